USE tx_east;
GO
BEGIN TRANSACTION;
INSERT INTO dbo.stock VALUES ('B', 2);
UPDATE dbo.stock SET qty = qty - 1 WHERE sku = 'A';
COMMIT TRANSACTION;
GO
-- (--@wait: the databases are read in turn; the order across them is timing otherwise)
--@wait
USE tx_west;
GO
BEGIN TRANSACTION;
UPDATE dbo.stock SET qty = qty + 1 WHERE sku = 'A';
DELETE FROM dbo.stock WHERE sku = 'A';
COMMIT TRANSACTION;
GO
--@wait
USE tx_east;
GO
INSERT INTO dbo.stock VALUES ('C', 3);
GO
