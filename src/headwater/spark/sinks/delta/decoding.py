"""Decoding: a topic's records of one batch into parsed frames, in the columns the change log and
the current state read.

Two forms arrive. JSON events are parsed with their Connect schemas (``from_json``; see
:mod:`headwater.spark.sinks.connect_types`). Typed rows (source options ``snapshotDelivery=rows``
and ``streamDelivery=rows``; the contract is :mod:`headwater.engine.typed_rows`) are decoded in the
executors (``mapInArrow``) straight into the table's column types, and given the fields the events
would carry: the source block is the template's (the record's value), with the fields the rows
carry per row taken from them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from headwater.engine.registry import DerivedRowField
from headwater.engine.typed_rows import (
    EVENT_MS,
    IPC_SCHEMA_BYTES,
    OP,
    POSITION,
    SOURCE_PREFIX,
    TIME_FIELDS,
    TS_US,
    ipc_schema,
    read_ipc,
    source_column,
)
from headwater.spark.sinks import connect_types as ct
from headwater.spark.sinks.connect_types import quote
from headwater.spark.sinks.delta.schemas import ENVELOPE_PREFIX, TYPED_ROWS, Summary, Topic


@dataclass
class Part:
    """Events of one topic in one form, parsed: columns position, op, ts_ms, k, v (what the change
    log stores). Typed rows also keep their flat form, which the current-state table reads: the
    envelope's structs would be built for every row just to take the values out again."""

    parsed: Any  # None for typed rows when no change log is written
    fmt: str  # how values are encoded (ct.NATIVE: already of their stored types)
    tag: str  # the suffix of its writes' transaction ids
    flat: Any = None  # typed rows: the table's columns plus the row columns (engine.typed_rows)
    records: Any = None  # typed rows: the records carrying them (Arrow IPC, not decoded)
    # typed rows: their change log as the executors write it (typed_changelog.TypedChangelog), when
    # they may; None: Spark's append of `parsed`
    changelog: Any = None


def json_events(events: Any, topic: Topic, summary: Summary, decimal_format: str) -> Any:
    """JSON records parsed with their Connect schemas (values of :func:`ct.json_type`)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    fmt = decimal_format
    row_type = ct.json_type(topic.row, fmt)
    payload = [StructField("before", row_type), StructField("after", row_type), StructField("ts_ms", LongType())]
    if topic.source is not None:
        payload.append(StructField("source", ct.json_type(topic.source, fmt)))
    if topic.transaction is not None:
        payload.append(StructField("transaction", ct.json_type(topic.transaction, fmt)))
    value_type = StructType([StructField("payload", StructType(payload))])
    value = F.from_json("value", value_type)["payload"]
    if summary.bare:
        value = F.when(F.col("value").startswith(ENVELOPE_PREFIX), value).otherwise(
            F.from_json("value", StructType(payload)))
    key_struct = StructType([StructField(f["field"], ct.json_type(f, fmt)) for f in topic.key_fields])
    key_type = StructType([StructField("payload", key_struct)]) if topic.key_wrapped else key_struct
    parsed = events.select(
        "position", "op", "ts_ms",
        (F.from_json("key", key_type).alias("k") if topic.key_fields else F.lit(None).alias("k")),
        value.alias("v"))
    if topic.key_fields and topic.key_wrapped:
        parsed = parsed.withColumn("k", F.col("k")["payload"])
    return parsed


# -- typed rows ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TypedSource:
    """The source block of a topic's typed rows in one batch: the fields the executors give each
    row (the rows carry them, or their templates differ) and the others, the same for all. Of the
    per-row fields, `fallbacks` are those whose NULL means "not carried: this value" (the rows
    that do not carry one all have it in their templates; a carried per-row field is never NULL,
    see headwater.engine.typed_rows); the executors fill the rest from each record's template."""

    per_row: tuple[str, ...]
    constants: dict[str, Any]
    fallbacks: dict[str, Any] = field(default_factory=dict)
    # per-row fields the rows derive from their columns (the connector's description says how)
    derived: dict[str, DerivedRowField] = field(default_factory=dict)


def typed_source(records: Any, topic: Topic, connector: str | None = None) -> TypedSource:
    """What the typed records say of their source blocks, read on the driver (a record stands for
    up to a batch of rows, so there are few): their templates' source blocks (the records' values)
    and the source fields their rows carry (the schemas at the start of their Arrow IPC streams).
    A field carried by some rows or differing between templates is given per row; every other one
    is a constant of the batch, which Spark adds to the rows without their passing through Arrow.
    A field some rows carry and the templates of all the others agree on is the rows' value, else
    (NULL: not carried) that common one: the executors then hand over no per-row copy of it (a
    string column of a million equal values was a good part of a large batch's change log). The
    fields the description of `connector` (`source.connector`) derives are computed from the
    columns of the rows that have them."""
    from pyspark.sql import functions as F

    from headwater.engine.registry import describe

    if topic.source is None:
        return TypedSource((), {})
    description = describe(connector) if connector else None
    derivable = {d.field: d for d in description.derived_row_fields} if description is not None else {}
    found = records.select("value", F.substring(TYPED_ROWS, 1, IPC_SCHEMA_BYTES).alias("head")).collect()
    templates = [template_source(r["value"]) for r in found]
    columns: list[set[str] | None] = []  # per record: its rows' columns (None: the head is too short)
    for r in found:
        schema = ipc_schema(bytes(r["head"]))
        columns.append(None if schema is None else set(schema.names))
    per_row: list[str] = []
    constants: dict[str, Any] = {}
    fallbacks: dict[str, Any] = {}
    derived: dict[str, DerivedRowField] = {}
    for f in topic.source["fields"]:
        name = f["field"]
        if name in TIME_FIELDS:
            continue
        values = {json.dumps(t.get(name), sort_keys=True) for t in templates}
        # the column whose presence says the rows give the field
        marks = derivable[name].inputs[0][0] if name in derivable else source_column(name)
        carriers = [c is None or marks in c for c in columns]
        if not any(carriers) and len(values) <= 1:
            constants[name] = templates[0].get(name) if templates else None
            continue
        per_row.append(name)
        if name in derivable and any(carriers):
            derived[name] = derivable[name]
        others = {json.dumps(t.get(name), sort_keys=True) for t, c in zip(templates, columns)
                  if c is not None and marks not in c}
        if len(others) <= 1 and all(c is not None for c in columns):
            fallbacks[name] = json.loads(others.pop()) if others else None
    return TypedSource(tuple(per_row), constants, fallbacks, derived)


def template_source(value: str | None) -> dict[str, Any]:
    """The source block of a typed record's template (its value, with its schema or without)."""
    if value is None:
        return {}
    document = json.loads(value)
    envelope = document.get("payload") if isinstance(document, dict) and "schema" in document else document
    source = envelope.get("source") if isinstance(envelope, dict) else None
    return source if isinstance(source, dict) else {}


def typed_rows(records: Any, topic: Topic, decimal_format: str, source: TypedSource | None) -> Any:
    """Typed rows (Arrow IPC in ``typed_rows``: snapshot chunks and streamed row changes, see
    :mod:`headwater.engine.typed_rows`), decoded in the executors: the table's columns, already of
    their stored types, and the row columns; with `source` (for the change log) also the source
    fields it gives per row, as ``SOURCE_PREFIX + field``."""
    from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType

    fmt = decimal_format
    extra: list[tuple[str, Any]] = [(POSITION, StringType()), (OP, StringType()), (TS_US, LongType())]
    per_row: tuple[str, ...] = ()
    if source is not None:  # else the current-state table's merge reads no more (Spark cannot prune a mapInArrow)
        assert topic.source is not None or not source.per_row
        fields = {f["field"]: f for f in (topic.source or {}).get("fields", [])}
        per_row = source.per_row
        extra.append((EVENT_MS, LongType()))
        for n in per_row:
            if n in source.derived:
                extra += [(c, DataType.fromDDL(kind)) for c, kind in source.derived[n].inputs]
            if n not in source.derived or n not in source.fallbacks:
                extra.append((source_column(n), ct.json_type(fields[n], fmt)))
    unique: dict[str, Any] = {}
    for name, kind in extra:  # each column once: a derivation's input may be a per-row field too
        unique.setdefault(name, kind)
    extra = list(unique.items())
    flat = StructType([StructField(f["field"], ct.spark_type(f, fmt), True) for f in topic.row["fields"]]
                      + [StructField(name, kind, True) for name, kind in extra])
    fill = tuple(n for n in per_row if source is not None and n not in source.fallbacks)
    columns = ["value", TYPED_ROWS] if fill else [TYPED_ROWS]
    return records.select(*columns).mapInArrow(TypedRowsDecoder(flat, fill), flat)


def typed_envelopes(rows: Any, topic: Topic, decimal_format: str, source: TypedSource) -> Any:
    """Typed rows (:func:`typed_rows`) given the event fields the events would carry: position and
    op, ``before``/``after`` (a delete's row is its before), ``source`` (the time fields from the
    row's time, the fields of `source` given per row from the rows, the others constants).
    Parsed like the JSON events, with values already of their stored types."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    fmt = decimal_format
    fields = list(topic.row["fields"])

    def col(name: str) -> Any:
        return F.col(quote(name))

    ts_us, op = col(TS_US), col(OP)
    times = {"ts_ms": F.floor(ts_us / 1000), "ts_us": ts_us, "ts_ns": ts_us * 1000}

    def source_field(f: ct.Schema) -> Any:
        name = f["field"]
        if name in times:
            value = times[name]
        elif name in source.derived:
            rule = source.derived[name]
            otherwise = (F.lit(source.fallbacks[name]) if name in source.fallbacks
                         else col(source_column(name)))  # filled from the record's template
            value = F.when(col(rule.inputs[0][0]).isNotNull(), F.expr(rule.expression)).otherwise(otherwise)
        elif name in source.fallbacks and source.fallbacks[name] is not None:
            value = F.coalesce(col(source_column(name)), F.lit(source.fallbacks[name]))
        elif name in source.per_row:
            value = col(source_column(name))
        else:
            value = F.lit(source.constants.get(name))
        return value.cast(ct.json_type(f, fmt)).alias(name)

    row_type = StructType([StructField(f["field"], ct.spark_type(f, fmt), True) for f in fields])
    row = F.struct(*[col(f["field"]) for f in fields])
    deleted = op == "d"
    payload = [F.when(deleted, row).otherwise(F.lit(None).cast(row_type)).alias("before"),
               F.when(deleted, F.lit(None).cast(row_type)).otherwise(row).alias("after"),
               F.coalesce(col(EVENT_MS), F.floor(ts_us / 1000)).cast("BIGINT").alias("ts_ms")]
    if topic.source is not None:
        payload.append(F.struct(*[source_field(f) for f in topic.source["fields"]]).alias("source"))
    if topic.transaction is not None:
        payload.append(F.lit(None).cast(ct.json_type(topic.transaction, fmt)).alias("transaction"))
    key = (F.struct(*[col(f["field"]) for f in topic.key_fields]).alias("k") if topic.key_fields
           else F.lit(None).alias("k"))
    return rows.select(col(POSITION).alias("position"), op.alias("op"),
                       F.floor(ts_us / 1000).cast("BIGINT").alias("ts_ms"), key, F.struct(*payload).alias("v"))


class TypedRowsDecoder:
    """``mapInArrow`` function: records carrying typed rows (``typed_rows``, and ``value`` when
    `per_row` names source fields) → batches of `schema`, columns by name: one the rows lack (a
    column added since) is NULL, but a source field of `per_row` the rows do not carry is their
    template's."""

    def __init__(self, schema: Any, per_row: tuple[str, ...] = ()) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.schema = to_arrow_schema(schema, timezone="UTC")  # Spark exchanges instants in UTC
        self.per_row = per_row

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        target = self.schema
        from_template = {source_column(n) for n in self.per_row}
        for record in batches:
            values = record.column("value").to_pylist() if from_template else None
            for i, blob in enumerate(record.column(TYPED_ROWS).to_pylist()):
                if blob is None:
                    continue
                template: dict[str, Any] | None = None
                for part in read_ipc(blob):
                    names = set(part.schema.names)
                    arrays = []
                    for f in target:
                        if f.name in names:
                            arrays.append(part.column(f.name).cast(f.type))
                        elif f.name in from_template and values is not None:
                            if template is None:
                                template = template_source(values[i])
                            constant = template.get(f.name[len(SOURCE_PREFIX):])
                            arrays.append(pa.nulls(part.num_rows, f.type) if constant is None
                                          else pa.repeat(pa.scalar(constant, f.type), part.num_rows))
                        else:
                            arrays.append(pa.nulls(part.num_rows, f.type))
                    yield pa.RecordBatch.from_arrays(arrays, schema=target)
