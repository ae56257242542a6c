USE colmask;
GO
INSERT INTO dbo.people VALUES (3, '987-65-4321', N'Grace Hopper', 'NY', 'grace@navy.mil', 99999.99, '1906-12-09', 5);
GO
UPDATE dbo.people SET city = 'Arlington', full_name = N'Grace B. Hopper' WHERE id = 3;
GO
UPDATE dbo.people SET ssn = '000-00-0000', email = 'x@y.z', city = 'ab' WHERE id = 2;
GO
DELETE FROM dbo.people WHERE id = 1;
GO
