"""Snapshot options against real PostgreSQL: snapshot.locking.mode=shared with
snapshot.lock.timeout.ms, snapshot.delay.ms, snapshot.isolation.mode's transactions,
snapshot.locking.mode=custom refused. snapshot.select.statement.overrides and
snapshot.include.collection.list are compared with Debezium's events in the recorded scenarios
snapshot_select_overrides and snapshot_include_collections."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from headwater import config as cfg
from headwater.connectors.postgres import snapshot as snap
from headwater.connectors.postgres.connection import connect
from headwater.connectors.postgres.connector import PostgresConnector
from headwater.engine.connector import ConnectorError
from headwater.relational.table import TableId
from helpers.capture import RunningCapture, base_properties


def test_shared_lock_waits_at_most_the_lock_timeout(pg_db, tmp_path: Path) -> None:
    """(At the function level: another transaction's exclusive lock taken before the connector starts
    would already block the creation of the replication slot, in Debezium too.)"""
    pg_db.execute("CREATE TABLE public.locked (id int PRIMARY KEY)")
    blocker = pg_db.connect(autocommit=False)
    with blocker.cursor() as cur:
        cur.execute("LOCK TABLE public.locked IN ACCESS EXCLUSIVE MODE")
    conn = connect(cfg.from_properties(base_properties(pg_db, tmp_path, "unused")).connector)
    try:
        snap.begin_snapshot_transaction(conn, None)
        started = time.monotonic()
        with pytest.raises(ConnectorError) as info:
            snap.lock_tables(conn, [TableId(None, "public", "locked")], 300)
        assert 0.25 < time.monotonic() - started < 5
    finally:
        conn.close()
        blocker.rollback()
    assert str(info.value).startswith(
        "snapshot: could not lock table public.locked within snapshot.lock.timeout.ms=300 "
        "(snapshot.locking.mode=shared)")


def test_shared_lock_is_held_during_the_snapshot(pg_db, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.t (id int PRIMARY KEY)")
    pg_db.execute("INSERT INTO public.t SELECT generate_series(1, 3)")
    props = base_properties(pg_db, tmp_path, "hw_lock2", **{
        "snapshot.locking.mode": "shared", "snapshot.mode": "initial_only",
        "snapshot.select.statement.overrides": "public.t",
        "snapshot.select.statement.overrides.public.t": "SELECT id FROM public.t, pg_sleep(1)"})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    deadline = time.monotonic() + 30
    locks: list = []
    while not locks and time.monotonic() < deadline:
        locks = pg_db.execute(
            "SELECT l.mode FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            "WHERE a.application_name = 'headwater-snapshot' AND l.relation = 'public.t'::regclass")
        time.sleep(0.05)
    capture.thread.join(60)
    capture.stop()
    assert locks == [("AccessShareLock",)]
    assert len(capture.records()) == 3


def test_snapshot_delay(pg_db, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.t (id int PRIMARY KEY)")
    pg_db.execute("INSERT INTO public.t VALUES (1)")
    props = base_properties(pg_db, tmp_path, "hw_delay", **{"snapshot.delay.ms": "1500",
                                                            "snapshot.mode": "initial_only"})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    time.sleep(0.8)
    assert capture.records() == []
    assert pg_db.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'hw_delay'") == [(0,)]
    capture.thread.join(30)
    capture.stop()
    assert len(capture.records()) == 1


@pytest.mark.parametrize(("mode", "level"), [("serializable", "serializable"), ("repeatable_read", "repeatable read"),
                                             ("read_committed", "read committed"),
                                             ("read_uncommitted", "read uncommitted")])
def test_isolation_mode_transactions(pg_db, tmp_path: Path, mode: str, level: str) -> None:
    config = cfg.from_properties(base_properties(pg_db, tmp_path, "unused")).connector
    conn = connect(config)
    try:
        txid, lsn = snap.begin_snapshot_transaction(conn, None, mode)
        with conn.cursor() as cur:
            cur.execute("SHOW transaction_isolation")
            assert cur.fetchone()[0] == level
            cur.execute("SHOW transaction_read_only")
            assert cur.fetchone()[0] == "on"
        assert txid > 0 and lsn is not None and lsn > 0
    finally:
        conn.close()


def test_custom_locking_mode_is_refused(pg_db, tmp_path: Path) -> None:
    props = base_properties(pg_db, tmp_path, "unused", **{"snapshot.locking.mode": "custom",
                                                          "snapshot.locking.mode.custom.name": "mine"})
    with pytest.raises(ConnectorError, match=r"snapshot\.locking\.mode=custom loads a Java SnapshotLock"):
        PostgresConnector(cfg.from_properties(props).connector)
