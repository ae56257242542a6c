-- column.mask.with.N.chars, column.truncate.to.N.chars, column.mask.hash.SHA-256.with.salt, column.propagate.source.type,
-- datatype.propagate.source.type
CREATE DATABASE colmask;
GO
ALTER DATABASE colmask SET ALLOW_SNAPSHOT_ISOLATION ON;
GO
USE colmask;
GO
EXEC sys.sp_cdc_enable_db;
GO
CREATE TABLE dbo.people (
    id int NOT NULL PRIMARY KEY,
    ssn char(11) NULL,
    full_name nvarchar(60) NULL,
    city varchar(40) NULL,
    email varchar(80) NULL,
    salary decimal(12, 2) NULL,
    born date NULL,
    rating float NULL
);
GO
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'people', @role_name = NULL,
    @supports_net_changes = 0;
GO
INSERT INTO dbo.people VALUES (1, '123-45-6789', N'Ada Lovelace', 'London', 'ada@example.com', 1234.50, '1815-12-10', 4.5);
INSERT INTO dbo.people VALUES (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
GO
