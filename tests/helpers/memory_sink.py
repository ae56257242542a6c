"""A sink that keeps the records the engine hands it, for tests that run the engine on a thread."""

from __future__ import annotations

import threading
from typing import Any

from headwater.engine.records import SourceRecord


class RecordingSink:
    """Keeps every record written, in order (`write` also serves as a source's emit callback, keeping what
    it emits); `wait_for` lets the test thread wait for them."""

    def __init__(self) -> None:
        self.records: list[SourceRecord] = []
        self.changed = threading.Condition()

    def write(self, records: list[SourceRecord]) -> None:
        with self.changed:
            self.records.extend(records)
            self.changed.notify_all()

    def write_encoded(self, batch: Any) -> None:
        raise AssertionError("no encoded batches here")

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def wait_for(self, n: int, timeout: float) -> bool:
        """Until `n` records have come, at most `timeout` seconds; whether they did."""
        with self.changed:
            return self.changed.wait_for(lambda: len(self.records) >= n, timeout)
