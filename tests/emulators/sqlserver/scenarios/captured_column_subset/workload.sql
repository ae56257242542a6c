USE capcols;
GO
INSERT INTO dbo.prices (id, net, vat_rate, secret, note) VALUES (2, 20.5, 0.07, 'y', N'second');
GO
UPDATE dbo.prices SET net = 11 WHERE id = 1;
GO
-- only uncaptured columns change (rowversion changes too)
UPDATE dbo.prices SET secret = 'z', vat_rate = 0.1 WHERE id = 2;
GO
DELETE FROM dbo.prices WHERE id = 1;
GO
