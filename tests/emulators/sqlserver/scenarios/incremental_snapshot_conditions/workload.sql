USE incremental_snapshot_conditions;
GO
-- both signals in one transaction: the second one's table joins the running snapshot (no wait in between,
-- so the order of the events does not depend on how long a client waits between the two)
BEGIN TRANSACTION;
INSERT INTO dbo.debezium_signal (id, type, data) VALUES ('conditions-1', 'execute-snapshot',
    '{"data-collections": ["incremental_snapshot_conditions.dbo.products"], "type": "incremental", "additional-conditions": [{"data-collection": "incremental_snapshot_conditions.dbo.products", "filter": "color = ''blue'' AND weight > 5"}]}');
INSERT INTO dbo.debezium_signal (id, type, data) VALUES ('surrogate-1', 'execute-snapshot',
    '{"data-collections": ["incremental_snapshot_conditions.dbo.readings"], "type": "incremental", "surrogate-key": "seq"}');
COMMIT TRANSACTION;
GO
