"""Transaction metadata (`provide.transaction.metadata`): BEGIN/END records on the transaction
topic and the `transaction` block of each data event, as Debezium's TransactionMonitor emits
them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from headwater.model.schema import INT64, OPTIONAL_INT64, STRING, Schema, struct

TRANSACTION_KEY_SCHEMA = struct("io.debezium.connector.common.TransactionMetadataKey", [("id", STRING)],
                                version=1)
_COLLECTION_SCHEMA = struct("event.collection", [("data_collection", STRING), ("event_count", INT64)],
                            optional=True, version=1)
TRANSACTION_VALUE_SCHEMA = struct(
    "io.debezium.connector.common.TransactionMetadataValue",
    [
        ("status", STRING),
        ("id", STRING),
        ("event_count", OPTIONAL_INT64),
        ("data_collections", Schema("array", optional=True, items=_COLLECTION_SCHEMA)),
        ("ts_ms", INT64),
    ],
    version=1,
)

# Debezium's TransactionContext.store/load: an offset inside a transaction keeps its id and its
# events per data collection, so a restart inside it goes on counting (no second BEGIN)
OFFSET_TRANSACTION_ID = "transaction_id"
OFFSET_ORDER_PREFIX = "transaction_data_collection_order_"


def store_open_transaction(offset: dict[str, Any], tx_id: Any, per_collection: dict[str, int]) -> None:
    offset[OFFSET_TRANSACTION_ID] = tx_id
    for collection, count in per_collection.items():
        offset[OFFSET_ORDER_PREFIX + collection] = count


def load_open_transaction(offset: dict[str, Any]) -> tuple[Any, dict[str, int]] | None:
    """The stored transaction's id and events per data collection, or None when none is open."""
    tx_id = offset.get(OFFSET_TRANSACTION_ID)
    if tx_id is None:
        return None
    counts: dict[str, int] = {}
    for key, value in offset.items():
        if key.startswith(OFFSET_ORDER_PREFIX):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"offset field {key!r} must be a non-negative event count, got {value!r}")
            counts[key[len(OFFSET_ORDER_PREFIX):]] = value
    return tx_id, counts


def java_string_hash(text: str) -> int:
    """`String.hashCode()` of the JVM (UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a `java.util.HashMap<String, …>` filled with `keys` in this order.

    Debezium builds END's `data_collections` from such a map, so its order is the map's bucket
    order: spread hash `h ^ (h >>> 16)` masked by the table size (16, doubled past 0.75 load),
    insertion order within a bucket."""
    ordered = list(dict.fromkeys(keys))
    capacity = 16
    while len(ordered) > capacity * 0.75:
        capacity *= 2
    mask = capacity - 1

    def bucket(k: str) -> int:
        h = java_string_hash(k)
        return (h ^ (h >> 16)) & mask

    return [k for _, k in sorted(((bucket(k), i), k) for i, k in enumerate(ordered))]


class TransactionContext:
    """Counts of the transaction in progress."""

    __slots__ = ("begun", "per_collection", "total")

    def __init__(self) -> None:
        self.begun = False
        self.total = 0
        self.per_collection: dict[str, int] = {}

    def reset(self) -> None:
        self.begun = False
        self.total = 0
        self.per_collection = {}

    def event(self, collection: str) -> tuple[int, int]:
        self.total += 1
        n = self.per_collection.get(collection, 0) + 1
        self.per_collection[collection] = n
        return self.total, n

    def begin_value(self, tx_id: str, ts_ms: int) -> dict[str, Any]:
        return {"status": "BEGIN", "id": tx_id, "event_count": None, "data_collections": None, "ts_ms": ts_ms}

    def end_value(self, tx_id: str, ts_ms: int) -> dict[str, Any]:
        collections = [
            {"data_collection": c, "event_count": self.per_collection[c]}
            for c in java_hashmap_order(self.per_collection)
        ]
        return {"status": "END", "id": tx_id, "event_count": self.total, "data_collections": collections,
                "ts_ms": ts_ms}
