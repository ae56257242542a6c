-- table.include.list in non-alphabetical order across two schemas, a table name that needs quoting ([order]),
-- snapshot.include.collection.list (a subset: the rest is streamed only), snapshot.select.statement.overrides,
-- snapshot.isolation.mode=snapshot
CREATE DATABASE snaporder;
GO
ALTER DATABASE snaporder SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE snaporder;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE SCHEMA sales;
GO
CREATE TABLE sales.[order] (id int NOT NULL PRIMARY KEY, customer nvarchar(40) NOT NULL, total money NULL);
CREATE TABLE dbo.zeta (id int NOT NULL PRIMARY KEY, z varchar(10) NULL);
CREATE TABLE dbo.alpha (id int NOT NULL PRIMARY KEY, a varchar(10) NULL, archived bit NOT NULL DEFAULT 0);
CREATE TABLE dbo.ignored (id int NOT NULL PRIMARY KEY);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'sales', @source_name = N'order', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'zeta', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'alpha', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'ignored', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO sales.[order] VALUES (1, N'Amy', NULL), (2, N'Zed', 10.5);
INSERT INTO dbo.zeta VALUES (1, 'z1'), (2, 'z2');
INSERT INTO dbo.alpha (id, a, archived) VALUES (1, 'a1', 0), (2, 'a2', 1), (3, 'a3', 0);
INSERT INTO dbo.ignored VALUES (1);
GO
