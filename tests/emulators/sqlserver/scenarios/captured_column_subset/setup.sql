-- a capture instance on a subset of the columns (@captured_column_list): the snapshot reads every column, the
-- change table lacks two; a rowversion column; an update of only uncaptured columns
CREATE DATABASE capcols;
GO
ALTER DATABASE capcols SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE capcols;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.prices (
    id int NOT NULL PRIMARY KEY,
    net decimal(10, 2) NOT NULL,
    vat_rate decimal(4, 3) NOT NULL DEFAULT 0.2,
    secret varchar(20) NULL,
    note nvarchar(20) NULL,
    rv rowversion
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'prices', @role_name = NULL,
    @supports_net_changes = 0, @captured_column_list = N'id, net, note, rv';
GO
INSERT INTO dbo.prices (id, net, secret, note) VALUES (1, 10, 'x', N'first');
GO
