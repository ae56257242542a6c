-- Incremental snapshot (execute-snapshot signal) of two tables through a CDC-enabled signal table.
-- snapshot.mode=no_data: the rows below are read only by the incremental snapshot (each exactly once).
CREATE DATABASE incremental_snapshot;
GO
ALTER DATABASE incremental_snapshot SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE incremental_snapshot;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.debezium_signal (id varchar(64) NOT NULL PRIMARY KEY, type varchar(32) NOT NULL,
    data varchar(2048) NULL);
CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY, label varchar(40) NOT NULL, qty int NULL);
CREATE TABLE dbo.order_lines (
    order_id int NOT NULL,
    line_code varchar(10) NOT NULL,
    product nvarchar(60) NOT NULL,
    price decimal(10, 2) NULL,
    shipped bit NOT NULL,
    created datetime2(3) NOT NULL,
    CONSTRAINT pk_order_lines PRIMARY KEY (order_id, line_code)
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'debezium_signal', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'order_lines', @role_name = NULL,
    @supports_net_changes = 0;
GO
-- 3000 rows; ORDER BY: SQL Server inserts into the clustered index in key order
INSERT INTO dbo.items (id, label, qty)
SELECT i, CONCAT('item-', i), CASE WHEN i % 10 = 0 THEN NULL ELSE i % 97 END
FROM (SELECT d1.d + 10 * d2.d + 100 * d3.d + 1000 * d4.d + 1 AS i
      FROM (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d1(d)
      CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d2(d)
      CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d3(d)
      CROSS JOIN (VALUES (0),(1),(2)) d4(d)) n
ORDER BY i;
GO
-- 300 rows, composite key (int, varchar), mixed types
INSERT INTO dbo.order_lines (order_id, line_code, product, price, shipped, created)
SELECT o, CONCAT('L', l), CONCAT(N'product ', o, N'/', l), CASE WHEN l = 2 THEN NULL ELSE o * 1.25 + l END,
    CASE WHEN (o + l) % 2 = 0 THEN 1 ELSE 0 END, DATEADD(minute, o * 3 + l, CAST('2024-01-02T03:04:05.678' AS datetime2(3)))
FROM (SELECT d1.d + 10 * d2.d + 1 AS o FROM (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d1(d)
      CROSS JOIN (VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)) d2(d)) orders
CROSS JOIN (VALUES (1),(2),(3)) lines(l)
ORDER BY o, l;
GO
