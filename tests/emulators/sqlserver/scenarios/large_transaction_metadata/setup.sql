-- one statement inserting 2500 rows (one transaction), then an update of all of them, with provide.transaction.metadata=true
CREATE DATABASE largetx;
GO
ALTER DATABASE largetx SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE largetx;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.bulk_rows (id int NOT NULL PRIMARY KEY, grp tinyint NOT NULL, label varchar(20) NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'bulk_rows', @role_name = NULL,
    @supports_net_changes = 0;
GO
-- one row for the snapshot (a transaction-metadata run still has no transaction block on `r` events)
INSERT INTO dbo.bulk_rows VALUES (0, 0, 'seed');
GO
