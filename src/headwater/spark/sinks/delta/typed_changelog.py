"""The change log of typed rows written by the executors: each task decodes its records' typed rows
(:mod:`headwater.engine.typed_rows`) and builds the change log's columns with pyarrow — the same
values :func:`.changelog.frame` gives them through :func:`.decoding.typed_envelopes` — writes them
as Parquet files (:mod:`.files`), and the driver commits the files with delta-rs as the
idempotent append Spark's writer would make (``txn``: app id, batch id).

Why: through Spark, each row went from Python (the decode) into the JVM, was built into the
``before``/``after``/``source`` structs and written by Delta's writer with statistics on every
leaf column: most of what a change log cost a large batch, several times the current-state table.
pyarrow builds the structs from the decoded columns without copying them and writes the file in a
fraction of that (bench/README.md).

Used when (:meth:`TypedChangelog.plan`, else Spark's append): ``files`` is on, the change log is a
local (or ``file:``) path, it does not exist yet and Spark would create it as delta-rs does (plain
column types, nothing the session adds to new tables) or it exists with one of Spark's plain
protocols (:func:`.files.writable_configuration`) and exactly the schema the batch's rows have (a
schema change goes to Spark, whose append merges the new fields), the source fields are of
primitive types, and every field the connector derives per row is an expression
:func:`row_expression` evaluates.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from headwater.engine.registry import ChangelogColumn
from headwater.engine.typed_rows import EVENT_MS, OP, POSITION, SOURCE_PREFIX, TS_US, read_ipc, source_column
from headwater.spark.sinks import connect_types as ct
from headwater.spark.sinks.delta import changelog
from headwater.spark.sinks.delta import files as delta_files
from headwater.spark.sinks.delta.decoding import TypedSource, template_source
from headwater.spark.sinks.delta.schemas import TYPED_ROWS, Topic

_TIME_FIELDS = ("ts_ms", "ts_us", "ts_ns")
# Spark types a source field (and a connector's change-log column) may have on this path: values
# pyarrow casts as Spark does
_PRIMITIVE = ("StringType", "LongType", "IntegerType", "ShortType", "ByteType", "BooleanType")


# -- derived fields: the SQL of a connector's DerivedRowField, evaluated with pyarrow -------------

_TOKEN = re.compile(r"\s*(?:(?P<text>'(?:[^']|'')*')|(?P<name>`(?:[^`]|``)+`)|(?P<word>[A-Za-z_]\w*)|(?P<punct>[(),]))")
Evaluator = Callable[[dict[str, Any], int], Any]


def row_expression(sql: str) -> Evaluator:
    """An evaluator of `sql` over named Arrow columns, for the subset derived fields use: string
    literals, backquoted columns, ``concat`` (NULL if any argument is), ``coalesce`` and
    ``CAST(… AS STRING|BIGINT)``. Raises ValueError for anything else (the change log then goes
    through Spark, which evaluates any expression)."""
    tokens: list[tuple[str, str]] = []
    at = 0
    sql = sql.strip()
    while at < len(sql):
        match = _TOKEN.match(sql, at)
        if match is None or match.end() == at:
            raise ValueError(f"cannot evaluate {sql!r} at {at}")
        kind = match.lastgroup
        assert kind is not None
        tokens.append((kind, match.group(kind)))
        at = match.end()
    position = 0

    def take(kind: str, value: str | None = None) -> str:
        nonlocal position
        if position >= len(tokens) or tokens[position][0] != kind or (
                value is not None and tokens[position][1].lower() != value):
            raise ValueError(f"cannot evaluate {sql!r}: expected {value or kind} at token {position}")
        position += 1
        return tokens[position - 1][1]

    def parse() -> Evaluator:
        import pyarrow as pa
        import pyarrow.compute as pc

        if position >= len(tokens):
            raise ValueError(f"cannot evaluate {sql!r}: unexpected end")
        kind, value = tokens[position]
        if kind == "text":
            take("text")
            literal = pa.scalar(value[1:-1].replace("''", "'"), pa.string())
            return lambda columns, n: literal
        if kind == "name":
            take("name")
            column = value[1:-1].replace("``", "`")
            return lambda columns, n: columns[column]
        function = take("word").lower()
        take("punct", "(")
        if function == "cast":
            inner = parse()
            take("word", "as")
            target = {"string": pa.string(), "bigint": pa.int64()}.get(take("word").lower())
            take("punct", ")")
            if target is None:
                raise ValueError(f"cannot evaluate {sql!r}: a CAST to a type other than STRING or BIGINT")
            return lambda columns, n: pc.cast(inner(columns, n), target)
        args = [parse()]
        while position < len(tokens) and tokens[position] == ("punct", ","):
            take("punct", ",")
            args.append(parse())
        take("punct", ")")
        if function == "concat":
            return lambda columns, n: pc.binary_join_element_wise(*[a(columns, n) for a in args], "",
                                                                  null_handling="emit_null")
        if function == "coalesce":
            return lambda columns, n: pc.coalesce(*[a(columns, n) for a in args])
        raise ValueError(f"cannot evaluate {sql!r}: function {function}")

    evaluate = parse()
    if position != len(tokens):
        raise ValueError(f"cannot evaluate {sql!r}: trailing tokens")

    def evaluated(columns: dict[str, Any], n: int) -> Any:
        import pyarrow as pa

        result = evaluate(columns, n)
        return pa.repeat(result, n) if isinstance(result, pa.Scalar) else result
    return evaluated


# -- the executors' side ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _SourceField:
    name: str
    kind: str  # time, derived, fallback, per_row, constant
    constant: Any = None  # constant: the value; fallback/derived: the fallback, if any
    has_fallback: bool = False
    inputs: tuple[tuple[str, str], ...] = ()  # derived: (column, SQL type)
    expression: str = ""  # derived


@dataclass(frozen=True)
class ChangelogRows:
    """What a task needs to build the change log's rows of a topic's typed rows (pickled to the
    executors): the names of the row's and key's fields, how each source field is found, the
    connector's change-log columns, and the change log's Arrow schema."""

    row_fields: tuple[str, ...]
    key_fields: tuple[str, ...]
    source_fields: tuple[_SourceField, ...] | None  # None: the topic has no source block
    columns: tuple[tuple[str, str | None], ...]  # (change-log column, source field or None)
    fill: tuple[str, ...]  # per-row source fields a row lacking them takes from its template
    transaction: bool
    batch_id: int

    def batches(self, records: Iterator[Any], schema: Any) -> Iterator[Any]:
        """Records (``typed_rows``, and ``value`` when rows take fields from their template) →
        record batches of the change log (`schema`, Arrow)."""
        evaluators = {f.name: row_expression(f.expression) for f in self.source_fields or () if f.kind == "derived"}
        for record in records:
            values = record.column("value").to_pylist() if self.fill else None
            for i, blob in enumerate(record.column(TYPED_ROWS).to_pylist()):
                if blob is None:
                    continue
                template: dict[str, Any] | None = None
                for part in read_ipc(blob):
                    if part.num_rows == 0:
                        continue
                    if values is not None and template is None:
                        template = template_source(values[i])
                    yield self._batch(part, schema, template or {}, evaluators)

    def _batch(self, part: Any, schema: Any, template: dict[str, Any], evaluators: dict[str, Evaluator]) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        n = part.num_rows
        names = set(part.schema.names)

        def column(name: str, kind: Any) -> Any:
            return part.column(name).cast(kind) if name in names else pa.nulls(n, kind)

        def constant(value: Any, kind: Any) -> Any:
            return pa.nulls(n, kind) if value is None else pa.repeat(pa.scalar(value).cast(kind), n)

        ts_us = part.column(TS_US).cast(pa.int64())
        # floor(ts_us / 1000) as Spark computes it (a double division)
        ts_ms = pc.cast(pc.floor(pc.divide(pc.cast(ts_us, pa.float64()), 1000.0)), pa.int64())
        op = part.column(OP).cast(pa.string())
        deleted = pc.fill_null(pc.equal(op, "d"), False)
        out: dict[str, Any] = {"position": part.column(POSITION).cast(pa.string()), "op": op,
                               "source_ts_ms": ts_ms,
                               "commit_time": pc.multiply(ts_ms, 1000).cast(schema.field("commit_time").type)}
        source: dict[str, Any] = {}
        if self.source_fields is not None:
            source_type = schema.field("source").type
            for f in self.source_fields:
                kind = source_type.field(f.name).type
                per_row = source_column(f.name)
                if f.kind == "time":
                    value = {"ts_ms": ts_ms, "ts_us": ts_us, "ts_ns": pc.multiply(ts_us, 1000)}[f.name]
                elif f.kind == "derived":
                    # as the decoded rows hold them: a per-row source column the rows lack is
                    # their template's (TypedRowsDecoder)
                    inputs = {c: (self._per_row(part, c, c[len(SOURCE_PREFIX):], _sql_type(t), template)
                                  if c.startswith(SOURCE_PREFIX) else column(c, _sql_type(t))) for c, t in f.inputs}
                    first = inputs[f.inputs[0][0]]
                    otherwise = (constant(f.constant, kind) if f.has_fallback
                                 else self._per_row(part, per_row, f.name, kind, template))
                    value = pc.if_else(pc.is_valid(first), evaluators[f.name](inputs, n).cast(kind), otherwise)
                elif f.kind == "fallback":
                    value = pc.coalesce(column(per_row, kind), constant(f.constant, kind))
                elif f.kind == "per_row":
                    value = self._per_row(part, per_row, f.name, kind, template)
                else:
                    value = constant(f.constant, kind)
                source[f.name] = value.cast(kind)
        for name, field in self.columns:
            kind = schema.field(name).type
            out[name] = source[field].cast(kind) if field is not None and field in source else pa.nulls(n, kind)
        if self.key_fields:
            key_type = schema.field("key").type
            out["key"] = pa.StructArray.from_arrays([column(k, key_type.field(k).type) for k in self.key_fields],
                                                    fields=list(key_type))
        row_type = schema.field("after").type
        row = [column(name, row_type.field(name).type) for name in self.row_fields]
        out["before"] = pa.StructArray.from_arrays(row, fields=list(row_type), mask=pc.invert(deleted))
        out["after"] = pa.StructArray.from_arrays(row, fields=list(row_type), mask=deleted)
        if self.source_fields is not None:
            source_type = schema.field("source").type
            out["source"] = pa.StructArray.from_arrays([source[f.name] for f in source_type], fields=list(source_type))
        if self.transaction:
            out["transaction"] = pa.nulls(n, schema.field("transaction").type)
        event_ms = part.column(EVENT_MS).cast(pa.int64()) if EVENT_MS in names else None
        out["ts_ms"] = ts_ms if event_ms is None else pc.coalesce(event_ms, ts_ms)
        out["batch_id"] = pa.repeat(pa.scalar(self.batch_id, pa.int64()), n)
        return pa.RecordBatch.from_arrays([out[f.name].cast(f.type) for f in schema], schema=schema)

    def _per_row(self, part: Any, column: str, name: str, kind: Any, template: dict[str, Any]) -> Any:
        """A per-row source field: the rows' column, else (a row that does not carry it) its
        template's value for the fields of `fill`, else NULL."""
        import pyarrow as pa

        n = part.num_rows
        if column in part.schema.names:
            return part.column(column).cast(kind)
        value = template.get(name) if name in self.fill else None
        return pa.nulls(n, kind) if value is None else pa.repeat(pa.scalar(value).cast(kind), n)


def _sql_type(ddl: str) -> Any:
    import pyarrow as pa

    types = {"BIGINT": pa.int64(), "INT": pa.int32(), "STRING": pa.string(), "BOOLEAN": pa.bool_()}
    if ddl.upper() not in types:
        raise ValueError(f"derived field input of type {ddl}")
    return types[ddl.upper()]


class ChangelogFileWriter(delta_files._FileWriter):
    """``mapInArrow`` function: records of typed rows → Parquet files of the change log."""

    def __init__(self, directory: str, table_schema: Any, stats_columns: list[str], rows: ChangelogRows) -> None:
        super().__init__(directory, table_schema, stats_columns)
        self.rows = rows

    def _table_batches(self, batches: Iterator[Any]) -> Iterator[Any]:
        return self.rows.batches(batches, self.schema)


# -- the driver's side ------------------------------------------------------------------------------


@dataclass
class TypedChangelog:
    """A topic's typed rows of one batch, to be appended to its change log by the executors."""

    records: Any  # the batch's records carrying typed rows
    directory: str
    schema: Any  # the change log's Spark schema (the stored one, or the one to create)
    create: bool  # the change log does not exist yet
    rows: ChangelogRows
    parallelism: int

    @classmethod
    def plan(cls, session: Any, records: Any, parsed: Any, topic: Topic, source: TypedSource,
             columns: tuple[ChangelogColumn, ...], path: str, batch_id: int, files: bool) -> TypedChangelog | None:
        """The executors' append of the typed rows' change log, or None when Spark has to write it
        (see the module's docstring). `parsed`: the rows as :func:`.decoding.typed_envelopes` gives
        them, whose change-log columns (analysed, not run) are the schema the files must have."""
        from pyspark.sql.types import StructType

        directory = delta_files.local_directory(path) if files else None
        if directory is None:
            return None
        wanted = delta_files.nullable_type(changelog.frame(parsed, topic, columns, ct.NATIVE, batch_id).schema)
        if not delta_files.arrow_writable(wanted):
            return None
        described = delta_files.describe(directory)
        if described is None:
            if not delta_files.plain_schema(wanted) or delta_files.session_adds_to_new_tables(session):
                return None
            schema, create = wanted, True
        else:
            if delta_files.writable_configuration(directory) is None:
                return None
            import json

            schema = StructType.fromJson(json.loads(described[1]))
            if delta_files.nullable_type(schema) != wanted:
                return None  # new fields: Spark's append merges them
            create = False
        primitive = [f.dataType for f in schema.fields if f.name in {c.column for c in columns} | {"snapshot"}]
        if topic.source is not None:
            primitive += [f.dataType for f in schema["source"].dataType.fields]
        if any(type(t).__name__ not in _PRIMITIVE for t in primitive):
            return None
        try:
            source_fields = _source_fields(topic, source)
        except ValueError:
            return None
        fields = {f["field"] for f in (topic.source or {}).get("fields", [])}
        named = [(c.column, c.field if c.field in fields else None) for c in columns]
        named.append(("snapshot", "snapshot" if "snapshot" in fields else None))
        rows = ChangelogRows(
            tuple(f["field"] for f in topic.row["fields"]), tuple(f["field"] for f in topic.key_fields),
            source_fields, tuple(named),
            tuple(n for n in source.per_row if n not in source.fallbacks), topic.transaction is not None, batch_id)
        return cls(records, directory, schema, create, rows, session.sparkContext.defaultParallelism)

    def append(self, app_id: str, batch_id: int) -> None:
        """Write the files and commit them (unless the change log already has this batch)."""
        if not self.pending(app_id, batch_id):
            return
        writer, selected = self.writer()
        # a task per core (coalesce never adds partitions): fewer, larger files, as for a snapshot
        written = (self.records.select(*selected).coalesce(self.parallelism)
                   .mapInArrow(writer, delta_files.FILE_COLUMNS).collect())
        self.commit([delta_files.WrittenFile(r["path"], r["size"], r["rows"], r["stats"]) for r in written],
                    app_id, batch_id)

    def pending(self, app_id: str, batch_id: int) -> bool:
        """Whether the change log lacks this batch (a replayed batch may be there already)."""
        from deltalake import DeltaTable

        if self.create:
            return True
        done = DeltaTable(self.directory).transaction_version(app_id)
        return done is None or done < batch_id

    def writer(self) -> tuple[ChangelogFileWriter, list[str]]:
        """The executors' writer of the change log's files, and the record columns it reads."""
        if self.create:
            os.makedirs(self.directory, exist_ok=True)
        configuration = {} if self.create else (delta_files.writable_configuration(self.directory) or {})
        indexed = delta_files.indexed_columns([(f.name, f.dataType) for f in self.schema.fields], configuration)
        writer = ChangelogFileWriter(self.directory, self.schema, indexed, self.rows)
        return writer, ["value", TYPED_ROWS] if self.rows.fill else [TYPED_ROWS]

    def commit(self, files: list[delta_files.WrittenFile], app_id: str, batch_id: int) -> None:
        """Commit the files :meth:`writer` wrote, with the batch's idempotent-write id."""
        if self.create:
            delta_files.create_with_files(self.directory, self.schema, files, app_id, batch_id)
        else:
            delta_files.commit(self.directory, files, app_id, batch_id)


@dataclass
class PendingChangelog:
    """A batch's change log of typed rows not yet appended: the current state's snapshot files may
    take it into their job (:class:`~headwater.spark.sinks.delta.files.PairedFileWriter`);
    otherwise :meth:`append` writes it on its own, before the current state is written."""

    changelog: TypedChangelog
    app_id: str
    batch_id: int
    written: bool = False

    def append(self) -> None:
        if not self.written:
            self.changelog.append(self.app_id, self.batch_id)
            self.written = True


def _source_fields(topic: Topic, source: TypedSource) -> tuple[_SourceField, ...] | None:
    """How each source field of the topic is found, as :func:`.decoding.typed_envelopes` finds it."""
    if topic.source is None:
        return None
    found = []
    for f in topic.source["fields"]:
        name = f["field"]
        if name in _TIME_FIELDS:
            found.append(_SourceField(name, "time"))
        elif name in source.derived:
            rule = source.derived[name]
            row_expression(rule.expression)  # raises for what it cannot evaluate
            for _, kind in rule.inputs:
                _sql_type(kind)
            found.append(_SourceField(name, "derived", source.fallbacks.get(name), name in source.fallbacks,
                                      rule.inputs, rule.expression))
        elif name in source.fallbacks and source.fallbacks[name] is not None:
            found.append(_SourceField(name, "fallback", source.fallbacks[name]))
        elif name in source.per_row:
            found.append(_SourceField(name, "per_row"))
        else:
            found.append(_SourceField(name, "constant", source.constants.get(name)))
    return tuple(found)


__all__ = ["ChangelogFileWriter", "ChangelogRows", "PendingChangelog", "TypedChangelog", "row_expression"]
