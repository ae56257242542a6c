"""A committed change reaches the jsonl file without waiting on a timer — the reader, the worker
processes (or the reader thread) and the engine hand it on as soon as it is there — with
poll.interval.ms and offset.flush.interval.ms far longer than the test may take."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from helpers.capture import RunningCapture, base_properties

LONG_MS = "120000"
PATIENCE_S = 20  # for each change, once streaming runs; a wait on either interval would exceed it


def _lines(out: Path) -> int:
    return out.read_bytes().count(b"\n") if out.exists() else 0


def _wait_lines(capture: RunningCapture, n: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _lines(capture.out) >= n:
            return True
        assert capture.alive(), "the capture ended"
        time.sleep(0.01)
    return False


def _wait_streaming(db, capture: RunningCapture, slot: str) -> None:
    deadline = time.monotonic() + 120
    while not db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND active", (slot,)):
        assert capture.alive(), "the capture ended"
        assert time.monotonic() < deadline, "streaming never started"
        time.sleep(0.05)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_each_change_reaches_the_file_without_waiting_for_poll_or_flush_intervals(pg_db, tmp_path, workers):
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, v text)")
    pg_db.execute("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    props = base_properties(pg_db, tmp_path, f"hw_latency_{workers}", **{
        "snapshot.mode": "no_data", "encoding.workers": workers,
        "poll.interval.ms": LONG_MS, "offset.flush.interval.ms": LONG_MS})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    try:
        _wait_streaming(pg_db, capture, f"hw_latency_{workers}")
        pg_db.execute("INSERT INTO items VALUES (1, 'a')")
        assert _wait_lines(capture, 1, 120), "the first change never arrived"  # includes the start-up
        for i in range(2, 5):  # one at a time, each while Headwater is idle
            pg_db.execute("INSERT INTO items VALUES (%s, 'a')", (i,))
            assert _wait_lines(capture, i, PATIENCE_S), f"change {i} waited for a timer"
        # offsets keep to their own interval: none stored covers a change yet (an idle position
        # reached before the first change, with no records pending, is stored at once: OffsetMarker.idle)
        if (tmp_path / "offsets.json").exists():
            stored = json.loads((tmp_path / "offsets.json").read_text())["offsets"]
            first_lsn = capture.records()[0]["value"]["payload"]["source"]["lsn"]
            assert all(o["lsn_commit"] <= first_lsn for o in stored.values()), (stored, first_lsn)
    finally:
        capture.stop()
    assert [r["value"]["payload"]["after"]["id"] for r in capture.records()] == [1, 2, 3, 4]
    assert (tmp_path / "offsets.json").exists()  # stored at the stop, after the sink's fsync
