"""Debezium's "Initial Snapshot" notifications around a snapshot read table by table (the initial
snapshot, and blocking snapshots, which Debezium reports the same way): STARTED, IN_PROGRESS
before each table, TABLE_SCAN_COMPLETED after it with its row count, COMPLETED or ABORTED.

They are handed on as they happen, past the snapshot's one-record look-ahead (the record held
back to be marked `last`), as Debezium's are: a table's last row comes after its
TABLE_SCAN_COMPLETED and the next table's IN_PROGRESS."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Offset = dict[str, Any]


class SnapshotNotifications:
    def __init__(self, notifications: Any, snapshot_tables: Sequence[str], captured_tables: Sequence[str],
                 offset: Offset) -> None:
        self.notifications = notifications
        self.snapshot_tables = list(snapshot_tables)
        self.captured_tables = list(captured_tables)
        self.offset = offset
        self.current: str | None = None
        self.rows = 0

    def started(self) -> None:
        if self.notifications is not None:
            self.notifications.initial_started(self.offset)

    def table(self, collection: str) -> None:
        """The snapshot moves to `collection` (the previous table is done)."""
        if collection == self.current:
            return
        self._finish_table()
        self.current = collection
        self.rows = 0
        if self.notifications is not None:
            self.notifications.initial_table_in_progress(collection, self.snapshot_tables, self.offset)

    def row(self) -> None:
        self.rows += 1

    def finish_table(self) -> None:
        """The table being read is done (before the snapshot's held-back last record goes)."""
        self._finish_table()

    def _finish_table(self) -> None:
        if self.current is not None and self.notifications is not None:
            self.notifications.initial_table_completed(self.current, self.rows, self.captured_tables, self.offset)
        self.current = None

    def completed(self) -> None:
        """After the snapshot's last record."""
        self._finish_table()
        if self.notifications is not None:
            self.notifications.initial_completed(self.offset)

    def aborted(self) -> None:
        if self.notifications is not None:
            self.notifications.initial_aborted(self.offset)
