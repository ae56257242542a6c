-- A table without any key (Debezium's key is null) and one with only a unique index (its columns
-- become the key: getPrimaryKeys returns nothing, getIndexInfo the unique index).
CREATE DATABASE no_primary_key;
GO
ALTER DATABASE no_primary_key SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE no_primary_key;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.events_log (
    happened_at datetime2(3) NOT NULL,
    kind varchar(20) NOT NULL,
    detail nvarchar(200) NULL
);
GO
CREATE TABLE dbo.tags (
    tag_id int NOT NULL,
    name nvarchar(50) NOT NULL,
    colour varchar(20) NULL
);
GO
CREATE UNIQUE INDEX ux_tags_name ON dbo.tags (name);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'events_log', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'tags', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.events_log VALUES ('2024-01-01T10:00:00.000', 'login', N'alice'), ('2024-01-01T10:00:00.000', 'login', N'alice');
INSERT INTO dbo.tags VALUES (1, N'red-tag', 'red'), (2, N'blue-tag', NULL);
GO
