"""SQL layer, transactions: BEGIN/COMMIT/ROLLBACK/SAVE TRAN with @@TRANCOUNT and ENVCHANGE
descriptors, statement-level rollback, IMPLICIT_TRANSACTIONS, isolation levels (SNAPSHOT allowed
only with ALLOW_SNAPSHOT_ISOLATION, error 3952), visibility between sessions, LOCK_TIMEOUT (1222),
cancel, reset."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from emulators.sqlserver.engine.server import EmulatorServer
from emulators.sqlserver.engine.testing import PASSWORD, collect, engine_with
from emulators.sqlserver.results import EnvChange, LoginInfo


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    setup = [f"USE {db}; CREATE TABLE dbo.Acct (Id int NOT NULL PRIMARY KEY, Bal int NOT NULL); "
             "INSERT INTO Acct VALUES (1, 100), (2, 200)" for db in ("TxDb", "SnapDb")]
    with engine_with("CREATE DATABASE TxDb; CREATE DATABASE SnapDb; "
                     "ALTER DATABASE SnapDb SET ALLOW_SNAPSHOT_ISOLATION ON", *setup) as srv:
        yield srv


def open_session(server: EmulatorServer, db: str = "TxDb"):
    return server.open_session(LoginInfo("sa", PASSWORD, database=db))


def test_trancount_and_descriptors(server: EmulatorServer) -> None:
    s = open_session(server)
    out = collect(s.execute_batch("BEGIN TRAN; BEGIN TRANSACTION; SELECT @@TRANCOUNT"))
    assert out.rows == [(2,)]
    begin = out.env[0]
    assert begin.kind == "begin_transaction" and len(begin.new) == 8 and begin.new != b"\0" * 8
    assert s.transaction_descriptor == begin.new
    out = collect(s.execute_batch("COMMIT; SELECT @@TRANCOUNT"))
    assert out.env == [] and out.rows == [(1,)]
    out = collect(s.execute_batch("COMMIT TRAN"))
    assert out.env == [EnvChange("commit_transaction", b"", begin.new)]
    assert s.transaction_descriptor == b"\0" * 8
    s.close()


def test_rollback_undoes_and_savepoints(server: EmulatorServer) -> None:
    s = open_session(server)
    out = collect(s.execute_batch(
        "BEGIN TRAN; UPDATE Acct SET Bal = 0 WHERE Id = 1; SAVE TRAN sp1; UPDATE Acct SET Bal = 0 WHERE Id = 2; "
        "ROLLBACK TRAN sp1; SELECT Bal FROM Acct ORDER BY Id; ROLLBACK; SELECT Bal FROM Acct ORDER BY Id; "
        "SELECT @@TRANCOUNT"))
    assert out.error is None, out.error
    assert [list(r.rows) for r in out.result_sets] == [[(0,), (200,)], [(100,), (200,)], [(0,)]]
    assert [e.kind for e in out.env] == ["begin_transaction", "rollback_transaction"]
    s.close()


def test_failed_statement_keeps_the_transaction(server: EmulatorServer) -> None:
    s = open_session(server)
    out = collect(s.execute_batch(
        "BEGIN TRAN; INSERT INTO Acct VALUES (3, 1); INSERT INTO Acct VALUES (3, 2); SELECT @@TRANCOUNT; COMMIT; "
        "SELECT Id, Bal FROM Acct WHERE Id = 3; DELETE FROM Acct WHERE Id = 3"))
    assert [m.number for m in out.errors] == [2627]
    assert [list(r.rows) for r in out.result_sets] == [[(1,)], [(3, 1)]]
    s.close()


def test_uncommitted_rows_are_invisible_to_another_session(server: EmulatorServer) -> None:
    writer, reader = open_session(server), open_session(server)
    collect(writer.execute_batch("BEGIN TRAN; INSERT INTO Acct VALUES (10, 1)"))
    assert collect(reader.execute_batch("SELECT COUNT(*) FROM Acct WHERE Id = 10")).rows == [(0,)]
    collect(writer.execute_batch("COMMIT"))
    assert collect(reader.execute_batch("SELECT COUNT(*) FROM Acct WHERE Id = 10")).rows == [(1,)]
    collect(writer.execute_batch("DELETE FROM Acct WHERE Id = 10"))
    writer.close()
    reader.close()


def test_snapshot_isolation_needs_the_database_option(server: EmulatorServer) -> None:
    s = open_session(server)
    out = collect(s.execute_batch("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRAN; SELECT * FROM Acct"))
    assert out.error is not None and out.error.message.number == 3952
    assert out.error.message.text == (
        "Snapshot isolation transaction failed accessing database 'TxDb' because snapshot isolation is not allowed "
        "in this database. Use ALTER DATABASE to allow snapshot isolation.")
    collect(s.execute_batch("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; IF @@TRANCOUNT > 0 ROLLBACK"))
    out = collect(s.execute_batch("SELECT name, snapshot_isolation_state, snapshot_isolation_state_desc "
                                  "FROM sys.databases WHERE name IN ('TxDb', 'SnapDb') ORDER BY database_id"))
    assert out.rows == [("TxDb", 0, "OFF"), ("SnapDb", 1, "ON")]
    s.close()


def test_snapshot_reader_keeps_its_view_while_another_session_writes(server: EmulatorServer) -> None:
    reader, writer = open_session(server, "SnapDb"), open_session(server, "SnapDb")
    out = collect(reader.execute_batch("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRAN; "
                                       "SELECT Bal FROM Acct WHERE Id = 1"))
    assert out.rows == [(100,)]
    out = collect(writer.execute_batch("UPDATE Acct SET Bal = 150 WHERE Id = 1"))
    assert out.counts == [1]
    assert collect(reader.execute_batch("SELECT Bal FROM Acct WHERE Id = 1")).rows == [(100,)]
    collect(reader.execute_batch("COMMIT"))
    assert collect(reader.execute_batch("SELECT Bal FROM Acct WHERE Id = 1")).rows == [(150,)]
    collect(writer.execute_batch("UPDATE Acct SET Bal = 100 WHERE Id = 1"))
    reader.close()
    writer.close()


def test_lock_timeout_is_error_1222(server: EmulatorServer) -> None:
    holder, waiter = open_session(server), open_session(server)
    collect(holder.execute_batch("BEGIN TRAN; UPDATE Acct SET Bal = Bal + 1 WHERE Id = 2"))
    started = time.monotonic()
    out = collect(waiter.execute_batch("SET LOCK_TIMEOUT 200; UPDATE Acct SET Bal = Bal + 1 WHERE Id = 2; "
                                       "SELECT @@LOCK_TIMEOUT"))
    assert [(m.number, m.text) for m in out.errors] == [(1222, "Lock request time out period exceeded.")]
    assert out.rows == [(200,)]   # 1222 ends the statement, not the batch
    assert time.monotonic() - started < 5
    collect(holder.execute_batch("ROLLBACK"))
    holder.close()
    waiter.close()


def test_implicit_transactions(server: EmulatorServer) -> None:
    s = open_session(server)
    out = collect(s.execute_batch("SET IMPLICIT_TRANSACTIONS ON; UPDATE Acct SET Bal = 7 WHERE Id = 2; "
                                  "SELECT @@TRANCOUNT; ROLLBACK; SET IMPLICIT_TRANSACTIONS OFF"))
    assert out.rows == [(1,)] and [e.kind for e in out.env] == ["begin_transaction", "rollback_transaction"]
    assert collect(s.execute_batch("SELECT Bal FROM Acct WHERE Id = 2")).rows == [(200,)]
    s.close()


def test_cancel_stops_a_running_statement(server: EmulatorServer) -> None:
    s = open_session(server)
    timer = threading.Timer(0.3, s.cancel)
    timer.start()
    started = time.monotonic()
    out = collect(s.execute_batch("WAITFOR DELAY '00:00:05'; SELECT 1"))
    assert time.monotonic() - started < 3
    assert out.result_sets == []
    # the session is usable afterwards
    assert collect(s.execute_batch("SELECT 2")).rows == [(2,)]
    s.close()


def test_reset_rolls_back_and_restores_defaults(server: EmulatorServer) -> None:
    s = open_session(server)
    collect(s.execute_batch("SET NOCOUNT ON; BEGIN TRAN; UPDATE Acct SET Bal = 1 WHERE Id = 1; USE SnapDb"))
    s.reset()
    assert s.database == "TxDb" and s.trancount == 0 and not s.nocount
    assert collect(s.execute_batch("SELECT Bal FROM Acct WHERE Id = 1")).rows == [(100,)]
    s.close()


def test_nocount_suppresses_row_counts(server: EmulatorServer) -> None:
    s = open_session(server)
    out = collect(s.execute_batch("SET NOCOUNT ON; UPDATE Acct SET Bal = Bal WHERE Id = 1; SET NOCOUNT OFF; "
                                  "UPDATE Acct SET Bal = Bal WHERE Id = 1"))
    assert out.counts == [1]
    s.close()


def test_deadlock_victim_gets_1205_and_its_transaction_is_rolled_back(server: EmulatorServer) -> None:
    a, b = open_session(server), open_session(server)
    collect(a.execute_batch("BEGIN TRAN; UPDATE Acct SET Bal = Bal WHERE Id = 1"))
    collect(b.execute_batch("BEGIN TRAN; UPDATE Acct SET Bal = Bal WHERE Id = 2"))
    results: dict[str, object] = {}

    def second() -> None:
        results["a"] = collect(a.execute_batch("UPDATE Acct SET Bal = Bal WHERE Id = 2"))

    t = threading.Thread(target=second)
    t.start()
    time.sleep(0.3)
    results["b"] = collect(b.execute_batch("UPDATE Acct SET Bal = Bal WHERE Id = 1"))
    t.join(timeout=20)
    outcomes = [results["a"], results["b"]]
    victims = [o for o in outcomes if o.error is not None]
    assert len(victims) == 1
    err = victims[0].error.message
    assert err.number == 1205 and err.severity == 13
    assert err.text.endswith("has been chosen as the deadlock victim. Rerun the transaction.")
    assert victims[0].env[-1].kind == "rollback_transaction"
    for s in (a, b):
        collect(s.execute_batch("IF @@TRANCOUNT > 0 ROLLBACK"))
    assert a.trancount == 0 and b.trancount == 0
    a.close()
    b.close()


def test_snapshot_update_conflict_is_3960(server: EmulatorServer) -> None:
    a, b = open_session(server, "SnapDb"), open_session(server, "SnapDb")
    collect(a.execute_batch("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRAN; SELECT Bal FROM Acct WHERE Id = 2"))
    collect(b.execute_batch("UPDATE Acct SET Bal = 201 WHERE Id = 2"))
    out = collect(a.execute_batch("UPDATE Acct SET Bal = 202 WHERE Id = 2"))
    assert out.errors[0].number == 3960
    collect(a.execute_batch("IF @@TRANCOUNT > 0 ROLLBACK"))
    collect(b.execute_batch("UPDATE Acct SET Bal = 200 WHERE Id = 2"))
    a.close()
    b.close()


def test_tablockx_hint_locks_the_table_until_the_transaction_ends(server: EmulatorServer) -> None:
    holder, other = open_session(server), open_session(server)
    out = collect(holder.execute_batch("BEGIN TRAN; SELECT TOP(0) * FROM [TxDb].[dbo].[Acct] WITH (TABLOCKX)"))
    assert out.error is None and out.names == ["Id", "Bal"]
    out = collect(other.execute_batch("SET LOCK_TIMEOUT 100; INSERT INTO Acct VALUES (50, 1)"))
    assert [m.number for m in out.errors] == [1222]
    collect(holder.execute_batch("COMMIT"))
    out = collect(other.execute_batch("INSERT INTO Acct VALUES (50, 1); DELETE FROM Acct WHERE Id = 50"))
    assert out.errors == [] and out.counts == [1, 1]
    holder.close()
    other.close()
