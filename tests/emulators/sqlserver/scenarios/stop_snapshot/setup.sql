-- execute-snapshot for two tables, then stop-snapshot for the first one in the same transaction (so the stop
-- is next in stream order, before the first window-open row); chunk size 10. snapshot.mode=no_data.
CREATE DATABASE stop_snapshot;
GO
ALTER DATABASE stop_snapshot SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE stop_snapshot;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.debezium_signal (id varchar(64) NOT NULL PRIMARY KEY, type varchar(32) NOT NULL,
    data varchar(2048) NULL);
GO
CREATE TABLE dbo.big (id int NOT NULL PRIMARY KEY, payload varchar(20) NOT NULL);
CREATE TABLE dbo.small (code char(3) NOT NULL PRIMARY KEY, label nvarchar(20) NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'debezium_signal', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'big', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'small', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.big (id, payload)
SELECT i, CONCAT('big-', i) FROM (SELECT d1.d + 10 * d2.d + 1 AS i FROM (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d1(d) CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d2(d)) n
ORDER BY i;
INSERT INTO dbo.small (code, label) VALUES ('AAA', N'first'), ('BBB', NULL), ('CCC', N'third'), ('DDD', N'fourth');
GO
