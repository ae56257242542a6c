"""serve.py as a user runs it: the address line, SIGTERM, the sa login, and a restart on the same
data (``--data-dir``) after SIGKILL, during committed writes, that loses and duplicates nothing."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import mssql_python
import pytest

from helpers.sqlserver import SqlServerEmulator, connect, wait_for


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # under /tmp: the backing PostgreSQL runs as the postgres user, which cannot enter pytest's tmp_path
    path = Path(tempfile.mkdtemp(prefix="sqlserver-emulator-data-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_serve_prints_its_address_logs_in_sa_and_stops_on_sigterm() -> None:
    emulator = SqlServerEmulator().start()
    try:
        assert emulator.port > 0
        (version,) = emulator.execute("SELECT @@VERSION")[0]
        assert version.startswith("Microsoft SQL Server 2022")
        with pytest.raises(mssql_python.Error, match=r"Login failed for user 'sa'"):
            connect(emulator.host, emulator.port, password="not-the-password")
        proc = emulator.proc
        assert proc is not None
    finally:
        emulator.stop()
    assert proc.returncode == 0, emulator.log()


SETUP = """
CREATE DATABASE shop;
"""
TABLE = """
EXEC sys.sp_cdc_enable_db;
CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, note nvarchar(40) NULL);
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL,
    @supports_net_changes = 0;
"""


def _captured(emulator: SqlServerEmulator) -> list[tuple[int, int]]:
    """(operation, id) of every change row, in LSN order."""
    rows = emulator.execute(
        "SELECT __$operation, id FROM cdc.dbo_orders_CT ORDER BY __$start_lsn, __$seqval, __$operation", "shop")
    return [(int(op), int(i)) for op, i in rows]


def test_restart_after_sigkill_loses_and_duplicates_no_committed_change(data_dir: Path) -> None:
    emulator = SqlServerEmulator(data_dir=data_dir, capture_interval=0.1).start()
    try:
        emulator.execute(SETUP)
        emulator.execute(TABLE, "shop")
        committed: list[int] = []
        in_flight: list[int] = []
        stop = threading.Event()

        def write() -> None:
            with contextlib.suppress(mssql_python.Error), contextlib.closing(emulator.connect("shop")) as conn:
                cur = conn.cursor()
                for i in range(1, 100_000):
                    if stop.is_set():
                        return
                    in_flight[:] = [i]
                    cur.execute("INSERT INTO dbo.orders (id, note) VALUES (?, ?)", i, f"order {i}")
                    committed.append(i)
                    in_flight.clear()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        wait_for(lambda: len(committed) >= 200, "200 committed inserts")
        emulator.kill()  # mid-write, capture job and all
        writer.join(30)
        stop.set()
        assert not writer.is_alive()
        emulator.start()  # same data directory: the kept PostgreSQL, its slot and change tables

        stored = {int(i) for (i,) in emulator.execute("SELECT id FROM dbo.orders", "shop")}
        assert set(committed) <= stored
        assert stored <= set(committed) | set(in_flight)  # the one in flight may or may not have committed

        emulator.execute("INSERT INTO dbo.orders (id, note) VALUES (0, N'after restart')", "shop")
        expected = sorted(stored | {0})
        captured = wait_for(lambda: (rows := _captured(emulator)) and len(rows) >= len(expected) and rows,
                            "the capture job to catch up after the restart")
        assert all(op == 2 for op, _ in captured)
        ids = [i for _, i in captured]
        assert sorted(ids) == expected  # every committed insert exactly once
        assert ids[:-1] == sorted(ids[:-1]) and ids[-1] == 0  # in commit order; the new one last
    finally:
        emulator.stop()


def test_truncate_of_a_cdc_table_is_refused_and_drop_table_drops_its_capture_instances() -> None:
    with SqlServerEmulator() as emulator:
        emulator.execute(SETUP)
        emulator.execute(TABLE + "CREATE TABLE dbo.plain (id int PRIMARY KEY);", "shop")
        emulator.execute("INSERT INTO dbo.plain VALUES (1); TRUNCATE TABLE dbo.plain;", "shop")
        assert emulator.execute("SELECT COUNT(*) FROM dbo.plain", "shop") == [(0,)]
        with pytest.raises(mssql_python.Error, match=r"Cannot truncate table 'dbo\.orders' because it is published "
                                                     r"for replication or enabled for Change Data Capture\."):
            emulator.execute("TRUNCATE TABLE dbo.orders", "shop")
        assert emulator.execute("SELECT capture_instance FROM cdc.change_tables", "shop") == [("dbo_orders",)]
        emulator.execute("DROP TABLE dbo.orders", "shop")
        assert emulator.execute("SELECT COUNT(*) FROM cdc.change_tables", "shop") == [(0,)]
        assert emulator.execute("SELECT OBJECT_ID('cdc.dbo_orders_CT')", "shop") == [(None,)]
