"""The captured tables' current schemas and topics, rebuilt when a table's definition changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater.connectors.postgres.metadata import CatalogReader
from headwater.connectors.postgres.source_info import SOURCE_SCHEMA
from headwater.connectors.postgres.types import DEFAULT_UNAVAILABLE_PLACEHOLDER, PostgresValueConverters
from headwater.relational.filters import ColumnFilter, TableFilter
from headwater.relational.table import Table, TableId
from headwater.relational.table_schema import TableSchema, build_table_schema


@dataclass
class CapturedTable:
    table: Table
    schema: TableSchema
    topic: str
    collection: str           # "schema.table", as Debezium names data collections
    raw_columns: tuple[str, ...]


class SchemaRegistry:
    def __init__(self, catalog: CatalogReader, *, topic_prefix: str, delimiter: str, table_filter: TableFilter,
                 column_filter: ColumnFilter, key_columns: dict[str, list[str]], include_unknown: bool,
                 unavailable_placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER) -> None:
        self.catalog = catalog
        self.topic_prefix = topic_prefix
        self.delimiter = delimiter
        self.table_filter = table_filter
        self.column_filter = column_filter
        self.key_columns = key_columns
        self.converters = PostgresValueConverters(include_unknown=include_unknown,
                                                  unavailable_placeholder=unavailable_placeholder)
        self._by_oid: dict[int, CapturedTable | None] = {}
        self._versions: dict[int, int] = {}

    def topic_for(self, table_id: TableId) -> str:
        return self.delimiter.join([self.topic_prefix, table_id.schema or "", table_id.table])

    def build(self, table: Table, raw_columns: tuple[str, ...] | None = None) -> CapturedTable:
        raw = raw_columns if raw_columns is not None else tuple(c.name for c in table.columns if not c.generated)
        schema = build_table_schema(
            table, self.converters, topic_prefix=self.topic_prefix, source_schema=SOURCE_SCHEMA,
            key_columns=self.key_columns.get(table.id.identifier()), column_filter=self.column_filter,
            raw_columns=raw,
        )
        return CapturedTable(table, schema, self.topic_for(table.id), table.id.identifier(), raw)

    def load(self, oids: list[int]) -> dict[int, CapturedTable]:
        out = {}
        for oid, table in self.catalog.read_tables(oids).items():
            captured = self.build(table)
            self.define(oid, captured)
            out[oid] = captured
        return out

    def for_relation(self, oid: int, namespace: str, name: str, columns: list[Any]) -> CapturedTable | None:
        """The captured table for a pgoutput Relation message (None when it is not captured),
        re-reading the catalog when the relation's columns differ from what is known."""
        table_id = TableId(None, namespace, name)
        if not self.table_filter(table_id):
            self.define(oid, None)
            return None
        names = tuple(c.name for c in columns)
        current = self._by_oid.get(oid)
        if current is not None and current.raw_columns == names and current.table.id == table_id and \
                _types_match(current.table, columns):
            return current
        tables = self.catalog.read_tables([oid])
        if oid not in tables:
            self.define(oid, None)
            return None
        captured = self.build(tables[oid], names)
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


def _types_match(table: Table, columns: list[Any]) -> bool:
    by_name = {c.name: c for c in table.columns}
    for rc in columns:
        col = by_name.get(rc.name)
        if col is None or col.type_oid != rc.type_oid or (rc.type_modifier != col.type_modifier and
                                                           col.native is not None and
                                                           col.native.kind != "d"):
            return False
    return True
