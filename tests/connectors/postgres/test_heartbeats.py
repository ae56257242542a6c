"""Heartbeats keep WAL retention bounded while the captured tables are idle and other tables
churn, and `heartbeat.action.query` runs at each heartbeat (its errors do not stop capture)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from helpers.capture import RunningCapture, base_properties, emit_sentinel_and_wait, insert_lsn, wait_slot_active

HEARTBEAT_TOPIC = "__debezium-heartbeat.dbserver1"
MB = 1024 * 1024


def _retained(db, slot: str) -> int:
    """WAL the slot still holds back from the consumer's point of view (bytes)."""
    rows = db.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), confirmed_flush_lsn)::bigint "
                      "FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    assert rows, f"slot {slot} vanished"
    return int(rows[0][0])


def _stored_lsn(tmp: Path) -> int | None:
    """The highest WAL position in the connector's offset file (None before anything was stored)."""
    try:
        offsets = json.loads((tmp / "offsets.json").read_text())["offsets"]
    except (OSError, ValueError, KeyError):
        return None
    positions = [int(o["lsn"]) for o in offsets.values() if o.get("lsn") is not None]
    return max(positions) if positions else None


def _capture(db, tmp: Path, slot: str, **extra: str) -> RunningCapture:
    tmp.mkdir(parents=True, exist_ok=True)
    props = base_properties(db, tmp, slot, **{
        "snapshot.mode": "no_data", "table.include.list": "public.t", "publication.autocreate.mode": "filtered",
        "offset.flush.interval.ms": "200", "slot.drop.on.stop": "false", **extra})
    capture = RunningCapture(props, tmp / "out.jsonl").start()
    wait_slot_active(db, slot, capture)
    return capture


def test_heartbeats_keep_wal_retention_bounded(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_db.execute("CREATE TABLE churn (id bigserial PRIMARY KEY, v text)")
    on = _capture(pg_db, tmp_path / "on", "hw_hb_on", **{"heartbeat.interval.ms": "200"})
    off = _capture(pg_db, tmp_path / "off", "hw_hb_off")
    # a transaction on the captured table, open across the churn: acknowledging past its start
    # must not lose it (PostgreSQL resends every transaction committing after confirmed_flush_lsn)
    open_tx = pg_db.connect(autocommit=False)
    with open_tx.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (1, 'in flight')")
    try:
        start = insert_lsn(pg_db)
        t0 = time.monotonic()
        for _ in range(100):  # ~20 MB of WAL in 100 transactions on a table outside the publication
            pg_db.execute("INSERT INTO churn (v) SELECT repeat(md5(g::text), 6) FROM generate_series(1, 1000) g")
            time.sleep(0.08)
        churn = insert_lsn(pg_db) - start
        churn_s = time.monotonic() - t0
        assert churn > 15 * MB, churn
        deadline = time.monotonic() + 15
        time.sleep(0.4)  # two heartbeat intervals
        while (retained_on := _retained(pg_db, "hw_hb_on")) >= 2 * MB and time.monotonic() < deadline:
            time.sleep(0.2)
        retained_off = _retained(pg_db, "hw_hb_off")
        print(f"\nchurn {churn / MB:.1f} MB in {churn_s:.1f} s; retained with heartbeats "
              f"{retained_on / 1024:.0f} kB, without {retained_off / MB:.1f} MB")
        assert retained_on < 2 * MB, f"heartbeats on: slot holds {retained_on} bytes after {churn} of churn"
        # Without heartbeats the slot may move too: psycopg2 reports the server's keepalive position
        # as flushed once everything received was acknowledged. The reader stores that idle
        # position as an offset-only marker (its resume position, lsn_commit, not `lsn`, which stays
        # at the last message processed: none here), so that offset is not behind the slot either.
        time.sleep(0.5)  # offset.flush.interval.ms
        stored_on, stored_off = _stored_lsn(tmp_path / "on"), _stored_lsn(tmp_path / "off")
        assert stored_on is not None and stored_on >= start + churn - 2 * MB, (stored_on, start, churn)
        assert stored_off is None, stored_off
        off.stop()
        resume_off = max(int(o["lsn_commit"]) for o in
                         json.loads((tmp_path / "off" / "offsets.json").read_text())["offsets"].values())
        confirmed_off = int(pg_db.execute(
            "SELECT pg_wal_lsn_diff(confirmed_flush_lsn, '0/0')::bigint FROM pg_replication_slots "
            "WHERE slot_name = 'hw_hb_off'")[0][0])
        assert resume_off >= confirmed_off, (resume_off, confirmed_off)
        off.stop()
        on.stop()
    finally:
        off.stop_event.set()
        on.stop_event.set()
    # the open transaction commits while the connector is down: after a restart from the stored
    # (heartbeat) offset it is delivered
    open_tx.commit()
    again = _capture(pg_db, tmp_path / "on", "hw_hb_on", **{"heartbeat.interval.ms": "200"})
    try:
        emit_sentinel_and_wait(pg_db, again, quiet=0.5)
    finally:
        again.stop()
    records = again.records()
    data = [r for r in records if r["topic"] == "dbserver1.public.t"]
    assert [r["value"]["payload"]["after"] for r in data] == [{"id": 1, "v": "in flight"}]
    beats = [r for r in records if r["topic"] == HEARTBEAT_TOPIC]
    assert len(beats) >= 10
    assert beats[0]["key"]["payload"] == {"serverName": "dbserver1"}
    offsets = json.loads((tmp_path / "on" / "offsets.json").read_text())
    assert offsets, "no offset stored"


def test_heartbeat_action_query_runs_each_interval(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_db.execute("CREATE TABLE heartbeat_counter (id int PRIMARY KEY, n bigint NOT NULL)")
    pg_db.execute("INSERT INTO heartbeat_counter VALUES (1, 0)")
    capture = _capture(pg_db, tmp_path, "hw_hb_action", **{
        "heartbeat.interval.ms": "200", "slot.drop.on.stop": "true",
        "heartbeat.action.query": "UPDATE heartbeat_counter SET n = n + 1 WHERE id = 1"})
    try:
        time.sleep(2.5)
    finally:
        capture.stop()
    n = pg_db.execute("SELECT n FROM heartbeat_counter")[0][0]
    beats = [r for r in capture.records() if r["topic"] == HEARTBEAT_TOPIC]
    assert n >= 5 and len(beats) >= 5
    assert abs(n - len(beats)) <= 1  # the query runs once per heartbeat


def test_failing_heartbeat_action_query_does_not_stop_capture(pg_db, tmp_path, caplog):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    query = "UPDATE no_such_table SET n = n + 1"
    with caplog.at_level(logging.ERROR, logger="headwater"):
        capture = _capture(pg_db, tmp_path, "hw_hb_fail", **{
            "heartbeat.interval.ms": "200", "slot.drop.on.stop": "true", "heartbeat.action.query": query})
        try:
            time.sleep(0.6)
            pg_db.execute("INSERT INTO t VALUES (7, 'still captured')")
            emit_sentinel_and_wait(pg_db, capture, quiet=0.3)
        finally:
            capture.stop()
    data = [r for r in capture.records() if r["topic"] == "dbserver1.public.t"]
    assert [r["value"]["payload"]["after"]["id"] for r in data] == [7]
    assert any(query in rec.getMessage() and "no_such_table" in rec.getMessage() for rec in caplog.records)
