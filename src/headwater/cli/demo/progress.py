"""What the demo has captured so far: change events per topic and op, counted by the back-end's
thread and read by the display."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Iterable

OPS = ("r", "c", "u", "d")  # the ops the view shows a column for (the totals count every op)
RATE_WINDOW_S = 5.0


class CaptureProgress:
    """Counts per topic and op, the total, when the last event came and whether the initial
    snapshot's ``last`` record has been seen. Thread-safe: one thread adds, another reads."""

    def __init__(self, topics: Iterable[str]) -> None:
        self._lock = threading.Lock()
        self._ops: dict[str, Counter[str]] = {topic: Counter() for topic in topics}
        self._total = 0
        self._last_event_at = time.monotonic()
        self._samples: deque[tuple[float, int]] = deque()
        self.snapshot_done = threading.Event()

    def add(self, counts: Iterable[tuple[str, str, int]], *, snapshot_last: bool = False) -> None:
        """Count ``(topic, op, events)``; ``snapshot_last``: the batch held the snapshot's last record."""
        with self._lock:
            added = 0
            for topic, op, n in counts:
                self._ops.setdefault(topic, Counter())[op] += n
                added += n
            self._total += added
            if added:
                self._last_event_at = time.monotonic()
        if snapshot_last:
            self.snapshot_done.set()

    def counts(self) -> tuple[dict[str, Counter[str]], int]:
        """A copy of the counts per topic, and the total."""
        with self._lock:
            return {topic: Counter(c) for topic, c in self._ops.items()}, self._total

    def quiet_for(self) -> float:
        """Seconds since the last event was counted."""
        with self._lock:
            return time.monotonic() - self._last_event_at

    def events_per_second(self) -> float:
        """Events per second over the last few seconds (call regularly, from the display only)."""
        _, total = self.counts()
        now = time.monotonic()
        self._samples.append((now, total))
        while len(self._samples) > 2 and now - self._samples[0][0] > RATE_WINDOW_S:
            self._samples.popleft()
        t0, n0 = self._samples[0]
        return (total - n0) / (now - t0) if now - t0 > 0.5 else 0.0
