"""The connector's database schema (Debezium's SqlServerDatabaseSchema): the structure of every
captured table as events are built with it, the Connect schemas built from it, the schema
history (`schema.history.internal`) that records each structure at the position it starts to
apply, and the schema-change events (`include.schema.changes`).

SQL Server's catalog only shows the present, so on a restart the structures in force at the
stored offset come from the history, not from the catalog (spec §1.13, §6).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from headwater.connectors.sqlserver.lsn import lsn_from_str
from headwater.connectors.sqlserver.source_info import SOURCE_SCHEMA
from headwater.engine.connector import ConnectorError
from headwater.engine.records import SourceRecord
from headwater.relational.column_mappers import ColumnMappers
from headwater.relational.filters import ColumnFilter
from headwater.relational.key_mapper import KeyColumnMapper, KeyColumnsError
from headwater.relational.plugins import PluginError
from headwater.relational.table import Table, TableId
from headwater.relational.table_schema import TableSchema, build_table_schema
from headwater.relational.topic_naming import NameAdjuster, NamingError, TopicNaming

log = logging.getLogger(__name__)


@dataclass
class TableEntry:
    """A table as events are built with it."""

    table: Table
    schema: TableSchema
    topic: str
    collection: str          # Debezium's data collection id: "db.schema.table"

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.table.columns)


class _WithDefaults:
    """The configuration, reading properties it does not declare as unset (None) instead of
    failing: the type settings ask for a few that not every configuration declares."""

    def __init__(self, config: Any) -> None:
        self._config = config

    def get(self, name: str, default: Any = None) -> Any:
        return self._config.get(name, default)


def data_collection(table_id: TableId) -> str:
    return f"{table_id.catalog}.{table_id.schema}.{table_id.table}"


class DatabaseSchema:
    """Tables by id, their TableSchemas, and the history they are recorded in."""

    def __init__(self, config: Any, naming: TopicNaming, *, column_filter: ColumnFilter,
                 key_columns: KeyColumnMapper | None, custom_converters: Any = None,
                 history: Any = None, schema_changes: Any = None, include_schema_changes: bool = False) -> None:
        from headwater.connectors.sqlserver.types import SqlServerValueConverters, TypeSettings

        self.config = config
        self.naming = naming
        self.server = naming.prefix
        self.converters = SqlServerValueConverters(TypeSettings.from_config(_WithDefaults(config)))
        self.column_filter = column_filter
        self.key_columns = key_columns
        self.mappers = ColumnMappers.from_config(config)
        self.schema_names = NameAdjuster(config.get("schema.name.adjustment.mode", "none"))
        self.field_names = NameAdjuster(config.get("field.name.adjustment.mode", "none"), fields=True)
        self.custom_converters = custom_converters
        self._custom: Any = None
        self.history = history
        self.schema_changes = schema_changes
        self.include_schema_changes = include_schema_changes
        self.tables: dict[TableId, TableEntry] = {}

    # -- tables ---------------------------------------------------------------------------------

    def topic(self, table_id: TableId) -> str:
        """`<prefix>.<db>.<schema>.<table>`: SQL Server runs in Debezium's multi-partition mode,
        where both topic naming strategies put the database into the name."""
        parts = [p for p in (self.server, table_id.catalog, table_id.schema, table_id.table) if p and p.strip()]
        return self.naming.sanitize(self.naming.delimiter.join(parts))

    def build(self, table: Table) -> TableEntry:
        topic = self.topic(table.id)
        try:
            if self.custom_converters is not None and self._custom is None:
                self._custom = self.custom_converters.create()
            keys = None if self.key_columns is None else \
                self.key_columns.key_columns(table.id, [c.name for c in table.columns])
            schema = build_table_schema(
                table, self.converters, topic_prefix=self.server, source_schema=SOURCE_SCHEMA, key_columns=keys,
                column_filter=self.column_filter, mappers=self.mappers or None, topic=topic,
                schema_names=self.schema_names, field_names=self.field_names, custom=self._custom)
        except (NamingError, KeyColumnsError) as exc:
            raise ConnectorError(f"table {data_collection(table.id)}: {exc}") from None
        except PluginError as exc:
            raise ConnectorError(str(exc)) from None
        return TableEntry(table, schema, topic, data_collection(table.id))

    def table_for(self, table_id: TableId) -> TableEntry | None:
        return self.tables.get(table_id)

    def define(self, table: Table) -> TableEntry:
        entry = self.build(table)
        self.tables[table.id] = entry
        return entry

    # -- schema changes -------------------------------------------------------------------------

    def describe(self) -> Callable[[Table, Any], Any]:
        from headwater.connectors.sqlserver.types import describe_column
        return describe_column

    def schema_change(self, kind: str, table: Table, *, source: dict[str, Any], offset: dict[str, Any],
                      partition_offset: dict[str, Any], emit: Callable[[Any], None] | None,
                      ddl: str | None, record: bool = True) -> TableEntry:
        """A CREATE/ALTER of `table`: recorded in the history at `partition_offset` (the database's
        own offset, Debezium's position), sent to the schema-change topic when
        `include.schema.changes`, then applied. `record` False: only applied (a snapshot told not to
        snapshot the schema: snapshot.mode.configuration.based.snapshot.schema=false)."""
        from headwater.relational.schema_change import table_change

        if not record:
            return self.define(table)
        change = table_change(kind, table, self.describe())  # type: ignore[arg-type]
        db = table.id.catalog or ""
        if self.history is not None:
            self.history.record({"server": self.server, "database": db}, partition_offset, database_name=db,
                                schema_name=table.id.schema, ddl=ddl, changes=[change],
                                ts_ms=source.get("ts_ms"))
        if self.include_schema_changes and emit is not None and self.schema_changes is not None:
            record: SourceRecord = self.schema_changes.record(
                database=db, schema=table.id.schema, ddl=ddl, changes=[change], source=source, offset=offset,
                collection=data_collection(table.id))
            emit(record)
        return self.define(table)

    # -- recovery -------------------------------------------------------------------------------

    def recover(self, positions: dict[str, dict[str, Any]]) -> None:
        """The tables in force at the stored per-database offsets, from the history (Debezium's
        comparator: a record applies when its change LSN is at or before the offset's)."""
        from headwater.connectors.sqlserver.types import column_from_description
        from headwater.relational.schema_history import StopPoint, recover_tables

        if self.history is None:
            return
        stops = []
        for db, position in positions.items():
            desired = (lsn_from_str(position.get("commit_lsn")), lsn_from_str(position.get("change_lsn")))

            def at_or_before(recorded: Any, desired: tuple[bytes | None, bytes | None] = desired) -> bool:
                # Debezium compares change LSNs only, so a record is lost on recovery when the
                # offset's change LSN is null (stored after an iteration without changes); here
                # (commit LSN, change LSN) decide, a null change LSN standing for the whole commit
                commit, change = lsn_from_str(recorded.get("commit_lsn")), lsn_from_str(recorded.get("change_lsn"))
                if (commit or b"") != (desired[0] or b""):
                    return (commit or b"") < (desired[0] or b"")
                return change is None or desired[1] is None or change <= desired[1]

            stops.append(StopPoint({"server": self.server, "database": db}, at_or_before))
        tables = recover_tables(self.history, stops, column_from_description, use_catalog_before_schema=True)
        for table in tables.values():
            self.define(table)
