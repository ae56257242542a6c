USE typesupd;
GO
INSERT INTO dbo.vals VALUES (3, '1969-12-31T23:59:59.9995000', '12:00:00.0005', '1970-01-01T00:00:00.0000000-00:30',
    '1969-12-31T23:59:59.999', '2079-06-06T23:59:00', 0.0001, 0.0001, 0.0000000001, 0, 0xDEADBEEF, N'ü', NULL, 0x010203, 0);
GO
-- only a non-LOB column changes: the LOB columns are not in the update's changed columns
UPDATE dbo.vals SET counter = counter + 1 WHERE id IN (1, 3);
GO
UPDATE dbo.vals SET c_dt2 = '2000-01-01T00:00:00.1234567', c_time7 = '01:02:03.4567891',
    c_dto = '2000-01-01T00:00:00.1234567+05:45', c_money = 1.5, c_num = 12345678901234567890.0123456789 WHERE id = 2;
GO
UPDATE dbo.vals SET c_vbmax = NULL, c_nvmax = N'changed' WHERE id = 1;
GO
DELETE FROM dbo.vals WHERE id = 3;
GO
