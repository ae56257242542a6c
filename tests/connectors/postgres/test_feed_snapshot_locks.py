"""The Spark source's snapshot on PostgreSQL holds no table lock on the driver while executors read.

The driver keeps the snapshot's transaction open (its exported snapshot) for as long as the
snapshot's batches run; executors import that snapshot in transactions of their own. A lock the
driver kept on a table (from planning its chunks, or snapshot.locking.mode=shared) would make a
TRUNCATE or ALTER of that table wait for the whole snapshot, and every executor reading the table
after it would queue behind the waiting TRUNCATE: a wait across connections PostgreSQL cannot see
as a deadlock, so the query would hang (seen in tests/spark/test_delivery_guarantees.py, whose
workload truncates now and then)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from headwater.engine.feed import PHASE_STREAM, CaptureFeed
from helpers.capture import spark_properties
from helpers.feed import pg_feed


@pytest.fixture
def two_tables(pg_db: Any) -> Any:
    for name in ("a", "b"):
        pg_db.execute(f"CREATE TABLE public.{name} (id int PRIMARY KEY, val text)")
        pg_db.execute(f"INSERT INTO public.{name} SELECT g, 'v' || g FROM generate_series(1, 25) g")
    return pg_db


def _feed(pg_db: Any, tmp_path: Path, **extra: str) -> CaptureFeed:
    slot = f"hw_lock_{uuid.uuid4().hex[:10]}"
    return pg_feed(spark_properties(pg_db, tmp_path, slot, **extra), snapshot_chunk_rows=10)


def _driver_locks(pg_db: Any) -> list[str]:
    """The user tables the driver's sessions hold locks on."""
    rows = pg_db.execute(
        "SELECT DISTINCT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "JOIN pg_stat_activity a ON a.pid = l.pid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND a.datname = current_database() AND a.application_name LIKE 'headwater%' "
        "ORDER BY 1")
    return [r[0] for r in rows or []]


def _read(feed: CaptureFeed, work: list[Any], seconds: float = 30) -> list[Any]:
    """The executors' side: the work's records, each item read on a connection of its own; an
    AssertionError when the read does not finish in time (instead of hanging the test)."""
    decoder = feed.decoder()
    out: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            for item in work:
                out.extend(p.record for p in decoder.decode(item))
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "an executor's read of the snapshot is blocked"
    if failure:
        raise failure[0]
    return out


@pytest.mark.parametrize("locking", ["none", "shared"])
def test_a_truncate_during_the_snapshot_batches_does_not_hang_them(two_tables: Any, tmp_path: Path,
                                                                   locking: str) -> None:
    feed = _feed(two_tables, tmp_path, **{"snapshot.locking.mode": locking})
    try:
        start = feed.initial_offset()
        end = feed.latest(start, 10)  # one chunk a batch: a's first chunk, b read in later batches
        first = _read(feed, feed.plan(start, end))
        assert sorted(r.value["after"]["id"] for r in first) == list(range(1, 11))
        assert _driver_locks(two_tables) == [], "the driver holds table locks while executors read"
        # an application truncates b (not read yet) while the snapshot's batches go on
        conn = psycopg2.connect(two_tables.dsn)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SET lock_timeout = '10s'")
                cur.execute("TRUNCATE public.b")
        finally:
            conn.close()
        records, start = list(first), end
        for _ in range(20):
            end = feed.latest(start, 10)
            records += _read(feed, feed.plan(start, end))
            start = end
            if end["phase"] == PHASE_STREAM:
                break
        assert start["phase"] == PHASE_STREAM
        # a is read whole; b, truncated before it was read, is empty to the snapshot (TRUNCATE is
        # not MVCC-safe): the TRUNCATE that streaming sends next ends in the same state
        by_table: dict[str, list[int]] = {}
        for r in records:
            by_table.setdefault(r.topic.rsplit(".", 1)[1], []).append(r.value["after"]["id"])
        assert sorted(by_table["a"]) == list(range(1, 26))
        assert by_table.get("b", []) == []
    finally:
        feed.close()
