USE incremental_snapshot;
GO
INSERT INTO dbo.debezium_signal (id, type, data) VALUES ('ad-hoc-1', 'execute-snapshot',
    '{"data-collections": ["incremental_snapshot.dbo.items", "incremental_snapshot.dbo.order_lines"], "type": "incremental"}');
GO
