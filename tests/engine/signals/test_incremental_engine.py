"""Incremental and blocking snapshots driven through the engine with its in-memory connector:
Debezium's watermark windows de-duplicated against a stream that keeps changing the rows being
read, a restart in the middle going on at the chunk, stop / pause / resume, the insert_delete
strategy, and signals that cannot be acted on — without a database (the connectors' own tests
run the same against PostgreSQL and the SQL Server emulator)."""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from typing import Any

import pytest

from headwater.engine.coordinator import Engine, EngineSettings
from headwater.engine.offsets import MemoryOffsetStore
from headwater.engine.records import SourceRecord
from helpers.memory_connector import MemoryConnector, MemoryDatabase
from helpers.memory_sink import RecordingSink

SIGNALS = "public.signal"


class Running:
    """The engine on a thread, streaming once this returns (a row of table z came through)."""

    def __init__(self, connector: MemoryConnector, store: MemoryOffsetStore, sink: RecordingSink) -> None:
        self.engine = Engine(connector, sink, store, EngineSettings(poll_interval_ms=10, offset_flush_interval_ms=0))
        self.stop = threading.Event()
        self.failure: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        db = connector.db
        marker = len(db.log) + 10**6
        deadline = time.monotonic() + 10
        while not any(r.topic == "mem.public.z" and r.key == {"id": marker} for r in list(sink.records)):
            assert time.monotonic() < deadline and not self.failure, self.failure or "the stream did not start"
            if marker not in db.tables["public.z"].rows:
                db.insert("z", marker, 0)
            time.sleep(0.02)
            db.delete("z", marker)

    def _run(self) -> None:
        try:
            self.engine.run(self.stop)
        except BaseException as exc:
            self.failure.append(exc)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        if self.failure:
            raise self.failure[0]


def _db(rows: int = 0) -> MemoryDatabase:
    db = MemoryDatabase()
    db.create("signal", "id", "type", "data", type_name="text")
    db.create("a", "id", "v")
    db.create("b", "id", "v")
    db.create("z", "id", "v")
    for i in range(1, rows + 1):
        db.insert("a", i, i)
    return db


def _connector(db: MemoryDatabase, **props: Any) -> MemoryConnector:
    return MemoryConnector(db, **{"signal.data.collection": SIGNALS, "incremental.snapshot.chunk.size": 100,
                                  "snapshot.mode": "no_data", **props})


def _wait(predicate: Any, what: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _signal(db: MemoryDatabase, sid: str, kind: str, data: dict[str, Any] | str | None) -> None:
    db.insert("signal", sid, kind, data if isinstance(data, str) or data is None else json.dumps(data))


def _data(records: list[SourceRecord], topic: str = "mem.public.a") -> list[SourceRecord]:
    return [r for r in records if r.topic == topic and r.value is not None]


def _replay(records: list[SourceRecord]) -> dict[int, int]:
    state: dict[int, int] = {}
    for r in records:
        if r.value["op"] == "d":
            state.pop(r.key["id"], None)
        else:
            state[r.value["after"]["id"]] = r.value["after"]["v"]
    return state


def _reads(records: list[SourceRecord]) -> list[int]:
    return [r.key["id"] for r in records if r.value["op"] == "r"]


def _table(db: MemoryDatabase, name: str = "a") -> dict[int, int]:
    return {k: row[1] for k, row in db.tables[f"public.{name}"].rows.items()}


def _completed(sink: RecordingSink, db: MemoryDatabase) -> bool:
    """The snapshot's last window closed (no incremental state in the last offset)."""
    return sink.records != [] and "incremental_snapshot_collections" not in sink.records[-1].offset \
        and any(r.value is not None and r.value.get("op") == "r" for r in sink.records)


def test_snapshot_under_concurrent_changes_replays_to_the_table_state() -> None:
    db = _db(2500)
    connector = _connector(db)
    sink = RecordingSink()
    run = Running(connector, MemoryOffsetStore(), sink)
    try:
        _signal(db, "ad-hoc-1", "execute-snapshot", {"data-collections": ["public\\.a"], "type": "INCREMENTAL"})
        rng = random.Random(7)
        next_id = 3000
        for _ in range(600):  # updates, deletes and inserts racing the chunks
            op = rng.random()
            keys = list(db.tables["public.a"].rows)
            if op < 0.5:
                k = rng.choice(keys)
                db.update("a", k, k, rng.randrange(10**6))
            elif op < 0.8:
                db.delete("a", rng.choice(keys))
            else:
                next_id += 1
                db.insert("a", next_id, next_id)
            if rng.random() < 0.1:
                time.sleep(0.001)
        signal_rows = db.tables[SIGNALS].rows
        _wait(lambda: _completed(sink, db) and signal_rows
              and len([r for r in sink.records if r.topic == "mem.public.signal"]) == len(signal_rows),
              "the snapshot to finish")
        # the snapshot can finish before the last changes: a later change of another table fences them
        db.insert("z", -1, 0)
        _wait(lambda: any(r.topic == "mem.public.z" and r.key == {"id": -1} for r in list(sink.records)),
              "the changes made after the snapshot")
    finally:
        run.close()
    events = _data(sink.records)
    assert _replay(events) == _table(db)
    reads = _reads(events)
    assert len(reads) == len(set(reads)), "a row was read twice"
    assert reads, "nothing was read"
    # every window: open and close rows came back through the stream, each chunk read once
    signal_rows = [r.value["after"] for r in sink.records if r.topic == "mem.public.signal"]
    opens = [s["id"] for s in signal_rows if s["type"] == "snapshot-window-open"]
    closes = [s["id"] for s in signal_rows if s["type"] == "snapshot-window-close"]
    assert [o[: -len("-open")] for o in opens] == [c[: -len("-close")] for c in closes]
    assert len(opens) >= 25  # 2500 rows in chunks of 100


def test_reads_are_marked_incremental_and_come_before_the_close_row() -> None:
    db = _db(250)
    sink = RecordingSink()
    run = Running(_connector(db), MemoryOffsetStore(), sink)
    try:
        _signal(db, "s1", "execute-snapshot", {"data-collections": ["public.a"]})
        _wait(lambda: len(_reads(_data(sink.records))) == 250, "the reads")
    finally:
        run.close()
    reads = [r for r in _data(sink.records) if r.value["op"] == "r"]
    assert {r.value["source"]["snapshot"] for r in reads} == {"incremental"}
    assert [r.key["id"] for r in reads] == list(range(1, 251))
    order = [(r.topic, (r.value["after"] or {}).get("type")) for r in sink.records if r.value is not None]
    first_close = order.index(("mem.public.signal", "snapshot-window-close"))
    assert order[first_close - 1] == ("mem.public.a", None)  # the chunk's reads just before its close row


def test_a_restart_goes_on_at_the_chunk_with_no_row_missing() -> None:
    db = _db(1000)
    store = MemoryOffsetStore()
    connector = _connector(db, **{"incremental.snapshot.chunk.size": 50})
    connector.chunk_delay = 0.05
    first = RecordingSink()
    run = Running(connector, store, first)
    try:
        _signal(db, "s1", "execute-snapshot", {"data-collections": ["public.a"]})
        _wait(lambda: len(_reads(_data(first.records))) >= 300, "some chunks")
    finally:
        run.close()
    stored = store.load(connector.partition())
    assert stored is not None and "incremental_snapshot_collections" in stored
    db.delete("a", 999)
    db.update("a", 998, 998, -1)
    second = RecordingSink()
    run = Running(_connector(db, **{"incremental.snapshot.chunk.size": 50}), store, second)
    try:
        _wait(lambda: _completed(second, db), "the rest of the snapshot")
    finally:
        run.close()
    before, after = _reads(_data(first.records)), _reads(_data(second.records))
    assert min(after) > max(before) - 50, "the restart read from the start again"
    assert set(before) | set(after) == set(range(1, 1001)) - {999}
    assert _replay(_data(first.records) + _data(second.records)) == _table(db)


def test_conditions_surrogate_key_and_insert_delete() -> None:
    db = _db(300)
    for i in range(1, 51):
        db.insert("b", i, 1000 - i)
    sink = RecordingSink()
    run = Running(_connector(db, **{"incremental.snapshot.watermarking.strategy": "insert_delete"}),
                  MemoryOffsetStore(), sink)
    try:
        _signal(db, "s1", "execute-snapshot", {
            "data-collections": ["public.a", "public.b"],
            "additional-conditions": [{"data-collection": "public.a", "filter": "v % 3 == 0"}],
        })
        _wait(lambda: len(_reads(_data(sink.records))) == 100
              and len(_reads(_data(sink.records, "mem.public.b"))) == 50, "the reads")
        _signal(db, "s2", "execute-snapshot", {"data-collections": ["public.b"], "surrogate-key": "v"})
        _wait(lambda: len(_reads(_data(sink.records, "mem.public.b"))) == 100, "the surrogate-key reads")
    finally:
        run.close()
    assert _reads(_data(sink.records)) == list(range(3, 301, 3))
    second = _reads(_data(sink.records, "mem.public.b"))[50:]
    assert second == list(range(50, 0, -1))  # chunked by v, which falls as id grows
    # insert_delete: the signal table keeps only the user's signals
    assert set(db.tables[SIGNALS].rows) == {"s1", "s2"}


def test_stop_pause_resume_and_bad_signals_do_not_stop_the_stream(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="headwater.engine.signals")
    db = _db(400)
    for i in range(1, 401):
        db.insert("b", i, i)
    sink = RecordingSink()
    connector = _connector(db)
    connector.chunk_delay = 0.1  # chunks of 100 rows: the pause arrives while b is read
    run = Running(connector, MemoryOffsetStore(), sink)
    try:
        _signal(db, "bad-json", "execute-snapshot", "{not json")
        _signal(db, "unknown", "do-something", None)
        _signal(db, "empty", "execute-snapshot", {"data-collections": []})
        _signal(db, "no-table", "execute-snapshot", {"data-collections": ["public.nope"]})
        _signal(db, "log", "log", {"message": "at {}"})
        db.insert("a", 5000, 1)
        _wait(lambda: any(r.key == {"id": 5000} for r in _data(sink.records)), "the insert after the bad signals")
        _signal(db, "s1", "execute-snapshot", {"data-collections": ["public.a", "public.b"]})
        _signal(db, "stop-b", "stop-snapshot", {"data-collections": ["public.b"], "type": "incremental"})
        _wait(lambda: len(_reads(_data(sink.records))) == 401, "a's reads")
        time.sleep(0.3)
        _signal(db, "s2", "execute-snapshot", {"data-collections": ["public.b"]})
        _signal(db, "pause", "pause-snapshot", None)
        _wait(lambda: "incremental snapshot paused" in caplog.text, "the pause")
        time.sleep(0.3)
        paused_at = len(_reads(_data(sink.records, "mem.public.b")))
        time.sleep(0.3)
        assert len(_reads(_data(sink.records, "mem.public.b"))) == paused_at
        _signal(db, "resume", "resume-snapshot", None)
        _wait(lambda: len(_reads(_data(sink.records, "mem.public.b"))) == 400, "b's reads after resume")
    finally:
        run.close()
    assert _reads(_data(sink.records, "mem.public.b")) == list(range(1, 401))  # b's first request was stopped
    for reason in ("not valid JSON", "unknown signal type", "'data-collections' is missing or empty",
                   "public.nope skipped"):
        assert reason in caplog.text


def test_blocking_snapshot_pauses_streaming_and_reads_the_tables() -> None:
    db = _db(120)
    for i in range(1, 11):
        db.insert("b", i, i)
    sink = RecordingSink()
    run = Running(_connector(db), MemoryOffsetStore(), sink)
    try:
        db.insert("a", 500, 1)
        _wait(lambda: len(_data(sink.records)) == 1, "the stream")
        _signal(db, "blk", "execute-snapshot", {
            "type": "blocking", "data-collections": ["public.a", "public.b"],
            "additional-conditions": [{"data-collection": "public.b", "filter": "SELECT * FROM b WHERE v > 5"}]})
        _wait(lambda: len(_reads(_data(sink.records, "mem.public.b"))) == 5, "the blocking snapshot")
        db.insert("a", 501, 1)
        _wait(lambda: any(r.key == {"id": 501} for r in _data(sink.records)), "streaming after it")
    finally:
        run.close()
    a = _data(sink.records)
    assert [r.value["op"] for r in a][:1] == ["c"] and [r.value["op"] for r in a][-1] == "c"
    assert sorted(_reads(a)) == [*range(1, 121), 500]
    assert _reads(_data(sink.records, "mem.public.b")) == [6, 7, 8, 9, 10]
    markers = [r.value["source"]["snapshot"] for r in sink.records if r.value is not None
               and r.value.get("op") == "r"]
    assert markers[0] == "first" and markers[-1] == "last"


def test_a_blocking_snapshot_a_stop_interrupted_is_read_again_at_the_restart() -> None:
    """Its records' offsets name the request until the marker that ends it: a run stopped inside it
    (between its two tables) reads it again, whole, before it streams; a run after it ended does not."""
    from headwater.engine.signals.blocking import BLOCKING_KEY

    db = _db(2000)
    for i in range(1, 51):
        db.insert("b", i, i)
    store = MemoryOffsetStore()
    connector = _connector(db)
    connector.read_delay = 2.0  # after each table's rows: the stop comes before the second table

    first = RecordingSink()
    run = Running(connector, store, first)
    try:
        _signal(db, "blk", "execute-snapshot", {"type": "blocking", "data-collections": ["public.a", "public.b"]})
        # (handed on 512 at a time)
        _wait(lambda: len(_reads(_data(first.records))) >= 1024, "the first table of the blocking snapshot")
    finally:
        run.close()
    assert _reads(_data(first.records, "mem.public.b")) == [], "it ended before the stop: nothing is tested"
    stored = store.load(connector.partition())
    assert stored is not None and BLOCKING_KEY in stored

    db.update("a", 7, 7, -7)  # streamed after the snapshot that is read again
    second = RecordingSink()
    again = _connector(db)
    run = Running(again, store, second)
    try:
        _wait(lambda: any(r.key == {"id": 7} and r.value["op"] == "u" for r in _data(second.records)), "the update")
    finally:
        run.close()
    assert sorted(_reads(_data(second.records))) == list(range(1, 2001))
    assert sorted(_reads(_data(second.records, "mem.public.b"))) == list(range(1, 51))
    assert _replay(_data(first.records) + _data(second.records)) == _table(db)
    stored = store.load(again.partition())
    assert stored is not None and BLOCKING_KEY not in stored

    third = RecordingSink()
    run = Running(_connector(db), store, third)
    run.close()
    assert _reads(_data(third.records)) == []


def test_a_corrupt_blocking_snapshot_request_in_the_offset_is_a_clear_error() -> None:
    from headwater.engine.connector import ConnectorError
    from headwater.engine.signals.blocking import BLOCKING_KEY, unfinished_blocking

    for bad in ("{", '{"kind": "blocking"}', 5):
        with pytest.raises(ConnectorError, match="'headwater_blocking' is not a blocking snapshot request"):
            unfinished_blocking({"pos": 3, BLOCKING_KEY: bad})


def test_signals_through_the_in_process_channel_and_a_file(tmp_path: Any) -> None:
    db = _db(150)
    signal_file = tmp_path / "signals.txt"
    connector = _connector(db, **{"signal.enabled.channels": ["source", "in-process", "file"],
                                  "signal.file": str(signal_file), "signal.poll.interval.ms": 50})
    sink = RecordingSink()
    run = Running(connector, MemoryOffsetStore(), sink)
    try:
        sent = run.engine.signal("execute-snapshot", {"data-collections": ["public.a"]}, "api-1")
        assert sent.id == "api-1"
        _wait(lambda: len(_reads(_data(sink.records))) == 150, "the snapshot the API asked for")
        for i in range(1, 21):
            db.insert("b", i, i)
        signal_file.write_text(json.dumps({"id": "file-1", "type": "execute-snapshot",
                                           "data": {"data-collections": ["public.b"]}}) + "\n")
        _wait(lambda: len(_reads(_data(sink.records, "mem.public.b"))) == 20, "the snapshot the file asked for")
    finally:
        run.close()
    assert signal_file.read_text() == ""  # read signals are removed from the file, as Debezium does


def test_a_blocking_snapshot_honours_select_overrides_and_is_notified() -> None:
    db = _db(20)
    for i in range(1, 11):
        db.insert("b", i, i)
    sink = RecordingSink()
    connector = _connector(db, **{
        "snapshot.select.statement.overrides": ["public.a"],
        "snapshot.select.statement.overrides.public.a": "SELECT * FROM a WHERE id <= 3",
        "notification.enabled.channels": ["sink"], "notification.sink.topic.name": "mem.notifications"})
    run = Running(connector, MemoryOffsetStore(), sink)
    try:
        _signal(db, "blk", "execute-snapshot", {"type": "blocking", "data-collections": ["public\\.[ab]"]})
        _wait(lambda: any(r.topic == "mem.notifications" and r.value["type"] == "COMPLETED"
                          and r.value["aggregate_type"] == "Initial Snapshot" for r in sink.records),
              "the blocking snapshot's COMPLETED")
    finally:
        run.close()
    assert _reads(_data(sink.records)) == [1, 2, 3]
    assert _reads(_data(sink.records, "mem.public.b")) == list(range(1, 11))
    notes = [(r.value["aggregate_type"], r.value["type"], (r.value["additional_data"] or {}).get("scanned_collection"),
              (r.value["additional_data"] or {}).get("total_rows_scanned"))
             for r in sink.records if r.topic == "mem.notifications"]
    blocking = notes[notes.index(("Initial Snapshot", "STARTED", None, None), 1):]
    assert blocking == [
        ("Initial Snapshot", "STARTED", None, None),
        ("Initial Snapshot", "IN_PROGRESS", None, None),
        ("Initial Snapshot", "TABLE_SCAN_COMPLETED", "public.a", "3"),
        ("Initial Snapshot", "IN_PROGRESS", None, None),
        ("Initial Snapshot", "TABLE_SCAN_COMPLETED", "public.b", "10"),
        ("Initial Snapshot", "COMPLETED", None, None),
    ]
