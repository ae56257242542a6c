USE skipcd;
GO
INSERT INTO dbo.ledger VALUES (3, 1, 1, 1, 0.5, 1);
GO
UPDATE dbo.ledger SET amount = -922337203685477.5808, ratio = 0.1 WHERE id = 1;
GO
UPDATE dbo.ledger SET fee = NULL, small = 0, r = 0.1 WHERE id = 2;
GO
DELETE FROM dbo.ledger WHERE id = 2;
GO
-- a key update: delete + create, both skipped
UPDATE dbo.ledger SET id = 4 WHERE id = 3;
GO
