-- Primary-key values that change.
CREATE DATABASE key_update;
GO
ALTER DATABASE key_update SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE key_update;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.accounts (
    id int NOT NULL PRIMARY KEY,
    owner nvarchar(50) NOT NULL
);
GO
CREATE TABLE dbo.seats (
    row_letter char(1) NOT NULL,
    seat_no tinyint NOT NULL,
    holder nvarchar(50) NULL,
    PRIMARY KEY (row_letter, seat_no)
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'accounts', @role_name = NULL,
    @supports_net_changes = 0;
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'seats', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.accounts VALUES (1, N'ann'), (2, N'ben'), (3, N'cat');
INSERT INTO dbo.seats VALUES ('A', 1, N'ann'), ('A', 2, NULL), ('B', 1, N'ben');
GO
