"""Properties of the standalone sinks, keyed by sink type (``debezium.sink.<type>.<property>``)."""

from __future__ import annotations

from headwater.config.errors import ConfigError
from headwater.config.fields import Field, FieldSet, non_empty
from headwater.config.fields import FieldType as T

SINK_FIELDS: dict[str, FieldSet] = {}
SINK_DOCS: dict[str, str] = {}


def register_sink(sink_type: str, fields: FieldSet, doc: str = "") -> None:
    """Register (or replace) the FieldSet of a sink type."""
    SINK_FIELDS[sink_type] = fields
    SINK_DOCS[sink_type] = doc


def sink_fields(sink_type: str) -> FieldSet:
    """The FieldSet of ``sink_type``; ConfigError listing the supported types when unknown."""
    fs = SINK_FIELDS.get(sink_type.strip().lower())
    if fs is None:
        raise ConfigError(
            f"unknown sink type '{sink_type}' (debezium.sink.type): supported sink types are {', '.join(SINK_FIELDS)}"
        )
    return fs


register_sink(
    "jsonl",
    FieldSet(
        Field(
            "path",
            T.STRING,
            required=True,
            group="sink",
            validator=non_empty,
            doc="File that receives one JSON record ({topic, key, value, headers}) per line.",
        ),
        Field(
            "fsync",
            T.BOOLEAN,
            True,
            group="sink",
            doc="fsync the file before offsets are committed (durable at-least-once delivery).",
        ),
    ),
    doc="All records appended to one JSON-lines file.",
)
register_sink(
    "files",
    FieldSet(
        Field(
            "directory",
            T.STRING,
            required=True,
            group="sink",
            validator=non_empty,
            doc="Directory that receives one JSON-lines file per topic.",
        ),
        Field(
            "fsync",
            T.BOOLEAN,
            True,
            group="sink",
            doc="fsync the files before offsets are committed (durable at-least-once delivery).",
        ),
    ),
    doc="One JSON-lines file per topic in a directory.",
)
register_sink(
    "stdout",
    FieldSet(
        Field(
            "pretty",
            T.BOOLEAN,
            False,
            group="sink",
            doc="Indent the JSON instead of one record per line (for reading; numbers are re-rendered, so a "
            "double may be spelled differently from Debezium's JSON).",
        ),
    ),
    doc="Records printed to standard output.",
)
