-- data.query.mode=function: a table (in a non-dbo schema) gets CDC after the connector started; another table's only
-- capture instance is dropped while streaming (its later changes are not captured); a table created before the
-- connector but never CDC-enabled until later has rows the snapshot did not read
CREATE DATABASE cdclife;
GO
ALTER DATABASE cdclife SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE cdclife;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE SCHEMA inv;
GO
CREATE TABLE dbo.stays (id int NOT NULL PRIMARY KEY, v varchar(10) NULL);
CREATE TABLE dbo.goes (id int NOT NULL PRIMARY KEY, v varchar(10) NULL);
CREATE TABLE inv.later (id int NOT NULL PRIMARY KEY, qty int NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'stays', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'goes', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.stays VALUES (1, 's1');
INSERT INTO dbo.goes VALUES (1, 'g1');
INSERT INTO inv.later VALUES (1, 10);
GO
