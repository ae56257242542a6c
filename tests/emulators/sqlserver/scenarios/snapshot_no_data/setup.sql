-- snapshot.mode=no_data: no read events; streaming starts at the current LSN (rows inserted before are not emitted)
CREATE DATABASE nodata;
GO
ALTER DATABASE nodata SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE nodata;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, item nvarchar(40) NOT NULL, qty smallint NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.orders VALUES (1, N'pen', 2), (2, N'ink', NULL);
GO
UPDATE dbo.orders SET qty = 3 WHERE id = 1;
GO
