USE skipupd;
GO
INSERT INTO dbo.items VALUES (3, N'screw', 5, 0.30);
GO
UPDATE dbo.items SET qty = qty + 1;
GO
UPDATE dbo.items SET id = 30 WHERE id = 3;
GO
DELETE FROM dbo.items WHERE id = 2;
GO
INSERT INTO dbo.items VALUES (4, N'washer', NULL, NULL);
GO
