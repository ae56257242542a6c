-- Two databases captured by one connector (database.names=db_one,db_two): one partition each.
CREATE DATABASE db_one;
GO
CREATE DATABASE db_two;
GO
ALTER DATABASE db_one SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
ALTER DATABASE db_two SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE db_one;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.tablea (id int NOT NULL PRIMARY KEY, cola varchar(30) NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'tablea', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.tablea VALUES (1, 'one-a');
GO
USE db_two;
GO
EXEC sys.sp_cdc_enable_db;
GO
-- the same table name in the other database: distinct topics
CREATE TABLE dbo.tablea (id int NOT NULL PRIMARY KEY, cola varchar(30) NULL);
CREATE TABLE dbo.tableb (id int NOT NULL PRIMARY KEY, colb nvarchar(30) NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'tablea', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'tableb', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.tablea VALUES (1, 'two-a');
INSERT INTO dbo.tableb VALUES (1, N'two-b');
GO
