-- include.schema.changes=true: schema change events on topic server1 (snapshot CREATE, then ALTER
-- when a second capture instance with a new column is read).
CREATE DATABASE include_schema_changes;
GO
ALTER DATABASE include_schema_changes SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE include_schema_changes;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.products (
    id int NOT NULL PRIMARY KEY,
    name nvarchar(100) NOT NULL,
    description nvarchar(512) NULL DEFAULT N'none',
    weight decimal(8, 3) NULL
);
GO
-- not CDC-enabled: Debezium's snapshot still reads every table its filters include (sp_tables), so it gets a
-- CREATE schema change event (and no change events)
CREATE TABLE dbo.not_captured (id int NOT NULL PRIMARY KEY);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'products', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.products (id, name, weight) VALUES (101, N'scooter', 3.14);
GO
