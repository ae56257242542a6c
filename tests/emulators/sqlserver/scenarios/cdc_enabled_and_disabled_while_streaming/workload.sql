USE cdclife;
GO
INSERT INTO dbo.goes VALUES (2, 'g2');
INSERT INTO inv.later VALUES (2, 20);
GO
--@wait
EXEC sys.sp_cdc_enable_table @source_schema = N'inv', @source_name = N'later', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO inv.later VALUES (3, 30);
GO
UPDATE inv.later SET qty = 11 WHERE id = 1;
GO
UPDATE dbo.goes SET v = 'g2b' WHERE id = 2;
GO
--@wait
EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'goes', @capture_instance = N'dbo_goes';
GO
UPDATE dbo.goes SET v = 'lost' WHERE id = 1;
INSERT INTO dbo.stays VALUES (2, 's2');
GO
DELETE FROM inv.later WHERE id = 2;
GO
