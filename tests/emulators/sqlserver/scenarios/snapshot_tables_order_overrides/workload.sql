USE snaporder;
GO
INSERT INTO dbo.zeta VALUES (3, 'z3');
GO
INSERT INTO dbo.ignored VALUES (2);
GO
UPDATE sales.[order] SET total = 11 WHERE id = 2;
GO
UPDATE dbo.alpha SET archived = 0 WHERE id = 2;
GO
DELETE FROM dbo.zeta WHERE id = 1;
GO
