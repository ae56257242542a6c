"""Signals in the Spark source (PostgreSQL → the headwater source → the Delta sink): the driver
streams through the signaling stage and hands over the records it built
(headwater.engine.signals.units).

An incremental snapshot asked for through the signal table, while other transactions update,
delete and insert the rows being snapshotted, and a restart of the query from its checkpoint in
the middle of it: the Delta current-state table equals the table afterwards, and the notifications
say it completed. A blocking snapshot asked for through the file channel reaches the table too.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.capture import spark_properties
from helpers.spark_capture import SparkCapture, wait_first_batch

SIGNAL = "public.debezium_signal"
NOTIFICATIONS = "hw_spark_notifications"
ROWS = 3000


class DeltaCapture(SparkCapture):
    """The source into the Delta sink, and every record into a list (notifications, positions)."""

    def __init__(self, spark: Any, options: dict[str, str], checkpoint: Path, lake: Path) -> None:
        super().__init__(spark, options, checkpoint, trigger={"processingTime": "1 second"})
        from headwater.spark.sinks.delta import DeltaSink

        self.sink = DeltaSink(spark, str(lake))

    def _collect(self, df: Any, batch_id: int) -> None:
        df = df.persist()
        try:
            self.sink.write(df, batch_id)
            super()._collect(df.select("topic", "value", "position", "op"), batch_id)
        finally:
            df.unpersist()

    def notifications(self) -> list[dict[str, Any]]:
        return [json.loads(r.value)["payload"] for r in self.rows() if r.topic == NOTIFICATIONS]


def _props(pg_db: Any, tmp_path: Path, slot: str, **extra: str) -> dict[str, str]:
    return spark_properties(pg_db, tmp_path, slot, **{
        "slot.drop.on.stop": "false", "snapshot.mode": "no_data", "signal.data.collection": SIGNAL,
        "incremental.snapshot.chunk.size": "250", "notification.enabled.channels": "sink",
        "notification.sink.topic.name": NOTIFICATIONS, **extra})


def _current(spark: Any, capture: DeltaCapture, table: str) -> dict[int, tuple[Any, ...]]:
    path = capture.sink.table_path(f"dbserver1.public.{table}")
    return {r["id"]: (r["v"], r["n"]) for r in spark.read.format("delta").load(path).collect()}


def _source_rows(pg_db: Any, table: str) -> dict[int, tuple[Any, ...]]:
    return {r[0]: (r[1], r[2]) for r in pg_db.execute(f"SELECT id, v, n FROM {table}")}


class Churn:
    """Small transactions updating, deleting and inserting rows of `items` on a thread."""

    def __init__(self, pg_db: Any, seed: int, next_id: int) -> None:
        self.db, self.rng = pg_db, random.Random(seed)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.next_id = next_id
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                i = self.rng.randint(1, self.next_id - 1)
                kind = self.rng.random()
                if kind < 0.6:
                    self.db.execute("UPDATE items SET v = v || 'u', n = n + 1 WHERE id = %s", (i,))
                elif kind < 0.85:
                    self.db.execute("DELETE FROM items WHERE id = %s", (i,))
                else:
                    self.db.execute("INSERT INTO items VALUES (%s, 'new', 0)", (self.next_id,))
                    self.next_id += 1
                time.sleep(0.01)
        except BaseException as exc:  # handed to the test
            self.error = exc

    def __enter__(self) -> Churn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        if self.error is not None:
            raise self.error


def _completed(capture: DeltaCapture) -> bool:
    return any(n["aggregate_type"] == "Incremental Snapshot" and n["type"] == "COMPLETED"
               for n in capture.notifications())


@pytest.mark.timeout(600)
def test_an_incremental_snapshot_with_concurrent_changes_and_a_restart_ends_in_the_table(spark, pg_db, tmp_path):
    pg_db.execute("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                  "data varchar(2048))")
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, v text, n int)")
    pg_db.execute(f"INSERT INTO items SELECT g, 'row ' || g, g FROM generate_series(1, {ROWS}) g")
    # small batches and read-ahead: the snapshot spans several batches, so the query stops in it
    props = _props(pg_db, tmp_path, "hw_spark_inc", maxRowsPerBatch="1000", readAheadMessages="1000")
    lake, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"

    capture = DeltaCapture(spark, props, checkpoint, lake).start()
    try:
        wait_first_batch(capture.query)
        with Churn(pg_db, 22, ROWS + 1) as churn:
            pg_db.execute("INSERT INTO debezium_signal VALUES ('inc-1', 'execute-snapshot', "
                          "'{\"data-collections\": [\"public.items\"], \"type\": \"incremental\"}')")
            capture.wait_for(lambda rows: sum(r.op == "r" for r in rows) >= 1000, timeout=300)
    finally:
        capture.stop()
    assert not _completed(capture), "the snapshot ended before the restart: nothing is tested"
    reads_before = sum(r.op == "r" for r in capture.rows())

    # the checkpoint's offsets hold the snapshot's progress: the new query goes on from its chunk
    capture = DeltaCapture(spark, props, checkpoint, lake).start()
    try:
        with Churn(pg_db, 23, churn.next_id):
            capture.wait_for(lambda rows: _completed(capture), timeout=300)
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
    reads_after = sum(r.op == "r" for r in capture.rows())
    # not the whole table again (a chunk may be read twice: the one whose batch had not committed)
    assert 0 < reads_after < ROWS - reads_before + 1000
    assert _current(spark, capture, "items") == _source_rows(pg_db, "items")
    kinds = [n["type"] for n in capture.notifications() if n["aggregate_type"] == "Incremental Snapshot"]
    assert kinds[-1] == "COMPLETED" and "IN_PROGRESS" in kinds
    positions = [r.position for r in capture.rows() if r.position is not None]
    assert len(set(positions)) == len(positions), "two records share a position"


@pytest.mark.timeout(600)
def test_a_blocking_snapshot_through_the_file_channel_reaches_the_table(spark, pg_db, tmp_path):
    pg_db.execute("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                  "data varchar(2048))")
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, v text, n int)")
    pg_db.execute("INSERT INTO items SELECT g, 'row ' || g, g FROM generate_series(1, 500) g")
    signals = tmp_path / "signals.txt"
    props = _props(pg_db, tmp_path, "hw_spark_blk", **{"signal.enabled.channels": "source,file",
                                                      "signal.file": str(signals), "signal.poll.interval.ms": "100"})
    capture = DeltaCapture(spark, props, tmp_path / "checkpoint", tmp_path / "lake").start()
    try:
        wait_first_batch(capture.query)
        pg_db.execute("UPDATE items SET v = 'before' WHERE id <= 10")
        signals.write_text(json.dumps({"id": "blk-1", "type": "execute-snapshot", "data": {
            "data-collections": ["public.items"], "type": "blocking"}}) + "\n")
        deadline = time.monotonic() + 60
        while signals.read_text() and time.monotonic() < deadline:  # the channel empties the file
            capture.check()
            time.sleep(0.2)
        time.sleep(2)  # the stream stops, the snapshot reads, the stream goes on
        pg_db.execute("UPDATE items SET v = 'after' WHERE id <= 5")
        pg_db.execute("DELETE FROM items WHERE id = 500")
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
    assert sum(r.op == "r" for r in capture.rows()) == 500
    assert _current(spark, capture, "items") == _source_rows(pg_db, "items")
