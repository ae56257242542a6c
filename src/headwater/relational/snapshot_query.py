"""Custom snapshot queries: Debezium's `SnapshotQuery` SPI for Python (`snapshot.query.mode=custom`).

`snapshot.query.mode.custom.name=package.module:Class` names a class with

```python
class OnlyRecent:
    def configure(self, props: dict[str, str]) -> None:        # optional: the whole configuration
        self.days = int(props.get("only.recent.days", "30"))

    def snapshot_query(self, table_id: str, columns: list[str]) -> str | None:
        return f"SELECT {', '.join(columns)} FROM {table_id} WHERE updated > now() - interval '{self.days} days'"
```

For every table to snapshot that has no `snapshot.select.statement.overrides` entry (an override
wins, as in Debezium), `snapshot_query` gets the table as a double-quoted identifier
(`"public"."orders"`) and its columns as double-quoted identifiers, without the columns that
`column.include.list`/`column.exclude.list` leave out (all of them when none would remain), and
returns the SELECT to read the table with, or None (or blank) to take no snapshot of the table's
rows (its changes are still streamed). The query's result columns are matched to the table's
columns by name; columns it does not return are NULL in the events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from headwater.relational.plugins import PluginError, error_reason, instantiate, load_class
from headwater.relational.table import TableId

QUERY_METHODS = ("snapshot_query",)
MODE = "snapshot.query.mode"
NAME = "snapshot.query.mode.custom.name"


class SnapshotQuery(Protocol):
    def snapshot_query(self, table_id: str, columns: list[str]) -> str | None:
        """The SELECT for the table, or None to skip its snapshot."""


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quoted_table(table_id: TableId) -> str:
    """Debezium's `TableId.toDoubleQuotedString()`."""
    parts = [p for p in (table_id.catalog, table_id.schema) if p] + [table_id.table]
    return ".".join(quote_identifier(p) for p in parts)


class CustomSnapshotQuery:
    """The configured plug-in, created and configured once (on the process that plans snapshots)."""

    def __init__(self, spec: str, properties: Mapping[str, str]) -> None:
        self.spec = spec.strip()
        cls = load_class(spec, NAME, "snapshot query", QUERY_METHODS)
        self.instance = instantiate(cls, NAME, spec)
        configure = getattr(self.instance, "configure", None)
        if callable(configure):
            try:
                configure(dict(properties))
            except Exception as exc:
                raise PluginError(f"snapshot query {self.spec}: configure() failed: {error_reason(exc)}") from None

    @classmethod
    def from_config(cls, config: Any) -> CustomSnapshotQuery | None:
        """None unless snapshot.query.mode=custom."""
        if config.get(MODE) != "custom":
            return None
        spec = config.get(NAME)
        if not spec or not spec.strip():
            raise PluginError(f"{MODE}=custom needs {NAME}: the snapshot query class, as package.module:Class")
        return cls(spec, config.raw)

    def query(self, table_id: TableId, columns: list[str],
              column_filter: Callable[[TableId, str], bool] | None = None) -> str | None:
        """The plug-in's SELECT for the table (None: no snapshot of its rows)."""
        kept = [c for c in columns if column_filter is None or column_filter(table_id, c)] or list(columns)
        try:
            statement = self.instance.snapshot_query(quoted_table(table_id), [quote_identifier(c) for c in kept])
        except Exception as exc:
            raise PluginError(f"snapshot query {self.spec} failed for table {table_id.identifier()}: "
                              f"{error_reason(exc)}") from None
        if statement is None:
            return None
        if not isinstance(statement, str):
            raise PluginError(f"snapshot query {self.spec} returned {type(statement).__name__} for table "
                              f"{table_id.identifier()}; expected the SELECT as a str, or None")
        return statement if statement.strip() else None
