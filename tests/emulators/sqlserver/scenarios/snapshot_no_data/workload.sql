USE nodata;
GO
INSERT INTO dbo.orders VALUES (3, N'paper', 500);
GO
UPDATE dbo.orders SET qty = 1 WHERE id = 2;
GO
DELETE FROM dbo.orders WHERE id = 1;
GO
