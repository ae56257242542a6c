"""The bounded queue between the connector's reader thread and the consumer (Debezium's
ChangeEventQueue): back-pressure by count and, optionally, by approximate bytes."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from headwater.engine.records import SourceRecord


class QueueClosed(Exception):
    """The producer side failed or was stopped; carries the producer's error as __cause__."""


def weight(item: Any) -> int:
    """How many records an item stands for (a pending batch of a worker counts its messages)."""
    return getattr(item, "weight", 1)


def approximate_size(item: Any) -> int:
    """A cheap estimate of a record's memory, for `max.queue.size.in.bytes`."""
    if not isinstance(item, SourceRecord):
        return 64
    return 200 + _size(item.key) + _size(item.value)


def _size(value: Any) -> int:
    if value is None:
        return 8
    if isinstance(value, (str, bytes)):
        return 50 + len(value)
    if isinstance(value, dict):
        return 64 + sum(24 + _size(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return 56 + sum(8 + _size(v) for v in value)
    return 32


class ChangeEventQueue:
    def __init__(self, max_size: int = 8192, max_bytes: int = 0) -> None:
        if max_size < 1:
            raise ValueError("max.queue.size must be at least 1")
        self.max_size = max_size
        self.max_bytes = max_bytes
        self._items: deque[Any] = deque()
        self._count = 0       # sum of item weights, bounded by max_size
        self._bytes = 0
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._error: BaseException | None = None
        self._closed = False

    def put_many(self, items: Iterable[Any]) -> None:
        """Enqueue items, blocking while the queue is full (back-pressure on the reader)."""
        sizing = self.max_bytes > 0
        with self._lock:
            for item in items:
                size = approximate_size(item) if sizing else 0
                w = weight(item)
                while not self._closed and self._count > 0 and (
                    self._count + w > self.max_size
                    or (sizing and self._bytes > 0 and self._bytes + size > self.max_bytes)
                ):
                    self._not_full.wait(0.5)
                if self._closed:
                    raise QueueClosed("the queue was closed")
                self._items.append(item)
                self._count += w
                self._bytes += size
            self._not_empty.notify()

    def poll(self, max_batch: int, timeout: float) -> list[Any]:
        """Up to `max_batch` items; waits up to `timeout` seconds for the first one. Raises
        QueueClosed (with the producer's error as cause) once the queue is drained and closed."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not self._items:
                if self._closed:
                    err = QueueClosed("the connector stopped")
                    if self._error is not None:
                        raise err from self._error
                    raise err
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._not_empty.wait(remaining)
            n = min(max_batch, len(self._items))
            popleft = self._items.popleft
            batch = [popleft() for _ in range(n)]
            self._count -= sum(weight(i) for i in batch)
            if self.max_bytes > 0:
                self._bytes -= sum(approximate_size(i) for i in batch)
            self._not_full.notify_all()
            return batch

    def close(self, error: BaseException | None = None) -> None:
        """No more items will come. Items already queued can still be polled."""
        with self._lock:
            self._closed = True
            if error is not None and self._error is None:
                self._error = error
            self._not_empty.notify_all()
            self._not_full.notify_all()

    @property
    def error(self) -> BaseException | None:
        return self._error

    def __len__(self) -> int:
        return len(self._items)
