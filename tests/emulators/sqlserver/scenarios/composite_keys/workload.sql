USE composite_keys;
GO
INSERT INTO dbo.order_lines (order_id, line_no, product, quantity, price) VALUES (11, 2, N'glue', 3, 4.99);
GO
UPDATE dbo.order_lines SET quantity = 250 WHERE order_id = 10 AND line_no = 2;
GO
UPDATE dbo.order_lines SET price = 19.99 WHERE order_id = 11;
GO
DELETE FROM dbo.order_lines WHERE order_id = 10 AND line_no = 1;
GO
BEGIN TRANSACTION;
INSERT INTO dbo.order_lines (order_id, line_no, product, quantity, price) VALUES (12, 1, N'drill', 1, 89.00);
INSERT INTO dbo.order_lines (order_id, line_no, product, quantity, price) VALUES (12, 2, N'bits', 10, 1.10);
DELETE FROM dbo.order_lines WHERE order_id = 11 AND line_no = 2;
COMMIT TRANSACTION;
GO
