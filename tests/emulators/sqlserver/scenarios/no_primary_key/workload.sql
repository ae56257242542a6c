USE no_primary_key;
GO
-- duplicates: two identical rows, each its own event
INSERT INTO dbo.events_log VALUES ('2024-01-02T08:30:00.125', 'logout', N'bob'), ('2024-01-02T08:30:00.125', 'logout', N'bob');
GO
UPDATE dbo.events_log SET detail = N'carol' WHERE kind = 'logout';
GO
DELETE FROM dbo.events_log WHERE kind = 'login';
GO
INSERT INTO dbo.tags VALUES (3, N'green-tag', 'green');
GO
UPDATE dbo.tags SET colour = 'navy' WHERE tag_id = 2;
GO
-- changes the unique-index column, i.e. Debezium's key
UPDATE dbo.tags SET name = N'scarlet-tag' WHERE tag_id = 1;
GO
DELETE FROM dbo.tags WHERE tag_id = 3;
GO
