-- Every type of spec section 3 (see README.md): row 1 holds the reference vectors of Debezium's own
-- test suite (spec MS-163..173), row 4 the extremes of each type; defaults on a second table.
CREATE DATABASE types;
GO
ALTER DATABASE types SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE types;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.all_types (
    id int NOT NULL PRIMARY KEY,
    c_bit bit NULL,
    c_tinyint tinyint NULL,
    c_smallint smallint NULL,
    c_int int NULL,
    c_bigint bigint NULL,
    c_real real NULL,
    c_float float NULL,
    c_float24 float(24) NULL,
    c_decimal decimal(6, 3) NULL,
    c_numeric numeric NULL,
    c_numeric_38 numeric(38, 10) NULL,
    c_smallmoney smallmoney NULL,
    c_money money NULL,
    c_char char(3) NULL,
    c_varchar varchar(1000) NULL,
    c_varchar_max varchar(max) NULL,
    c_text text NULL,
    c_nchar nchar(3) NULL,
    c_nvarchar nvarchar(50) NULL,
    c_nvarchar_max nvarchar(max) NULL,
    c_ntext ntext NULL,
    c_xml xml NULL,
    c_uniqueidentifier uniqueidentifier NULL,
    c_date date NULL,
    c_time0 time(0) NULL,
    c_time2 time(2) NULL,
    c_time3 time(3) NULL,
    c_time4 time(4) NULL,
    c_time6 time(6) NULL,
    c_time7 time NULL,
    c_datetime datetime NULL,
    c_smalldatetime smalldatetime NULL,
    c_datetime2_0 datetime2(0) NULL,
    c_datetime2_3 datetime2(3) NULL,
    c_datetime2_4 datetime2(4) NULL,
    c_datetime2_6 datetime2(6) NULL,
    c_datetime2_7 datetime2 NULL,
    c_datetimeoffset datetimeoffset(3) NULL,
    c_datetimeoffset7 datetimeoffset NULL,
    c_binary binary(4) NULL,
    c_varbinary varbinary(16) NULL,
    c_varbinary_max varbinary(max) NULL,
    c_image image NULL,
    c_rowversion rowversion NOT NULL
);
GO
-- column defaults end up in the schemas (Debezium parses them, temporal ones through SELECT PARSE)
CREATE TABLE dbo.defaults (
    id int NOT NULL PRIMARY KEY,
    d_int int NULL DEFAULT 42,
    d_bigint bigint NOT NULL DEFAULT -7,
    d_bit bit NULL DEFAULT 1,
    d_decimal decimal(8, 2) NULL DEFAULT 3.5,
    d_real real NULL DEFAULT 1.25,
    d_nvarchar nvarchar(20) NULL DEFAULT N'fallback',
    d_char char(4) NULL DEFAULT 'ab',
    d_varbinary varbinary(8) NULL DEFAULT 0x0A0B,
    d_date date NULL DEFAULT '2020-02-29',
    d_datetime2 datetime2(3) NULL DEFAULT '2020-01-01T12:34:56.789',
    d_time time(0) NULL DEFAULT '08:00:00',
    d_now datetime NULL DEFAULT GETDATE()
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'all_types', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'defaults', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.all_types (id, c_bit, c_tinyint, c_smallint, c_int, c_bigint, c_real, c_float, c_float24, c_decimal, c_numeric, c_numeric_38, c_smallmoney, c_money, c_char, c_varchar, c_varchar_max, c_text, c_nchar, c_nvarchar, c_nvarchar_max, c_ntext, c_xml, c_uniqueidentifier, c_date, c_time0, c_time2, c_time3, c_time4, c_time6, c_time7, c_datetime, c_smalldatetime, c_datetime2_0, c_datetime2_3, c_datetime2_4, c_datetime2_6, c_datetime2_7, c_datetimeoffset, c_datetimeoffset7, c_binary, c_varbinary, c_varbinary_max, c_image) VALUES (1,
    1, 22, 333, 4444, 55555, 4.323, 3.323, 1.5, 1.123, 2, 12345678901234567890.0123456789, 5.323, 6.323,
    'cc', 'vcc', 'varchar max', 'tc', N'cč', N'vcč', N'nvarchar max ň', N'tč', '<a>b</a>',
    '7F1B7B5A-4B3C-4E2D-9F1A-0123456789AB', '2018-07-13',
    '10:23:45', '10:23:45.678', '10:23:45.678', '10:23:45.6789', '10:23:45.678912', '10:23:45.6789123',
    '2018-07-13 13:23:45.78', '2018-07-13 14:23:45',
    '2018-07-13 11:23:45.5', '2018-07-13 11:23:45.345', '2018-07-13 11:23:45.3456', '2018-06-20 15:13:16.945104',
    '2018-07-13 11:23:45.34',
    '2018-07-13 12:23:45.456+11:00', '1999-12-31 23:59:59.9999999-08:00',
    0x010203, 0x010203, 0xDEADBEEF, 0x0102);
INSERT INTO dbo.all_types (id, c_bit, c_tinyint, c_smallint, c_int, c_bigint, c_real, c_float, c_float24, c_decimal, c_numeric, c_numeric_38, c_smallmoney, c_money, c_char, c_varchar, c_varchar_max, c_text, c_nchar, c_nvarchar, c_nvarchar_max, c_ntext, c_xml, c_uniqueidentifier, c_date, c_time0, c_time2, c_time3, c_time4, c_time6, c_time7, c_datetime, c_smalldatetime, c_datetime2_0, c_datetime2_3, c_datetime2_4, c_datetime2_6, c_datetime2_7, c_datetimeoffset, c_datetimeoffset7, c_binary, c_varbinary, c_varbinary_max, c_image) VALUES (4,
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
INSERT INTO dbo.defaults (id, d_now) VALUES (1, '2021-03-04T05:06:07.000');
GO
