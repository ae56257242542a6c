-- names needing quoting and adjustment (a schema and a table with a hyphen, a space, a column starting with a digit,
-- a keyword), schema.name.adjustment.mode=avro, field.name.adjustment.mode=avro, topic.delimiter=_; unicode data; NULLs
CREATE DATABASE namesuni;
GO
ALTER DATABASE namesuni SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE namesuni;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE SCHEMA [hr-dept];
GO
CREATE TABLE [hr-dept].[line items] (
    [id] int NOT NULL PRIMARY KEY,
    [1st name] nvarchar(50) NULL,
    [unit-price] decimal(9, 2) NULL,
    [select] varchar(20) NULL,
    [naïve] nchar(4) NULL
);
CREATE TABLE dbo.[order] ([key] int NOT NULL PRIMARY KEY, [value] nvarchar(max) NULL, latin varchar(30) NULL);
GO
-- the default capture instance name (hr-dept_line items) is not a valid identifier: name it
EXEC sys.sp_cdc_enable_table @source_schema = N'hr-dept', @source_name = N'line items', @role_name = NULL,
    @supports_net_changes = 0, @capture_instance = N'hr_dept_line_items';
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'order', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO [hr-dept].[line items] VALUES (1, N'Zoë 😀 中文', 12.50, 'from', N'ñ');
INSERT INTO [hr-dept].[line items] VALUES (2, NULL, NULL, NULL, NULL);
INSERT INTO dbo.[order] VALUES (1, N'Ελληνικά — “quotes” 𝄞', 'Ã©çà');
GO
