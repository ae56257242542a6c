-- time.precision.mode=connect (100 ns digits cut to ms), decimal.handling.mode=string (money/smallmoney/numeric(38,10)
-- edge values), binary.handling.mode=hex; updates that leave the LOB columns (varbinary(max), nvarchar(max), xml) unchanged
CREATE DATABASE typesupd;
GO
ALTER DATABASE typesupd SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE typesupd;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.vals (
    id int NOT NULL PRIMARY KEY,
    c_dt2 datetime2(7) NULL,
    c_time7 time(7) NULL,
    c_dto datetimeoffset(7) NULL,
    c_dt datetime NULL,
    c_sdt smalldatetime NULL,
    c_money money NULL,
    c_smallmoney smallmoney NULL,
    c_num numeric(38, 10) NULL,
    c_dec decimal(5, 0) NULL,
    c_vbmax varbinary(max) NULL,
    c_nvmax nvarchar(max) NULL,
    c_xml xml NULL,
    c_bin binary(3) NULL,
    counter int NOT NULL
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'vals', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.vals VALUES (1, '2024-02-29T23:59:59.9999999', '23:59:59.9999999', '2024-02-29T23:59:59.9999999+14:00',
    '2024-02-29T23:59:59.997', '2024-02-29T23:59:00', 922337203685477.5807, 214748.3647,
    9999999999999999999999999999.9999999999, 99999, 0x00FF10, N'lob text', N'<a b="1">x</a>', 0x0A0B0C, 0);
INSERT INTO dbo.vals VALUES (2, '0001-01-01T00:00:00.0000001', '00:00:00.0000001', '0001-01-01T00:00:00.0000001-14:00',
    '1753-01-01T00:00:00', '1900-01-01T00:00:00', -922337203685477.5808, -214748.3648,
    -0.0000000001, -99999, 0x, N'', N'<e/>', 0x00, 0);
GO
