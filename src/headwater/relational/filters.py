"""Include/exclude filters for schemas, tables and columns, with Debezium's matching rules:
each list item is a regular expression matched against the whole identifier (anchored),
case-insensitively."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from headwater.relational.table import TableId


def compile_patterns(patterns: Iterable[str] | None) -> list[re.Pattern[str]]:
    return [re.compile(p, re.IGNORECASE) for p in (patterns or ()) if p]


def _any_full_match(patterns: Sequence[re.Pattern[str]], text: str) -> bool:
    return any(p.fullmatch(text) for p in patterns)


def _included(include: Sequence[re.Pattern[str]], exclude: Sequence[re.Pattern[str]], text: str) -> bool:
    """Debezium's include/exclude pair: the include list when set, else the exclude list."""
    if include:
        return _any_full_match(include, text)
    if exclude:
        return not _any_full_match(exclude, text)
    return True


@dataclass
class TableFilter:
    """Decides which tables are captured: `schema.include.list`/`schema.exclude.list` on the schema
    name, `table.include.list`/`table.exclude.list` on `schema.table`, and the always-excluded
    system schemas."""

    schema_include: list[re.Pattern[str]]
    schema_exclude: list[re.Pattern[str]]
    table_include: list[re.Pattern[str]]
    table_exclude: list[re.Pattern[str]]
    system_schemas: frozenset[str] = frozenset()
    # tables extensions put into user schemas that Debezium treats as system tables (PostGIS's
    # spatial_ref_sys), in any schema
    system_tables: frozenset[str] = frozenset()

    @classmethod
    def build(cls, *, schema_include: Iterable[str] | None = None, schema_exclude: Iterable[str] | None = None,
              table_include: Iterable[str] | None = None, table_exclude: Iterable[str] | None = None,
              system_schemas: Iterable[str] = (), system_tables: Iterable[str] = ()) -> TableFilter:
        return cls(compile_patterns(schema_include), compile_patterns(schema_exclude),
                   compile_patterns(table_include), compile_patterns(table_exclude),
                   frozenset(system_schemas), frozenset(system_tables))

    def schema_included(self, schema: str | None) -> bool:
        if schema is None:
            return True
        if schema in self.system_schemas or schema.startswith("pg_temp") or schema.startswith("pg_toast"):
            return False
        return _included(self.schema_include, self.schema_exclude, schema)

    def __call__(self, table_id: TableId) -> bool:
        if not self.schema_included(table_id.schema) or table_id.table in self.system_tables:
            return False
        return _included(self.table_include, self.table_exclude, table_id.identifier())


@dataclass
class ColumnFilter:
    """`column.include.list` / `column.exclude.list`, matched against `schema.table.column`."""

    include: list[re.Pattern[str]]
    exclude: list[re.Pattern[str]]

    @classmethod
    def build(cls, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> ColumnFilter:
        return cls(compile_patterns(include), compile_patterns(exclude))

    def __call__(self, table_id: TableId, column: str) -> bool:
        return _included(self.include, self.exclude, f"{table_id.identifier()}.{column}")


@dataclass
class PrefixFilter:
    """`message.prefix.include.list` / `message.prefix.exclude.list` over the prefixes of logical
    decoding messages (Debezium's LogicalDecodingMessageFilter): the include list when set, else
    the exclude list; anchored, case-insensitive. An empty prefix is matched like any other."""

    include: list[re.Pattern[str]]
    exclude: list[re.Pattern[str]]

    @classmethod
    def build(cls, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> PrefixFilter:
        return cls(compile_patterns(include), compile_patterns(exclude))

    def __call__(self, prefix: str) -> bool:
        return _included(self.include, self.exclude, prefix)
