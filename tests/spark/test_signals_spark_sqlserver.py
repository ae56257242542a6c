"""Signals in the Spark source on SQL Server (the emulator → the headwater source → the Delta sink):
the driver streams through the signaling stage and hands over the records it built, positioned as
SqlServerWorkDecoder positions them (headwater.engine.signals.units, record_positions).

An incremental snapshot asked for through the signal table while other transactions update, delete
and insert the rows being snapshotted: the Delta current-state table equals the table afterwards,
the notifications say it completed, and no two records share a position.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_signals_spark import NOTIFICATIONS, DeltaCapture

from helpers.spark_capture import wait_first_batch
from helpers.sqlserver import SqlServerEmulator
from helpers.sqlserver_fixtures import cdc_database, emulator_fixture

pytestmark = pytest.mark.postgres  # the emulator is backed by PostgreSQL

ROWS = 600


sqlserver = emulator_fixture("module")


@pytest.fixture
def database(sqlserver: SqlServerEmulator) -> Iterator[str]:
    with cdc_database(sqlserver, f"hw_sig_{uuid.uuid4().hex[:8]}") as name:
        yield name


def _props(sqlserver: SqlServerEmulator, db: str, tmp_path: Path) -> dict[str, str]:
    return {
        "connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
        "database.hostname": sqlserver.host, "database.port": str(sqlserver.port), "database.user": "sa",
        "database.password": sqlserver.password, "database.encrypt": "false", "database.names": db,
        "topic.prefix": "server1", "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(tmp_path / "history.dat"), "poll.interval.ms": "100",
        "snapshot.mode": "no_data", "signal.data.collection": f"{db}.dbo.debezium_signal",
        "incremental.snapshot.chunk.size": "100", "notification.enabled.channels": "sink",
        "notification.sink.topic.name": NOTIFICATIONS}


class Churn:
    """Small transactions updating, deleting and inserting rows of dbo.items on a thread."""

    def __init__(self, sqlserver: SqlServerEmulator, db: str, seed: int, next_id: int) -> None:
        self.conn = sqlserver.connect(db)
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.next_id = next_id
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            cur = self.conn.cursor()
            while not self.stop.is_set():
                i = self.rng.randint(1, self.next_id - 1)
                kind = self.rng.random()
                if kind < 0.6:
                    cur.execute("UPDATE dbo.items SET v = v + 'u', n = n + 1 WHERE id = ?", i)
                elif kind < 0.85:
                    cur.execute("DELETE FROM dbo.items WHERE id = ?", i)
                else:
                    cur.execute("INSERT INTO dbo.items (id, v, n) VALUES (?, 'new', 0)", self.next_id)
                    self.next_id += 1
                time.sleep(0.02)
        except BaseException as exc:  # handed to the test
            self.error = exc

    def __enter__(self) -> Churn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        self.conn.close()
        if self.error is not None:
            raise self.error


@pytest.mark.timeout(600)
def test_an_incremental_snapshot_with_concurrent_changes_ends_in_the_table(spark: Any, sqlserver: SqlServerEmulator,
                                                                           database: str, tmp_path: Path) -> None:
    db = database
    sqlserver.execute("CREATE TABLE dbo.debezium_signal (id varchar(64) NOT NULL PRIMARY KEY, type varchar(32) "
                      "NOT NULL, data varchar(2048) NULL)", database=db)
    sqlserver.execute("CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY, v varchar(400) NULL, n int NULL)",
                      database=db)
    for table in ("debezium_signal", "items"):
        sqlserver.execute(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', "
                          "@role_name = NULL, @supports_net_changes = 0", database=db)
    values = ", ".join(f"({i}, 'row {i}', {i})" for i in range(1, ROWS + 1))
    sqlserver.execute(f"INSERT INTO dbo.items (id, v, n) VALUES {values}", database=db)

    capture = DeltaCapture(spark, _props(sqlserver, db, tmp_path), tmp_path / "checkpoint", tmp_path / "lake",
                           f"server1.{db}.dbo.items").start()
    try:
        wait_first_batch(capture.query)
        with Churn(sqlserver, db, 22, ROWS + 1):
            sqlserver.execute("INSERT INTO dbo.debezium_signal (id, type, data) VALUES ('inc-1', 'execute-snapshot', "
                              f"'{{\"data-collections\": [\"{db}.dbo.items\"], \"type\": \"incremental\"}}')",
                              database=db)
            capture.wait_for(lambda rows: _completed(capture), timeout=300)
        # the last change: once it is in, every change before it is too
        sqlserver.execute("INSERT INTO dbo.items (id, v, n) VALUES (-1, 'last', -1)", database=db)
        capture.wait_for(lambda rows: any(r.op == "c" and '"last"' in (r.value or "") for r in rows), timeout=120)
    finally:
        capture.stop()
    reads = sum(r.op == "r" for r in capture.rows())
    assert ROWS // 2 < reads <= ROWS + 200  # the rows (less the deleted, plus the inserted) read once
    path = capture.sink.table_path(capture.topic)
    delta = {r["id"]: (r["v"], r["n"]) for r in spark.read.format("delta").load(path).collect()}
    source = {r[0]: (r[1], r[2]) for r in sqlserver.execute("SELECT id, v, n FROM dbo.items", database=db)}
    assert delta == source
    kinds = [n["type"] for n in capture.notifications() if n["aggregate_type"] == "Incremental Snapshot"]
    assert kinds[0] == "STARTED" and kinds[-1] == "COMPLETED" and "IN_PROGRESS" in kinds
    positions = [r.position for r in capture.rows() if r.position is not None]
    assert len(set(positions)) == len(positions), "two records share a position"


def _completed(capture: DeltaCapture) -> bool:
    return any(n["aggregate_type"] == "Incremental Snapshot" and n["type"] == "COMPLETED"
               for n in capture.notifications())


def test_signals_take_one_database(sqlserver: SqlServerEmulator, tmp_path: Path) -> None:
    """With several databases a read event could not sort with its own database's changes: refused."""
    from headwater.config import COMMON_FIELDS, Configuration
    from headwater.config.registry import ensure_builtin_connectors, resolve_connector
    from headwater.connectors.sqlserver.connector import SqlServerConnector
    from headwater.engine.connector import ConnectorError

    ensure_builtin_connectors()
    props = {**_props(sqlserver, "one", tmp_path), "database.names": "one,two",
             "signal.data.collection": "one.dbo.debezium_signal"}
    _, fields = resolve_connector(props["connector.class"])
    connector = SqlServerConnector(Configuration.build(props, COMMON_FIELDS.merge(fields)))
    source = connector.capture_source(parallel=True)
    with pytest.raises(ConnectorError, match=r"take one database in database\.names, got 2"):
        source.offset_position({"databases": {}})
