"""SQL layer, what Debezium's incremental and blocking snapshots send: plain scans come in clustered-index
order (as SQL Server reads a clustered table), the max-key query and the parameterised chunk query with
``OPTION(RECOMPILE)`` and an additional condition, the prepared watermark INSERT without a column list; and
the statement trace (serve.py --trace-statements) that shows what a client sent."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from emulators.sqlserver.engine.server import EmulatorServer
from emulators.sqlserver.engine.testing import collect, engine_with, param, session_in
from emulators.sqlserver.tds import server as tds_server


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    with engine_with("CREATE DATABASE snapdb", """USE snapdb;
            CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY, label varchar(10) NULL);
            INSERT INTO dbo.items VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd');
            UPDATE dbo.items SET label = 'a2' WHERE id = 1;
            UPDATE dbo.items SET label = 'c2' WHERE id = 3;
            CREATE TABLE dbo.pairs (a int NOT NULL, b varchar(5) NOT NULL, CONSTRAINT pk_pairs PRIMARY KEY (b, a));
            INSERT INTO dbo.pairs VALUES (2, 'x'), (1, 'y'), (1, 'x');
            CREATE TABLE dbo.heap (id int NOT NULL, v int NULL);
            INSERT INTO dbo.heap VALUES (3, 1), (1, 2);
            CREATE TABLE dbo.debezium_signal (id varchar(64) NOT NULL PRIMARY KEY, type varchar(32) NOT NULL,
                data varchar(2048) NULL)""") as srv:
        yield srv


@pytest.fixture()
def session(server: EmulatorServer) -> Iterator[Any]:
    with session_in(server, "snapdb") as s:
        yield s


def rows(session: Any, sql: str) -> list[tuple[Any, ...]]:
    out = collect(session.execute_batch(sql))
    assert out.error is None, out.errors
    return out.rows


def test_a_plain_scan_comes_in_clustered_key_order_after_updates(session) -> None:
    # PostgreSQL's heap now holds 2, 4, 1, 3 (updated rows move); SQL Server reads the clustered index
    assert rows(session, "SELECT * FROM [snapdb].[dbo].[items]") == [(1, "a2"), (2, "b"), (3, "c2"), (4, "d")]
    assert rows(session, "SELECT id FROM dbo.items AS i WHERE label <> 'b'") == [(1,), (3,), (4,)]
    assert rows(session, "SELECT TOP 2 id FROM items") == [(1,), (2,)]
    # a blocking snapshot's full-SELECT additional condition is such a scan, too
    assert rows(session, "SELECT * FROM [snapdb].[dbo].[items] WHERE label LIKE '%2'") == [(1, "a2"), (3, "c2")]


def test_the_clustered_order_is_the_key_order_not_the_column_order(session) -> None:
    assert rows(session, "SELECT a, b FROM dbo.pairs") == [(1, "x"), (2, "x"), (1, "y")]


def test_an_explicit_order_and_statements_with_their_own_order_are_left_alone(session) -> None:
    assert rows(session, "SELECT id FROM dbo.items ORDER BY id DESC") == [(4,), (3,), (2,), (1,)]
    assert rows(session, "SELECT COUNT(*) FROM dbo.items") == [(4,)]
    assert sorted(rows(session, "SELECT DISTINCT LEFT(label, 1) FROM dbo.items")) == [("a",), ("b",), ("c",),
                                                                                       ("d",)]
    assert sorted(rows(session, "SELECT * FROM dbo.heap")) == [(1, 2), (3, 1)]  # no clustered index: any order


def test_max_key_query_with_additional_condition_and_recompile(session) -> None:
    sql = "SELECT TOP 1 * FROM [snapdb].[dbo].[items] WHERE (label <> 'd') ORDER BY [id] DESC OPTION(RECOMPILE)"
    assert rows(session, sql) == [(3, "c2")]


def test_chunk_query_parameters_bound_through_sp_executesql(session) -> None:
    # the composite-key form Debezium 3.6 sends (RowValueConstructorChunkQueryBuilder's fallback)
    chunk = ("SELECT TOP 2 * FROM [snapdb].[dbo].[pairs] WHERE (([b] >  @P0 ) OR ([b] =  @P1 AND [a] >  @P2 )) "
             "AND NOT (([b] >  @P3 ) OR ([b] =  @P4 AND [a] >  @P5 )) ORDER BY [b], [a] OPTION(RECOMPILE)")
    out = collect(session.execute_rpc("sp_executesql", [
        param(chunk), param("@P0 nvarchar(4000),@P1 nvarchar(4000),@P2 int,@P3 nvarchar(4000),@P4 nvarchar(4000),"
                            "@P5 int"),
        param("x"), param("x"), param(1, "int"), param("y"), param("y"), param(1, "int")]))
    assert out.error is None, out.errors
    assert out.rows == [(2, "x"), (1, "y")]
    first = collect(session.execute_rpc("sp_executesql", [
        param("SELECT TOP 3 * FROM [snapdb].[dbo].[items] WHERE ([id] >  @P0 ) AND NOT ([id] >  @P1 ) "
              "ORDER BY [id] OPTION(RECOMPILE)"), param("@P0 int,@P1 int"), param(1, "int"), param(3, "int")]))
    assert first.rows == [(2, "b"), (3, "c2")]


def test_option_clause_errors_as_sql_server(session) -> None:
    for sql in ("SELECT * FROM dbo.items OPTION RECOMPILE", "SELECT * FROM dbo.items OPTION(NO_SUCH_HINT)"):
        out = collect(session.execute_batch(sql))
        assert out.errors and out.errors[0].number == 102, sql


def test_prepared_watermark_insert_without_column_list(session) -> None:
    insert = "INSERT INTO [snapdb].[dbo].[debezium_signal] VALUES ( @P0 ,  @P1 ,  @P2 )"
    types = "@P0 nvarchar(4000),@P1 nvarchar(4000),@P2 nvarchar(4000)"
    out = collect(session.execute_rpc("sp_prepexec", [
        param(None, "int", output=True), param(types), param(insert),
        param("abc-open"), param("snapshot-window-open"), param('{"openWindowTimestamp": "t"}')]))
    assert out.error is None, out.errors
    assert out.counts == [1]
    out = collect(session.execute_rpc("sp_executesql", [param(insert), param(types), param("abc-close"),
                                                         param("snapshot-window-close"), param(None)]))
    assert out.error is None, out.errors
    assert rows(session, "SELECT id, type, data FROM dbo.debezium_signal WHERE id LIKE 'abc-%'") == [
        ("abc-close", "snapshot-window-close", None), ("abc-open", "snapshot-window-open",
                                                       '{"openWindowTimestamp": "t"}')]
    # the insert_delete strategy's close: a prepared DELETE by id
    out = collect(session.execute_rpc("sp_executesql", [
        param("DELETE FROM [snapdb].[dbo].[debezium_signal] WHERE id =  @P0 "), param("@P0 nvarchar(4000)"),
        param("abc-open")]))
    assert out.error is None and out.counts == [1]


def test_statement_trace_names_the_request_and_its_parameters() -> None:
    params = [param("SELECT @P0"), param("@P0 int"), param(7, "int")]
    text = tds_server._describe_params(params)
    assert text == "? nvarchar = 'SELECT @P0'; ? nvarchar = '@P0 int'; ? int = 7"
    assert tds_server.trace.name == tds_server.log.name + ".statements"
    assert tds_server.trace.getEffectiveLevel() > logging.DEBUG  # off unless serve.py --trace-statements
