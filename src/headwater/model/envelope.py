"""The change-event envelope and the blocks shared by every connector."""

from __future__ import annotations

from headwater.model.schema import (
    INT64,
    OPTIONAL_INT64,
    OPTIONAL_STRING,
    STRING,
    Schema,
    struct,
)

# Debezium's operation codes.
OP_CREATE = "c"
OP_READ = "r"
OP_UPDATE = "u"
OP_DELETE = "d"
OP_TRUNCATE = "t"
OP_MESSAGE = "m"

SNAPSHOT_ENUM_ALLOWED = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"

SNAPSHOT_FIELD_SCHEMA = Schema(
    "string", optional=True, name="io.debezium.data.Enum", version=1,
    parameters={"allowed": SNAPSHOT_ENUM_ALLOWED}, default="false",
)

# The fields every connector's source block starts with, in Debezium's order.
COMMON_SOURCE_FIELDS: list[tuple[str, Schema]] = [
    ("version", STRING),
    ("connector", STRING),
    ("name", STRING),
    ("ts_ms", INT64),
    ("snapshot", SNAPSHOT_FIELD_SCHEMA),
    ("db", STRING),
    ("sequence", OPTIONAL_STRING),
    ("ts_us", OPTIONAL_INT64),
    ("ts_ns", OPTIONAL_INT64),
]

TRANSACTION_BLOCK_SCHEMA = struct(
    "event.block",
    [("id", STRING), ("total_order", INT64), ("data_collection_order", INT64)],
    optional=True, version=1,
)


def envelope_schema(name: str, row_schema: Schema, source_schema: Schema) -> Schema:
    """`<prefix>.<schema>.<table>.Envelope` (version 2) around one row schema."""
    return struct(
        name,
        [
            ("before", row_schema),
            ("after", row_schema),
            ("source", source_schema),
            ("transaction", TRANSACTION_BLOCK_SCHEMA),
            ("op", STRING),
            ("ts_ms", OPTIONAL_INT64),
            ("ts_us", OPTIONAL_INT64),
            ("ts_ns", OPTIONAL_INT64),
        ],
        version=2,
    )
