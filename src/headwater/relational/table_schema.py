"""Per-table key and value schemas, and the functions that turn a database row into them.

Built once per table version (Debezium's `TableSchemaBuilder`): the connector supplies, per
column, a Connect schema, a converter from the raw value it reads (PostgreSQL: the text form)
and the fallback used when a required column has no value; this module assembles key and row
structs, applies column filters and defaults, and pre-computes a plan so that converting a row
is one tight loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from headwater.model.envelope import envelope_schema
from headwater.model.schema import NO_DEFAULT, Schema, replace, struct
from headwater.relational.column_mappers import UNSET_LENGTH, ColumnMappers, default_source_column
from headwater.relational.converters import ConverterRegistry, Registered, RelationalColumn, value_function
from headwater.relational.filters import ColumnFilter
from headwater.relational.key_mapper import KeyColumnsError
from headwater.relational.plugins import PluginError, error_reason
from headwater.relational.table import Column, Table
from headwater.relational.topic_naming import NameAdjuster


class ColumnTypeError(Exception):
    """A column's type cannot be mapped (and unknown types are not to be included)."""


class ValueConverters(Protocol):
    """What a connector supplies for its column types."""

    def schema_for(self, table: Table, column: Column) -> Schema | None:
        """The Connect schema of the column (required variant), or None to leave the column out."""

    def converter_for(self, table: Table, column: Column, schema: Schema) -> Callable[[Any], Any]:
        """raw value (never None) -> Connect value."""

    def default_for(self, table: Table, column: Column, schema: Schema) -> Any:
        """The schema default parsed from the column's default expression, or NO_DEFAULT."""

    def fallback_for(self, table: Table, column: Column, schema: Schema) -> Any:
        """The value a required column gets when the row carries no value for it."""

    # Optional: connectors whose raw rows may mark a value as unavailable (PostgreSQL's unchanged
    # TOAST) also define `unavailable_marker` (the raw value) and
    # `unavailable_for(table, column, schema)` -> the value to emit instead, or NO_DEFAULT when
    # the column can never carry the marker (no check is compiled for it).
    # Optional too: `source_column(table, column)` -> `column_mappers.SourceColumn`, the column as
    # Debezium describes it (JDBC type, type name, length, scale), for the column mappers and the
    # custom converters; `raw_default_for(table, column)` -> the column's constant default in the
    # raw form of its values (else NO_DEFAULT), for the custom converters.


@dataclass(slots=True)
class ColumnPlan:
    name: str
    index: int                      # position in the raw tuple
    convert: Callable[[Any], Any]
    optional: bool
    fallback: Any                   # for required columns whose value is missing
    unavailable: Any = NO_DEFAULT   # emitted for the connector's "unavailable" raw marker
    mapper: Callable[[Any], Any] | None = None  # column mapper, applied to every value (None too)
    custom: bool = False            # a custom converter's: `convert` takes every raw value, None too


class TableSchema:
    """Key/value schemas of one table version and the row/key builders for it."""

    def __init__(self, table: Table, key_schema: Schema | None, row_schema: Schema, envelope: Schema,
                 plan: list[ColumnPlan], key_fields: list[str], unavailable_marker: Any = None) -> None:
        self.table = table
        self.key_schema = key_schema
        self.row_schema = row_schema
        self.envelope_schema = envelope
        self.plan = plan
        self.key_fields = key_fields
        self.row: Callable[[Sequence[Any]], dict[str, Any]] = _compile_row(plan, unavailable_marker)
        self.key: Callable[[dict[str, Any] | None], dict[str, Any] | None] = _compile_key(
            key_fields if key_schema is not None else None)


def _compile_key(fields: list[str] | None) -> Callable[[dict[str, Any] | None], dict[str, Any] | None]:
    """Generate `key(row) -> dict | None` (None for keyless tables or a missing row)."""
    if not fields:
        return lambda row: None
    items = ", ".join(f"{name!r}: row[{name!r}]" for name in fields)
    env: dict[str, Any] = {}
    exec(f"def key(row):\n    return None if row is None else {{{items}}}\n", env)
    return env["key"]


def _compile_row(plan: list[ColumnPlan], unavailable_marker: Any = None) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """Generate `row(raw) -> dict` for one table version: one dict display with the conversions
    inlined, several times faster than looping over the plan for every row.

    A None raw value is a SQL NULL: optional columns get None (the JSON converter later
    substitutes schema defaults, as Kafka's does), required ones their fallback. Columns that
    can carry `unavailable_marker` get their placeholder for it (one identity test; columns that
    never carry it pay nothing). Columns with a mapper (masking, truncation, hashing) wrap the
    whole value expression in it; the others are compiled exactly as without mappers."""
    env: dict[str, Any] = {"U": unavailable_marker}
    items = []
    for i, p in enumerate(plan):
        env[f"c{i}"] = p.convert
        env[f"f{i}"] = p.fallback
        missing = "None" if p.optional else f"f{i}"
        convert = f"c{i}(v)"
        if unavailable_marker is not None and p.unavailable is not NO_DEFAULT:
            env[f"u{i}"] = p.unavailable
            # a fresh list per row: records must not share mutable values
            placeholder = f"u{i}[:]" if isinstance(p.unavailable, list) else f"u{i}"
            convert = f"({placeholder} if v is U else c{i}(v))"
        value = f"{missing} if (v := raw[{p.index}]) is None else {convert}"
        if p.custom:  # the converter takes NULL (and the unavailable marker) itself
            value = f"c{i}(raw[{p.index}])"
        if p.mapper is not None:
            env[f"m{i}"] = p.mapper
            value = f"m{i}({value})"
        items.append(f"{p.name!r}: {value}")
    src = "def row(raw):\n    return {" + ", ".join(items) + "}\n"
    exec(src, env)  # column names are embedded via repr()
    return env["row"]


def build_table_schema(
    table: Table,
    converters: ValueConverters,
    *,
    topic_prefix: str,
    source_schema: Schema,
    key_columns: Sequence[str] | None = None,
    column_filter: ColumnFilter | None = None,
    raw_columns: Sequence[str] | None = None,
    mappers: ColumnMappers | None = None,
    topic: str | None = None,
    schema_names: NameAdjuster | None = None,
    field_names: NameAdjuster | None = None,
    custom: ConverterRegistry | None = None,
) -> TableSchema:
    """Build the schemas for `table`.

    `key_columns` overrides the primary key (`message.key.columns`); `raw_columns` is the column
    order of the raw tuples (defaults to the table's column order); `mappers` are the configured
    column mappers (value fields only, as in Debezium: key fields keep their plain schema).
    Debezium names the schemas after the table's data topic (`topic`, from the topic naming
    strategy; default `<topic_prefix>.<schema>.<table>`) adjusted by `schema_names`
    (`schema.name.adjustment.mode`), and the fields after the columns adjusted by `field_names`
    (`field.name.adjustment.mode`); filters, key columns and mappers still see the column names.
    `custom`: the configured custom converters (`headwater.relational.converters`), asked first
    for every column; a column one of them takes keeps its schema and values, in key and value.
    Raises PluginError when a converter fails while the schema is built."""
    if topic is not None:
        base = topic
    else:
        base = f"{topic_prefix}.{table.id.schema}.{table.id.table}" if table.id.schema else \
            f"{topic_prefix}.{table.id.table}"
    adjust_schema = schema_names.adjust if schema_names is not None else _same
    adjust_field = field_names.adjust if field_names is not None else _same
    raw_order = list(raw_columns) if raw_columns is not None else table.column_names()
    raw_index = {name: i for i, name in enumerate(raw_order)}
    keys = list(key_columns) if key_columns is not None else list(table.primary_key)

    marker = getattr(converters, "unavailable_marker", None)
    unavailable_for = getattr(converters, "unavailable_for", None) if marker is not None else None
    if mappers is not None and not mappers:
        mappers = None
    source_column = getattr(converters, "source_column", default_source_column)
    describe = source_column if mappers is not None else None
    fields: list[tuple[str, Schema]] = []
    plan: list[ColumnPlan] = []
    key_field_schemas: dict[str, Schema] = {}
    for column in table.columns:
        if column.name not in raw_index:
            continue
        registered = None
        if custom is not None:
            raw_default_for = getattr(converters, "raw_default_for", None)
            raw_default = raw_default_for(table, column) if raw_default_for is not None else NO_DEFAULT
            registered = _custom_for(custom, table, column, source_column(table, column), raw_default)
        if registered is not None:
            _add_custom(registered, converters, table, column, raw_default, field_name=adjust_field(column.name),
                        index=raw_index[column.name], keys=keys, key_field_schemas=key_field_schemas,
                        column_filter=column_filter, mappers=mappers, describe=source_column, fields=fields,
                        plan=plan, marker=marker)
            continue
        schema = converters.schema_for(table, column)
        if schema is None:
            continue
        default = converters.default_for(table, column, schema)
        field_schema = _finish(schema, column.optional, default)
        field_name = adjust_field(column.name)
        if column.name in keys:
            key_field_schemas[column.name] = field_schema
        # key columns are always kept in the key even if filtered out of the value
        if column_filter is not None and not column_filter(table.id, column.name):
            continue
        convert = converters.converter_for(table, column, schema)
        fallback = None
        if not column.optional:
            fallback = default if default is not NO_DEFAULT else converters.fallback_for(table, column, schema)
        unavailable = NO_DEFAULT if unavailable_for is None else unavailable_for(table, column, schema)
        mapper = None
        if describe is not None:
            assert mappers is not None
            mapped = mappers.for_column(table.id, describe(table, column), schema)
            if mapped is not None:
                field_schema = _finish(mapped[0], column.optional, default)
                mapper = mapped[1]
        fields.append((field_name, field_schema))
        plan.append(ColumnPlan(field_name, raw_index[column.name], convert, column.optional, fallback, unavailable,
                               mapper))

    row_schema = struct(adjust_schema(f"{base}.Value"), fields, optional=True)
    key_schema = None
    key_columns_kept = [k for k in keys if k in key_field_schemas]
    key_fields = [adjust_field(k) for k in key_columns_kept]
    in_value = {name for name, _ in fields}
    left_out = [k for k, f in zip(key_columns_kept, key_fields) if f not in in_value]
    if left_out:
        # Debezium keeps such a column in the key (read from the full tuple when streaming, the
        # type's zero in the snapshot); Headwater builds keys from the value's fields
        raise KeyColumnsError(
            f"key column(s) {', '.join(left_out)} are left out of the value by column.include.list/"
            "column.exclude.list; Headwater cannot build the key without them: capture them, or key the table "
            "on captured columns with message.key.columns")
    if key_fields:
        key_schema = struct(adjust_schema(f"{base}.Key"),
                            [(adjust_field(k), key_field_schemas[k]) for k in key_columns_kept])
    envelope = envelope_schema(adjust_schema(f"{base}.Envelope"), row_schema, source_schema)
    return TableSchema(table, key_schema, row_schema, envelope, plan, key_fields, marker)


def _same(name: str) -> str:
    return name


def _custom_for(custom: ConverterRegistry, table: Table, column: Column, source: Any,
                raw_default: Any) -> Registered | None:
    return custom.converter_for(RelationalColumn(
        name=column.name, data_collection=table.id.identifier(), type_name=source.type_name,
        type_expression=source.type_name, jdbc_type=source.jdbc_type, native_type=column.type_oid,
        length=None if source.length == UNSET_LENGTH else source.length, scale=source.scale,
        optional=column.optional, default_value=None if raw_default is NO_DEFAULT else raw_default,
        has_default_value=column.default_expression is not None))


def _add_custom(registered: Registered, converters: ValueConverters, table: Table, column: Column,
                raw_default: Any, *,
                field_name: str, index: int, keys: list[str], key_field_schemas: dict[str, Schema],
                column_filter: ColumnFilter | None, mappers: ColumnMappers | None,
                describe: Callable[[Table, Column], Any], fields: list[tuple[str, Schema]],
                plan: list[ColumnPlan], marker: Any) -> None:
    """A column taken over by a custom converter, as Debezium's TableSchemaBuilder adds it: the
    registered schema (optional when the column is), the default passed through the converter."""
    label = f"{table.id.identifier()}.{column.name}"
    schema = registered.schema
    optional = schema.optional or column.optional
    default = NO_DEFAULT
    if raw_default is not NO_DEFAULT and raw_default is not None:
        try:
            default = registered.converter(raw_default)
        except Exception as exc:
            raise PluginError(f"{registered.label} failed on the default value of column {label}: "
                              f"{error_reason(exc)}") from None
        if default is None:
            default = NO_DEFAULT
    field_schema = _finish(schema, optional, default)
    if column.name in keys:
        key_field_schemas[column.name] = field_schema
    if column_filter is not None and not column_filter(table.id, column.name):
        return
    unavailable_input = None
    if marker is not None:
        standard = converters.schema_for(table, column)
        unavailable_for = getattr(converters, "unavailable_for", None)
        if standard is not None and unavailable_for is not None:
            unavailable_input = unavailable_for(table, column, standard)
        if unavailable_input is None or unavailable_input is NO_DEFAULT:
            placeholder = getattr(converters, "unavailable_placeholder", b"")
            unavailable_input = placeholder.decode() if isinstance(placeholder, bytes) else placeholder
    convert = value_function(registered, label, optional=optional, marker=marker, unavailable_input=unavailable_input)
    mapper = None
    if mappers is not None:
        mapped = mappers.for_column(table.id, describe(table, column), schema)
        if mapped is not None:
            field_schema = _finish(mapped[0], optional, default)
            mapper = mapped[1]
    fields.append((field_name, field_schema))
    plan.append(ColumnPlan(field_name, index, convert, optional, None, NO_DEFAULT, mapper, custom=True))


def _finish(schema: Schema, optional: bool, default: Any) -> Schema:
    if schema.optional == optional and default is NO_DEFAULT:
        return schema
    return replace(schema, optional=optional, default=default)
