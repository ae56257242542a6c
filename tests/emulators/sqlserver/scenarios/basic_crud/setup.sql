-- A table with an identity primary key, a NOT NULL column, nullable columns and a default.
CREATE DATABASE basic_crud;
GO
ALTER DATABASE basic_crud SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE basic_crud;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.customers (
    id int IDENTITY(1001, 1) NOT NULL PRIMARY KEY,
    first_name nvarchar(255) NOT NULL,
    last_name nvarchar(255) NULL,
    email varchar(255) NOT NULL,
    score int NULL DEFAULT 0
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'customers', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.customers (first_name, last_name, email) VALUES (N'Sally', N'Thomas', 'sally.thomas@acme.com');
INSERT INTO dbo.customers (first_name, last_name, email, score) VALUES (N'George', N'Bailey', 'gbailey@foobar.com', 7);
GO
