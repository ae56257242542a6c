-- two databases, data.query.mode=function, provide.transaction.metadata=true:
-- BEGIN/END per database on the one transaction topic; the order Debezium visits the databases in
CREATE DATABASE tx_east;
GO
CREATE DATABASE tx_west;
GO
ALTER DATABASE tx_east SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
ALTER DATABASE tx_west SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE tx_east;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.stock (sku varchar(10) NOT NULL PRIMARY KEY, qty int NOT NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'stock', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.stock VALUES ('A', 1);
GO
USE tx_west;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.stock (sku varchar(10) NOT NULL PRIMARY KEY, qty int NOT NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'stock', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.stock VALUES ('A', 100);
GO
