USE FiltCase;
GO
INSERT INTO dbo.Customers VALUES (2, N'Ben', NULL, 2);
GO
INSERT INTO dbo.CustomerNotes VALUES (11, 2, N'new'), (12, 2, NULL);
GO
UPDATE dbo.CustomerNotes SET Body = N'edited' WHERE NoteId = 12;
GO
INSERT INTO dbo.Audit VALUES (2, 'not captured');
GO
DELETE FROM dbo.Customers WHERE Id = 1;
GO
