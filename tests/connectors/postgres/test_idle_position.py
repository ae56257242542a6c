"""Without heartbeats, idle churn on tables outside the publication must not leave the stored offset
behind the slot: psycopg2 reports the server's keepalive position as flushed on its own once
everything received was acknowledged, so the slot's confirmed_flush_lsn moves past the last stored
offset, and a restart would be refused as for a recreated slot (PG-243). The reader records that
idle position as an offset-only marker, stored as soon as nothing else awaits storing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from helpers.capture import (
    HeadwaterRun,
    RunningCapture,
    base_properties,
    drop_sentinels,
    emit_sentinel_and_wait,
    insert_lsn,
    wait_slot_active,
)

TOPIC = "dbserver1.public.t"


def _confirmed(db, slot: str) -> int:
    return int(db.execute("SELECT pg_wal_lsn_diff(confirmed_flush_lsn, '0/0')::bigint FROM pg_replication_slots "
                          "WHERE slot_name = %s", (slot,))[0][0])


def _offset(tmp: Path) -> dict | None:
    try:
        offsets = json.loads((tmp / "offsets.json").read_text())["offsets"]
    except (OSError, ValueError, KeyError):
        return None
    assert len(offsets) <= 1, offsets
    return next(iter(offsets.values()), None)


def _stored(tmp: Path) -> int | None:
    """lsn_commit of the stored offset (where the next run resumes)."""
    offset = _offset(tmp)
    return None if offset is None or offset.get("lsn_commit") is None else int(offset["lsn_commit"])


def _props(db, tmp: Path, slot: str, **extra: str) -> dict[str, str]:
    return base_properties(db, tmp, slot, **{
        "snapshot.mode": "no_data", "table.include.list": "public.t", "publication.autocreate.mode": "filtered",
        "slot.drop.on.stop": "false", "status.update.interval.ms": "1000", **extra})


def _churn(db, seconds: float) -> tuple[int, int]:
    """Transactions on a table outside the publication for `seconds`, committed one by one (the
    server sends nothing for them: PostgreSQL 15+ skips empty transactions; older versions send
    BEGIN/COMMIT, which move the position the same way). Returns the WAL range written."""
    start = insert_lsn(db)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        db.execute("INSERT INTO churn (v) SELECT md5(g::text) FROM generate_series(1, 200) g")
        time.sleep(0.05)
    return start, insert_lsn(db)


def _wait_row(capture, row_id: int, timeout: float = 30) -> None:
    """Until the change of row `row_id` is written. (Not a sentinel message: the stored offset
    acknowledges a transaction's end only, and psycopg2 forwards its acknowledgement to keepalive
    positions only once the last message it received is acknowledged — a commit, here.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(v.get("id") == row_id for v in _values(capture.records())):
            return
        assert capture.alive(), "the capture ended"
        time.sleep(0.05)
    raise AssertionError(f"row {row_id} never arrived")


def _values(records: list[dict]) -> list[dict]:
    return [r["value"]["payload"]["after"] for r in drop_sentinels(records) if r["topic"] == TOPIC]


def _setup(db) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("CREATE TABLE churn (id bigserial PRIMARY KEY, v text)")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_clean_stop_after_idle_churn_resumes(pg_db, tmp_path, workers):
    _setup(pg_db)
    slot = f"hw_idle_stop_{workers}"
    props = _props(pg_db, tmp_path, slot, **{"encoding.workers": workers})
    first = RunningCapture(props, tmp_path / "out1.jsonl").start()
    try:
        wait_slot_active(pg_db, slot, first)
        pg_db.execute("INSERT INTO t VALUES (1, 'before')")
        _wait_row(first, 1)
        churn_start, _ = _churn(pg_db, 3.0)
        # psycopg2 acknowledges a keepalive position at its next status update (every second)
        deadline = time.monotonic() + 15
        while _confirmed(pg_db, slot) <= churn_start and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)
    finally:
        first.stop()
    confirmed = _confirmed(pg_db, slot)
    # the scenario happened: the slot moved past the last captured change during the churn
    assert confirmed > churn_start, (confirmed, churn_start)
    stored = _stored(tmp_path)
    assert stored is not None and stored >= confirmed, (stored, confirmed)
    # only the resume position moved: the rest is the offset after row 1's COMMIT (its LSN and
    # transaction, which a blocking snapshot's records would carry)
    offset = _offset(tmp_path)
    row = next(r for r in first.records() if r["topic"] == TOPIC)
    assert offset is not None and offset["txId"] == row["value"]["payload"]["source"]["txId"], offset
    assert offset["lsn"] == offset["last_commit_lsn"] < offset["lsn_commit"], offset

    pg_db.execute("INSERT INTO t VALUES (2, 'while down')")
    again = RunningCapture(props, tmp_path / "out2.jsonl").start()
    try:
        wait_slot_active(pg_db, slot, again)  # a refused start ends the engine: its error is raised here
        pg_db.execute("INSERT INTO t VALUES (3, 'after')")
        emit_sentinel_and_wait(pg_db, again, quiet=0.3)
    finally:
        again.stop()
    assert _values(first.records()) == [{"id": 1, "v": "before"}]
    assert _values(again.records()) == [{"id": 2, "v": "while down"}, {"id": 3, "v": "after"}]


def _headwater(props: dict[str, str], workdir: Path) -> HeadwaterRun:
    workdir.mkdir()
    return HeadwaterRun(props, workdir / "out.jsonl").start()


def test_kill_after_idle_churn_resumes(pg_db, tmp_path):
    """SIGKILL once the churn is over: the idle position was stored as soon as it was reached,
    not at offset.flush.interval.ms (a minute here), so the slot is not ahead of the stored offset.
    The killed run resumes from a stored offset, and receives no captured change before the churn:
    psycopg2 forwards from the start of a run (nothing received yet), and nothing but idle
    positions awaits storing."""
    _setup(pg_db)
    slot = "hw_idle_kill"
    props = _props(pg_db, tmp_path, slot, **{"offset.flush.interval.ms": "60000"})
    first = _headwater(props, tmp_path / "run1")
    try:
        wait_slot_active(pg_db, slot, first)
        pg_db.execute("INSERT INTO t VALUES (1, 'before')")
        _wait_row(first, 1)
    finally:
        first.stop()  # SIGTERM: a clean stop stores the offset
    assert _stored(tmp_path) is not None

    run = _headwater(props, tmp_path / "run2")
    try:
        wait_slot_active(pg_db, slot, run)
        churn_start, _ = _churn(pg_db, 3.0)
        deadline = time.monotonic() + 15
        while (_confirmed(pg_db, slot) <= churn_start or (_stored(tmp_path) or 0) < _confirmed(pg_db, slot)) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        confirmed = _confirmed(pg_db, slot)
        assert confirmed > churn_start, "the slot did not move during the churn"
        assert (_stored(tmp_path) or 0) >= confirmed, (_stored(tmp_path), confirmed, run.log_tail())
    finally:
        assert run.proc is not None
        run.proc.kill()
        run.proc.wait()
    # the killed walsender moved the slot no further than the last store
    assert (_stored(tmp_path) or 0) >= _confirmed(pg_db, slot)

    pg_db.execute("INSERT INTO t VALUES (2, 'while down')")
    again = _headwater(props, tmp_path / "run3")
    try:
        wait_slot_active(pg_db, slot, again)  # a refused start ends the run: the wait fails with its log
        pg_db.execute("INSERT INTO t VALUES (3, 'after')")
        emit_sentinel_and_wait(pg_db, again, quiet=0.3)
    finally:
        again.stop()
    assert _values(first.records()) == [{"id": 1, "v": "before"}]
    assert _values(run.records()) == []
    assert _values(again.records()) == [{"id": 2, "v": "while down"}, {"id": 3, "v": "after"}]
