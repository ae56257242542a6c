"""The engine driven through its own in-memory connector: the coordinator's snapshot and
handover, markers, the dispatcher's key-change split and tombstones, the order of commits, and
retries — without a database."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from headwater.engine.connector import ConnectorError
from headwater.engine.coordinator import Engine, EngineSettings
from headwater.engine.dispatcher import NEW_KEY_HEADER, OLD_KEY_HEADER
from headwater.engine.offsets import MemoryOffsetStore
from headwater.engine.records import SourceRecord
from helpers.memory_connector import MemoryConnector, MemoryDatabase


class ListSink:
    """Keeps what it is given; `events` logs flushes for the order checks."""

    def __init__(self, events: list[str] | None = None) -> None:
        self.records: list[SourceRecord] = []
        self.flushed = 0
        self.events = events if events is not None else []

    def write(self, records: list[SourceRecord]) -> None:
        self.records.extend(records)

    def write_encoded(self, batch: Any) -> None:
        raise AssertionError("no encoded batches here")

    def flush(self) -> None:
        self.flushed = len(self.records)
        self.events.append(f"flush {self.flushed}")

    def close(self) -> None:
        pass


class LoggingStore(MemoryOffsetStore):
    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def save(self, partition: dict[str, Any], offset: dict[str, Any]) -> None:
        super().save(partition, offset)
        self.events.append(f"save {offset['pos']}")


def _db() -> MemoryDatabase:
    db = MemoryDatabase()
    db.create("a", "id", "v")
    db.create("b", "id", "v")
    db.create("c", "id", "v")
    for i in (1, 2, 3):
        db.insert("a", i, i * 10)
    for i in (1, 2):
        db.insert("c", i, i)
    return db


def _run(connector: MemoryConnector, sink: ListSink, store: MemoryOffsetStore, until: Any,
         **settings: Any) -> Engine:
    """Run the engine until `until(sink)` holds (or it ends by itself), then stop it."""
    engine = Engine(connector, sink, store, EngineSettings(poll_interval_ms=20, offset_flush_interval_ms=0,
                                                           **settings))
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            engine.run(stop)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while thread.is_alive() and not until(sink):
        assert time.monotonic() < deadline, f"timed out with {len(sink.records)} records"
        time.sleep(0.01)
    stop.set()
    thread.join(10)
    if failure:
        raise failure[0]
    return engine


def _values(sink: ListSink) -> list[tuple[str, str | None, Any]]:
    out = []
    for r in sink.records:
        value = r.value
        marker = value["source"]["snapshot"] if value is not None else None
        op = value["op"] if value is not None else "tombstone"
        out.append((r.topic.rsplit(".", 1)[1], op, marker))
    return out


def test_the_snapshot_is_read_in_include_list_order_with_debeziums_markers_then_the_stream_follows():
    db = _db()
    connector = MemoryConnector(db, **{"table.include.list": ["public.c", "public.a", "public.b"]})
    sink = ListSink()

    def then_insert(s: ListSink) -> bool:
        if len(s.records) == 5 and not db.tables["public.b"].rows:
            db.insert("b", 7, 7)  # once the snapshot is delivered
        return len(s.records) >= 6

    _run(connector, sink, MemoryOffsetStore(), then_insert)
    # b is empty and last: the snapshot's last record (a's last) still says "last"
    assert _values(sink) == [("c", "r", "first"), ("c", "r", "last_in_data_collection"),
                             ("a", "r", "first_in_data_collection"), ("a", "r", "true"), ("a", "r", "last"),
                             ("b", "c", "false")]  # then streamed from the snapshot's point


def test_a_restart_streams_from_the_stored_offset_without_a_snapshot():
    db = _db()
    store = MemoryOffsetStore()
    _run(MemoryConnector(db), ListSink(), store, lambda s: len(s.records) >= 5)
    db.insert("a", 4, 40)
    sink = ListSink()
    _run(MemoryConnector(db), sink, store, lambda s: len(s.records) >= 1)
    assert _values(sink) == [("a", "c", "false")]
    assert sink.records[0].value["after"] == {"id": 4, "v": 40}


@pytest.mark.parametrize("mode,snapshots", [("initial", None), ("when_needed", True), ("no_data", None)])
def test_a_position_the_log_no_longer_holds_stops_unless_the_mode_snapshots_again(mode, snapshots):
    db = _db()
    store = MemoryOffsetStore()
    _run(MemoryConnector(db), ListSink(), store, lambda s: len(s.records) >= 5)
    db.insert("a", 4, 40)
    db.purge()
    sink = ListSink()
    if snapshots is None:
        with pytest.raises(ConnectorError, match="no longer holds position 5"):
            _run(MemoryConnector(db, **{"snapshot.mode": mode}), sink, store, lambda s: False)
        assert sink.records == []
        return
    _run(MemoryConnector(db, **{"snapshot.mode": mode}), sink, store, lambda s: len(s.records) >= 6)
    assert [op for _, op, _ in _values(sink)] == ["r"] * 6  # a new snapshot holds the lost change


def test_chunked_snapshot_plans_keep_the_markers_of_a_whole_table_read():
    from headwater.engine.capture import plan_snapshot

    db = _db()
    for i in range(4, 12):
        db.insert("a", i, i)
    connector = MemoryConnector(db)
    source = connector.capture_source(parallel=True)
    point = source.open_snapshot(None, False)
    chunks = plan_snapshot(connector, source, point, 3)
    assert [(c.collection, c.lower, c.upper) for c in chunks] == [
        ("public.a", None, ("3",)), ("public.a", ("3",), ("6",)), ("public.a", ("6",), ("9",)),
        ("public.a", ("9",), None), ("public.b", None, None), ("public.c", None, None)]
    records: list[Any] = []
    for chunk in chunks:
        source.read_chunk(point, chunk, records.append, threading.Event())
    markers = [r.value["source"]["snapshot"] for r in records]
    assert markers == ["first", *["true"] * 9, "last_in_data_collection", "first_in_data_collection", "last"]
    assert [r.key["id"] for r in records[:11]] == list(range(1, 12))


def test_a_key_change_is_a_delete_a_tombstone_and_a_create_and_deletes_leave_tombstones():
    db = _db()
    store = MemoryOffsetStore()
    _run(MemoryConnector(db), ListSink(), store, lambda s: len(s.records) >= 5)
    db.update("a", 1, 100, 10)   # the key changes
    db.delete("a", 2)
    sink = ListSink()
    _run(MemoryConnector(db), sink, store, lambda s: len(s.records) >= 5)
    assert [op for _, op, _ in _values(sink)] == ["d", "tombstone", "c", "d", "tombstone"]
    delete, tombstone, create = sink.records[:3]
    assert delete.key == tombstone.key == {"id": 1} and create.key == {"id": 100}
    assert [h[0] for h in delete.headers] == [NEW_KEY_HEADER] and [h[0] for h in create.headers] == [OLD_KEY_HEADER]
    db.delete("a", 3)
    sink = ListSink()
    _run(MemoryConnector(db, **{"tombstones.on.delete": False}), sink, store, lambda s: len(s.records) >= 1)
    time.sleep(0.1)
    assert [op for _, op, _ in _values(sink)] == ["d"]


def test_offsets_are_stored_after_the_sink_flushed_and_acknowledged_after_they_are_stored():
    db = _db()
    events: list[str] = []
    sink = ListSink(events)
    store = LoggingStore(events)
    connector = MemoryConnector(db)
    original = connector.capture_source

    def capture_source(*, parallel: bool) -> Any:
        source = original(parallel=parallel)
        acknowledge = source.acknowledge
        source.acknowledge = lambda offset: (events.append(f"ack {offset['pos']}"), acknowledge(offset))  # type: ignore[method-assign]
        return source

    connector.capture_source = capture_source  # type: ignore[method-assign]
    for i in range(4, 8):
        db.insert("b", i, i)
    _run(connector, sink, store, lambda s: len(s.records) >= 9)
    assert events, "nothing was committed"
    for n, event in enumerate(events):
        if event.startswith("save"):
            assert events[n - 1].startswith("flush"), events
        if event.startswith("ack"):
            assert events[n - 1] == event.replace("ack", "save"), events
    assert db.acknowledged and db.acknowledged == sorted(db.acknowledged)


def test_a_retriable_failure_restarts_from_the_stored_offset_and_loses_nothing():
    db = _db()
    store = MemoryOffsetStore()
    _run(MemoryConnector(db), ListSink(), store, lambda s: len(s.records) >= 5)
    for i in range(4, 10):
        db.insert("a", i, i)
    connector = MemoryConnector(db, **{"errors.max.retries": 3})
    connector.fail_at = 8  # after three of the six changes
    sink = ListSink()
    _run(connector, sink, store, lambda s: len(s.records) >= 6, errors_max_retries=3, retry_delay_initial_ms=1,
         restart_wait_ms=1)
    assert [r.key["id"] for r in sink.records] == [4, 5, 6, 7, 8, 9]  # each once, in order
    assert len(connector.sources) == 1 and connector.sources[0].opened == 2


def test_retries_give_up_after_errors_max_retries():
    db = _db()
    store = MemoryOffsetStore()
    _run(MemoryConnector(db), ListSink(), store, lambda s: len(s.records) >= 5)
    db.insert("a", 4, 4)
    connector = MemoryConnector(db)
    connector.fail_at, connector.fail_always = 5, True
    with pytest.raises(ConnectorError, match=r"gave up after 2 retries: errors.max.retries=2"):
        _run(connector, ListSink(), store, lambda s: False, errors_max_retries=2, retry_delay_initial_ms=1,
             restart_wait_ms=1)
