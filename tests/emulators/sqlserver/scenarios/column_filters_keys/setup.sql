-- column.exclude.list, message.key.columns (keyless table keyed by a column; a composite override of a
-- primary key), tombstones.on.delete=false
CREATE DATABASE colkeys;
GO
ALTER DATABASE colkeys SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE colkeys;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.accounts (
    id int NOT NULL PRIMARY KEY,
    region char(2) NOT NULL,
    name nvarchar(50) NOT NULL,
    secret varchar(40) NULL,
    note nvarchar(100) NULL
);
CREATE TABLE dbo.events_log (
    event_code varchar(20) NOT NULL,
    payload nvarchar(100) NULL,
    internal_flag bit NULL
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'accounts', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'events_log', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.accounts VALUES (1, 'EU', N'Alice', 'pw-1', N'first');
INSERT INTO dbo.accounts VALUES (2, 'US', N'Bob', NULL, NULL);
INSERT INTO dbo.events_log VALUES ('boot', N'system up', 1);
GO
