USE types;
GO
-- the same values again, through streaming
INSERT INTO dbo.all_types (id, c_bit, c_tinyint, c_smallint, c_int, c_bigint, c_real, c_float, c_float24, c_decimal, c_numeric, c_numeric_38, c_smallmoney, c_money, c_char, c_varchar, c_varchar_max, c_text, c_nchar, c_nvarchar, c_nvarchar_max, c_ntext, c_xml, c_uniqueidentifier, c_date, c_time0, c_time2, c_time3, c_time4, c_time6, c_time7, c_datetime, c_smalldatetime, c_datetime2_0, c_datetime2_3, c_datetime2_4, c_datetime2_6, c_datetime2_7, c_datetimeoffset, c_datetimeoffset7, c_binary, c_varbinary, c_varbinary_max, c_image) VALUES (2,
    1, 22, 333, 4444, 55555, 4.323, 3.323, 1.5, 1.123, 2, 12345678901234567890.0123456789, 5.323, 6.323,
    'cc', 'vcc', 'varchar max', 'tc', N'cč', N'vcč', N'nvarchar max ň', N'tč', '<a>b</a>',
    '7F1B7B5A-4B3C-4E2D-9F1A-0123456789AB', '2018-07-13',
    '10:23:45', '10:23:45.678', '10:23:45.678', '10:23:45.6789', '10:23:45.678912', '10:23:45.6789123',
    '2018-07-13 13:23:45.78', '2018-07-13 14:23:45',
    '2018-07-13 11:23:45.5', '2018-07-13 11:23:45.345', '2018-07-13 11:23:45.3456', '2018-06-20 15:13:16.945104',
    '2018-07-13 11:23:45.34',
    '2018-07-13 12:23:45.456+11:00', '1999-12-31 23:59:59.9999999-08:00',
    0x010203, 0x010203, 0xDEADBEEF, 0x0102);
GO
INSERT INTO dbo.all_types (id, c_bit, c_tinyint, c_smallint, c_int, c_bigint, c_real, c_float, c_float24, c_decimal, c_numeric, c_numeric_38, c_smallmoney, c_money, c_char, c_varchar, c_varchar_max, c_text, c_nchar, c_nvarchar, c_nvarchar_max, c_ntext, c_xml, c_uniqueidentifier, c_date, c_time0, c_time2, c_time3, c_time4, c_time6, c_time7, c_datetime, c_smalldatetime, c_datetime2_0, c_datetime2_3, c_datetime2_4, c_datetime2_6, c_datetime2_7, c_datetimeoffset, c_datetimeoffset7, c_binary, c_varbinary, c_varbinary_max, c_image) VALUES (5,
    0, 255, -32768, -2147483648, 9223372036854775807, -3.4E38, 1.7976931348623157E308, 1.17549435E-38,
    -999.999, 999999999999999999, -9999999999999999999999999999.9999999999, -214748.3648, 922337203685477.5807,
    '', '', '', '', N'', N'', N'', N'', '<root attr="1"><child/></root>',
    '00000000-0000-0000-0000-000000000000', '0001-01-01',
    '00:00:00', '23:59:59.99', '23:59:59.999', '23:59:59.9999', '23:59:59.999999', '23:59:59.9999999',
    '1753-01-01 00:00:00', '2079-06-06 23:59:00',
    '0001-01-01 00:00:00', '9999-12-31 23:59:59.999', '1970-01-01 00:00:00', '1969-12-31 23:59:59.999999',
    '9999-12-31 23:59:59.9999999',
    '0001-01-01 14:00:00.000+14:00', '9999-12-31 09:59:59.9999999-14:00',
    0x, 0x, 0x, 0x);
GO
-- every nullable column NULL (rowversion is set by the server)
INSERT INTO dbo.all_types (id) VALUES (3);
GO
-- an update that leaves the (max)/LOB columns alone: in the update-before row SQL Server stores NULL for
-- text/ntext/image (Debezium: its placeholder) and for the unchanged (max) columns (Debezium: null, as
-- mssql-jdbc reports (max) columns as VARCHAR/NVARCHAR/VARBINARY). xml is changed too: the documentation
-- of the change tables does not say what an unchanged xml column holds in the update-before row.
UPDATE dbo.all_types SET c_int = 4445, c_nvarchar = N'changed', c_datetime2_7 = '2020-02-02 02:02:02.2222222',
    c_xml = '<c>d</c>' WHERE id = 1;
GO
-- an update of the (max)/LOB columns
UPDATE dbo.all_types SET c_varchar_max = 'new max', c_nvarchar_max = N'nový', c_varbinary_max = 0xCAFE, c_xml = '<b/>'
WHERE id = 1;
GO
DELETE FROM dbo.all_types WHERE id = 2;
GO
INSERT INTO dbo.defaults (id, d_now) VALUES (2, '2022-01-01T00:00:00.000');
GO
