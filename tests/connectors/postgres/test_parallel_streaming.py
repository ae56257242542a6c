"""Events built by worker processes are the events built on the reader thread, and a restart in
the middle of a large transaction resumes inside it."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from test_crash_restart import Runner

from helpers.capture import RunningCapture, base_properties, drop_sentinels, emit_sentinel_and_wait
from helpers.conformance import normalize, serialized

WORKLOAD = [
    # one transaction larger than a worker chunk, so chunks split it
    "INSERT INTO items SELECT g, 'v' || g, g * 1.25, now() FROM generate_series(1, 5000) g",
    "UPDATE items SET val = 'u' || id WHERE id % 7 = 0",
    "UPDATE items SET id = id + 100000 WHERE id BETWEEN 10 AND 20",   # key changes: d + tombstone + c
    "DELETE FROM items WHERE id % 11 = 0",
    "INSERT INTO other VALUES (1, 'x'), (2, 'y')",
    "TRUNCATE other",
    "SELECT pg_logical_emit_message(true, 'p', 'in tx')",
    "SELECT pg_logical_emit_message(false, 'p', 'not in tx')",
] + [f"UPDATE items SET amount = amount + 1 WHERE id = {i}" for i in range(100, 400)]


def _setup(db) -> None:
    db.execute("CREATE TABLE items (id int PRIMARY KEY, val text, amount numeric(12,2), ts timestamptz)")
    db.execute("CREATE TABLE other (id int PRIMARY KEY, v text)")
    db.execute("CREATE PUBLICATION dbz_publication FOR ALL TABLES")


def _capture(db, tmp: Path, slot: str, workers: int, caplog) -> list[dict]:
    props = base_properties(db, tmp, slot, **{"snapshot.mode": "no_data", "encoding.workers": str(workers),
                                              "skipped.operations": "none"})
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="headwater"):
        capture = RunningCapture(props, tmp / "out.jsonl").start()
        try:
            emit_sentinel_and_wait(db, capture, timeout=120, quiet=0.5)
        finally:
            capture.stop()
    used = any("worker processes" in r.getMessage() for r in caplog.records)
    assert used == (workers > 0), "the run did not use the expected build mode"
    return [normalize.normalize_event(r) for r in drop_sentinels(capture.records())]


def test_workers_emit_exactly_what_the_reader_thread_emits(pg_db, tmp_path, caplog):
    _setup(pg_db)
    # both slots exist before the workload, so both runs see exactly the same changes
    pg_db.execute("SELECT pg_create_logical_replication_slot('hw_seq', 'pgoutput')")
    pg_db.execute("SELECT pg_create_logical_replication_slot('hw_par', 'pgoutput')")
    for statement in WORKLOAD:
        pg_db.execute(statement)
    (tmp_path / "seq").mkdir()
    (tmp_path / "par").mkdir()
    sequential = _capture(pg_db, tmp_path / "seq", "hw_seq", 0, caplog)
    parallel = _capture(pg_db, tmp_path / "par", "hw_par", 2, caplog)
    assert len(sequential) > 5000 + 700 + 300
    ops = {json.dumps(r["value"]["payload"]["op"]) for r in sequential if r["value"] and "op" in r["value"]["payload"]}
    assert {'"c"', '"u"', '"d"', '"t"', '"m"'} <= ops
    assert serialized(parallel) == serialized(sequential)


def test_sigkill_inside_a_large_transaction_resumes_inside_it(pg_db, tmp_path):
    _setup(pg_db)
    runner = Runner(pg_db, tmp_path, "hw_bigtx", **{"snapshot.mode": "no_data", "encoding.workers": "2",
                                                    "max.batch.size": "512", "max.queue.size": "2048"})
    try:
        runner.start()
        runner.wait_streaming()
        pg_db.execute("INSERT INTO items SELECT g, 'v' || g, g, now() FROM generate_series(1, 60000) g")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            offsets = runner.offsets.read_text() if runner.offsets.exists() else ""
            if '"tx_final_lsn"' in offsets and runner.out.exists() and runner.out.stat().st_size > 10_000_000:
                break
            time.sleep(0.02)
        runner.kill()
        stored = json.loads(runner.offsets.read_text())["offsets"]
        (offset,) = stored.values()
        assert offset.get("tx_final_lsn") is not None and offset["tx_msgs"] > 0, offset
        runner.start()
        runner.wait_for_sentinel()
        assert runner.terminate() == 0
        first, second = runner.segments()
    finally:
        runner.cleanup()

    def ids(lines):
        return [r["key"]["id"] for r in lines if r["topic"] == "dbserver1.public.items"]

    before, after = ids(first), ids(second)
    assert sorted(set(before) | set(after)) == list(range(1, 60001)), "changes were lost"
    # the restart resumed inside the transaction: it re-sent only what followed the stored offset
    assert after[0] > 1 and after[0] == offset["tx_msgs"] + 1
    assert after == list(range(after[0], 60001))
