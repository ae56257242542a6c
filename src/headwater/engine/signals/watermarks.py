"""Debezium's signal-table watermarks (`incremental.snapshot.watermarking.strategy`): a chunk's
window opens when the row `<chunk id>-open` (type `snapshot-window-open`) comes back through the
change stream and closes at the row `<chunk id>-close` (`snapshot-window-close`) — or, with
`insert_delete`, at the delete of the open row, so the signal table does not grow."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from headwater.engine.signals.connector import WindowMarks

if TYPE_CHECKING:
    from headwater.engine.signals.connector import IncrementalSource

WINDOW_OPEN = "snapshot-window-open"
WINDOW_CLOSE = "snapshot-window-close"


def instant(ns: int | None = None) -> str:
    """Java's Instant.toString of a time in nanoseconds: UTC, fractions in groups of three digits."""
    ns = time.time_ns() if ns is None else ns
    seconds, fraction = divmod(ns, 1_000_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    if fraction:
        digits = f"{fraction:09d}"
        while digits.endswith("000"):
            digits = digits[:-3]
        text += "." + digits
    return text + "Z"


class SignalTableMarks(WindowMarks):
    """The rows' data holds the times the window opened and closed, as Debezium writes them."""

    def __init__(self, source: IncrementalSource, strategy: str) -> None:
        self.source = source
        self.strategy = strategy
        self._opened = ""

    def open(self, chunk_id: str) -> None:
        self._opened = instant()
        self.source.insert_signal(f"{chunk_id}-open", WINDOW_OPEN, f'{{"openWindowTimestamp": "{self._opened}"}}')

    def close(self, chunk_id: str) -> None:
        if self.strategy == "insert_delete":
            self.source.delete_signal(f"{chunk_id}-open")
        else:
            self.source.insert_signal(f"{chunk_id}-close", WINDOW_CLOSE,
                                      f'{{"openWindowTimestamp": "{self._opened}", '
                                      f'"closeWindowTimestamp": "{instant()}"}}')
