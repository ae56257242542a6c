USE transaction_metadata;
GO
-- one transaction, two tables: BEGIN, two events, END (END is emitted when the next
-- transaction's first event arrives, or after the connector's end-of-transaction check)
BEGIN TRANSACTION;
INSERT INTO dbo.tablea VALUES (2, 'a2');
INSERT INTO dbo.tableb VALUES (2, 'b2');
COMMIT TRANSACTION;
GO
-- an autocommitted statement is a transaction of its own
UPDATE dbo.tablea SET cola = 'a1' WHERE id = 1;
GO
BEGIN TRANSACTION;
INSERT INTO dbo.tableb VALUES (3, 'b3'), (4, 'b4');
DELETE FROM dbo.tablea WHERE id = 2;
UPDATE dbo.tableb SET colb = 'b2x' WHERE id = 2;
COMMIT TRANSACTION;
GO
