"""The queue between a connector's background stream reader and the Spark source's batches."""

from __future__ import annotations

import collections
import queue
import threading
from typing import Any

# at most this many bytes of units read ahead, whatever their count
READ_AHEAD_BYTES = 256 << 20


class UnitQueue:
    """A FIFO of (unit, offset after it) bounded by the changes it holds, not by the units: a
    reader hands over whatever its connection had buffered, from a few changes to a full unit, so
    a bound in units read ahead anywhere from a few thousand changes to the intended amount. A
    unit larger than the bound still fits into an empty queue."""

    def __init__(self, changes: int, nbytes: int = READ_AHEAD_BYTES) -> None:
        self.capacity = max(1, changes)
        self.byte_capacity = max(1, nbytes)
        self.changes = 0  # held now
        self.nbytes = 0
        self._items: collections.deque[tuple[Any, Any, int, int]] = collections.deque()
        self._changed = threading.Condition()

    def put(self, unit: Any, after: Any, size: int, nbytes: int, timeout: float) -> None:
        """Raises queue.Full when there is no room within `timeout` seconds."""

        def room() -> bool:
            return not self._items or (self.changes + size <= self.capacity
                                       and self.nbytes + nbytes <= self.byte_capacity)

        with self._changed:
            if not self._changed.wait_for(room, timeout):
                raise queue.Full
            self._items.append((unit, after, size, nbytes))
            self.changes += size
            self.nbytes += nbytes
            self._changed.notify_all()

    def get(self, timeout: float) -> tuple[Any, Any]:
        """Raises queue.Empty when nothing arrives within `timeout` seconds (0: do not wait)."""
        with self._changed:
            if not self._changed.wait_for(lambda: bool(self._items), timeout):
                raise queue.Empty
            unit, after, size, nbytes = self._items.popleft()
            self.changes -= size
            self.nbytes -= nbytes
            self._changed.notify_all()
            return unit, after

    def empty(self) -> bool:
        with self._changed:
            return not self._items
