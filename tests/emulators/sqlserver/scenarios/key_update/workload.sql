USE key_update;
GO
UPDATE dbo.accounts SET id = 10 WHERE id = 1;
GO
-- key and non-key column in one statement
UPDATE dbo.accounts SET id = 20, owner = N'benjamin' WHERE id = 2;
GO
-- one column of a composite key
UPDATE dbo.seats SET seat_no = 9 WHERE row_letter = 'A' AND seat_no = 2;
GO
-- two rows swap keys in one transaction
BEGIN TRANSACTION;
UPDATE dbo.accounts SET id = 99 WHERE id = 3;
UPDATE dbo.accounts SET id = 3 WHERE id = 10;
UPDATE dbo.accounts SET id = 10 WHERE id = 99;
COMMIT TRANSACTION;
GO
-- a non-key update afterwards: a plain u event
UPDATE dbo.seats SET holder = N'cat' WHERE row_letter = 'B';
GO
