USE schema_change;
GO
INSERT INTO dbo.customers (first_name, last_name, email) VALUES ('George', 'Bailey', 'gbailey@foobar.com');
GO
-- step 1: change the table; the old capture instance keeps capturing without the new column
ALTER TABLE dbo.customers ADD phone_number varchar(32) NULL;
GO
INSERT INTO dbo.customers (first_name, last_name, email, phone_number) VALUES ('Edward', 'Walker', 'ed@walker.com', '+1-555-000000');
GO
-- step 2: a second capture instance with the new structure
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'customers', @role_name = NULL,
    @supports_net_changes = 0, @capture_instance = N'dbo_customers_v2';
GO
INSERT INTO dbo.customers (first_name, last_name, email, phone_number) VALUES ('John', 'Doe', 'john.doe@example.com', '+1-555-123456');
GO
UPDATE dbo.customers SET phone_number = '+1-555-999999' WHERE id = 1001;
GO
--@wait
-- step 3: once the connector streams from the new instance, drop the old one
EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'customers', @capture_instance = N'dbo_customers';
GO
INSERT INTO dbo.customers (first_name, last_name, email, phone_number) VALUES ('Anne', 'Kretchmar', 'annek@noanswer.org', '+1-555-777777');
GO
DELETE FROM dbo.customers WHERE id = 1002;
GO
