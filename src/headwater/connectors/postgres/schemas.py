"""The captured tables' current schemas and topics, rebuilt when a table's definition changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater.connectors.postgres.metadata import CatalogReader
from headwater.connectors.postgres.source_info import SOURCE_SCHEMA
from headwater.connectors.postgres.types import (
    DEFAULT_UNAVAILABLE_PLACEHOLDER,
    PgType,
    PostgresValueConverters,
    TypeSettings,
)
from headwater.engine.connector import ConnectorError
from headwater.relational import column_mappers as cm
from headwater.relational.column_mappers import ColumnMappers, SourceColumn
from headwater.relational.converters import ConverterRegistry, CustomConverters
from headwater.relational.filters import ColumnFilter, TableFilter
from headwater.relational.key_mapper import KeyColumnMapper, KeyColumnsError
from headwater.relational.plugins import PluginError
from headwater.relational.table import Column, Table, TableId
from headwater.relational.table_schema import TableSchema, build_table_schema
from headwater.relational.topic_naming import NameAdjuster, NamingError, TopicNaming


@dataclass
class CapturedTable:
    table: Table
    schema: TableSchema
    topic: str
    collection: str           # "schema.table", as Debezium names data collections
    raw_columns: tuple[str, ...]
    from_relation: bool = False  # built from a pgoutput Relation message (else: the catalog, as for snapshots)


class SchemaRegistry:
    def __init__(self, catalog: CatalogReader, *, topic_prefix: str, delimiter: str, table_filter: TableFilter,
                 column_filter: ColumnFilter, key_columns: KeyColumnMapper | None, include_unknown: bool,
                 unavailable_placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER,
                 column_mappers: ColumnMappers | None = None, topic_naming: TopicNaming | None = None,
                 schema_name_adjustment: str = "none", field_name_adjustment: str = "none",
                 type_settings: TypeSettings | None = None,
                 custom_converters: CustomConverters | None = None) -> None:
        self.catalog = catalog
        self.topic_prefix = topic_prefix
        self.delimiter = delimiter
        self.topic_naming = topic_naming or TopicNaming(prefix=topic_prefix, delimiter=delimiter)
        # stateful, as Debezium's: two names adjusted to the same replacement are an error
        self.schema_names = NameAdjuster(schema_name_adjustment)
        self.field_names = NameAdjuster(field_name_adjustment, fields=True)
        self.table_filter = table_filter
        self.column_filter = column_filter
        self.key_columns = key_columns
        self.converters = _Converters(include_unknown=include_unknown, type_settings=type_settings,
                                      unavailable_placeholder=unavailable_placeholder)
        # Debezium describes a column differently after a Relation message than from the JDBC
        # metadata the snapshot uses (`serial` -> `int4`, unconstrained numeric length); only the
        # column mappers see that
        # (and a few values: streamed ones come from pgoutput text, see the types module)
        self.relation_converters = _Converters(include_unknown=include_unknown, type_settings=type_settings,
                                               unavailable_placeholder=unavailable_placeholder, from_relation=True)
        self.column_mappers = column_mappers if column_mappers else None
        self.custom_converters = custom_converters  # `converters` (headwater.relational.converters)
        self._custom: ConverterRegistry | None = None  # their instances, made at the first build
        self._by_oid: dict[int, CapturedTable | None] = {}
        self._versions: dict[int, int] = {}

    def topic_for(self, table_id: TableId) -> str:
        return self.topic_naming.data_change_topic(table_id)

    def build(self, table: Table, raw_columns: tuple[str, ...] | None = None,
              from_relation: bool | None = None) -> CapturedTable:
        """The table's schemas; `from_relation` (default: whether `raw_columns`, the order of a
        Relation message, is given) says whether it is built for streamed changes."""
        if from_relation is None:
            from_relation = raw_columns is not None
        raw = raw_columns if raw_columns is not None else tuple(c.name for c in table.columns if not c.generated)
        topic = self.topic_for(table.id)
        try:
            if self.custom_converters is not None and self._custom is None:
                self._custom = self.custom_converters.create()
            key_columns = (None if self.key_columns is None
                           else self.key_columns.key_columns(table.id, [c.name for c in table.columns]))
            schema = build_table_schema(
                table, self.relation_converters if from_relation else self.converters, topic_prefix=self.topic_prefix,
                source_schema=SOURCE_SCHEMA, key_columns=key_columns,
                column_filter=self.column_filter, raw_columns=raw, mappers=self.column_mappers, topic=topic,
                schema_names=self.schema_names, field_names=self.field_names, custom=self._custom,
            )
        except (NamingError, KeyColumnsError) as exc:
            raise ConnectorError(f"table {table.id.identifier()}: {exc}") from None
        except PluginError as exc:  # a custom converter failed to load, or while the schema was built
            raise ConnectorError(str(exc)) from None
        return CapturedTable(table, schema, topic, table.id.identifier(), raw, from_relation)

    def load(self, oids: list[int]) -> dict[int, CapturedTable]:
        out = {}
        for oid, table in self.catalog.read_tables(oids).items():
            captured = self.build(table)
            self.define(oid, captured)
            out[oid] = captured
        return out

    def for_relation(self, oid: int, namespace: str, name: str, columns: list[Any],
                     replica_identity: str | None = None, committed_xid: int | None = None) -> CapturedTable | None:
        """The captured table for a pgoutput Relation message (None when it is not captured).

        Like Debezium, every Relation message rebuilds the table's schemas: PostgreSQL sends one
        before a relation's first change of each session and after every change of its definition
        (columns, types, NOT NULL, defaults, keys, replica identity), and the catalog is read again
        each time (see CatalogReader.read_relation for what comes from where)."""
        table_id = TableId(None, namespace, name)
        if not self.table_filter(table_id):
            self.define(oid, None)
            return None
        table = self.catalog.read_relation(table_id, columns, replica_identity, committed_xid)
        captured = self.build(table, tuple(c.name for c in columns))
        self.define(oid, captured)
        return captured

    def define(self, oid: int, captured: CapturedTable | None) -> None:
        """Set what a relation currently is (None: not captured); bumps its version."""
        self._by_oid[oid] = captured
        self._versions[oid] = self._versions.get(oid, 0) + 1

    def get(self, oid: int) -> CapturedTable | None:
        return self._by_oid.get(oid)

    def definition(self, oid: int) -> tuple[int, Table | None, tuple[str, ...]]:
        """(version, table, raw column order) of a relation, to hand to a worker process."""
        captured = self._by_oid.get(oid)
        version = self._versions.get(oid, 0)
        if captured is None:
            return version, None, ()
        return version, captured.table, captured.raw_columns


# -------------------------------------------------------------------------------------------
# columns as Debezium's PostgreSQL connector describes them (for the column mappers)

_UNKNOWN_LENGTH = 2147483647  # pgjdbc's unknownLength default
_CHARACTER_JDBC = {"bpchar": cm.CHAR, "char": cm.CHAR, "varchar": cm.VARCHAR, "text": cm.VARCHAR, "name": cm.VARCHAR}
_SERIALS = {"int4": "serial", "int8": "bigserial", "int2": "smallserial"}
_DATETIME = ("date", "time", "timetz", "interval", "timestamp", "timestamptz")


def _display_size(name: str, typmod: int) -> int:
    """pgjdbc TypeInfoCache.getDisplaySize."""
    fixed = {"int2": 6, "int4": 11, "oid": 10, "int8": 20, "float4": 15, "float8": 25, "char": 1, "bool": 1,
             "date": 13, "interval": 49}
    if name in fixed:
        return fixed[name]
    if name in ("time", "timetz", "timestamp", "timestamptz"):
        second = 7 if typmod == -1 else 0 if typmod == 0 else 3 if typmod == 1 else typmod + 1
        return {"time": 8, "timetz": 14, "timestamp": 22, "timestamptz": 28}[name] + second
    if name in ("varchar", "bpchar"):
        return _UNKNOWN_LENGTH if typmod == -1 else typmod - 4
    if name == "numeric":
        if typmod == -1:
            return 131089
        return 1 + (((typmod - 4) >> 16) & 0xFFFF) + (1 if (typmod - 4) & 0xFFFF else 0)
    if name == "bit":
        return typmod
    if name == "varbit":
        return _UNKNOWN_LENGTH if typmod == -1 else typmod
    return _UNKNOWN_LENGTH


def _precision(name: str, typmod: int) -> int:
    """pgjdbc TypeInfoCache.getPrecision."""
    fixed = {"int2": 5, "int4": 10, "oid": 10, "int8": 19, "float4": 8, "float8": 17, "char": 1, "bool": 1}
    if name in fixed:
        return fixed[name]
    if name == "numeric":
        return 0 if typmod == -1 else ((typmod - 4) >> 16) & 0xFFFF
    if name in ("varchar", "bpchar"):
        return _UNKNOWN_LENGTH if typmod == -1 else typmod - 4
    if name in _DATETIME:
        return _display_size(name, typmod)
    if name == "bit":
        return typmod
    if name == "varbit":
        return _UNKNOWN_LENGTH if typmod == -1 else typmod
    return _UNKNOWN_LENGTH


def _scale(name: str, typmod: int) -> int:
    """pgjdbc TypeInfoCache.getScale."""
    if name == "float4":
        return 8
    if name == "float8":
        return 17
    if name == "numeric":
        return 0 if typmod == -1 else (typmod - 4) & 0xFFFF
    if name in ("time", "timetz", "timestamp", "timestamptz"):
        return 6 if typmod == -1 else typmod
    if name == "interval":
        return 6 if typmod == -1 else typmod & 0xFFFF
    return 0


def pg_source_column(column: Column, *, from_relation: bool) -> SourceColumn:
    """The column as Debezium's `Column` has it: from the JDBC metadata (snapshot) or from a
    Relation message and the type registry (streaming)."""
    pg = column.native
    if not isinstance(pg, PgType):
        return SourceColumn(column.name, column.type_name)
    # arrays: pgjdbc looks at the element type, unless that is a domain (or the array is int2vector)
    base = pg.element if pg.element is not None and not pg.element.is_domain and pg.name != "int2vector" \
        else pg
    name, typmod = base.name, pg.modifier
    if pg.element is not None:
        jdbc = 2003  # ARRAY
    elif pg.kind == "e":
        jdbc = cm.VARCHAR
    else:
        jdbc = _CHARACTER_JDBC.get(name, cm.OTHER)
    type_name = column.type_name
    length = _precision(name, typmod)
    scale: int | None = _scale(name, typmod)
    if from_relation:
        if length == 0:
            length = _display_size(name, typmod)
    else:
        if type_name in _SERIALS and column.default_expression and "nextval(" in column.default_expression:
            type_name = _SERIALS[type_name]
        if name == "numeric" and typmod == -1:
            scale = None
    return SourceColumn(column.name, type_name, jdbc, length, scale)


class _Converters(PostgresValueConverters):
    def __init__(self, *, from_relation: bool = False, **kwargs: Any) -> None:
        super().__init__(streaming=from_relation, **kwargs)
        self.from_relation = from_relation

    def source_column(self, table: Table, column: Column) -> SourceColumn:
        return pg_source_column(column, from_relation=self.from_relation)
