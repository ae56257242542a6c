USE stop_snapshot;
GO
BEGIN TRANSACTION;
INSERT INTO dbo.debezium_signal (id, type, data) VALUES ('execute-1', 'execute-snapshot',
    '{"data-collections": ["stop_snapshot.dbo.big", "stop_snapshot.dbo.small"], "type": "incremental"}');
INSERT INTO dbo.debezium_signal (id, type, data) VALUES ('stop-1', 'stop-snapshot',
    '{"data-collections": ["stop_snapshot.dbo.big"], "type": "incremental"}');
COMMIT TRANSACTION;
GO
