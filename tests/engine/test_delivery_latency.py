"""Delivery does not wait on a timer: a change that is there is handed to the sink at once, with
`poll.interval.ms` far longer than the test may take (a poll that waited for it, or for a batch
to fill, as Debezium's ChangeEventQueue.poll does since DBZ-3887, would fail here)."""

from __future__ import annotations

import threading
import time
from typing import Any

from headwater.engine.coordinator import Engine, EngineSettings
from headwater.engine.offsets import MemoryOffsetStore
from headwater.engine.queue import ChangeEventQueue
from helpers.memory_connector import MemoryConnector, MemoryDatabase
from helpers.memory_sink import RecordingSink

LONG_MS = 120_000   # poll.interval.ms / offset.flush.interval.ms: a wait on them cannot go unnoticed
PATIENCE_S = 20     # how long the test waits for what must come at once


def test_poll_returns_a_present_item_without_waiting_for_the_interval_or_a_full_batch():
    queue = ChangeEventQueue(max_size=8192)
    queue.put_many(["a"])
    t = time.monotonic()
    assert queue.poll(2048, LONG_MS / 1000) == ["a"]
    assert time.monotonic() - t < PATIENCE_S


def test_a_waiting_poll_returns_when_the_first_item_arrives():
    queue = ChangeEventQueue(max_size=8192)
    got: list[Any] = []
    poller = threading.Thread(target=lambda: got.append(queue.poll(2048, LONG_MS / 1000)), daemon=True)
    poller.start()
    time.sleep(0.1)  # the poll is waiting (no item yet)
    queue.put_many(["a"])
    poller.join(PATIENCE_S)
    assert got == [["a"]]


def test_a_streamed_change_reaches_the_sink_without_waiting_for_poll_or_flush_intervals():
    db = MemoryDatabase()
    db.create("a", "id", "v")
    db.insert("a", 1, 10)
    sink = RecordingSink()
    store = MemoryOffsetStore()
    engine = Engine(MemoryConnector(db), sink, store,
                    EngineSettings(poll_interval_ms=LONG_MS, offset_flush_interval_ms=LONG_MS))
    stop = threading.Event()
    thread = threading.Thread(target=engine.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert sink.wait_for(1, PATIENCE_S), "the snapshot row did not arrive"
        for i in range(2, 5):  # one change at a time, each while the engine is idle
            db.insert("a", i, i * 10)
            assert sink.wait_for(i, PATIENCE_S), f"change {i} waited for a timer"
        assert [r.value["after"]["id"] for r in sink.records] == [1, 2, 3, 4]
        assert store.load(engine.connector.partition()) is None  # offsets wait for their own interval
    finally:
        stop.set()
        thread.join(PATIENCE_S)
    assert not thread.is_alive()
    assert store.load(engine.connector.partition()) is not None  # stored at the stop, after the sink
