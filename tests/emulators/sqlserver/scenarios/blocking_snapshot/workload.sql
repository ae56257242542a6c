USE blocking_snapshot;
GO
INSERT INTO dbo.customers (id, name, tier) VALUES (4, 'dave', 3);
UPDATE dbo.orders SET amount = 11.00 WHERE id = 100;
GO
--@wait
INSERT INTO dbo.debezium_signal (id, type, data) VALUES ('blocking-1', 'execute-snapshot',
    '{"data-collections": ["blocking_snapshot.dbo.customers", "blocking_snapshot.dbo.orders"], "type": "blocking", "additional-conditions": [{"data-collection": "blocking_snapshot.dbo.orders", "filter": "SELECT * FROM [blocking_snapshot].[dbo].[orders] WHERE amount > 5"}]}');
GO
--@wait
-- rows the blocking snapshot does not read: amount <= 5, and a table it does not snapshot
INSERT INTO dbo.orders (id, customer_id, amount, placed) VALUES (103, 4, 2.50, '2024-03-04T09:15:00');
DELETE FROM dbo.orders WHERE id = 102;
UPDATE dbo.notes SET body = N'edited' WHERE id = 1;
GO
