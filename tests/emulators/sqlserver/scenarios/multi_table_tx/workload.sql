USE multi_table_tx;
GO
-- interleaved: orders, items, stock, items, stock, orders
BEGIN TRANSACTION;
INSERT INTO dbo.orders VALUES (2, N'ben', 0.00);
INSERT INTO dbo.order_items VALUES (2, 1, 'SKU-1');
UPDATE dbo.stock SET on_hand = on_hand - 1 WHERE sku = 'SKU-1';
INSERT INTO dbo.order_items VALUES (2, 2, 'SKU-2');
UPDATE dbo.stock SET on_hand = on_hand - 1 WHERE sku = 'SKU-2';
UPDATE dbo.orders SET total = 35.50 WHERE id = 2;
COMMIT TRANSACTION;
GO
-- a single-table change between two multi-table transactions
UPDATE dbo.stock SET on_hand = 200 WHERE sku = 'SKU-1';
GO
BEGIN TRANSACTION;
DELETE FROM dbo.order_items WHERE order_id = 1;
DELETE FROM dbo.orders WHERE id = 1;
UPDATE dbo.stock SET on_hand = on_hand + 1 WHERE sku = 'SKU-1';
COMMIT TRANSACTION;
GO
