"""The initial snapshot's notifications in the Spark source's feed (engine/snapshot_notification_units.py),
through the engine's in-memory connector: the records of each batch's units, decoded and sorted
by position as Spark delivers them, come in the standalone runner's order (run_capture: Debezium's,
see tests/conformance/signals/golden) — the notifications and every row with its marker — in one
batch or many, with empty tables anywhere, a custom SELECT, partitions; a restarted snapshot
sends STARTED again, once."""

from __future__ import annotations

import dataclasses
import pickle
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from headwater.engine.capture import run_capture
from headwater.engine.feed import PHASE_STREAM, CaptureFeed, PositionedRecord, WorkDecoder
from headwater.engine.records import SourceRecord
from headwater.engine.snapshot_notification_units import NotifyingDecoder, NotifyingUnit
from headwater.engine.source import Offset, SnapshotPoint
from helpers.memory_connector import MemoryCaptureSource, MemoryConnector, MemoryDatabase

TOPIC = "mem.notifications"
SINK = {"notification.enabled.channels": ["sink"], "notification.sink.topic.name": TOPIC,
        "snapshot.mode": "initial_only"}


class Source(MemoryCaptureSource):
    """Resumes an interrupted snapshot at a new point (streaming from its original position); its
    tables are in partitions when the connector says so; positions as a connector gives them."""

    def resume_snapshot(self, offset: Offset) -> SnapshotPoint | None:
        point = self.open_snapshot(offset, False)
        return SnapshotPoint(point.handle, {"pos": offset["pos"], "snapshot": True})

    def snapshot_tables(self, point: SnapshotPoint) -> list[Any]:
        tables = super().snapshot_tables(point)
        parts = self.connector.partitions  # type: ignore[attr-defined]
        if not parts:
            return tables
        return [Partitioned(t.collection, t.table, t.raw_columns, parts[t.collection]) for t in tables]

    def offset_position(self, offset: Offset) -> str:
        return f"{offset['pos'] + 1:08X}" + "0" * 24  # streamed records come after the snapshot's (major 0)


@dataclasses.dataclass
class Partitioned:
    collection: str
    table: Any
    raw_columns: tuple[str, ...]
    partition: str


class Decoder(WorkDecoder):
    """Executor side of the memory connector: a chunk's records, positioned like PostgreSQL's
    (0, table, chunk, row number)."""

    def __init__(self, connector: MemoryConnector) -> None:
        self.source = Source(connector)

    def decode(self, item: Any) -> Iterator[PositionedRecord]:
        point, chunk = item
        out: list[Any] = []
        self.source.read_chunk(point, chunk, out.append, threading.Event())
        prefix = f"{0:08X}{chunk.table_index:08X}{chunk.chunk_index:08X}"
        records = [r for r in out if isinstance(r, SourceRecord)]
        return iter(PositionedRecord(prefix + f"{n:08X}", r) for n, r in enumerate(records))


class Connector(MemoryConnector):
    def __init__(self, db: MemoryDatabase, partitions: dict[str, str] | None = None, **properties: Any) -> None:
        super().__init__(db, **properties)
        self.partitions = partitions or {}

    def capture_source(self, *, parallel: bool) -> Source:
        source = Source(self)
        self.sources.append(source)
        return source

    def work_decoder(self) -> Decoder:
        return Decoder(self)


def _db(**tables: int) -> MemoryDatabase:
    db = MemoryDatabase()
    for name, rows in tables.items():
        db.create(name, "id", "v")
        for i in range(1, rows + 1):
            db.insert(name, i, i)
    db.purge()
    return db


def _summary(record: SourceRecord) -> tuple[Any, ...]:
    """A record without what varies between runs (notification ids and times)."""
    if record.topic == TOPIC:
        value = record.value
        assert record.headers == () and not record.context_headers, "a notification has no headers"
        return value["type"], value["aggregate_type"], value["additional_data"]
    return record.topic, record.value["after"]["id"], record.value["source"]["snapshot"]


def _standalone(connector: MemoryConnector) -> list[tuple[Any, ...]]:
    out: list[SourceRecord] = []
    source = connector.capture_source(parallel=False)
    run_capture(connector, source, None, lambda items: out.extend(i for i in items if isinstance(i, SourceRecord)),
                threading.Event())
    return [_summary(r) for r in out]


def _batch(feed: CaptureFeed, start: Offset, end: Offset) -> list[PositionedRecord]:
    """A batch's records as Spark delivers them: each unit decoded (shipped pickled) by the
    feed's decoder, all sorted by position."""
    decoder = feed.decoder()
    records = [r for unit in feed.plan(start, end) for r in decoder.decode(pickle.loads(pickle.dumps(unit)))]
    positions = [r.position for r in records]
    assert len(set(positions)) == len(positions), "two records share a position"
    return sorted(records, key=lambda r: r.position)


def _spark(connector: MemoryConnector, chunk_rows: int, max_rows: int | None = None,
           feed: CaptureFeed | None = None, start: Offset | None = None) -> list[PositionedRecord]:
    feed = feed or CaptureFeed(connector, snapshot_chunk_rows=chunk_rows)
    start = start or feed.initial_offset()
    delivered: list[PositionedRecord] = []
    for _ in range(100):
        end = feed.latest(start, max_rows)
        delivered += _batch(feed, start, end)
        start = end
        if end["phase"] == PHASE_STREAM:
            positions = [r.position for r in delivered]
            assert positions == sorted(positions), "batches out of position order"
            return delivered
    raise AssertionError("the snapshot does not end")


CASES = {
    # Debezium's initial_notifications scenario: the last table is empty
    "last table empty": ({"a": 5, "b": 4, "c": 0}, {}),
    "empty tables first and between": ({"a": 0, "b": 3, "c": 0, "d": 1}, {}),
    "one row per table": ({"a": 1, "b": 1}, {}),
    "no table": ({}, {}),
    "custom select": ({"a": 4, "b": 6, "c": 2}, {
        "snapshot.select.statement.overrides": ["public.b"],
        "snapshot.select.statement.overrides.public.b": "SELECT * FROM b WHERE v % 2 == 0"}),
}


@pytest.mark.parametrize("chunk_rows,max_rows", [(2, None), (1, None), (2, 2), (3, 1)])
@pytest.mark.parametrize("case", CASES)
def test_spark_batches_send_the_standalone_runners_notifications_in_its_order(case: str, chunk_rows: int,
                                                                              max_rows: int | None) -> None:
    tables, properties = CASES[case]
    props = {**SINK, **properties, "snapshot.chunk.rows": chunk_rows}
    want = _standalone(Connector(_db(**tables), **props))
    got = [_summary(r.record) for r in _spark(Connector(_db(**tables), **props), chunk_rows, max_rows)]
    assert got == want
    kinds = [g[0] for g in got if g[0] in ("STARTED", "COMPLETED")]
    assert kinds == ["STARTED", "COMPLETED"]


def test_the_debezium_order_around_a_last_empty_table() -> None:
    """What the golden files show (tests/conformance/signals/golden/initial_notifications.jsonl),
    independently of the standalone runner."""
    got = [_summary(r.record) for r in _spark(Connector(_db(a=3, b=2, c=0), **SINK), 2)]
    shape = [(g[0], g[2].get("current_collection_in_progress") or g[2].get("scanned_collection"),
              g[2].get("total_rows_scanned")) if g[0].isupper() else g[1:] for g in got]
    assert shape == [
        ("STARTED", None, None), ("IN_PROGRESS", "public.a", None), (1, "first"), (2, "true"),
        ("TABLE_SCAN_COMPLETED", "public.a", "3"), ("IN_PROGRESS", "public.b", None), (3, "last_in_data_collection"),
        (1, "first_in_data_collection"),
        ("TABLE_SCAN_COMPLETED", "public.b", "2"), ("IN_PROGRESS", "public.c", None),
        ("TABLE_SCAN_COMPLETED", "public.c", "0"), (2, "last"), ("COMPLETED", None, None)]


def test_partitions_release_their_last_row_before_the_next_partitions_notifications() -> None:
    parts = {"public.a": "p1", "public.b": "p1", "public.c": "p2", "public.d": "p2"}
    props = {**SINK, "snapshot.chunk.rows": 2}
    want = _standalone(Connector(_db(a=3, b=0, c=2, d=0), parts, **props))
    got = [_summary(r.record) for r in _spark(Connector(_db(a=3, b=0, c=2, d=0), parts, **props), 2, 2)]
    assert got == want


def test_a_snapshot_without_rows_sends_its_notifications_in_one_unit_where_streaming_starts() -> None:
    connector = Connector(_db(a=0, b=0), **SINK)
    want = _standalone(Connector(_db(a=0, b=0), **SINK))
    feed = CaptureFeed(connector, snapshot_chunk_rows=2)
    start = feed.initial_offset()
    end = feed.latest(start, None)
    units = feed.plan(start, end)
    alone = [u for u in units if isinstance(u, NotifyingUnit)]
    assert len(alone) == 1 and alone[0].inner is None
    records = _batch(feed, start, end)
    assert [_summary(r.record) for r in records] == want
    assert [r.record.value["type"] for r in records] == ["STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED",
                                                        "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "COMPLETED"]
    assert all(r.position.startswith(feed.source.offset_position(end)) for r in records)


def test_without_the_sink_channel_units_are_not_wrapped(caplog: Any) -> None:
    connector = Connector(_db(a=2, b=1), **{**SINK, "notification.enabled.channels": ["log"]})
    feed = CaptureFeed(connector, snapshot_chunk_rows=2)
    start = feed.initial_offset()
    with caplog.at_level("INFO"):
        units = feed.plan(start, feed.latest(start, None))
    assert units and not any(isinstance(u, NotifyingUnit) for u in units)
    logged = [r.getMessage() for r in caplog.records if "[Notification Service]" in r.getMessage()]
    assert [m.split("type='")[1].split("'")[0] for m in logged] == [
        "STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "COMPLETED"]
    plain = CaptureFeed(Connector(_db(a=2), **{"snapshot.mode": "initial_only"}), snapshot_chunk_rows=2)
    assert not isinstance(plain.decoder(), NotifyingDecoder)


def test_wrapped_units_are_decoded_as_events() -> None:
    class Typed(Decoder):
        def decode_typed_rows(self, item: Any) -> Any:
            return ["typed"]

    decoder = NotifyingDecoder(Typed(Connector(_db(a=1))))
    assert decoder.decode_typed_rows(NotifyingUnit(object())) is None
    assert decoder.decode_typed_rows(object()) == ["typed"]


def test_a_restarted_snapshot_sends_started_again_once_then_the_rest() -> None:
    """A driver restart in the middle of a multi-batch snapshot: the new process reads the batch
    that did not commit again, then the rest — as the standalone runner resumes (STARTED, the
    tables still to read); the table resumed mid-way reports its rows at the new point."""
    db = _db(a=10, b=3)
    props = {**SINK, "snapshot.chunk.rows": 2}
    feed = CaptureFeed(Connector(db, **props), snapshot_chunk_rows=2)
    start = feed.initial_offset()
    end = feed.latest(start, 4)  # two chunks a batch
    first = [_summary(r.record) for r in _batch(feed, start, end)]
    logged = (end, feed.latest(end, 4))  # logged; the driver dies before it commits
    feed.close()
    assert [f[0] for f in first] == ["STARTED", "IN_PROGRESS", *(["mem.public.a"] * 4)]
    db.insert("a", 11, 11)  # read at the new point

    feed = CaptureFeed(Connector(db, **props), snapshot_chunk_rows=2)
    replayed = _batch(feed, *logged)
    rest = _spark(feed.connector, 2, 4, feed=feed, start=logged[1])
    got = [_summary(r.record) for r in replayed + rest]
    notes = [(g[0], g[2].get("current_collection_in_progress") or g[2].get("scanned_collection"),
              g[2].get("total_rows_scanned")) for g in got if g[0].isupper()]
    assert notes == [("STARTED", None, None), ("IN_PROGRESS", "public.a", None),
                     ("TABLE_SCAN_COMPLETED", "public.a", "11"), ("IN_PROGRESS", "public.b", None),
                     ("TABLE_SCAN_COMPLETED", "public.b", "3"), ("COMPLETED", None, None)]
    rows = [g[1:] for g in got if not g[0].isupper()]
    assert rows == [*[(i, "true") for i in range(5, 11)], (11, "last_in_data_collection"),
                    (1, "first_in_data_collection"), (2, "true"), (3, "last")]
    assert got.index(notes_at(got, "TABLE_SCAN_COMPLETED")) == got.index(("mem.public.a", 11,
                                                                          "last_in_data_collection")) - 2


def notes_at(got: list[tuple[Any, ...]], kind: str) -> tuple[Any, ...]:
    return next(g for g in got if g[0] == kind)


def test_a_chunk_expected_to_have_rows_that_reads_none_still_sends_its_notifications(caplog: Any) -> None:
    """A custom SELECT is planned with its table's count: when it reads nothing, the notifications
    its unit carries come where streaming starts, in their order, with the rows it read (0)."""
    props = {**SINK, "snapshot.select.statement.overrides": ["public.b"],
             "snapshot.select.statement.overrides.public.b": "SELECT * FROM b WHERE v > 100"}
    with caplog.at_level("WARNING"):
        got = _spark(Connector(_db(a=2, b=6), **props), 2)
    notes = [r for r in got if r.record.topic == TOPIC]
    assert [(n.record.value["type"], n.record.value["additional_data"].get("total_rows_scanned")) for n in notes] == [
        ("STARTED", None), ("IN_PROGRESS", None), ("TABLE_SCAN_COMPLETED", "2"), ("IN_PROGRESS", None),
        ("TABLE_SCAN_COMPLETED", "0"), ("COMPLETED", None)]
    assert got[-1].record.value["type"] == "COMPLETED"
    assert "read no record" in caplog.text
