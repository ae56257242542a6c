-- skipped.operations=u with column.include.list (the key column and one other)
CREATE DATABASE skipupd;
GO
ALTER DATABASE skipupd SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE skipupd;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.items (
    id int NOT NULL PRIMARY KEY,
    name nvarchar(50) NOT NULL,
    qty int NULL,
    price decimal(10, 2) NULL
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.items VALUES (1, N'bolt', 10, 0.25), (2, N'nut', 20, 0.10);
GO
