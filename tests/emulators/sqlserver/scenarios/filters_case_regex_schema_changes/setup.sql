-- filters written in another case than the catalog and as regular expressions (Debezium matches them
-- case-insensitively), message.key.columns with a regex table part, with include.schema.changes=true
CREATE DATABASE FiltCase;
GO
ALTER DATABASE FiltCase SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE FiltCase;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.Customers (Id int NOT NULL PRIMARY KEY, Name nvarchar(40) NOT NULL, Email varchar(60) NULL, Tier tinyint NULL);
CREATE TABLE dbo.CustomerNotes (NoteId int NOT NULL, CustomerId int NOT NULL, Body nvarchar(100) NULL);
CREATE TABLE dbo.Audit (Id int NOT NULL PRIMARY KEY, What varchar(20) NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'Customers', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'CustomerNotes', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'Audit', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.Customers VALUES (1, N'Ann', 'ann@example.com', 1);
INSERT INTO dbo.CustomerNotes VALUES (10, 1, N'likes tea');
INSERT INTO dbo.Audit VALUES (1, 'setup');
GO
