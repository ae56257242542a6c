"""The Spark source's snapshot batches (engine/feed.py) over a plan whose first table has no key:
its chunks are block ranges, which do not move the snapshot's progress until the table's last
one. A batch must never end where it started, or its chunks are planned by no batch."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.engine.feed import PHASE_STREAM, CaptureFeed
from headwater.engine.snapshot_plan import SnapshotChunk
from headwater.relational.table import Column, Table, TableId
from helpers.memory_connector import MemoryConnector, MemoryDatabase


def _chunk(name: str, index: int, n: int, count: int, *, blocks: bool) -> SnapshotChunk:
    key = () if blocks else ("id",)
    table = Table(TableId(None, "public", name), (Column("id", 1, "int8"),), key)
    last = n == count - 1
    return SnapshotChunk(table, ("id",), f"public.{name}", index, n, index == 0, index == 1, n == 0, last, key,
                         None if blocks or n == 0 else (str(10 * n),),
                         None if blocks or last else (str(10 * (n + 1)),),
                         (n * 5, n * 5 + 5) if blocks else None, None)


# a table without a key in four block ranges, then one with a key in three key ranges
PLAN = [*(_chunk("heap", 0, n, 4, blocks=True) for n in range(4)),
        *(_chunk("keyed", 1, n, 3, blocks=False) for n in range(3))]


@pytest.fixture
def feed(monkeypatch: pytest.MonkeyPatch) -> CaptureFeed:
    monkeypatch.setattr("headwater.engine.feed.plan_snapshot", lambda *args: list(PLAN))
    db = MemoryDatabase()
    db.create("heap", "id")
    db.create("keyed", "id")
    return CaptureFeed(MemoryConnector(db), snapshot_chunk_rows=10)


def test_every_chunk_is_planned_once_when_the_first_table_has_no_key(feed: CaptureFeed) -> None:
    planned: list[Any] = []
    start = feed.initial_offset()
    for _ in range(len(PLAN) + 1):
        end = feed.latest(start, 10)  # one chunk a batch, but no cut inside the table without a key
        planned += [chunk for _, chunk in feed.plan(start, end)]
        assert end != start
        start = end
        if end["phase"] == PHASE_STREAM:
            break
    assert start["phase"] == PHASE_STREAM
    assert planned == PLAN
