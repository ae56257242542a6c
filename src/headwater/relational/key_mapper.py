"""`message.key.columns`: which columns make a table's message key, matched as Debezium's
CustomKeyMapper matches them.

Each column of each entry ``<table regex>:<col>,<col>`` becomes one regular expression
``<table regex>.<col>`` (the text as written, then split at unescaped commas and trimmed like any
Debezium regex list), matched anchored and case-insensitively against ``schema.table.column`` (and,
for tables with a catalog — SQL Server's databases — also ``catalog.schema.table.column``).
A table's key is every column some expression matches: expressions in the order written, and for
each one the table's columns in table order. No entry "wins": several entries matching a table add
up (``public.t.*:code;public.tab2:id`` gives ``public.tab2`` the key ``{code, id}``), and the
``.`` between table and column is a regex dot too (``public.t.*:code`` also matches a column
``xcode``). When nothing matches, the primary key stays.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from headwater.config.fields import split_list
from headwater.config.relational import parse_message_key_columns
from headwater.relational.table import TableId


class KeyColumnsError(ValueError):
    """A table whose key `message.key.columns` cannot build."""


@dataclass(frozen=True)
class KeyColumnMapper:
    patterns: tuple[re.Pattern[str], ...]

    @classmethod
    def from_spec(cls, spec: str | None) -> KeyColumnMapper | None:
        """The mapper of a `message.key.columns` value (None: not set). ValueError when malformed."""
        if spec is None or not spec.strip():
            return None
        patterns: list[re.Pattern[str]] = []
        for table, columns in parse_message_key_columns(spec):
            for column in columns:
                patterns += [re.compile(regex, re.IGNORECASE) for regex in split_list(f"{table}.{column}")]
        return cls(tuple(patterns))

    def key_columns(self, table_id: TableId, columns: Sequence[str]) -> list[str] | None:
        """The key columns of a table with these columns (in table order), or None when no
        expression matches any of them (the primary key is the key then). KeyColumnsError when
        a column is matched twice: Debezium cannot build such a key schema either (a duplicate
        field) and fails."""
        # Debezium's Key.matchColumn: the column id with the table's full id (with the catalog:
        # SQL Server's `db.schema.table`), and for connectors that name tables without their
        # catalog (a TableIdToStringMapper: SQL Server's `schema.table`) that form too
        short = f"{table_id.identifier()}."
        prefixes = (f"{table_id.catalog}.{short}", short) if table_id.catalog else (short,)
        out: list[str] = []
        for pattern in self.patterns:
            out += [c for c in columns if any(pattern.fullmatch(prefix + c) for prefix in prefixes)]
        if len(set(out)) != len(out):
            twice = sorted({c for c in out if out.count(c) > 1})
            raise KeyColumnsError(
                f"message.key.columns selects column(s) {', '.join(twice)} of table {table_id.identifier()} more than "
                "once (several entries match it); Debezium fails on such a key too: make the entries select each "
                "column once")
        return out or None
