USE namesuni;
GO
INSERT INTO [hr-dept].[line items] VALUES (3, N'日本語テキスト', -0.01, 'where', N'ü');
GO
UPDATE [hr-dept].[line items] SET [1st name] = NULL, [unit-price] = NULL, [select] = NULL WHERE [id] = 1;
GO
UPDATE [hr-dept].[line items] SET [1st name] = N'', [naïve] = N'' WHERE [id] = 2;
GO
INSERT INTO dbo.[order] VALUES (2, NULL, NULL), (3, N'', '');
GO
UPDATE dbo.[order] SET [value] = N'tab	and
newline and \ backslash and "dq"' WHERE [key] = 2;
GO
DELETE FROM [hr-dept].[line items] WHERE [id] = 3;
GO
