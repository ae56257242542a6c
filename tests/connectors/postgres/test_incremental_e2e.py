"""Incremental and blocking snapshots of PostgreSQL end to end, through `headwater run` as a user
runs it: an incremental snapshot while another connection writes to the rows being read (the
delivered events, replayed in order, end in the table's state), a `headwater run` killed with
SIGKILL in the middle of one (it resumes at the chunk the stored offset names), a blocking
snapshot whose filter is a whole SELECT while the table changes, and a signal sent by
`headwater signal` through the file channel to a running `headwater run`."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from headwater.engine.signals.keys import decode_key
from helpers.capture import (
    HeadwaterRun,
    base_properties,
    drop_sentinels,
    emit_sentinel_and_wait,
    notifications,
    payload,
    read_records,
    wait_for_run,
    wait_slot_active,
)

SIGNAL = "public.debezium_signal"
TOPIC = "dbserver1.public.t"
NOTIFICATIONS = "dbserver1.notifications"


def _setup(db: Any, rows: int) -> None:
    db.execute("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
               "data varchar(2048))")
    db.execute("CREATE TABLE t (id integer PRIMARY KEY, v integer NOT NULL, note text)")
    db.execute("INSERT INTO t SELECT g, g, 'row ' || g FROM generate_series(1, %s) g", (rows,))


def _props(db: Any, workdir: Path, **extra: str) -> dict[str, str]:
    # no initial snapshot: every row the stream does not carry must come from the incremental one
    return base_properties(db, workdir, f"hw_inc_e2e_{os.getpid()}_{time.monotonic_ns() % 10**8}", **{
        "snapshot.mode": "no_data",
        "signal.data.collection": SIGNAL,
        "notification.enabled.channels": "sink",
        "notification.sink.topic.name": NOTIFICATIONS,
        **extra,
    })






def _completed(out: Path) -> bool:
    return any(n["aggregate_type"] == "Incremental Snapshot" and n["type"] == "COMPLETED"
               for n in notifications(read_records(out), NOTIFICATIONS))




def _replay(records: list[dict[str, Any]], topic: str = TOPIC) -> dict[int, dict[str, Any]]:
    """The table as the events say, applied in delivery order (a tombstone changes nothing)."""
    state: dict[int, dict[str, Any]] = {}
    for r in records:
        if r["topic"] != topic or r["value"] is None:
            continue
        p = payload(r["value"])
        if p["op"] == "d":
            state.pop(p["before"]["id"], None)
        else:
            state[p["after"]["id"]] = p["after"]
    return state


def _table(db: Any) -> dict[int, dict[str, Any]]:
    return {i: {"id": i, "v": v, "note": n} for i, v, n in db.execute("SELECT id, v, note FROM t")}


def _reads(records: list[dict[str, Any]]) -> list[int]:
    return [payload(r["value"])["after"]["id"] for r in records
            if r["topic"] == TOPIC and r["value"] is not None
            and payload(r["value"])["source"]["snapshot"] == "incremental"]


def _execute(db: Any, sig_id: str, data: dict[str, Any]) -> None:
    db.execute("INSERT INTO debezium_signal VALUES (%s, 'execute-snapshot', %s)", (sig_id, json.dumps(data)))


def _windows(records: list[dict[str, Any]]) -> list[list[int]]:
    """The incremental reads grouped by the window they were emitted at: a window's buffered rows go
    out when its close watermark comes back, before that `-close` row is itself passed on."""
    windows: list[list[int]] = [[]]
    for r in records:
        value = payload(r["value"]) if r["value"] is not None else None
        if r["topic"] == "dbserver1.public.debezium_signal" and value and value["op"] == "c" \
                and value["after"]["type"] == "snapshot-window-close":
            windows.append([])
        elif r["topic"] == TOPIC and value and value["source"]["snapshot"] == "incremental":
            windows[-1].append(value["after"]["id"])
    return windows


class _Writer(threading.Thread):
    """Random single-row updates, deletes and inserts over the snapshotted key range, each in its
    own transaction, until stopped; remembers every id it touched."""

    def __init__(self, db: Any, high: int) -> None:
        super().__init__(daemon=True)
        self.dsn = db.dsn
        self.high = high
        self.stop = threading.Event()
        self.touched: set[int] = set()
        self.count = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        rnd = random.Random(22)
        try:
            conn = psycopg2.connect(self.dsn)
            conn.autocommit = True
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    i = rnd.randint(1, self.high)
                    op = rnd.random()
                    if op < 0.5:
                        cur.execute("UPDATE t SET v = v + 1000000, note = 'updated' WHERE id = %s", (i,))
                    elif op < 0.75:
                        cur.execute("DELETE FROM t WHERE id = %s", (i,))
                    else:
                        cur.execute("INSERT INTO t VALUES (%s, %s, 'inserted') ON CONFLICT (id) DO UPDATE "
                                    "SET v = EXCLUDED.v, note = 'upserted'", (i, -i))
                    self.touched.add(i)
                    self.count += 1
                    time.sleep(0.002)
            conn.close()
        except BaseException as exc:  # reported by the test
            self.error = exc


def test_incremental_snapshot_under_concurrent_writes_replays_to_the_table(pg_db, tmp_path):
    rows = 3000
    _setup(pg_db, rows)
    props = _props(pg_db, tmp_path, **{"incremental.snapshot.chunk.size": "250"})
    run = HeadwaterRun(props, tmp_path / "out.jsonl").start()
    writer = _Writer(pg_db, rows + 200)  # inserts beyond the maximum key too
    try:
        wait_slot_active(pg_db, props["slot.name"], run)
        writer.start()
        time.sleep(0.3)
        _execute(pg_db, "sig-concurrent", {"data-collections": ["public.t"], "type": "incremental"})
        wait_for_run(lambda: _completed(run.out), "the incremental snapshot to complete", run)
        writer.stop.set()
        writer.join(10)
        assert writer.error is None, writer.error
        emit_sentinel_and_wait(pg_db, run)
    finally:
        writer.stop.set()
        run.stop()
    records = drop_sentinels(run.records())
    assert writer.count > 200, "the writer did not run alongside the snapshot"

    assert _replay(records) == _table(pg_db)
    reads = _reads(records)
    windows = _windows(records)
    assert len(windows) > rows // 250, "the snapshot was not read in chunks"
    for window in windows:
        assert len(window) == len(set(window)), "a row was read twice in one window"
    assert len(reads) == len(set(reads)), "a row was read by two chunks"
    # a row nobody touched is read exactly once (the snapshot is the only event that carries it)
    untouched = set(range(1, rows + 1)) - writer.touched
    assert untouched and untouched <= set(reads)
    maxima = {n["additional_data"]["maximum_key"] for n in notifications(records, NOTIFICATIONS)
              if n["type"] == "IN_PROGRESS"}
    assert len(maxima) == 1, maxima
    assert max(reads) <= int(maxima.pop()), "a row inserted beyond the maximum key was read"


def _stored_offset(path: Path) -> dict[str, Any]:
    offsets = json.loads(path.read_text())["offsets"]
    assert len(offsets) == 1, offsets
    return next(iter(offsets.values()))


def test_sigkill_during_an_incremental_snapshot_resumes_at_the_chunk(pg_db, tmp_path):
    rows, chunk = 8000, 200
    _setup(pg_db, rows)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    props = _props(pg_db, tmp_path, **{"incremental.snapshot.chunk.size": str(chunk)})
    run = HeadwaterRun(props, first / "out.jsonl").start()
    try:
        wait_slot_active(pg_db, props["slot.name"], run)
        _execute(pg_db, "sig-kill", {"data-collections": ["public.t"], "type": "incremental"})

        def mid_snapshot() -> bool:  # a stored offset past a few chunks, the snapshot still going
            offsets = tmp_path / "offsets.json"
            if not offsets.exists():
                return False
            stored = _stored_offset(offsets).get("incremental_snapshot_primary_key")
            key = decode_key(stored, "incremental_snapshot_primary_key") if stored else None
            return key is not None and int(key[0]) >= 4 * chunk

        wait_for_run(mid_snapshot, "the stored offset to pass 4 chunks", run)
        writes = threading.Thread(target=lambda: [
            pg_db.execute("UPDATE t SET v = -v WHERE id = %s", (i,)) for i in range(1, rows, 997)])
        writes.start()
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.proc.wait(10)
        writes.join()
    finally:
        if run.alive():
            os.killpg(run.proc.pid, signal.SIGKILL)
    first_records = read_records(run.out)
    assert not _completed(run.out), "the snapshot completed before the kill: nothing to resume"
    stored = _stored_offset(tmp_path / "offsets.json")
    resume_key = int(decode_key(stored["incremental_snapshot_primary_key"], "incremental_snapshot_primary_key")[0])
    assert json.loads(stored["incremental_snapshot_collections"])[0]["incremental_snapshot_collections_id"] == \
        "public.t"

    run2 = HeadwaterRun(props, second / "out.jsonl").start()
    try:
        wait_for_run(lambda: _completed(run2.out), "the resumed snapshot to complete", run2, timeout=90)
        pg_db.execute("INSERT INTO t VALUES (%s, 1, 'after the restart')", (rows + 1,))
        emit_sentinel_and_wait(pg_db, run2)
    finally:
        run2.stop()
    second_records = drop_sentinels(run2.records())

    first_reads, second_reads = _reads(first_records), _reads(second_records)
    assert len(first_reads) >= 4 * chunk
    # the chunks the stored offset says are done are not read again; the first read after the
    # restart is the row after the stored key (the chunk in flight at the kill is read again)
    assert second_reads and min(second_reads) == resume_key + 1
    assert all(i > resume_key for i in second_reads)
    assert len(second_reads) == len(set(second_reads))
    assert set(first_reads) | set(second_reads) >= set(range(1, rows + 1)), "rows missing"
    assert _replay(first_records + second_records) == _table(pg_db)
    # nothing of the first run is taken up again but what followed the stored offset
    assert sum(1 for i in second_reads if i in set(first_reads)) <= len(first_reads) - resume_key


def test_blocking_snapshot_with_a_select_filter_then_streaming(pg_db, tmp_path):
    _setup(pg_db, 40)
    pg_db.execute("CREATE TABLE other (id integer PRIMARY KEY)")
    pg_db.execute("INSERT INTO other SELECT generate_series(1, 3)")
    props = _props(pg_db, tmp_path)
    run = HeadwaterRun(props, tmp_path / "out.jsonl").start()
    try:
        wait_slot_active(pg_db, props["slot.name"], run)
        pg_db.execute("UPDATE t SET note = 'before the signal' WHERE id = 1")
        _execute(pg_db, "sig-block", {
            "data-collections": ["public.t", "public.other"], "type": "blocking",
            "additional-conditions": [{"data-collection": "public.t",
                                       "filter": "SELECT * FROM public.t WHERE id % 5 = 0 ORDER BY v DESC"}]})
        # written while the snapshot may still run (none of them a row the filter selects):
        # streamed before or after it, nothing lost
        for i in range(41, 45):
            pg_db.execute("INSERT INTO t VALUES (%s, %s, 'during')", (i, i))
        pg_db.execute("UPDATE t SET note = 'during' WHERE id = 3")
        wait_for_run(lambda: any(n["aggregate_type"] == "Initial Snapshot" and n["type"] == "COMPLETED"
                                 for n in notifications(read_records(run.out), NOTIFICATIONS)),
                     "the blocking snapshot", run)
        pg_db.execute("UPDATE t SET v = 0 WHERE id = 2")
        emit_sentinel_and_wait(pg_db, run)
    finally:
        run.stop()
    records = drop_sentinels(run.records())
    values = [(r["topic"], payload(r["value"])) for r in records if r["value"] is not None
              and r["topic"] != NOTIFICATIONS]
    snapshot = [(t, v["after"]["id"], v["source"]["snapshot"]) for t, v in values if v["op"] == "r"]
    # tables in name order (Debezium sorts them); the filter's rows in its own order (v DESC);
    # the markers of an initial snapshot
    expected_t = [i for i in range(40, 0, -1) if i % 5 == 0]
    assert [(t, i) for t, i, _ in snapshot] == [*[("dbserver1.public.other", i) for i in (1, 2, 3)],
                                                *[(TOPIC, i) for i in expected_t]]
    assert [m for _, _, m in snapshot] == ["first", "true", "last_in_data_collection", "first_in_data_collection",
                                           *["true"] * (len(expected_t) - 2), "last"]
    scans = {n["additional_data"]["scanned_collection"]: n["additional_data"]["total_rows_scanned"]
             for n in notifications(records, NOTIFICATIONS) if n["type"] == "TABLE_SCAN_COMPLETED"}
    assert scans == {"public.other": "3", "public.t": str(len(expected_t))}
    signal_at = next(i for i, (t, v) in enumerate(values) if t.endswith("debezium_signal") and
                     v["after"]["id"] == "sig-block")
    first_read = next(i for i, (_, v) in enumerate(values) if v["op"] == "r")
    assert signal_at < first_read
    assert [(v["op"], v["after"]["id"]) for t, v in values if t == TOPIC and v["op"] != "r"][-1] == ("u", 2)
    # the snapshot's reads stand for the filtered table; the stream carries the rest
    assert _replay(records) == {i: row for i, row in _table(pg_db).items()
                                if i % 5 == 0 or i in {1, 2, 3, 41, 42, 43, 44}}


def test_headwater_signal_through_the_file_channel_reaches_a_running_capture(pg_db, tmp_path):
    _setup(pg_db, 300)
    signals = tmp_path / "signals.txt"
    props = _props(pg_db, tmp_path, **{"signal.enabled.channels": "source,file", "signal.file": str(signals),
                                       "signal.poll.interval.ms": "100", "incremental.snapshot.chunk.size": "100"})
    run = HeadwaterRun(props, tmp_path / "out.jsonl").start()
    try:
        wait_slot_active(pg_db, props["slot.name"], run)
        headwater = Path(sys.executable).parent / "headwater"
        sent = subprocess.run(
            [str(headwater), "signal", str(run.properties), "--channel", "file", "--type", "execute-snapshot",
             "--id", "sig-file-1", "--data", '{"data-collections": ["public.t"], "type": "incremental"}'],
            capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        wait_for_run(lambda: _completed(run.out), "the snapshot the file signal asked for", run)
        assert signals.read_text() == "", "the channel did not take the signal from the file"
        emit_sentinel_and_wait(pg_db, run)
    finally:
        run.stop()
    records = drop_sentinels(run.records())
    assert sorted(_reads(records)) == list(range(1, 301))
    ids = {(n["id"], n["type"]) for n in notifications(records, NOTIFICATIONS)
           if n["aggregate_type"] == "Incremental Snapshot"}
    assert {("sig-file-1", "STARTED"), ("sig-file-1", "COMPLETED")} <= ids
    # a file signal is not a signal-table row: only the watermark rows appear on the signal topic
    signal_rows = [payload(r["value"])["after"]["type"] for r in records
                   if r["topic"] == "dbserver1.public.debezium_signal" and r["value"] is not None]
    assert signal_rows and set(signal_rows) <= {"snapshot-window-open", "snapshot-window-close"}


@pytest.mark.parametrize("strategy", ["insert_delete"])
def test_insert_delete_watermarks_leave_no_rows_behind(pg_db, tmp_path, strategy):
    _setup(pg_db, 500)
    props = _props(pg_db, tmp_path, **{"incremental.snapshot.chunk.size": "100",
                                       "incremental.snapshot.watermarking.strategy": strategy})
    run = HeadwaterRun(props, tmp_path / "out.jsonl").start()
    try:
        wait_slot_active(pg_db, props["slot.name"], run)
        _execute(pg_db, "sig-id", {"data-collections": ["public.t"], "type": "incremental"})
        wait_for_run(lambda: _completed(run.out), "the snapshot", run)
        emit_sentinel_and_wait(pg_db, run)
    finally:
        run.stop()
    assert sorted(_reads(run.records())) == list(range(1, 501))
    assert pg_db.execute("SELECT id FROM debezium_signal") == [("sig-id",)]


def test_a_table_added_to_the_include_list_later_is_snapshotted_on_demand(pg_db, tmp_path):
    """Debezium's reason for ad hoc snapshots: the configuration now captures another table. The
    connector restarts with it in table.include.list (the filtered publication gains it) and an
    execute-snapshot signal reads its rows; its changes stream from then on."""
    _setup(pg_db, 0)
    pg_db.execute("CREATE TABLE later (id integer PRIMARY KEY, v integer NOT NULL)")
    pg_db.execute("INSERT INTO later SELECT g, g FROM generate_series(1, 300) g")
    props = _props(pg_db, tmp_path, **{"table.include.list": "public.t", "publication.autocreate.mode": "filtered",
                                       "slot.drop.on.stop": "false",
                                       "incremental.snapshot.chunk.size": "128"})
    first = HeadwaterRun(props, tmp_path / "first.jsonl").start()
    try:
        wait_slot_active(pg_db, props["slot.name"], first)
        pg_db.execute("INSERT INTO later VALUES (301, 301)")  # not captured yet
        pg_db.execute("INSERT INTO t VALUES (1, 1, 'one')")
        emit_sentinel_and_wait(pg_db, first)
    finally:
        first.stop()
    assert not [r for r in first.records() if r["topic"] == "dbserver1.public.later"]
    second = HeadwaterRun({**props, "table.include.list": "public.t,public.later"}, tmp_path / "second.jsonl").start()
    try:
        wait_slot_active(pg_db, props["slot.name"], second)
        _execute(pg_db, "add-later", {"data-collections": ["public.later"]})
        wait_for_run(lambda: _completed(second.out), "the snapshot of the added table", second)
        pg_db.execute("UPDATE later SET v = -1 WHERE id = 7")
        emit_sentinel_and_wait(pg_db, second)
    finally:
        second.stop()
    later = [payload(r["value"]) for r in drop_sentinels(second.records())
             if r["topic"] == "dbserver1.public.later" and r["value"] is not None]
    assert sorted(v["after"]["id"] for v in later if v["op"] == "r") == list(range(1, 302))
    assert {v["source"]["snapshot"] for v in later if v["op"] == "r"} == {"incremental"}
    assert [(v["op"], v["after"]["id"], v["after"]["v"]) for v in later if v["op"] != "r"] == [("u", 7, -1)]
