-- Spec section 6, online procedure: the table's structure changes while the connector streams.
CREATE DATABASE schema_change;
GO
ALTER DATABASE schema_change SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE schema_change;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.customers (
    id int IDENTITY(1001, 1) NOT NULL PRIMARY KEY,
    first_name varchar(255) NOT NULL,
    last_name varchar(255) NOT NULL,
    email varchar(255) NOT NULL
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'customers', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.customers (first_name, last_name, email) VALUES ('Sally', 'Thomas', 'sally.thomas@acme.com');
GO
