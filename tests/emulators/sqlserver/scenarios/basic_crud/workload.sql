USE basic_crud;
GO
-- a single insert (score takes its default)
INSERT INTO dbo.customers (first_name, last_name, email) VALUES (N'Edward', N'Walker', 'ed@walker.com');
GO
-- one statement, three rows: three events in one transaction
INSERT INTO dbo.customers (first_name, last_name, email, score)
VALUES (N'Anne', N'Kretchmar', 'annek@noanswer.org', 1),
       (N'Zoë', NULL, 'zoe@example.com', NULL),
       (N'Ünal', N'Öztürk', 'unal@example.com', 3);
GO
UPDATE dbo.customers SET email = 'sally@acme.com', score = 10 WHERE id = 1001;
GO
DELETE FROM dbo.customers WHERE id = 1002;
GO
-- an explicit transaction with two statements
BEGIN TRANSACTION;
UPDATE dbo.customers SET last_name = N'Walker-Smith' WHERE id = 1003;
INSERT INTO dbo.customers (first_name, email) VALUES (N'Kenneth', 'ken@example.com');
COMMIT TRANSACTION;
GO
-- rolled back: no events
BEGIN TRANSACTION;
INSERT INTO dbo.customers (first_name, email) VALUES (N'Ghost', 'ghost@example.com');
DELETE FROM dbo.customers WHERE id = 1001;
ROLLBACK TRANSACTION;
GO
-- an update of several rows in one statement
UPDATE dbo.customers SET score = score + 1 WHERE score IS NOT NULL AND id >= 1004;
GO
