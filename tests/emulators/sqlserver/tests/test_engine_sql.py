"""SQL layer, statements: batches with several statements and result sets, DML round trips,
identifier case-insensitivity with original spelling in results, three-part names, variables and
sp_executesql/sp_prepare RPCs, built-in functions, error numbers and texts, unsupported constructs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from emulators.sqlserver.engine.server import EmulatorServer
from emulators.sqlserver.engine.testing import PASSWORD, collect, engine_with, param, session_in
from emulators.sqlserver.results import EnvChange, LoginInfo, Message, ReturnStatus, ReturnValue, SqlServerError


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    with engine_with("CREATE DATABASE SalesDb; CREATE DATABASE OtherDb",
                     """USE SalesDb;
            CREATE TABLE dbo.Customers (CustomerId int IDENTITY(1,1) NOT NULL, FullName nvarchar(100) NOT NULL,
                City varchar(30) NULL DEFAULT 'Oslo', CONSTRAINT PK_Customers PRIMARY KEY (CustomerId));
            CREATE UNIQUE INDEX UX_Customers_FullName ON dbo.Customers (FullName);
            INSERT INTO dbo.Customers (FullName, City) VALUES (N'Ada', 'London'), (N'Grace', NULL);
            INSERT INTO Customers (FullName) VALUES (N'Linus')""",
                     "USE OtherDb; CREATE TABLE dbo.Notes (Id int NOT NULL PRIMARY KEY, "
                     "Body nvarchar(50)); INSERT INTO Notes VALUES (1, N'other')") as srv:
        yield srv


@pytest.fixture()
def session(server: EmulatorServer) -> Iterator[Any]:
    with session_in(server, "SalesDb") as s:
        yield s


def test_login(server: EmulatorServer) -> None:
    with pytest.raises(SqlServerError) as exc:
        server.authenticate(LoginInfo("sa", "wrong"))
    assert exc.value.message.number == 18456 and exc.value.message.severity == 14
    assert exc.value.message.text == "Login failed for user 'sa'."
    server.authenticate(LoginInfo("SA", PASSWORD))


def test_several_statements_several_results(session) -> None:
    out = collect(session.execute_batch(
        "SELECT CustomerId, FullName FROM Customers ORDER BY CustomerId\n"
        "UPDATE Customers SET City = 'Paris' WHERE CustomerId > 100\n"
        "SELECT COUNT(*) AS n FROM dbo.Customers; SELECT @@ROWCOUNT"))
    assert out.error is None
    assert len(out.result_sets) == 3
    assert list(out.result_sets[0].rows) == [(1, "Ada"), (2, "Grace"), (3, "Linus")]
    assert out.counts == [0]
    assert list(out.result_sets[1].rows) == [(3,)] and out.result_sets[1].columns[0].name == "n"
    assert out.rows == [(1,)]  # @@ROWCOUNT after the SELECT COUNT(*)


def test_names_keep_original_spelling_and_lookup_is_case_insensitive(session) -> None:
    out = collect(session.execute_batch("SELECT * FROM [DBO].[customers] WHERE customerid = 1"))
    assert out.names == ["CustomerId", "FullName", "City"]
    assert out.types == ["int", "nvarchar(100)", "varchar(30)"]
    assert out.result_sets[0].columns[0].identity and not out.result_sets[0].columns[0].nullable
    out = collect(session.execute_batch("SELECT FULLNAME, CustomerId + 1, LEN(FullName) AS [Name Length] "
                                        "FROM Customers WHERE CustomerId = 1"))
    assert out.names == ["FULLNAME", "", "Name Length"]
    assert out.rows == [("Ada", 2, 3)]


def test_top_order_group_join_subquery_cte_union(session) -> None:
    out = collect(session.execute_batch("SELECT TOP 2 FullName FROM Customers ORDER BY FullName DESC"))
    assert out.rows == [("Linus",), ("Grace",)]
    out = collect(session.execute_batch("SELECT TOP (1) FullName FROM Customers ORDER BY CustomerId"))
    assert out.rows == [("Ada",)]
    out = collect(session.execute_batch(
        "WITH c AS (SELECT City, COUNT(*) AS n FROM Customers GROUP BY City) "
        "SELECT ISNULL(City, 'None') AS City, n FROM c ORDER BY City"))
    assert out.rows == [("London", 1), ("None", 1), ("Oslo", 1)]
    out = collect(session.execute_batch(
        "SELECT a.FullName FROM Customers a JOIN Customers b ON a.CustomerId = b.CustomerId + 1 "
        "WHERE a.CustomerId IN (SELECT CustomerId FROM Customers WHERE City IS NULL) "
        "UNION SELECT N'x' ORDER BY 1"))
    assert out.rows == [("Grace",), ("x",)]


def test_identity_insert_and_default(session) -> None:
    out = collect(session.execute_batch("INSERT INTO Customers (CustomerId, FullName) VALUES (10, N'X')"))
    assert [(m.number, m.text) for m in out.errors] == [
        (544, "Cannot insert explicit value for identity column in table 'Customers' when IDENTITY_INSERT is set "
              "to OFF.")]
    out = collect(session.execute_batch(
        "SET IDENTITY_INSERT dbo.Customers ON; INSERT INTO Customers (CustomerId, FullName) VALUES (10, N'Ten'); "
        "SET IDENTITY_INSERT dbo.Customers OFF; INSERT INTO Customers (FullName) VALUES (N'Eleven'); "
        "SELECT CustomerId, City FROM Customers WHERE CustomerId >= 10 ORDER BY 1; "
        "DELETE FROM Customers WHERE CustomerId >= 10"))
    assert out.error is None and out.errors == []
    assert out.result_sets[0].rows == [(10, "Oslo"), (11, "Oslo")]
    assert out.counts == [1, 1, 2]


def test_three_part_names_route_to_their_database(session) -> None:
    out = collect(session.execute_batch("SELECT Id, Body FROM OtherDb.dbo.Notes; SELECT DB_NAME()"))
    assert out.result_sets[0].rows == [(1, "other")] and out.rows == [("SalesDb",)]
    out = collect(session.execute_batch("SELECT * FROM [otherdb]..[notes]"))
    assert out.rows == [(1, "other")] and out.names == ["Id", "Body"]
    out = collect(session.execute_batch("SELECT * FROM SalesDb.dbo.Customers c JOIN OtherDb.dbo.Notes n ON 1 = 1"))
    assert out.error is not None and out.error.message.number == 50000
    assert "one database" in out.error.message.text
    out = collect(session.execute_batch("SELECT * FROM NoSuchDb.dbo.T"))
    assert out.error.message.number == 911
    assert out.error.message.text == ("Database 'NoSuchDb' does not exist. Make sure that the name is entered "
                                      "correctly.")


def test_use_changes_database_with_envchange(session) -> None:
    out = collect(session.execute_batch("USE otherdb"))
    assert out.env == [EnvChange("database", "OtherDb", "SalesDb")]
    assert [m.number for m in out.items if isinstance(m, Message)] == [5701]
    assert session.database == "OtherDb"
    assert collect(session.execute_batch("SELECT DB_NAME()")).rows == [("OtherDb",)]


@pytest.mark.parametrize(("sql", "number", "text"), [
    ("SELECT * FROM dbo.Nope", 208, "Invalid object name 'dbo.Nope'."),
    ("SELECT Nope FROM Customers", 207, "Invalid column name 'Nope'."),
    ("INSERT INTO Customers (FullName) VALUES (N'Ada')", 2601,
     "Cannot insert duplicate key row in object 'dbo.Customers' with unique index 'UX_Customers_FullName'. "
     "The duplicate key value is (Ada)."),
    ("INSERT INTO Customers (FullName) VALUES (NULL)", 515,
     "Cannot insert the value NULL into column 'FullName', table 'SalesDb.dbo.Customers'; column does not allow "
     "nulls. INSERT fails."),
    ("COMMIT", 3902, "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION."),
    ("ROLLBACK TRAN", 3903, "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION."),
    ("CREATE TABLE Customers (a int)", 2714, "There is already an object named 'Customers' in the database."),
    ("SELECT 1 / 0", 8134, "Divide by zero error encountered."),
    ("SELECT FROM WHERE", 102, None),
    ("CREATE DATABASE salesdb", 1801, "Database 'salesdb' already exists. Choose a different database name."),
    ("EXEC dbo.no_such_proc", 2812, "Could not find stored procedure 'dbo.no_such_proc'."),
    ("MERGE INTO Customers t USING Customers s ON t.CustomerId = s.CustomerId WHEN MATCHED THEN UPDATE SET "
     "City = 'x';", 50000, "emulator: MERGE statements are not supported"),
    ("CREATE TABLE T2 (a int, b AS (a + 1))", 50000, "emulator: computed column 'b' is not supported"),
    ("ALTER TABLE Customers ADD CONSTRAINT CK_City CHECK (City <> 'x')", 50000,
     "emulator: table constraint CHECK (City <> 'x') is not supported"),
    ("GO", 102, "Incorrect syntax near 'GO'."),
    ("RAISERROR('Custom %s failure', 16, 1, 'xyz')", 50000, "Custom xyz failure"),
    ("THROW 51000, 'thrown', 1", 51000, "thrown"),
])
def test_errors(session, sql: str, number: int, text: str | None) -> None:
    out = collect(session.execute_batch(sql))
    assert out.errors, f"no error for {sql}"
    assert out.errors[0].number == number
    if text is not None:
        assert out.errors[0].text == text


def test_duplicate_primary_key_message(session) -> None:
    collect(session.execute_batch("CREATE TABLE dbo.Pk (a int NOT NULL, b int NOT NULL, "
                                  "CONSTRAINT PK_Pk PRIMARY KEY (a, b)); INSERT INTO Pk VALUES (1, 2)"))
    out = collect(session.execute_batch("INSERT INTO Pk VALUES (1, 2); SELECT COUNT(*) FROM Pk"))
    assert [(m.number, m.severity, m.text) for m in out.errors] == [
        (2627, 14, "Violation of PRIMARY KEY constraint 'PK_Pk'. Cannot insert duplicate key in object 'dbo.Pk'. "
                   "The duplicate key value is (1, 2).")]
    assert out.rows == [(1,)]


def test_variables_print_and_server_functions(session) -> None:
    out = collect(session.execute_batch(
        "DECLARE @n int = 2, @name nvarchar(20); SET @name = N'Grace'; "
        "SELECT @n = COUNT(*) FROM Customers WHERE FullName <> @name; PRINT 'n is ' + CAST(@n AS varchar(10)); "
        "SELECT @n AS n, @name AS name, @@SPID AS spid, @@TRANCOUNT, @@SERVERNAME, SCHEMA_NAME(), "
        "OBJECT_NAME(OBJECT_ID('dbo.Customers')), SERVERPROPERTY('ProductMajorVersion')"))
    assert out.error is None, out.error
    assert [m.text for m in out.items if isinstance(m, Message)] == ["n is 2"]
    row = out.rows[0]
    assert row[:5] == (2, "Grace", session.spid, 0, session.server.server_name)
    assert row[5:7] == ("dbo", "Customers")
    assert row[7].value == "16"
    out = collect(session.execute_batch("SELECT @@VERSION"))
    assert out.rows[0][0].startswith("Microsoft SQL Server 2022") and " 16.0." in out.rows[0][0]
    out = collect(session.execute_batch("SELECT @undeclared"))
    assert out.error.message.number == 137


def test_sp_executesql_and_prepared_statements(session) -> None:
    out = collect(session.execute_rpc("sp_executesql", [
        param("SELECT FullName FROM Customers WHERE CustomerId = @P0 OR City = @P1 ORDER BY 1", "nvarchar(max)"),
        param("@P0 int,@P1 nvarchar(4000)"), param(1, "int"), param("Oslo")]))
    assert out.error is None and out.rows == [("Ada",), ("Linus",)]
    assert isinstance(out.items[-1], ReturnStatus)
    out = collect(session.execute_rpc("sp_prepare", [
        param(None, "int", "@handle", output=True), param("@P0 int"),
        param("SELECT FullName FROM Customers WHERE CustomerId = @P0")]))
    handle = next(r for r in out.items if isinstance(r, ReturnValue)).value
    out = collect(session.execute_rpc("sp_execute", [param(handle, "int"), param(2, "int")]))
    assert out.rows == [("Grace",)]
    out = collect(session.execute_rpc("sp_prepexec", [
        param(None, "int", "@h", output=True), param("@P0 nvarchar(10)"), param("SELECT UPPER(@P0) AS u"),
        param("abc")]))
    assert out.rows == [("ABC",)] and any(isinstance(r, ReturnValue) and r.name == "@h" for r in out.items)
    assert collect(session.execute_rpc("sp_unprepare", [param(handle, "int")])).error is None
    out = collect(session.execute_rpc("sp_execute", [param(handle, "int"), param(2, "int")]))
    assert out.error.message.number == 8179
    out = collect(session.execute_rpc("sp_cursoropen", []))
    assert out.error.message.number == 50000 and "sp_cursoropen" in out.error.message.text


def test_exec_procedure_with_named_and_positional_arguments(session) -> None:
    out = collect(session.execute_batch("EXEC sp_pkeys @table_name = N'Customers', @table_owner = 'dbo'"))
    assert out.rows == [("SalesDb", "dbo", "Customers", "CustomerId", 1, "PK_Customers")]
    out = collect(session.execute_batch("{call sp_pkeys('Customers')}"))
    assert out.rows[0][3] == "CustomerId"


def test_if_and_blocks(session) -> None:
    out = collect(session.execute_batch(
        "IF EXISTS (SELECT 1 FROM Customers WHERE FullName = N'Ada') BEGIN SELECT 'yes' END ELSE SELECT 'no'"))
    assert out.rows == [("yes",)]
    out = collect(session.execute_batch("IF 1 = 0 SELECT 'a' ELSE SELECT 'b'"))
    assert out.rows == [("b",)]


def test_alter_and_drop_table(session) -> None:
    out = collect(session.execute_batch(
        "CREATE TABLE dbo.Alt (Id int NOT NULL CONSTRAINT PK_Alt PRIMARY KEY, A int); "
        "INSERT INTO Alt VALUES (1, 5); ALTER TABLE Alt ADD B nvarchar(10) NULL, C int NOT NULL DEFAULT 7; "
        "ALTER TABLE Alt DROP COLUMN A; ALTER TABLE Alt ALTER COLUMN B nvarchar(20) NOT NULL"))
    assert out.errors and out.errors[0].number in (515, 50000)   # B holds NULL: NOT NULL fails
    out = collect(session.execute_batch("SELECT * FROM Alt"))
    assert out.names == ["Id", "B", "C"] and out.rows == [(1, None, 7)]
    out = collect(session.execute_batch("SELECT name, column_id FROM sys.columns WHERE object_id = OBJECT_ID('Alt') "
                                        "ORDER BY column_id"))
    assert out.rows == [("Id", 1), ("B", 3), ("C", 4)]   # column ids are not reused
    out = collect(session.execute_batch("DROP TABLE Alt; SELECT OBJECT_ID('dbo.Alt')"))
    assert out.rows == [(None,)]
    out = collect(session.execute_batch("DROP TABLE Alt"))
    assert out.errors[0].number == 3701


def test_truncate_and_schema(session) -> None:
    out = collect(session.execute_batch(
        "CREATE SCHEMA Sales; CREATE TABLE Sales.Items (Id int NOT NULL PRIMARY KEY, Qty tinyint); "
        "INSERT INTO Sales.Items VALUES (1, 2), (2, 3); TRUNCATE TABLE Sales.Items; "
        "SELECT COUNT(*) FROM sales.items"))
    assert out.error is None and out.errors == [] and out.rows == [(0,)]
    out = collect(session.execute_batch("SELECT s.name FROM sys.tables t JOIN sys.schemas s "
                                        "ON s.schema_id = t.schema_id WHERE t.name = 'Items'"))
    assert out.rows == [("Sales",)]


def test_foreign_key_violation_is_547(session) -> None:
    out = collect(session.execute_batch(
        "CREATE TABLE dbo.Orders (OrderId int NOT NULL PRIMARY KEY, CustomerId int NOT NULL, "
        "CONSTRAINT FK_Orders_Customers FOREIGN KEY (CustomerId) REFERENCES dbo.Customers (CustomerId)); "
        "INSERT INTO Orders VALUES (1, 1); INSERT INTO Orders VALUES (2, 999)"))
    assert out.counts == [1]
    assert [(m.number, m.text) for m in out.errors] == [
        (547, 'The INSERT statement conflicted with the FOREIGN KEY constraint "FK_Orders_Customers". The conflict '
              'occurred in database "SalesDb", table "dbo.Customers".')]
    out = collect(session.execute_batch("EXEC sp_fkeys @pktable_name = 'Customers'"))
    assert [(r[2], r[3], r[6], r[7], r[11]) for r in out.rows] == [
        ("Customers", "CustomerId", "Orders", "CustomerId", "FK_Orders_Customers")]
    collect(session.execute_batch("DROP TABLE Orders"))


def test_cast_to_strings_uses_sql_server_text_forms(session) -> None:
    out = collect(session.execute_batch(
        "SELECT CAST(CAST('2020-01-02 03:04:05.1234567' AS datetime2) AS varchar(30)), "
        "CAST(CAST('2020-01-02 03:04:05 -05:30' AS datetimeoffset(0)) AS nvarchar(40)), "
        "CAST(42 AS varchar(10)) + 'x', CAST('abcdef' AS varchar(2))"))
    assert out.rows == [("2020-01-02 03:04:05.1234567", "2020-01-02 03:04:05.0000000 -05:30", "42x", "ab")]


def test_debezium_lsn_window_queries_with_parameters(session) -> None:
    collect(session.execute_batch("CREATE TABLE dbo.Lsn (start_lsn binary(10) NOT NULL, tran_id varbinary(10))"))
    collect(session.execute_batch("INSERT INTO Lsn VALUES (0x00000000000000010000, 0x01), "
                                  "(0x00000000000000020000, 0x00), (0x00000000000000030000, 0x02), "
                                  "(0x00000000000000040000, 0x03)"))
    query = ("SELECT MAX(start_lsn) FROM (SELECT TOP (@P0 + 1) start_lsn FROM SalesDb.dbo.Lsn "
             "WHERE start_lsn >= @P1 AND tran_id <> 0x00 ORDER BY start_lsn) as next_lsns")
    out = collect(session.execute_rpc("sp_executesql", [
        param(query, "nvarchar(max)"), param("@P0 int,@P1 binary(10)"), param(1, "int"),
        param(bytes.fromhex("00000000000000010000"), "binary(10)")]))
    assert out.error is None, out.error
    assert out.types == ["binary(10)"] and out.rows == [(bytes.fromhex("00000000000000030000"),)]


def test_sp_rename_keeps_the_object_id(session) -> None:
    out = collect(session.execute_batch(
        "CREATE TABLE dbo.OldName (Id int NOT NULL PRIMARY KEY, Val int); INSERT INTO OldName VALUES (1, 2); "
        "SELECT OBJECT_ID('dbo.OldName')"))
    object_id = out.rows[0][0]
    out = collect(session.execute_batch("EXEC sp_rename 'dbo.OldName', 'NewName'; "
                                        "EXEC sp_rename 'dbo.NewName.Val', 'Amount', 'COLUMN'; "
                                        "SELECT OBJECT_ID('dbo.NewName'), OBJECT_ID('dbo.OldName'); "
                                        "SELECT * FROM NewName"))
    assert out.error is None, out.error
    assert [m.number for m in out.items if isinstance(m, Message)] == [15477, 15477]
    assert list(out.result_sets[0].rows) == [(object_id, None)]
    assert out.names == ["Id", "Amount"] and out.rows == [(1, 2)]
    collect(session.execute_batch("DROP TABLE NewName"))


def test_server_time_zone_drives_sysdatetimeoffset() -> None:
    with engine_with(time_zone="Asia/Kolkata") as srv, session_in(srv, "master") as s:
        out = collect(s.execute_batch("SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET()), "
                                      "DATEDIFF(minute, GETUTCDATE(), GETDATE())"))
        assert out.rows == [(330, 330)]


def test_string_comparisons_follow_the_ci_collation(session) -> None:
    out = collect(session.execute_batch(
        "SELECT CustomerId FROM Customers WHERE FullName = 'ADA'; "
        "SELECT CustomerId FROM Customers WHERE FullName = 'ada   '; "
        "SELECT CustomerId FROM Customers WHERE FullName IN ('GRACE', 'nobody'); "
        "SELECT CustomerId FROM Customers WHERE FullName LIKE 'l%' ORDER BY 1; "
        "UPDATE Customers SET City = City WHERE FullName = 'LINUS'"))
    assert out.error is None, out.error
    assert [list(r.rows) for r in out.result_sets] == [[(1,)], [(1,)], [(2,)], [(3,)]]
    assert out.counts == [1]


def test_insert_select_converts_and_checks_each_column(session) -> None:
    out = collect(session.execute_batch(
        "CREATE TABLE dbo.Copy (Name varchar(4) NOT NULL, Born datetime2(0), Flag bit); "
        "INSERT INTO Copy (Name, Born, Flag) SELECT LEFT(FullName, 4), '2020-01-01 10:00:00.6', 1 FROM Customers "
        "WHERE CustomerId < 3; SELECT Name, Born, Flag FROM Copy ORDER BY Name"))
    assert out.error is None and out.errors == [], out.errors
    assert out.counts == [2]
    assert [(r[0], r[1].time.ticks, r[2]) for r in out.rows] == [("Ada", 360010000000, True),
                                                                 ("Grac", 360010000000, True)]
    out = collect(session.execute_batch("INSERT INTO Copy (Name) SELECT FullName FROM Customers WHERE CustomerId = 2"))
    assert [m.number for m in out.errors] == [2628]
    collect(session.execute_batch("DROP TABLE Copy"))
