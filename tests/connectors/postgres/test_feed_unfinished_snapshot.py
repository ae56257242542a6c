"""The Spark source's feed restarted inside its initial snapshot: the slot is kept when it can be,
and a slot that vanished (or moved) is an error unless the snapshot mode allows a new one."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from headwater.engine.connector import ConnectorError
from headwater.engine.feed import PHASE_SNAPSHOT, CaptureFeed
from helpers.capture import spark_properties
from helpers.feed import pg_feed


def _feed(pg_db, tmp_path: Path, slot: str, **extra: str) -> CaptureFeed:
    props = spark_properties(pg_db, tmp_path, slot, **{"slot.drop.on.stop": "false", **extra})
    return pg_feed(props, snapshot_chunk_rows=10)


def _snapshot_started(pg_db, tmp_path: Path, slot: str) -> dict:
    """A driver that planned the snapshot and died: its offset, the slot left behind."""
    feed = _feed(pg_db, tmp_path, slot)
    try:
        start = feed.initial_offset()
    finally:
        feed.close()
    assert start["phase"] == PHASE_SNAPSHOT
    return start


@pytest.fixture
def items(pg_db):
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, val text)")
    pg_db.execute("INSERT INTO public.items SELECT g, 'v' || g FROM generate_series(1, 25) g")
    return pg_db


def test_a_restart_inside_the_snapshot_keeps_the_slot(items, tmp_path):
    slot = f"hw_feed_{uuid.uuid4().hex[:10]}"
    start = _snapshot_started(items, tmp_path, slot)
    created = items.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    items.execute("DELETE FROM public.items WHERE id = 1")
    feed = _feed(items, tmp_path, slot)
    try:
        end = feed.latest(start, None)
        work = feed.plan(start, end)
        # the records say where the new snapshot was read (as Debezium); the stream starts at the slot
        assert len(work) == 3 and all(w.lsn > start["lsn_commit"] for w in work)
        assert feed._point is not None and feed._point.offset["lsn_commit"] == start["lsn_commit"]
    finally:
        feed.close()
    kept = items.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    assert kept == created, "the slot was replaced"


@pytest.mark.parametrize("how", ["dropped", "recreated"])
def test_a_vanished_slot_inside_the_snapshot_is_an_error_unless_when_needed(items, tmp_path, how):
    slot = f"hw_feed_{uuid.uuid4().hex[:10]}"
    start = _snapshot_started(items, tmp_path, slot)
    items.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    items.execute("INSERT INTO public.items VALUES (100, 'lost')")
    if how == "recreated":
        items.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    feed = _feed(items, tmp_path, slot)
    try:
        with pytest.raises(ConnectorError, match=rf"replication slot '{slot}' .*"
                           rf"{'does not exist' if how == 'dropped' else 'has moved on'}.*unfinished snapshot.*"
                           "snapshot.mode=when_needed"):
            feed.plan(start, feed.latest(start, None))
    finally:
        feed.close()
    feed = _feed(items, tmp_path, slot, **{"snapshot.mode": "when_needed"})
    try:
        end = feed.latest(start, None)
        # the old snapshot cannot be resumed: its batch reads nothing, and the stream, finding the
        # position gone, moves to a whole new snapshot (not one read twice: at the replay, then again)
        assert feed.plan(start, end) == []
        moved = feed.latest(end, None)
        assert moved["phase"] == PHASE_SNAPSHOT and feed.plan(end, moved) == []
        work = feed.plan(moved, feed.latest(moved, None))
        assert work and work[0].lsn > start["lsn_commit"]  # a new slot's consistent point
    finally:
        feed.close()


def test_asked_twice_for_the_initial_offset_the_feed_reads_the_slots_own_snapshot(items, tmp_path, caplog):
    """Spark calls initialOffset twice on one reader before batch 0 (for its start, then to plan
    it). The second call must not take the new slot for an old one and export another snapshot:
    the records must carry the slot's consistent point, and the stream start there."""
    slot = f"hw_feed_{uuid.uuid4().hex[:10]}"
    feed = _feed(items, tmp_path, slot)
    try:
        first = feed.initial_offset()
        items.execute("INSERT INTO public.items VALUES (100, 'after the slot')")
        with caplog.at_level("WARNING"):
            second = feed.initial_offset()
        assert second == first
        assert not [r for r in caplog.records if "exists" in r.getMessage()]
        work = feed.plan(second, feed.latest(second, None))
        assert {w.lsn for w in work} == {first["lsn_commit"]}
        decoder = feed.decoder()
        ids = [row["id"] for w in work for typed in decoder.decode_typed_rows(w) for row in typed.rows.to_pylist()]
        assert sorted(ids) == list(range(1, 26))  # the slot's snapshot: without the row inserted after it
    finally:
        feed.close()
