-- A two-column primary key (declared in an order different from the column order).
CREATE DATABASE composite_keys;
GO
ALTER DATABASE composite_keys SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE composite_keys;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.order_lines (
    line_no smallint NOT NULL,
    order_id int NOT NULL,
    product nvarchar(100) NOT NULL,
    quantity int NOT NULL,
    price decimal(10, 2) NULL,
    CONSTRAINT pk_order_lines PRIMARY KEY (order_id, line_no)
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'order_lines', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.order_lines (order_id, line_no, product, quantity, price) VALUES
    (10, 1, N'hammer', 1, 12.50),
    (10, 2, N'nails', 200, 0.02),
    (11, 1, N'saw', 1, NULL);
GO
