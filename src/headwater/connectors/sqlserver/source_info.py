"""SQL Server's `source` block and the offsets the connector stores.

Debezium keeps one source partition per database (`{"server": prefix, "database": db}`); the
engine has one partition per connector (`{"server": prefix}`), so the offset holds one entry per
database under `databases`, each with Debezium's own field names (`commit_lsn`, `change_lsn`,
`event_serial_no`, `snapshot`, `snapshot_completed`, and the transaction-metadata keys).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from headwater import __version__
from headwater.connectors.sqlserver.lsn import ZERO, lsn_from_str, lsn_to_str
from headwater.engine.transaction import java_string_hash
from headwater.model.envelope import COMMON_SOURCE_FIELDS
from headwater.model.schema import OPTIONAL_INT64, OPTIONAL_STRING, STRING, struct

CONNECTOR_NAME = "sqlserver"
VERSION = __version__

SOURCE_SCHEMA = struct(
    "io.debezium.connector.sqlserver.Source",
    [
        *COMMON_SOURCE_FIELDS,
        ("schema", STRING),
        ("table", STRING),
        ("change_lsn", OPTIONAL_STRING),
        ("commit_lsn", OPTIONAL_STRING),
        ("event_serial_no", OPTIONAL_INT64),
    ],
    version=1,
)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def epoch_micros(instant: dt.datetime) -> int:
    """Microseconds since the epoch of an aware datetime (a naive one is taken as UTC)."""
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=dt.UTC)
    delta = instant - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def source_block(server: str, db: str, schema: str, table: str, *, ts_us: int, snapshot: str,
                 commit_lsn: bytes | None, change_lsn: bytes | None, event_serial_no: int | None) -> dict[str, Any]:
    return {
        "version": VERSION,
        "connector": CONNECTOR_NAME,
        "name": server,
        "ts_ms": ts_us // 1000,
        "snapshot": snapshot,
        "db": db,
        "sequence": None,
        "ts_us": ts_us,
        "ts_ns": ts_us * 1000,
        "schema": schema,
        "table": table,
        "change_lsn": lsn_to_str(change_lsn),
        "commit_lsn": lsn_to_str(commit_lsn),
        "event_serial_no": event_serial_no,
    }


@dataclass
class DatabaseOffset:
    """One database's position (Debezium's SqlServerOffsetContext). Streaming resumes at
    (commit_lsn, change_lsn) skipping the first `event_serial_no` events there; `snapshot` and
    not `snapshot_completed`: a snapshot was running; `snapshot_completed`: streaming starts after
    commit_lsn (fn_cdc_increment_lsn), not at it."""

    commit_lsn: bytes | None = None
    change_lsn: bytes | None = None
    event_serial_no: int = 0
    snapshot: bool = False
    snapshot_completed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)   # transaction metadata keys, kept as stored

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "commit_lsn": lsn_to_str(self.commit_lsn),
            "change_lsn": lsn_to_str(self.change_lsn),
            "event_serial_no": self.event_serial_no,
        }
        if self.snapshot:
            d["snapshot"] = True
        if self.snapshot_completed:
            d["snapshot_completed"] = True
        d.update(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DatabaseOffset:
        if not isinstance(d, dict):
            raise ValueError("a database's offset must be an object")
        serial = d.get("event_serial_no", 0)
        if serial is None:
            serial = 0
        if isinstance(serial, bool) or not isinstance(serial, int) or serial < 0:
            raise ValueError(f"event_serial_no must be a non-negative integer, got {serial!r}")
        known = {"commit_lsn", "change_lsn", "event_serial_no", "snapshot", "snapshot_completed"}
        return cls(commit_lsn=lsn_from_str(d.get("commit_lsn")), change_lsn=lsn_from_str(d.get("change_lsn")),
                   event_serial_no=serial, snapshot=bool(d.get("snapshot", False)),
                   snapshot_completed=bool(d.get("snapshot_completed", False)),
                   extra={k: v for k, v in d.items() if k not in known})

    def position(self) -> tuple[bytes, bytes, int]:
        return (self.commit_lsn or ZERO, self.change_lsn or ZERO, self.event_serial_no)

    def copy(self) -> DatabaseOffset:
        return DatabaseOffset(self.commit_lsn, self.change_lsn, self.event_serial_no, self.snapshot,
                              self.snapshot_completed, dict(self.extra))


def parse_offset(offset: dict[str, Any], databases: Sequence[str]) -> dict[str, DatabaseOffset]:
    """The per-database entries of a stored offset (ValueError when it is not one of ours)."""
    entries = offset.get("databases")
    if not isinstance(entries, dict):
        raise ValueError("the offset has no 'databases' object (it was not written by the SQL Server connector)")
    return {db: DatabaseOffset.from_dict(entries[db]) for db in databases if db in entries}


def make_offset(entries: dict[str, DatabaseOffset]) -> dict[str, Any]:
    return {"databases": {db: e.to_dict() for db, e in entries.items()}}


def offset_sort_key(offset: dict[str, Any], databases: Sequence[str]) -> tuple[str, ...]:
    """Per-database positions in `database.names` order (each database's stream only moves
    forward, so the vector's lexicographic order agrees with delivery order)."""
    entries = offset.get("databases") or {}
    key = []
    for db in databases:
        e = entries.get(db)
        if e is None:
            key.append("")
            continue
        parsed = DatabaseOffset.from_dict(e)
        commit, change, serial = parsed.position()
        key.append(f"{commit.hex()}{change.hex()}{serial:08x}")
    return tuple(key)


def partition_order(server: str, databases: Sequence[str]) -> list[str]:
    """The order Debezium visits the databases in — snapshots one after the other, then each
    streaming round: its partitions are a `HashSet<SqlServerPartition>` whose hash is
    `Objects.hash(topic.prefix, database)`, so the order is the set's bucket order (spread hash
    masked by the table size, insertion order within a bucket), not `database.names` order."""
    names = list(dict.fromkeys(databases))
    capacity = 16
    while len(names) > capacity * 0.75:
        capacity *= 2

    def bucket(db: str) -> int:
        h = (31 * (31 + java_string_hash(server)) + java_string_hash(db)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [db for _, db in sorted(((bucket(db), i), db) for i, db in enumerate(names))]

