"""The resumable initial snapshot, engine side (engine/snapshot_resume.py), through the engine's
in-memory connector: a snapshot cut short after some chunks resumes at the next chunk at a new
point, streams from the original position, and the events replayed in order end in the
tables' state. The real databases' kill tests are in tests/connectors/*/test_*snapshot_resume.py."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

import pytest

from headwater.engine.capture import run_capture
from headwater.engine.records import OffsetMarker, SourceRecord
from headwater.engine.snapshot_plan import SnapshotChunk
from headwater.engine.snapshot_resume import PROGRESS_KEY, SnapshotProgress, between, progress_of, remaining
from headwater.engine.source import Offset, SnapshotPoint
from headwater.relational.table import Column, Table, TableId
from helpers.memory_connector import MemoryCaptureSource, MemoryConnector, MemoryDatabase


class Crash(Exception):
    pass


class ResumableSource(MemoryCaptureSource):
    """The memory connector with the connector's part of resuming: a new point that streams from
    the interrupted snapshot's position, while the log still holds it."""

    resumed = 0

    def resume_snapshot(self, offset: Offset) -> SnapshotPoint | None:
        if offset["pos"] < self.db.purged:
            return None
        ResumableSource.resumed += 1
        point = self.open_snapshot(offset, False)
        return SnapshotPoint(point.handle, {"pos": offset["pos"], "snapshot": True})


class Run:
    """One `run_capture` whose delivery "crashes" after `crash_after` snapshot records (the stored
    offset is that of the last record delivered), or is stopped once streaming reached the log's end."""

    def __init__(self, connector: MemoryConnector, offset: Offset | None, crash_after: int | None) -> None:
        self.records: list[SourceRecord] = []
        self.offset = offset
        self.crash_after = crash_after
        self.connector = connector
        self.stop = threading.Event()
        self.streaming = False

    def emit(self, items: list[Any]) -> None:
        for item in items:
            if isinstance(item, SourceRecord):
                if self.crash_after is not None and len(self.records) >= self.crash_after:
                    raise Crash
                if item.value is None:
                    continue  # a tombstone
                self.records.append(item)
                self.streaming = self.streaming or item.value["op"] != "r"
            if isinstance(item, SourceRecord | OffsetMarker):
                self.offset = item.offset
                self.streaming = self.streaming or bool(item.offset.get("snapshot_completed"))
        if self.streaming and self.offset is not None and self.offset["pos"] >= len(self.connector.db.log):
            self.stop.set()

    def go(self) -> Run:
        source = ResumableSource(self.connector)
        done = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                run_capture(self.connector, source, self.offset, self.emit, self.stop)
            except BaseException as exc:
                failure.append(exc)
            done.set()

        threading.Thread(target=run, daemon=True).start()
        assert done.wait(20), "run_capture did not end"
        if failure and not isinstance(failure[0], Crash):
            raise failure[0]
        return self


def _db(rows: int) -> MemoryDatabase:
    db = MemoryDatabase()
    db.create("a", "id", "v")
    db.create("b", "id", "v")
    for i in range(1, rows + 1):
        db.insert("a", i, i)
        db.insert("b", i, -i)
    db.purge()  # the snapshot is what brings these rows
    return db


def _replay(records: list[SourceRecord]) -> dict[str, dict[int, int]]:
    state: dict[str, dict[int, int]] = {"a": {}, "b": {}}
    for r in records:
        value = r.value
        table = r.topic.rsplit(".", 1)[1]
        if value is None:
            continue
        if value["op"] == "d":
            state[table].pop(value["before"]["id"], None)
        else:
            state[table][value["after"]["id"]] = value["after"]["v"]
    return state


def _table_state(db: MemoryDatabase) -> dict[str, dict[int, int]]:
    return {name: {k: row[1] for k, row in db.tables[f"public.{name}"].rows.items()} for name in ("a", "b")}


def test_crash_mid_snapshot_resumes_at_the_next_chunk() -> None:
    db = _db(100)
    connector = MemoryConnector(db, **{"snapshot.chunk.rows": 10})
    first = Run(connector, None, crash_after=135).go()  # 100 rows of a, then b's first chunks
    stored = first.offset
    progress = progress_of(stored)
    assert stored is not None and stored.get("snapshot") and progress is not None
    assert progress.done == ("public.a",) and progress.table == "public.b"
    completed_b = int(progress.after[0])  # type: ignore[index]
    assert 0 < completed_b < 35

    # while down: changes to rows already read and to rows not yet read
    db.update("a", 5, 5, 500)
    db.delete("a", 6)
    db.update("b", 2, 2, 222)
    db.update("b", 90, 90, 9000)
    db.delete("b", 91)
    db.insert("b", 150, 150)
    ResumableSource.resumed = 0
    second = Run(connector, stored, crash_after=None).go()
    assert ResumableSource.resumed == 1

    reads = Counter((r.topic, r.value["after"]["id"]) for r in first.records + second.records if r.value["op"] == "r")
    assert not [k for k, n in reads.items() if n > 1 and (k[0].endswith(".a") or k[1] <= completed_b)], \
        "rows of completed chunks were read again"
    second_reads = [r for r in second.records if r.value["op"] == "r"]
    assert {r.value["after"]["id"] for r in second_reads} == {i for i in range(completed_b + 1, 101) if i != 91} | {150}
    # the rows read after the restart are the table's rows now (a new point)
    assert {r.value["after"]["id"]: r.value["after"]["v"] for r in second_reads}[90] == 9000
    # the stream starts at the original position: every change since then comes after the reads
    streamed = [(r.value["op"], r.topic.rsplit(".", 1)[1]) for r in second.records if r.value["op"] != "r"]
    assert streamed == [("u", "a"), ("d", "a"), ("u", "b"), ("u", "b"), ("d", "b"), ("c", "b")]
    assert _replay(first.records + second.records) == _table_state(db)
    markers = [r.value["source"]["snapshot"] for r in first.records + second.records if r.value["op"] == "r"]
    assert markers[0] == "first" and markers[-1] == "last" and markers.count("first") == 1
    assert markers.count("last") == 1 and markers[1:-1].count("last_in_data_collection") == 1  # a's last
    assert PROGRESS_KEY not in second.offset


def test_records_carry_the_progress_made_before_them() -> None:
    db = _db(30)
    connector = MemoryConnector(db, **{"snapshot.chunk.rows": 10})
    run = Run(connector, None, crash_after=None).go()
    seen = [progress_of(r.offset) for r in run.records if r.value["op"] == "r"]
    # a chunk's last record is handed on once the chunk is complete (the next record arrived)
    # and says so; those before it carry the chunks completed before theirs
    assert seen[0] == SnapshotProgress() and seen[8] == SnapshotProgress()
    assert seen[9] == seen[10] == SnapshotProgress((), "public.a", ("id",), ("10",))
    assert seen[29] == seen[30] == SnapshotProgress(("public.a",))
    assert run.offset.get("snapshot_completed")


@pytest.mark.parametrize("mode", ["initial", "always"])
def test_falls_back_to_a_new_snapshot_when_resuming_is_impossible(mode: str, caplog: Any) -> None:
    caplog.set_level(logging.INFO)
    db = _db(40)
    connector = MemoryConnector(db, **{"snapshot.chunk.rows": 10, "snapshot.mode": mode})
    first = Run(connector, None, crash_after=25).go()
    stored = dict(first.offset)
    if mode == "initial":
        del stored[PROGRESS_KEY]  # as an earlier version wrote it
    ResumableSource.resumed = 0
    second = Run(connector, stored, crash_after=None).go()
    assert ResumableSource.resumed == 0
    assert len([r for r in second.records if r.value["op"] == "r"]) == 80  # everything again
    assert "snapshot progress" in caplog.text or "snapshot.mode=always" in caplog.text


def _chunk(collection: str, index: int, n: int, lower: str | None, upper: str | None, last: bool,
           key: tuple[str, ...] = ("id",)) -> SnapshotChunk:
    table = Table(TableId(None, "public", collection.split(".")[1]), (Column("id", 1, "int8"),), key)
    return SnapshotChunk(table, ("id",), collection, index, n, index == 0, last, n == 0, last, key,
                         (lower,) if lower else None, (upper,) if upper else None, None, None)


def test_remaining_and_between_cut_the_plan_by_progress() -> None:
    plan = [_chunk("s.a", 0, 0, None, "10", False), _chunk("s.a", 0, 1, "10", None, False),
            _chunk("s.b", 1, 0, None, "5", False), _chunk("s.b", 1, 1, "5", "9", False),
            _chunk("s.b", 1, 2, "9", None, False), _chunk("s.c", 2, 0, None, None, True)]
    start = SnapshotProgress(("s.a",), "s.b", ("id",), ("7",))  # a plan at a new point has other bounds
    rest = remaining(plan, start)
    assert [(c.collection, c.lower, c.upper, c.first_table, c.first_chunk) for c in rest] == [
        ("s.b", ("7",), None, False, False), ("s.c", None, None, False, True)]
    end = SnapshotProgress(("s.a", "s.b"), "s.c", ("id",), ("3",))
    assert [(c.collection, c.lower, c.upper) for c in between(plan, start, end)] == [
        ("s.b", ("7",), None), ("s.c", None, ("3",))]
    assert [(c.collection, c.lower, c.upper) for c in between(plan, None, start)] == [
        ("s.a", None, "10" and ("10",)), ("s.a", ("10",), None), ("s.b", None, ("7",))]
    # a key that changed: the table is read again whole
    changed = remaining(plan, SnapshotProgress(("s.a",), "s.b", ("other",), ("7",)))
    assert [(c.collection, c.lower, c.upper) for c in changed][:3] == [
        ("s.b", None, ("5",)), ("s.b", ("5",), ("9",)), ("s.b", ("9",), None)]


class ResumableConnector(MemoryConnector):
    def capture_source(self, *, parallel: bool) -> ResumableSource:
        source = ResumableSource(self)
        self.sources.append(source)
        return source


def _read(source: ResumableSource, units: list[Any]) -> list[SourceRecord]:
    out: list[Any] = []
    for point, chunk in units:
        source.read_chunk(point, chunk, out.append, threading.Event())
    return [r for r in out if isinstance(r, SourceRecord)]


def test_spark_feed_snapshot_in_batches_resumes_after_a_driver_restart() -> None:
    """The Spark source's driver side: with maxRowsPerBatch the snapshot is several batches; a new
    driver process replays the batch that did not commit from its logged offsets (a new point,
    ranges cut by the two progresses), goes on from there, and streams from the original position."""
    from headwater.engine.feed import PHASE_STREAM, CaptureFeed

    db = _db(100)
    connector = ResumableConnector(db)
    feed = CaptureFeed(connector, snapshot_chunk_rows=10)
    start = feed.initial_offset()
    end = feed.latest(start, 30)  # three chunks a batch
    committed = _read(feed.source, feed.plan(start, end))  # batch 0 committed
    logged = (end, feed.latest(end, 30))  # batch 1 logged; the driver dies before it commits
    assert [r.value["after"]["id"] for r in committed] == list(range(1, 31))
    db.update("a", 5, 5, 500)      # read in batch 0
    db.delete("a", 40)             # to be read in batch 1
    db.update("b", 7, 7, 700)      # not read yet
    feed.close()

    feed = CaptureFeed(connector, snapshot_chunk_rows=10)
    replayed = _read(feed.source, feed.plan(*logged))
    assert sorted(r.value["after"]["id"] for r in replayed) == [i for i in range(31, 61) if i != 40]
    delivered, start = committed + replayed, logged[1]
    for _ in range(20):
        end = feed.latest(start, 30)
        delivered += _read(feed.source, feed.plan(start, end))
        start = end
        if end["phase"] == PHASE_STREAM:
            break
    assert start["phase"] == PHASE_STREAM and start["pos"] == 200, "streaming does not start at the original position"
    reads = Counter((r.topic, r.value["after"]["id"]) for r in delivered)
    assert max(reads.values()) == 1 and len(reads) == 199
    markers = [r.value["source"]["snapshot"] for r in delivered]
    assert markers[0] == "first" and markers[-1] == "last" and markers.count("first") == 1
    # replaying the snapshot, then what streaming sends from the original position: the tables
    state = _replay(delivered)
    for change in db.log[start["pos"]:]:
        table = change.collection.rsplit(".", 1)[1]
        if change.after is None:
            state[table].pop(change.before[0], None)  # type: ignore[index]
        else:
            state[table][change.after[0]] = change.after[1]
    assert state == _table_state(db)


class CountingSource(ResumableSource):
    """Counts the consistent points opened (each one a new snapshot transaction, and on a real
    database perhaps a new slot)."""

    opened_points = 0

    def open_snapshot(self, offset: Offset | None, resnapshot: bool) -> SnapshotPoint:
        CountingSource.opened_points += 1
        return super().open_snapshot(offset, resnapshot)


class CountingConnector(MemoryConnector):
    def capture_source(self, *, parallel: bool) -> CountingSource:
        source = CountingSource(self)
        self.sources.append(source)
        return source


def _spark_run_until_streaming(feed: Any, start: Offset, rows: int) -> tuple[list[SourceRecord], Offset]:
    """Batches of about `rows` rows from `start` until the feed streams from a position the log
    holds (the memory connector streams no batches in Spark): the records, and that position."""
    from headwater.engine.feed import PHASE_STREAM

    delivered: list[SourceRecord] = []
    for _ in range(50):
        end = feed.latest(start, rows)
        delivered += _read(feed.source, feed.plan(start, end))
        start = end
        if end["phase"] == PHASE_STREAM and end["pos"] >= feed.source.db.purged:
            return delivered, start
    raise AssertionError(f"the feed does not reach streaming: {start}")


@pytest.mark.parametrize("mode", ["when_needed", "initial"])
def test_spark_snapshot_batches_when_the_position_is_gone_after_a_restart(mode: str, caplog: Any) -> None:
    """A driver restarted after some snapshot batches committed finds the position the snapshot
    was to stream from gone (e.g. the slot dropped or invalidated while it was down). It cannot
    resume (the changes since the first point are lost): with a mode that snapshots again
    (when_needed), the batch that did not commit reads nothing and the next one moves to ONE new
    snapshot, taken whole, then streaming from its position — no row missing, each row's last
    value; with `initial`, the connector's error."""
    from headwater.engine.connector import ConnectorError
    from headwater.engine.feed import CaptureFeed

    caplog.set_level(logging.INFO)
    db = _db(100)
    connector = CountingConnector(db, **{"snapshot.mode": mode})
    feed = CaptureFeed(connector, snapshot_chunk_rows=10)
    start = feed.initial_offset()
    end = feed.latest(start, 30)
    committed = _read(feed.source, feed.plan(start, end))  # batch 0 committed
    logged = (end, feed.latest(end, 30))  # batch 1 logged; the driver dies before it commits
    feed.close()
    db.update("a", 5, 5, 500)   # read in batch 0
    db.delete("a", 3)           # read in batch 0: a materialized table may keep it (a new snapshot has no deletes)
    db.delete("a", 40)          # to be read in batch 1
    db.update("b", 7, 7, 700)   # not read yet
    db.insert("b", 150, 150)
    db.purge()                  # the position the snapshot was to stream from is gone

    CountingSource.opened_points = 0
    feed = CaptureFeed(connector, snapshot_chunk_rows=10)
    if mode == "initial":
        with pytest.raises(ConnectorError, match="no longer holds"):
            feed.plan(*logged)
        return
    replayed = _read(feed.source, feed.plan(*logged))
    assert replayed == [], "the batch that did not commit is read at a point the stream cannot follow"
    delivered, streaming_from = _spark_run_until_streaming(feed, logged[1], 30)
    assert CountingSource.opened_points == 1, "one new snapshot, not one per batch"
    assert streaming_from["pos"] == len(db.log), "streaming starts at the new snapshot's position"
    reads = Counter((r.topic.rsplit(".", 1)[1], r.value["after"]["id"]) for r in delivered)
    assert max(reads.values()) == 1 and set(reads) == {(t, k) for t, rows in _table_state(db).items() for k in rows}
    markers = [r.value["source"]["snapshot"] for r in delivered]
    assert markers[0] == "first" and markers[-1] == "last"
    state = _replay(committed + delivered)
    assert state["a"].pop(3) == 3  # deleted while the position was lost: no event says so
    assert state == _table_state(db)
    assert "cannot be resumed" in caplog.text and "whole new snapshot" in caplog.text


class UnresumableSource(CountingSource):
    def resume_snapshot(self, offset: Offset) -> SnapshotPoint | None:
        return None  # a connector that cannot resume, its position still held


class UnresumableConnector(MemoryConnector):
    def capture_source(self, *, parallel: bool) -> UnresumableSource:
        source = UnresumableSource(self)
        self.sources.append(source)
        return source


def test_spark_snapshot_batches_of_a_connector_that_cannot_resume(caplog: Any) -> None:
    """The position is held but the connector cannot resume: the batches still to read are read
    at ONE new point (not one per batch), then streaming starts at the original position, so the
    events replayed in order end in the tables' state."""
    from headwater.engine.feed import CaptureFeed

    caplog.set_level(logging.INFO)
    db = _db(100)
    connector = UnresumableConnector(db)
    feed = CaptureFeed(connector, snapshot_chunk_rows=10)
    start = feed.initial_offset()
    end = feed.latest(start, 30)
    committed = _read(feed.source, feed.plan(start, end))
    logged = (end, feed.latest(end, 30))
    feed.close()
    original = len(db.log)
    db.update("a", 5, 5, 500)
    db.delete("a", 40)
    db.update("b", 7, 7, 700)

    CountingSource.opened_points = 0
    feed = CaptureFeed(connector, snapshot_chunk_rows=10)
    replayed = _read(feed.source, feed.plan(*logged))
    assert sorted(r.value["after"]["id"] for r in replayed) == [i for i in range(31, 61) if i != 40]
    delivered, streaming_from = _spark_run_until_streaming(feed, logged[1], 30)
    assert CountingSource.opened_points == 1
    assert streaming_from["pos"] == original
    reads = Counter((r.topic, r.value["after"]["id"]) for r in committed + replayed + delivered)
    assert max(reads.values()) == 1
    state = _replay(committed + replayed + delivered)
    for change in db.log[original:]:
        table = change.collection.rsplit(".", 1)[1]
        if change.after is None:
            state[table].pop(change.before[0], None)  # type: ignore[index]
        else:
            state[table][change.after[0]] = change.after[1]
    assert state == _table_state(db)
    assert "cannot be resumed by the connector" in caplog.text
