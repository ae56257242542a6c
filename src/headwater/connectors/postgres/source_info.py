"""PostgreSQL's `source` block, message-event schemas and the offsets it stores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater import __version__
from headwater.engine.registry import DerivedRowField
from headwater.engine.transaction import load_open_transaction, store_open_transaction
from headwater.model.envelope import COMMON_SOURCE_FIELDS, TRANSACTION_BLOCK_SCHEMA
from headwater.model.schema import OPTIONAL_BYTES, OPTIONAL_INT64, OPTIONAL_STRING, STRING, struct

CONNECTOR_NAME = "postgresql"
VERSION = __version__

SOURCE_SCHEMA = struct(
    "io.debezium.connector.postgresql.Source",
    [
        *COMMON_SOURCE_FIELDS,
        ("schema", STRING),
        ("table", STRING),
        ("txId", OPTIONAL_INT64),
        ("lsn", OPTIONAL_INT64),
        ("xmin", OPTIONAL_INT64),
        ("origin", OPTIONAL_STRING),
        ("origin_lsn", OPTIONAL_INT64),
    ],
    version=1,
)

MESSAGE_KEY_SCHEMA = struct("io.debezium.connector.postgresql.MessageKey", [("prefix", OPTIONAL_STRING)],
                            version=1)
MESSAGE_BLOCK_SCHEMA = struct("io.debezium.connector.postgresql.Message",
                              [("prefix", OPTIONAL_STRING), ("content", OPTIONAL_BYTES)], version=1)
MESSAGE_VALUE_SCHEMA = struct(
    "io.debezium.connector.postgresql.MessageValue",
    [
        ("op", STRING),
        ("ts_ms", OPTIONAL_INT64),
        ("source", SOURCE_SCHEMA),
        ("transaction", TRANSACTION_BLOCK_SCHEMA),
        ("message", MESSAGE_BLOCK_SCHEMA),
    ],
    version=1,
)

# The data collection Debezium counts logical decoding messages under in transaction END events:
# the default toString() of a Java object, whose hash part varies per run (normalized away).
MESSAGE_COLLECTION = "io.debezium.connector.postgresql.LogicalDecodingMessageMonitor$LogicalDecodingMessageId@1"


def position_key(major: int, minor: int, sub: int = 0) -> str:
    """A record's position (see headwater.engine.feed): 16 + 16 + 8 hex digits. Streamed: the
    commit LSN of its transaction (of itself when not transactional), its message's number in
    the transaction, its number among the message's records. Snapshot: 0, the table's and the
    chunk's numbers, the row's number in the chunk — below every streamed position."""
    return f"{major:016X}{minor:016X}{sub:08X}"


# Typed rows (headwater.engine.typed_rows) of streamed changes carry the LSN
# (`__hw_source_lsn`) and source.sequence's first element in a column of the connector's own;
# the sink derives `sequence` from the two as SEQUENCE says (a text column per row cost the
# change log more than two numbers)
SOURCE_LSN_COLUMN = "__hw_source_lsn"
LAST_COMMIT_LSN = "__hw_pg_last_commit_lsn"


def _quoted_sql(column: str) -> str:
    return f"coalesce(concat('\"', CAST(`{column}` AS STRING), '\"'), 'null')"


SEQUENCE = DerivedRowField("sequence", ((SOURCE_LSN_COLUMN, "BIGINT"), (LAST_COMMIT_LSN, "BIGINT")),
                           f"concat('[', {_quoted_sql(LAST_COMMIT_LSN)}, ',', {_quoted_sql(SOURCE_LSN_COLUMN)}, ']')")


def sequence(last_commit_lsn: int | None, lsn: int | None) -> str:
    """Debezium's `source.sequence`: a JSON array of two LSN strings, [last commit, current]."""
    a = "null" if last_commit_lsn is None else f'"{last_commit_lsn}"'
    b = "null" if lsn is None else f'"{lsn}"'
    return f"[{a},{b}]"


def source_block(server: str, db: str, *, ts_us: int, snapshot: str, schema: str, table: str,
                 tx_id: int | None, lsn: int | None, last_commit_lsn: int | None,
                 xmin: int | None = None) -> dict[str, Any]:
    return {
        "version": VERSION,
        "connector": CONNECTOR_NAME,
        "name": server,
        "ts_ms": ts_us // 1000,
        "snapshot": snapshot,
        "db": db,
        "sequence": sequence(last_commit_lsn, lsn),
        "ts_us": ts_us,
        "ts_ns": ts_us * 1000,
        "schema": schema,
        "table": table,
        "txId": tx_id,
        "lsn": lsn,
        "xmin": xmin,
        "origin": None,
        "origin_lsn": None,
    }


@dataclass
class PgOffset:
    """What Headwater stores for PostgreSQL (JSON-serializable via `to_dict`).

    Restart rule: stream from `lsn_commit` (every transaction whose commit record lies before it
    is done); if `tx_final_lsn` is set, the transaction committing there was partly written and
    its first `tx_msgs` data messages are skipped when it is received again; non-transactional
    messages at or before `message_lsn` are skipped."""

    lsn_commit: int | None = None
    tx_final_lsn: int | None = None
    tx_msgs: int = 0
    lsn: int | None = None
    tx_id: int | None = None
    ts_usec: int | None = None
    last_commit_lsn: int | None = None
    message_lsn: int | None = None
    snapshot: bool = False
    snapshot_completed: bool = False
    # inside a transaction, with provide.transaction.metadata: its id and events per collection so
    # far (Debezium's TransactionContext keys, which the builder writes into its offsets)
    open_transaction: tuple[Any, dict[str, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "lsn_commit": self.lsn_commit,
            "lsn": self.lsn,
            "txId": self.tx_id,
            "ts_usec": self.ts_usec,
        }
        if self.tx_final_lsn is not None:
            d["tx_final_lsn"] = self.tx_final_lsn
            d["tx_msgs"] = self.tx_msgs
        if self.last_commit_lsn is not None:
            d["last_commit_lsn"] = self.last_commit_lsn
        if self.message_lsn is not None:
            d["message_lsn"] = self.message_lsn
        if self.snapshot:
            d["snapshot"] = True
        if self.snapshot_completed:
            d["snapshot_completed"] = True
        if self.open_transaction is not None:
            store_open_transaction(d, *self.open_transaction)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PgOffset:
        def lsn(key: str) -> int | None:
            v = d.get(key)
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"offset field {key!r} must be a non-negative integer LSN, got {v!r}")
            return v

        if "lsn_commit" not in d:
            raise ValueError("offset has no 'lsn_commit'")
        return cls(
            lsn_commit=lsn("lsn_commit"),
            tx_final_lsn=lsn("tx_final_lsn"),
            tx_msgs=int(d.get("tx_msgs", 0)),
            lsn=lsn("lsn"),
            tx_id=d.get("txId"),
            ts_usec=d.get("ts_usec"),
            last_commit_lsn=lsn("last_commit_lsn"),
            message_lsn=lsn("message_lsn"),
            snapshot=bool(d.get("snapshot", False)),
            snapshot_completed=bool(d.get("snapshot_completed", False)),
            open_transaction=load_open_transaction(d),
        )
