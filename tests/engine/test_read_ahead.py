"""The read-ahead queue between a connector's stream reader and the Spark source's batches."""

from __future__ import annotations

import queue

import pytest

from headwater.engine.read_ahead import UnitQueue


def test_the_read_ahead_queue_is_bounded_in_changes_whatever_the_unit_sizes():
    """A reader hands over units of a few to thousands of changes; the bound is the changes held."""
    units = UnitQueue(100)
    small = [object() for _ in range(10)]
    for unit in small:
        units.put(unit, "after", 10, 10, timeout=0)
    assert units.changes == 100
    with pytest.raises(queue.Full):
        units.put(small[0], "after", 10, 10, timeout=0.05)
    assert units.get(timeout=0) == (small[0], "after")  # first in, first out
    units.put(small[0], "again", 10, 10, timeout=0)  # room for 10 again
    for unit in [*small[1:], small[0]]:
        assert units.get(timeout=0)[0] is unit
    with pytest.raises(queue.Empty):
        units.get(timeout=0)
    assert units.empty()
    units.put("big", None, 500, 500, timeout=0)  # larger than the bound: it fits into an empty queue
    with pytest.raises(queue.Full):
        units.put(small[0], None, 10, 10, timeout=0)


def test_the_read_ahead_queue_is_bounded_in_bytes_too():
    wide = UnitQueue(1000, nbytes=1000)  # wide rows
    wide.put("row", None, 1, 400, timeout=0)
    wide.put("row", None, 1, 400, timeout=0)
    with pytest.raises(queue.Full):
        wide.put("row", None, 1, 400, timeout=0)
    assert (wide.changes, wide.nbytes) == (2, 800)
