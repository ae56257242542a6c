-- Blocking snapshot (execute-snapshot with "type":"blocking") while streaming: an initial snapshot, streamed
-- changes, the blocking snapshot of two tables (one through a full-SELECT additional condition), streamed changes after
-- to rows the blocking snapshot does not read (orders with amount <= 5, the notes table), so the events do not depend
-- on whether they are made while the blocking snapshot runs (streaming is paused then) or after it.
CREATE DATABASE blocking_snapshot;
GO
ALTER DATABASE blocking_snapshot SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE blocking_snapshot;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.debezium_signal (id varchar(64) NOT NULL PRIMARY KEY, type varchar(32) NOT NULL,
    data varchar(2048) NULL);
GO
CREATE TABLE dbo.customers (id int NOT NULL PRIMARY KEY, name varchar(40) NOT NULL, tier tinyint NULL);
CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, customer_id int NOT NULL, amount decimal(9, 2) NOT NULL,
    placed datetime2(0) NOT NULL);
CREATE TABLE dbo.notes (id int NOT NULL PRIMARY KEY, body nvarchar(100) NULL);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'debezium_signal', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'customers', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'notes', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.customers (id, name, tier) VALUES (1, 'alice', 1), (2, 'bob', NULL), (3, 'carol', 2);
INSERT INTO dbo.orders (id, customer_id, amount, placed) VALUES
    (100, 1, 10.50, '2024-03-01T10:00:00'), (101, 2, 99.99, '2024-03-02T11:30:00'), (102, 1, 0.01, '2024-03-03T12:45:30');
INSERT INTO dbo.notes (id, body) VALUES (1, N'first note');
GO
