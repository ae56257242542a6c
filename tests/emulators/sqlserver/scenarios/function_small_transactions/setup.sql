-- data.query.mode=function, max.iteration.transactions=1: many small transactions interleaving two tables
CREATE DATABASE fnsmall;
GO
ALTER DATABASE fnsmall SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE fnsmall;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.left_t (id int NOT NULL PRIMARY KEY, v int NOT NULL);
CREATE TABLE dbo.right_t (id int NOT NULL PRIMARY KEY, v int NOT NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'left_t', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'right_t', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.left_t VALUES (0, 0);
GO
