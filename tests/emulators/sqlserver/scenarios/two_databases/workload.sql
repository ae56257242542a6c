USE db_one;
GO
INSERT INTO dbo.tablea VALUES (2, 'one-a2');
GO
-- (--@wait: the connector reads each database in its own partition, in turn; events of different
-- databases are only in a fixed order when Debezium has seen one database's change before the next)
--@wait
USE db_two;
GO
INSERT INTO dbo.tablea VALUES (2, 'two-a2');
UPDATE dbo.tableb SET colb = N'two-b1' WHERE id = 1;
GO
--@wait
-- three-part names from the other database
USE db_one;
GO
DELETE FROM db_two.dbo.tablea WHERE id = 1;
GO
--@wait
UPDATE db_one.dbo.tablea SET cola = 'one-a1' WHERE id = 1;
GO
