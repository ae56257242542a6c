-- skipped.operations=c,d (only snapshot reads and updates remain) with decimal.handling.mode=double
CREATE DATABASE skipcd;
GO
ALTER DATABASE skipcd SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE skipcd;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.ledger (
    id int NOT NULL PRIMARY KEY,
    amount money NULL,
    fee smallmoney NULL,
    ratio numeric(38, 10) NULL,
    small decimal(3, 3) NULL,
    r real NULL
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'ledger', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.ledger VALUES (1, 922337203685477.5807, -214748.3648, 1234567890123456789012345678.0123456789, 0.001, 3.4e38);
INSERT INTO dbo.ledger VALUES (2, 0.0001, 0.0001, -0.0000000001, -0.999, -1.17549435e-38);
GO
