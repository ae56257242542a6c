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
ITEMS = "dbserver1.public.items"
ROWS = 1200
CHUNK = 150


class DeltaCapture(SparkCapture):
    """The records of `topic` into the Delta sink's current-state table (no change log: each table
    a batch writes costs it seconds), and every record into a list (notifications, positions)."""

    def __init__(self, spark: Any, options: dict[str, str], checkpoint: Path, lake: Path, topic: str) -> None:
        super().__init__(spark, options, checkpoint, trigger={"processingTime": "500 milliseconds"})
        from headwater.spark.sinks.delta import DeltaSink

        self.sink = DeltaSink(spark, str(lake), options={"changelog": "false"})
        self.topic = topic

    def _collect(self, df: Any, batch_id: int) -> None:
        df = df.persist()
        try:
            rows = df.select("topic", "value", "position", "op").collect()
            if any(r.topic == self.topic for r in rows):  # (a write of nothing costs a job)
                self.sink.write(df.filter(df.topic == self.topic), batch_id)
            with self._lock:  # once written: a test that saw a record may read it from the table
                self.batches.append((batch_id, rows))
        finally:
            df.unpersist()

    def notifications(self) -> list[dict[str, Any]]:
        return [json.loads(r.value)["payload"] for r in self.rows() if r.topic == NOTIFICATIONS]


def _props(pg_db: Any, tmp_path: Path, slot: str, **extra: str) -> dict[str, str]:
    return spark_properties(pg_db, tmp_path, slot, **{
        "slot.drop.on.stop": "false", "snapshot.mode": "no_data", "signal.data.collection": SIGNAL,
        "incremental.snapshot.chunk.size": str(CHUNK), "notification.enabled.channels": "sink",
        "notification.sink.topic.name": NOTIFICATIONS, **extra})


def _tables(pg_db: Any, rows: int) -> None:
    """The signal table, and `items` with `rows` rows."""
    pg_db.execute("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                  "data varchar(2048))")
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, v text, n int)")
    pg_db.execute("INSERT INTO items SELECT g, 'row ' || g, g FROM generate_series(1, %s) g", (rows,))


def _execute_snapshot(pg_db: Any, signal_id: str, kind: str) -> None:
    """An execute-snapshot row of `items` in the signal table."""
    data = json.dumps({"data-collections": ["public.items"], "type": kind})
    pg_db.execute("INSERT INTO debezium_signal VALUES (%s, 'execute-snapshot', %s)", (signal_id, data))


def _current(spark: Any, capture: DeltaCapture) -> dict[int, tuple[Any, ...]]:
    path = capture.sink.table_path(capture.topic)
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
                time.sleep(0.02)
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


def _initial(capture: DeltaCapture) -> list[str]:
    """The types of the "Initial Snapshot" notifications (the start's, and a blocking snapshot's)."""
    return [n["type"] for n in capture.notifications() if n["aggregate_type"] == "Initial Snapshot"]


def _completed(capture: DeltaCapture) -> bool:
    return any(n["aggregate_type"] == "Incremental Snapshot" and n["type"] == "COMPLETED"
               for n in capture.notifications())


@pytest.mark.timeout(600)
def test_an_incremental_snapshot_with_concurrent_changes_and_a_restart_ends_in_the_table(spark, pg_db, tmp_path):
    _tables(pg_db, ROWS)
    # small batches and read-ahead: the snapshot spans several batches, so the query stops in it (and
    # the driver's stream waits for room in the read-ahead)
    props = _props(pg_db, tmp_path, "hw_spark_inc")
    small = {**props, "maxRowsPerBatch": "400", "readAheadMessages": "400"}
    lake, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"

    capture = DeltaCapture(spark, small, checkpoint, lake, ITEMS).start()
    try:
        wait_first_batch(capture.query)
        with Churn(pg_db, 22, ROWS + 1) as churn:
            _execute_snapshot(pg_db, "inc-1", "incremental")
            capture.wait_for(lambda rows: sum(r.op == "r" for r in rows) > 2 * CHUNK, timeout=300)
    finally:
        capture.stop()
    assert not _completed(capture), "the snapshot ended before the restart: nothing is tested"
    # as `headwater run`: a start without a snapshot is SKIPPED (PostgreSQL keeps no schema history)
    assert _initial(capture) == ["SKIPPED"]
    reads_before = sum(r.op == "r" for r in capture.rows())

    # the checkpoint's offsets hold the snapshot's progress: the new query goes on from its chunk
    capture = DeltaCapture(spark, props, checkpoint, lake, ITEMS).start()
    try:
        with Churn(pg_db, 23, churn.next_id):
            capture.wait_for(lambda rows: _completed(capture), timeout=300)
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
    reads_after = sum(r.op == "r" for r in capture.rows())
    # not the whole table again (a chunk may be read twice: the one whose batch had not committed)
    assert 0 < reads_after <= ROWS - reads_before + 2 * CHUNK < ROWS
    assert _current(spark, capture) == _source_rows(pg_db, "items")
    kinds = [n["type"] for n in capture.notifications() if n["aggregate_type"] == "Incremental Snapshot"]
    assert kinds[-1] == "COMPLETED" and "IN_PROGRESS" in kinds
    assert _initial(capture) == ["SKIPPED"]
    positions = [r.position for r in capture.rows() if r.position is not None]
    assert len(set(positions)) == len(positions), "two records share a position"


@pytest.mark.timeout(600)
def test_a_blocking_snapshot_through_the_file_channel_reaches_the_table(spark, pg_db, tmp_path):
    _tables(pg_db, 500)
    signals = tmp_path / "signals.txt"
    props = _props(pg_db, tmp_path, "hw_spark_blk", **{"signal.enabled.channels": "source,file",
                                                      "signal.file": str(signals), "signal.poll.interval.ms": "100"})
    capture = DeltaCapture(spark, props, tmp_path / "checkpoint", tmp_path / "lake", ITEMS).start()
    try:
        wait_first_batch(capture.query)
        pg_db.execute("UPDATE items SET v = 'before' WHERE id <= 10")
        signals.write_text(json.dumps({"id": "blk-1", "type": "execute-snapshot", "data": {
            "data-collections": ["public.items"], "type": "blocking"}}) + "\n")
        # no change follows: the snapshot's rows (which carry the stream's last position) and its
        # notifications are delivered on a quiet database too
        capture.wait_for(lambda rows: sum(r.op == "r" for r in rows) >= 500, timeout=60)
        capture.wait_for(lambda rows: _initial(capture)[-1:] == ["COMPLETED"] and "TABLE_SCAN_COMPLETED" in
                         _initial(capture), timeout=30)
        pg_db.execute("UPDATE items SET v = 'after' WHERE id <= 5")
        pg_db.execute("DELETE FROM items WHERE id = 500")
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
    assert sum(r.op == "r" for r in capture.rows()) == 500
    assert _current(spark, capture) == _source_rows(pg_db, "items")


@pytest.mark.timeout(600)
def test_a_blocking_snapshot_spans_batches_and_a_restart_inside_it_reads_it_again(spark, pg_db, tmp_path):
    """Its rows go through the read-ahead like any (not held whole on the driver until the stream
    runs again), so batches end inside it; the query stopped there reads it again when it starts
    from its checkpoint, and the table ends equal to the source."""
    rows = 3000
    _tables(pg_db, rows)
    props = _props(pg_db, tmp_path, "hw_spark_blk_restart")
    small = {**props, "maxRowsPerBatch": "200", "readAheadMessages": "200"}
    lake, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"
    capture = DeltaCapture(spark, small, checkpoint, lake, ITEMS).start()
    try:
        wait_first_batch(capture.query)
        _execute_snapshot(pg_db, "blk-1", "blocking")
        # (a blocking snapshot hands its rows over 512 at a time)
        capture.wait_for(lambda got: sum(r.op == "r" for r in got) >= 1000, timeout=300)
    finally:
        capture.stop()
    assert "COMPLETED" not in _initial(capture), "the snapshot ended before the stop: nothing is tested"
    with capture._lock:
        reading = [sum(r.op == "r" for r in got) for _, got in capture.batches]
    assert sum(n > 0 for n in reading) >= 2 and max(reading) < rows, reading

    pg_db.execute("UPDATE items SET v = 'while down' WHERE id <= 20")
    capture = DeltaCapture(spark, props, checkpoint, lake, ITEMS).start()
    try:
        capture.wait_for(lambda got: "COMPLETED" in _initial(capture), timeout=300)
        pg_db.execute("UPDATE items SET v = 'after' WHERE id <= 5")
        pg_db.execute("DELETE FROM items WHERE id = 3000")
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
    assert sum(r.op == "r" for r in capture.rows()) == rows  # read again, whole
    # a start from the checkpoint is SKIPPED (as `headwater run`'s); then the blocking snapshot's own
    assert _initial(capture)[:2] == ["SKIPPED", "STARTED"] and _initial(capture)[-1] == "COMPLETED"
    assert _current(spark, capture) == _source_rows(pg_db, "items")
    positions = [r.position for r in capture.rows() if r.position is not None]
    assert len(set(positions)) == len(positions), "two records share a position"


# -- the driver's units, without Spark or a database (headwater.engine.signals.units) ------------------

class _Source:
    """A capture source whose offsets are {"n": k}; it counts the keepalives asked of it."""

    def __init__(self) -> None:
        self.keepalives = 0

    def sort_key(self, offset: dict[str, Any]) -> tuple[int]:
        return (offset["n"],)

    def offset_position(self, offset: dict[str, Any]) -> str:
        return f"{offset['n']:08d}~"

    def keep_stream_alive(self) -> None:
        self.keepalives += 1


def _record(n: int) -> Any:
    from headwater.engine.records import SourceRecord

    return SourceRecord("t", None, None, None, {"n": n}, {"n": n}, op="u")


def _units(start: dict[str, Any], read_ahead: int = 100) -> Any:
    from headwater.engine.signals.units import SignalUnitStream

    return SignalUnitStream(None, _Source(), start, read_ahead)  # type: ignore[arg-type]


def _streamed(units: Any, n: int) -> Any:
    record = _record(n)
    units.positions[id(record)] = (f"{n:08d}", record)
    return record


def test_records_the_stage_adds_after_the_stream_went_quiet_are_handed_over_without_a_later_change() -> None:
    from headwater.engine.feed import ADDED_KEY, stream_key

    units = _units({"n": 1})
    units.streaming(True)
    units._take([_streamed(units, 2)])
    first, after = units.get(timeout=5)
    assert [r.record.value["n"] for r in first.records] == [2] and after == {"n": 2}
    # records the stage adds (notifications): they carry the last streamed offset, numbered after it
    units._take([_record(2), _record(2), _record(2)])
    rows, after = units.get(timeout=5)
    assert len(rows.records) == 3 and after == {"n": 2, ADDED_KEY: 3}
    assert stream_key(units.source, {"n": 2}) < stream_key(units.source, after) < stream_key(units.source, {"n": 3})
    positions = [r.position for r in rows.records]
    assert positions == sorted(positions) and positions[0] > "00000002" and positions[-1] < "00000003"
    head, tail = units.split(rows, (2, 2))  # a batch of an earlier run ended among them
    assert len(head.records) == 2 and len(tail.records) == 1
    # a restart from there numbers the next ones on
    again = _units({"n": 2, ADDED_KEY: 3})
    again.streaming(True)
    again._take([_record(2)])
    unit, after = again.get(timeout=5)
    assert after == {"n": 2, ADDED_KEY: 4} and unit.keys == [(2, 4)]


def test_a_blocking_snapshot_is_handed_over_as_it_is_read_and_a_restart_inside_it_reads_it_again() -> None:
    """Its rows do not wait on the driver for the stream to run again (the read-ahead bounds them);
    their offsets name the request, so a batch ending inside it resumes by reading it again; the
    offset marker that ends it gets a place of its own after the last row, without the request."""
    from headwater.engine.feed import ADDED_KEY
    from headwater.engine.records import OffsetMarker
    from headwater.engine.signals.actions import SnapshotRequest
    from headwater.engine.signals.blocking import BLOCKING_KEY

    request = SnapshotRequest("blocking", ["public.items"], {"public.items": "SELECT * FROM items WHERE id > 2"})
    marked = {"n": 2, BLOCKING_KEY: request.to_text()}
    units = _units({"n": 1})
    units.streaming(True)
    units._take([_streamed(units, 2)])
    assert units.get(timeout=5)[1] == {"n": 2}
    units.streaming(False)  # the stream stopped for the blocking snapshot
    rows = [_record(2), _record(2)]
    for row in rows:
        row.offset = marked
    units._take(rows)
    unit, after = units.get(timeout=5)  # while no stream runs
    assert len(unit.records) == 2 and after == {**marked, ADDED_KEY: 2}
    assert SnapshotRequest.from_text(after[BLOCKING_KEY]) == request
    units._take([OffsetMarker({"n": 2})])  # it ended
    end, after = units.get(timeout=5)
    assert end.records == [] and after == {"n": 2, ADDED_KEY: 3}

    inside = _units({"n": 2, ADDED_KEY: 1, BLOCKING_KEY: request.to_text()})
    assert inside.resume_blocking == request and BLOCKING_KEY not in inside.start_offset
    assert _units({"n": 2, ADDED_KEY: 3}).resume_blocking is None


def test_the_stream_waiting_for_room_in_the_read_ahead_keeps_its_connection_alive() -> None:
    units = _units({"n": 1}, read_ahead=1)
    units.streaming(True)

    def stream() -> None:  # three changes: the third waits until the first is taken
        for n in (2, 3, 4):
            units._take([_streamed(units, n)])

    units._thread = threading.Thread(target=stream, daemon=True)
    units._thread.start()
    deadline = time.monotonic() + 30
    while units.source.keepalives < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert units.source.keepalives >= 2 and units._thread.is_alive()
    assert units.get(timeout=5)[1] == {"n": 2}
    units._thread.join(10)
    assert not units._thread.is_alive()
    assert units.get(timeout=5)[1] == {"n": 3}
