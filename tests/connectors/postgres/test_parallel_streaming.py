"""Events built by worker processes are the events built on the reader thread, and a restart in
the middle of a large transaction resumes inside it."""

from __future__ import annotations

import json
import logging
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
        offset = runner.kill_inside_transaction(
            "INSERT INTO items SELECT g, 'v' || g, g, now() FROM generate_series(1, 60000) g", 10_000_000)
        first, second = runner.restart_to_sentinel()
    finally:
        runner.cleanup()

    def ids(lines):
        return [r["key"]["id"] for r in lines if r["topic"] == "dbserver1.public.items"]

    before, after = ids(first), ids(second)
    assert sorted(set(before) | set(after)) == list(range(1, 60001)), "changes were lost"
    # the restart resumed inside the transaction: it re-sent only what followed the stored offset
    assert after[0] > 1 and after[0] == offset["tx_msgs"] + 1
    assert after == list(range(after[0], 60001))


def test_a_restart_inside_a_transaction_goes_on_counting_its_metadata(pg_db, tmp_path):
    """provide.transaction.metadata: the offsets inside a transaction keep its id and events per
    collection (Debezium's TransactionContext), so a restart inside it sends no second BEGIN, its
    events' orders go on, and END counts the whole transaction."""
    _setup(pg_db)
    runner = Runner(pg_db, tmp_path, "hw_bigtx_meta", **{"snapshot.mode": "no_data",
                                                         "provide.transaction.metadata": "true",
                                                         "table.include.list": "public.items,public.other",
                                                         "max.batch.size": "512", "max.queue.size": "2048"})
    try:
        runner.start()
        runner.wait_streaming()
        # one transaction: two statements in one query
        offset = runner.kill_inside_transaction(
            "INSERT INTO items SELECT g, 'v' || g, g, now() FROM generate_series(1, 60000) g; "
            "INSERT INTO other VALUES (1, 'x'), (2, 'y')", 10_000_000)
        assert offset["transaction_data_collection_order_public.items"] == offset["tx_msgs"], offset
        first, second = runner.restart_to_sentinel()
    finally:
        runner.cleanup()

    def payload(record):
        value = record["value"]
        return value.get("payload", value)

    def statuses(lines):
        return [payload(r)["status"] for r in lines if r["topic"] == "dbserver1.transaction"]

    assert statuses(first) == ["BEGIN"] and statuses(second) == ["END"]
    (end,) = [payload(r) for r in second if r["topic"] == "dbserver1.transaction"]
    assert end["event_count"] == 60002
    assert sorted((c["data_collection"], c["event_count"]) for c in end["data_collections"]) == [
        ("public.items", 60000), ("public.other", 2)]
    resumed = [payload(r) for r in second if r["topic"] == "dbserver1.public.items"]
    assert resumed[0]["after"]["id"] == offset["tx_msgs"] + 1
    assert all(p["transaction"]["total_order"] == p["transaction"]["data_collection_order"] == p["after"]["id"]
               for p in resumed)
    other = [payload(r)["transaction"] for r in second if r["topic"] == "dbserver1.public.other"]
    assert [(t["total_order"], t["data_collection_order"]) for t in other] == [(60001, 1), (60002, 2)]
