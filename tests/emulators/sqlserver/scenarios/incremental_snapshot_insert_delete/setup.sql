-- Incremental snapshot with incremental.snapshot.watermarking.strategy=insert_delete (the window-close
-- deletes the window-open row), chunk size 50; changes in the signal's transaction. snapshot.mode=no_data.
CREATE DATABASE incremental_snapshot_insert_delete;
GO
ALTER DATABASE incremental_snapshot_insert_delete SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE incremental_snapshot_insert_delete;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.debezium_signal (id varchar(64) NOT NULL PRIMARY KEY, type varchar(32) NOT NULL,
    data varchar(2048) NULL);
GO
CREATE TABLE dbo.accounts (id bigint NOT NULL PRIMARY KEY, owner nvarchar(30) NOT NULL, balance money NOT NULL,
    opened date NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'debezium_signal', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'accounts', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.accounts (id, owner, balance, opened)
SELECT i * 10, CONCAT(N'owner ', i), i * 12.3456, CASE WHEN i % 4 = 0 THEN NULL ELSE DATEADD(day, i, CAST('2020-02-28' AS date)) END
FROM (SELECT d1.d + 10 * d2.d + 1 AS i FROM (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d1(d) CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d2(d)) n
ORDER BY i;
GO
