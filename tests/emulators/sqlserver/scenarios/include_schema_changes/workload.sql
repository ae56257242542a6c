USE include_schema_changes;
GO
INSERT INTO dbo.products (id, name, description, weight) VALUES (102, N'car battery', N'12V', 8.1);
GO
-- (--@wait lines: a schema change event is emitted when Debezium first reads a range holding the new
-- capture instance, so the connector must have read each step before the next)
--@wait
ALTER TABLE dbo.products ADD in_stock bit NOT NULL DEFAULT 1;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'products', @role_name = NULL,
    @supports_net_changes = 0, @capture_instance = N'dbo_products_v2';
GO
INSERT INTO dbo.products (id, name, weight, in_stock) VALUES (103, N'hammer', 0.75, 0);
GO
--@wait
-- a table that becomes captured while streaming: a CREATE schema change event
CREATE TABLE dbo.brands (id int NOT NULL PRIMARY KEY, name nvarchar(50) NOT NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'brands', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.brands VALUES (1, N'Acme');
GO
