-- Transaction boundaries (provide.transaction.metadata=true) over two tables.
CREATE DATABASE transaction_metadata;
GO
ALTER DATABASE transaction_metadata SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE transaction_metadata;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.tablea (id int NOT NULL PRIMARY KEY, cola varchar(30) NULL);
CREATE TABLE dbo.tableb (id int NOT NULL PRIMARY KEY, colb varchar(30) NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'tablea', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'tableb', @role_name = NULL,
    @supports_net_changes = 0;
GO
-- snapshot events carry no transaction block
INSERT INTO dbo.tablea VALUES (1, 'a');
GO
