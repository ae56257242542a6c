USE colkeys;
GO
INSERT INTO dbo.accounts VALUES (3, 'EU', N'Carol', 'pw-3', N'new');
GO
-- only an excluded column changes: Debezium still emits an update (the change row exists)
UPDATE dbo.accounts SET secret = 'pw-1b' WHERE id = 1;
GO
UPDATE dbo.accounts SET name = N'Bobby', note = N'renamed' WHERE id = 2;
GO
-- a change of a message.key.columns column that is not in the primary key: the key changes
UPDATE dbo.accounts SET region = 'US' WHERE id = 3;
GO
DELETE FROM dbo.accounts WHERE id = 1;
GO
INSERT INTO dbo.events_log VALUES ('login', N'alice', 0), ('login', N'bob', NULL);
GO
UPDATE dbo.events_log SET payload = N'system down' WHERE event_code = 'boot';
GO
DELETE FROM dbo.events_log WHERE payload = N'bob';
GO
