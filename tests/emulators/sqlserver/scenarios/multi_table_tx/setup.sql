-- Three tables changed together; the connector merges their change tables by LSN.
CREATE DATABASE multi_table_tx;
GO
ALTER DATABASE multi_table_tx SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE multi_table_tx;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, customer nvarchar(50) NOT NULL, total decimal(12, 2) NOT NULL);
CREATE TABLE dbo.order_items (order_id int NOT NULL, item_no int NOT NULL, sku varchar(20) NOT NULL,
    PRIMARY KEY (order_id, item_no));
CREATE TABLE dbo.stock (sku varchar(20) NOT NULL PRIMARY KEY, on_hand int NOT NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'order_items', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'stock', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.stock VALUES ('SKU-1', 100), ('SKU-2', 50);
INSERT INTO dbo.orders VALUES (1, N'ann', 10.00);
INSERT INTO dbo.order_items VALUES (1, 1, 'SKU-1');
GO
