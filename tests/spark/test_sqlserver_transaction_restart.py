"""Transaction metadata across restarts of the Spark source on SQL Server (`provide.transaction.metadata`).

Debezium sends a transaction's END only when the database's next transaction begins, or once the capture job
has idled; a restart in between must still send it, once, with the transaction's counts: the standalone runner
restores it from Debezium's `transaction_id` keys in its offset, the Spark source from its checkpoint's offset.
The streaming query is stopped twice while an END is pending (between batches, after the batch with the
transaction's events was committed): the first pending END must come with the next transaction's BEGIN, the
second from the idle timer of the restarted query. Then the batch holding that idle END is run again (its commit
removed from the checkpoint, as when the driver dies before logging it) while a newer transaction waits: the
replayed batch must be the batch as it ran. A standalone runner streams the same changes without a restart
alongside; both sides' records must be equal (the conformance masking)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from emulators.sqlserver.record import normalize_event
from helpers.capture import RunningCapture
from helpers.spark_capture import SparkCapture, conformance_line
from helpers.sqlserver import SqlServerEmulator, wait_for
from helpers.sqlserver_conformance import read_jsonl, wait_captured
from helpers.sqlserver_fixtures import cdc_database, emulator_fixture

pytestmark = pytest.mark.postgres  # the emulator is backed by PostgreSQL

PREFIX = "txr"
IDLE_END_S = 30  # the connector's idle END delay: 2 × the capture job's polling interval (set by `database`)
TRANSACTIONS = f"{PREFIX}.transaction"


sqlserver = emulator_fixture("module")


@pytest.fixture
def database(sqlserver: SqlServerEmulator) -> Iterator[str]:
    """A database with two captured tables and a row in one; dropped after the test."""
    with cdc_database(sqlserver, f"txr{uuid.uuid4().hex[:8]}", snapshot_isolation=False) as name:
        for table in ("tablea", "tableb"):
            sqlserver.execute(f"CREATE TABLE dbo.{table} (id int NOT NULL PRIMARY KEY, val varchar(30) NULL)",
                              database=name)
            sqlserver.execute(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', "
                              "@role_name = NULL, @supports_net_changes = 0", database=name)
        # The idle END comes 2 × the capture job's polling interval after the last change (the emulator
        # scans every 0.1 s regardless). The tests stop a query, or make the next change, before that timer
        # runs out: the default 10 s were too short for a loaded machine's Spark batches; 30 s here.
        sqlserver.execute(f"EXEC sys.sp_cdc_change_job @job_type = N'capture', @pollinginterval = {IDLE_END_S // 2}",
                          database=name)
        sqlserver.execute("INSERT INTO dbo.tablea VALUES (1, 'one')", database=name)
        captured(sqlserver, name)
        yield name


def captured(server: SqlServerEmulator, db: str) -> None:
    """Until the capture job has captured what was committed before this call."""
    conn = server.connect("master")
    try:
        wait_captured(conn, [db])
    finally:
        conn.close()


def connector_props(server: SqlServerEmulator, db: str, workdir: Path) -> dict[str, str]:
    return {
        "connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
        "database.hostname": server.host, "database.port": str(server.port), "database.user": "sa",
        "database.password": server.password, "database.encrypt": "false", "database.names": db,
        "topic.prefix": PREFIX, "snapshot.mode": "initial", "include.schema.changes": "false",
        "provide.transaction.metadata": "true", "poll.interval.ms": "100",
        "schema.history.internal.file.filename": str(workdir / "schema-history.dat"),
        "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true",
    }


def spark_options(server: SqlServerEmulator, db: str, workdir: Path, **extra: str) -> dict[str, str]:
    """The Spark source's options (snapshot chunks of 10 rows), its schema history in `workdir`."""
    workdir.mkdir()
    return {**connector_props(server, db, workdir), "snapshotChunkRows": "10", **extra}


def standalone_capture(server: SqlServerEmulator, db: str, workdir: Path, **extra: str) -> RunningCapture:
    """A standalone runner streaming the same changes into `workdir`/out.jsonl, started."""
    workdir.mkdir()
    return RunningCapture({**connector_props(server, db, workdir), **extra,
                           "offset.storage.file.filename": str(workdir / "offsets.json"),
                           "offset.flush.interval.ms": "100"}, workdir / "out.jsonl").start()


def payload(record: dict[str, Any]) -> Any:
    value = record["value"]
    return value.get("payload") if isinstance(value, dict) and "schema" in value else value


def data_events(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["topic"] != TRANSACTIONS and r["value"] is not None]


def boundaries(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(status, transaction id) of the transaction records, in order."""
    return [(payload(r)["status"], payload(r)["id"]) for r in records if r["topic"] == TRANSACTIONS]


def normalized(records: list[dict[str, Any]]) -> list[str]:
    """The records under the conformance masking (timestamps, LSNs, transaction ids), as JSON text."""
    return [json.dumps(normalize_event(r), sort_keys=True) for r in records]


def ends(records: list[dict[str, Any]], tx_id: str) -> list[dict[str, Any]]:
    return [payload(r) for r in records if r["topic"] == TRANSACTIONS and payload(r)["status"] == "END"
            and payload(r)["id"] == tx_id]


class Query:
    """One run of the streaming query on the shared checkpoint."""

    def __init__(self, spark: Any, options: dict[str, str], checkpoint: Path) -> None:
        self.capture = SparkCapture(spark, options, checkpoint, trigger={"processingTime": "200 milliseconds"})
        self.checkpoint = checkpoint
        self.capture.start()

    def records(self) -> list[dict[str, Any]]:
        return self.capture.records()

    def wait(self, condition: Callable[[list[dict[str, Any]]], bool], what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not condition(self.records()):
            self.capture.check()
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout} s; records: {self.summary()}")
            time.sleep(0.1)

    def stop_between_batches(self) -> None:
        """Stop once every batch that brought records is committed (a restart then starts after them)."""
        last = self.last_batch()
        wait_for(lambda: (self.checkpoint / "commits" / str(last)).exists(), f"the commit of batch {last}")
        self.capture.stop()
        assert self.capture.query.exception() is None, self.capture.query.exception()

    def batch_ids(self) -> list[int]:
        with self.capture._lock:
            return sorted({batch for batch, _ in self.capture.batches})

    def batch(self, batch_id: int) -> list[dict[str, Any]]:
        """The records of one batch (of its last run in this query)."""
        with self.capture._lock:
            rows = [rows for batch, rows in self.capture.batches if batch == batch_id][-1:]
        return [conformance_line(r) for batch_rows in rows for r in batch_rows]

    def last_batch(self) -> int:
        with self.capture._lock:
            return max(batch for batch, rows in self.capture.batches if rows)

    def summary(self) -> list[Any]:
        return [(r["topic"], payload(r).get("status") or payload(r).get("op")) for r in self.records()
                if r["value"] is not None]


@pytest.mark.timeout(420)  # two idle ENDs are waited for (IDLE_END_S each)
def test_pending_end_is_sent_after_restarts(spark: Any, sqlserver: SqlServerEmulator, database: str,
                                            tmp_path: Path) -> None:
    db = database
    options = spark_options(sqlserver, db, tmp_path / "spark")
    standalone = standalone_capture(sqlserver, db, tmp_path / "standalone")
    checkpoint = tmp_path / "checkpoint"
    runs: list[Query] = []
    try:
        runs.append(Query(spark, options, checkpoint))
        # the snapshot's row is out on both sides before the first change (the snapshot LSN is behind it)
        runs[0].wait(lambda r: len(data_events(r)) == 1, "the snapshot")
        wait_for(lambda: len(data_events(read_jsonl(standalone.out))) == 1, "the standalone snapshot", 60)

        sqlserver.execute("BEGIN TRANSACTION; INSERT INTO dbo.tablea VALUES (2, 'two'); "
                          "INSERT INTO dbo.tableb VALUES (1, 'b-one'); UPDATE dbo.tablea SET val = 'uno' WHERE id = 1; "
                          "COMMIT TRANSACTION", database=db)
        runs[0].wait(lambda r: len(data_events(r)) == 4, "the first transaction's events")
        first = payload(data_events(runs[0].records())[-1])["transaction"]["id"]
        runs[0].stop_between_batches()
        # the END of the first transaction is pending: the idle timer (IDLE_END_S) has not run out, and no
        # transaction followed
        assert boundaries(runs[0].records()) == [("BEGIN", first)], runs[0].summary()

        runs.append(Query(spark, options, checkpoint))
        sqlserver.execute("DELETE FROM dbo.tableb WHERE id = 1", database=db)
        runs[1].wait(lambda r: len(data_events(r)) >= 1, "the second transaction's event")
        second = payload(data_events(runs[1].records())[-1])["transaction"]["id"]
        runs[1].stop_between_batches()
        # the restarted query sent the END of the transaction left open before the second one's BEGIN
        assert boundaries(runs[1].records()) == [("END", first), ("BEGIN", second)], runs[1].summary()

        runs.append(Query(spark, options, checkpoint))
        runs[2].wait(lambda r: bool(ends(r, second)), "the idle END of the second transaction", 90)
        wait_for(lambda: bool(ends(read_jsonl(standalone.out), second)), "the standalone's idle END", 60)
        runs[2].stop_between_batches()
        # the driver dies after the batch with that END ran and before its commit was logged: the next run
        # replays it, while a transaction committed since is already in the change tables
        replayed = runs[2].last_batch()
        for name in (str(replayed), f".{replayed}.crc"):  # the log entry and its checksum
            (checkpoint / "commits" / name).unlink()
        sqlserver.execute("INSERT INTO dbo.tablea VALUES (3, 'three')", database=db)
        captured(sqlserver, db)

        runs.append(Query(spark, options, checkpoint))
        runs[3].wait(lambda r: len(data_events(r)) >= 1, "the third transaction's event")
        third = payload(data_events(runs[3].records())[-1])["transaction"]["id"]
        # the replayed batch is the batch as it ran: the END of the second transaction, not a batch later
        assert normalized(runs[3].batch(replayed)) == normalized(runs[2].batch(replayed)), runs[3].summary()
        runs[3].wait(lambda r: bool(ends(r, third)), "the idle END of the third transaction", 90)
        wait_for(lambda: bool(ends(read_jsonl(standalone.out), third)), "the standalone's idle END", 60)
        time.sleep(1.0)  # nothing more may come
    finally:
        for run in runs:
            with contextlib.suppress(Exception):
                run.capture.stop()
        standalone.stop()

    batches: dict[int, list[Any]] = {}
    for run in runs:  # a replayed batch replaces its first run's
        batches.update({batch: run.batch(batch) for batch in run.batch_ids()})
    got = [r for batch in sorted(batches) for r in batches[batch]]
    want = read_jsonl(standalone.out)
    for tx_id in (first, second, third):
        assert len(ends(got, tx_id)) == 1, boundaries(got)
    end = ends(got, first)[0]
    assert end["event_count"] == 3
    assert sorted((c["data_collection"], c["event_count"]) for c in end["data_collections"]) == \
        [(f"{db}.dbo.tablea", 2), (f"{db}.dbo.tableb", 1)]
    assert ends(got, second)[0]["event_count"] == 1
    assert boundaries(got) == [("BEGIN", first), ("END", first), ("BEGIN", second), ("END", second),
                               ("BEGIN", third), ("END", third)]
    assert normalized(got) == normalized(want)


@pytest.mark.timeout(240)
def test_pending_end_is_found_past_a_transaction_of_skipped_operations(spark: Any, sqlserver: SqlServerEmulator,
                                                                        database: str, tmp_path: Path) -> None:
    """With `skipped.operations=d` a transaction of deletes only never reaches the dispatcher, so it begins no
    transaction: the END pending before it still comes with the next transaction's BEGIN (as standalone)."""
    db = database
    skip_deletes = {"skipped.operations": "d"}
    options = spark_options(sqlserver, db, tmp_path / "spark", **skip_deletes)
    standalone = standalone_capture(sqlserver, db, tmp_path / "standalone", **skip_deletes)
    query = Query(spark, options, tmp_path / "checkpoint")
    try:
        query.wait(lambda r: len(data_events(r)) == 1, "the snapshot")
        wait_for(lambda: len(data_events(read_jsonl(standalone.out))) == 1, "the standalone snapshot", 60)
        sqlserver.execute("INSERT INTO dbo.tablea VALUES (2, 'two')", database=db)
        query.wait(lambda r: len(data_events(r)) == 2, "the first transaction's event")
        # well inside the idle timer (IDLE_END_S): the deletes, read by a window of their own (the query polls
        # every 200 ms), then a transaction that is streamed
        sqlserver.execute("DELETE FROM dbo.tablea WHERE id = 1", database=db)
        captured(sqlserver, db)
        time.sleep(1.5)
        sqlserver.execute("INSERT INTO dbo.tableb VALUES (5, 'five')", database=db)
        query.wait(lambda r: len(data_events(r)) == 3, "the third transaction's event")
        wait_for(lambda: len(data_events(read_jsonl(standalone.out))) == 3, "the standalone's events", 60)
    finally:
        with contextlib.suppress(Exception):
            query.capture.stop()
        standalone.stop()
    got, want = query.records(), read_jsonl(standalone.out)
    first, third = (payload(r)["transaction"]["id"] for r in data_events(got)[1:])
    assert boundaries(got)[:3] == [("BEGIN", first), ("END", first), ("BEGIN", third)], query.summary()
    assert normalized(got) == normalized(want[:len(got)])
