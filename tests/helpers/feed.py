"""The Spark source's PostgreSQL feed driven directly (no Spark): a slot streaming from now, and
the batches a Trigger.AvailableNow run would plan."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from headwater.config import from_properties
from headwater.connectors.postgres.connector import PostgresConnector
from headwater.embedded.postgres import drop_replication_slot
from headwater.engine.feed import CaptureFeed
from helpers.capture import spark_properties


def pg_feed(properties: dict[str, str], **options: Any) -> CaptureFeed:
    """The Spark source's feed over a PostgreSQL connector of these properties."""
    return CaptureFeed(PostgresConnector(from_properties(properties).connector), **options)


@contextmanager
def streaming_feed(pg_db: Any, tmp_path: Path, **properties: str) -> Iterator[tuple[CaptureFeed, dict]]:
    """(feed, start offset) on a new slot that streams from now (snapshot.mode=no_data); the feed
    is closed and the slot dropped afterwards."""
    slot = f"hw_feed_{uuid.uuid4().hex[:10]}"
    props = spark_properties(pg_db, tmp_path, slot, **{"snapshot.mode": "no_data", **properties})
    feed = pg_feed(props)
    try:
        yield feed, feed.initial_offset()
    finally:
        feed.close()
        # the slot's walsender may still be exiting after the feed closed its connection
        conn = pg_db.connect()
        try:
            drop_replication_slot(conn, slot)
        finally:
            conn.close()


def available_now_batches(feed: CaptureFeed, start: dict, limit: int | None = None) -> Iterator[list[Any]]:
    """The work items of each batch of an AvailableNow run from `start` (everything committed now)."""
    feed.prepare_available_now()
    while (end := feed.latest(start, limit)) != start:
        yield feed.plan(start, end)
        start = end
