-- Incremental snapshots with additional-conditions (one table), a surrogate-key (another), a chunk size of 7
-- and OPTION(RECOMPILE) on the chunk queries; both signals in one transaction. snapshot.mode=no_data.
CREATE DATABASE incremental_snapshot_conditions;
GO
ALTER DATABASE incremental_snapshot_conditions SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE incremental_snapshot_conditions;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.debezium_signal (id varchar(64) NOT NULL PRIMARY KEY, type varchar(32) NOT NULL,
    data varchar(2048) NULL);
GO
CREATE TABLE dbo.products (id int NOT NULL PRIMARY KEY, name varchar(40) NOT NULL, color varchar(10) NULL,
    weight decimal(6, 2) NULL);
-- keyed by id, snapshotted by the surrogate key seq (unique, not the primary key)
CREATE TABLE dbo.readings (id uniqueidentifier NOT NULL PRIMARY KEY, seq int NOT NULL UNIQUE,
    sensor nvarchar(20) NOT NULL, reading float NULL, taken datetimeoffset(2) NOT NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'debezium_signal', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'products', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'readings', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.products (id, name, color, weight)
SELECT i, CONCAT('product-', i), CASE i % 3 WHEN 0 THEN 'blue' WHEN 1 THEN 'red' ELSE NULL END, i * 0.75
FROM (SELECT d1.d + 10 * d2.d + 1 AS i FROM (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d1(d) CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d2(d)) n
WHERE i <= 60
ORDER BY i;
GO
-- ids are not in seq order: the surrogate key decides the chunks
INSERT INTO dbo.readings (id, seq, sensor, reading, taken)
SELECT CAST(CONCAT('00000000-0000-0000-0000-', RIGHT(CONCAT('000000000000', (i * 7919) % 1000), 12)) AS uniqueidentifier),
    i, CONCAT(N'sensor-', i % 4), CASE WHEN i % 5 = 0 THEN NULL ELSE i / 4.0 END,
    DATEADD(second, i * 61, CAST('2024-05-06T07:08:09.12+02:00' AS datetimeoffset(2)))
FROM (SELECT d1.d + 10 * d2.d + 1 AS i FROM (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d1(d) CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d2(d)) n
WHERE i <= 25
ORDER BY i;
GO
