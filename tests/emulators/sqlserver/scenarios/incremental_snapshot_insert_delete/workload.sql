USE incremental_snapshot_insert_delete;
GO
-- the changes share the signal's transaction: committed before Debezium reads the first chunk (at the signal)
-- and streamed before the first window opens, so their order does not depend on timing
BEGIN TRANSACTION;
INSERT INTO dbo.debezium_signal (id, type, data) VALUES ('insert-delete-1', 'execute-snapshot',
    '{"data-collections": ["incremental_snapshot_insert_delete.dbo.accounts"], "type": "incremental"}');
UPDATE dbo.accounts SET balance = 0 WHERE id = 10;
DELETE FROM dbo.accounts WHERE id = 20;
INSERT INTO dbo.accounts (id, owner, balance, opened) VALUES (5, N'late', 1.5, '2024-01-01');
COMMIT TRANSACTION;
GO
