"""The SQL Server connector: its configuration turned into the parts a run needs (filters, key
and column plug-ins, the schema history, the dispatcher), the checks of the server, and the
factory of :class:`~headwater.connectors.sqlserver.capture.SqlServerCaptureSource`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from headwater.config import Configuration
from headwater.connectors.sqlserver import metadata as md
from headwater.connectors.sqlserver.capture import SqlServerCaptureSource
from headwater.connectors.sqlserver.connection import SqlServerConnection, is_connection_loss, quote
from headwater.connectors.sqlserver.history import DatabaseSchema
from headwater.connectors.sqlserver.source_info import CONNECTOR_NAME, SOURCE_SCHEMA
from headwater.connectors.sqlserver.streaming import StreamSettings
from headwater.engine.connector import ConnectorError, SourceConnector
from headwater.engine.dispatcher import EventDispatcher
from headwater.engine.registry import ChangelogColumn, SourceDescription
from headwater.engine.snapshot_policy import SnapshotMode
from headwater.relational.converters import CustomConverters
from headwater.relational.filters import ColumnFilter, TableFilter
from headwater.relational.key_mapper import KeyColumnMapper
from headwater.relational.plugins import PluginError
from headwater.relational.snapshot_query import CustomSnapshotQuery
from headwater.relational.table import TableId
from headwater.relational.topic_naming import NamingError, TopicNaming

log = logging.getLogger(__name__)

# Debezium's SystemTablesPredicate (table.ignore.builtin)
SYSTEM_SCHEMAS = ("cdc", "sys")
SYSTEM_TABLES = ("systranschemas",)

# snapshot.mode values the engine's policy (or this connector, for recovery) carries out
_MODES = {"always", "initial", "initial_only", "no_data", "when_needed", "recovery", "configuration_based"}


class SqlServerConnector(SourceConnector):
    connector_name = CONNECTOR_NAME
    keeps_schema_history = True
    description = SourceDescription(
        CONNECTOR_NAME,
        (ChangelogColumn("commit_lsn", "STRING", "commit_lsn"), ChangelogColumn("change_lsn", "STRING", "change_lsn"),
         ChangelogColumn("event_serial_no", "BIGINT", "event_serial_no")))

    def __init__(self, config: Configuration) -> None:
        self.config = config
        self.server = config.get("topic.prefix")
        names = config.get("database.names")
        self.database_names: list[str] = [n.strip() for n in (names if isinstance(names, list)
                                                               else str(names or "").split(",")) if n.strip()]
        if not self.database_names:
            raise ConnectorError("database.names is empty: name the database(s) to capture")
        try:
            self.topic_naming = TopicNaming.from_config(config)
        except NamingError as exc:
            raise ConnectorError(str(exc)) from None
        self.snapshot_mode = SnapshotMode.from_config(config)
        self.snapshot_mode_name = self.snapshot_mode.mode
        configured = self.snapshot_mode_name == "configuration_based"
        # configuration_based: whether a snapshot records the table structures (history and
        # schema-change topic), and whether a missing history is answered by recording them anew
        self.snapshot_schema = not configured or bool(config.get("snapshot.mode.configuration.based.snapshot.schema"))
        self.snapshot_on_schema_error = configured and bool(
            config.get("snapshot.mode.configuration.based.snapshot.on.schema.error"))
        if self.snapshot_mode_name not in _MODES:
            raise ConnectorError(f"snapshot.mode={config.get('snapshot.mode')} is not supported by Headwater's "
                                 f"SQL Server connector; use one of {', '.join(sorted(_MODES))}")
        from headwater.connectors.sqlserver.config import snapshot_isolation_mode

        self.snapshot_isolation = snapshot_isolation_mode(config)
        ignore_builtin = config.get("table.ignore.builtin", True)
        self.table_filter = TableFilter.build(
            schema_include=config.get("schema.include.list", None),
            schema_exclude=config.get("schema.exclude.list", None),
            table_include=config.get("table.include.list"), table_exclude=config.get("table.exclude.list"),
            system_schemas=SYSTEM_SCHEMAS if ignore_builtin else (),
            system_tables=SYSTEM_TABLES if ignore_builtin else ())
        self._signal_hook(config)
        self.column_filter = ColumnFilter.build(config.get("column.include.list"), config.get("column.exclude.list"))
        try:
            self.key_columns = KeyColumnMapper.from_spec(config.get("message.key.columns"))
        except ValueError as exc:
            raise ConnectorError(f"message.key.columns: {exc}") from None
        try:
            self.custom_converters = CustomConverters.from_config(config)
            self.snapshot_query = CustomSnapshotQuery.from_config(config)
        except PluginError as exc:
            raise ConnectorError(str(exc)) from None
        skipped = config.get("skipped.operations") or []
        self.skipped_operations = frozenset() if "none" in skipped else frozenset(skipped)
        self._connected_once = False

    def _signal_hook(self, config: Configuration) -> None:
        """Signals (headwater.connectors.sqlserver.incremental): the signal table is captured
        whatever the table filters say (Debezium's RelationalTableFilters), in a database of
        database.names; `incremental.snapshot.*` options Headwater cannot honour are refused."""
        from headwater.connectors.sqlserver.incremental import SignalTableFilter, signal_table

        self.signal_table: TableId | None = signal_table(config)
        if self.signal_table is None:
            return
        if (self.signal_table.catalog or "").lower() not in {n.lower() for n in self.database_names}:
            raise ConnectorError(f"signal.data.collection={config.get('signal.data.collection')}: database "
                                 f"{self.signal_table.catalog!r} is not one of database.names "
                                 f"({', '.join(self.database_names)}); the signal table's rows are read from the "
                                 "change stream of a captured database")
        self.table_filter = SignalTableFilter(self.table_filter, self.signal_table)  # type: ignore[assignment]

    # -- SourceConnector ------------------------------------------------------------------------

    def spark_no_effect(self, runner: dict[str, str]) -> dict[str, str]:
        # the Spark driver's streaming loop waits poll.interval.ms between rounds without changes,
        # as the standalone one does; the chunk tasks read at the isolation level of
        # snapshot.isolation.mode, but no lock of one connection covers another's reads
        applied = {k: v for k, v in runner.items() if k != "poll.interval.ms"}
        if self.snapshot_isolation in ("exclusive", "repeatable_read"):
            applied["snapshot.isolation.mode"] = (
                f"{self.snapshot_isolation} takes table locks, which cannot cover the chunks the Spark source's "
                "executors read on connections of their own: they read in REPEATABLE READ without locks, and a "
                "change made during the snapshot may come twice (in a chunk and streamed), as with read_committed")
        return applied

    def partition(self) -> dict[str, Any]:
        return {"server": self.server}

    def validate(self) -> None:
        """Connect to every database and check the user can read its CDC tables (Debezium's
        validation: sp_cdc_help_change_data_capture, else cdc.change_tables), unless the snapshot
        never streams (initial_only)."""
        for name in self.database_names:
            conn = SqlServerConnection(self.config, name, purpose="headwater-validate")
            try:
                real = md.real_database_name(conn, name)
                if self.snapshot_mode_name != "initial_only":
                    try:
                        conn.query(f"SELECT COUNT(*) FROM {quote(real)}.cdc.change_tables")
                    except ConnectorError as exc:
                        if exc.retriable:
                            raise
                        raise ConnectorError(
                            f"user {self.config.get('database.user', None)!r} cannot read the CDC tables of database "
                            f"{real!r} ({exc}): enable CDC on the database (sys.sp_cdc_enable_db) and grant the "
                            "user access, or use snapshot.mode=initial_only") from None
                conn.rollback()
            finally:
                conn.close()

    def capture_source(self, *, parallel: bool) -> SqlServerCaptureSource:
        return SqlServerCaptureSource(self, parallel=parallel)

    def work_decoder(self) -> Any:
        """Spark's executors' decoder (SPARK helper): rebuilt from the properties there."""
        from headwater.connectors.sqlserver.work import SqlServerWorkDecoder

        return SqlServerWorkDecoder(self.config.raw)

    def connected(self, databases: list[str]) -> None:
        """The server was reached: from now on a lost connection is retried (errors.max.retries)."""
        self._connected_once = True

    def is_retriable(self, error: BaseException) -> bool:
        return self._connected_once and is_connection_loss(error)

    # -- parts of a run -------------------------------------------------------------------------

    def dispatcher(self, emit: Any, next_offset: Any) -> EventDispatcher:
        return EventDispatcher(emit=emit, next_offset=next_offset,
                               tombstones_on_delete=self.config.get("tombstones.on.delete"),
                               skipped_operations=self.skipped_operations,
                               provide_transaction_metadata=self.config.get("provide.transaction.metadata"),
                               transaction_topic=self.topic_naming.transaction_topic())

    def system_tables_filter(self, table_id: TableId) -> bool:
        """False for SQL Server's built-in tables (Debezium's SystemTablesPredicate)."""
        return not ((table_id.schema or "").lower() in SYSTEM_SCHEMAS or table_id.table.lower() in SYSTEM_TABLES)

    def history_scope(self) -> Any:
        from headwater.relational.schema_history import HistoryScope

        return HistoryScope(
            store_only_captured_tables=self.config.get("schema.history.internal.store.only.captured.tables.ddl", False),
            store_only_captured_databases=self.config.get("schema.history.internal.store.only.captured.databases.ddl",
                                                          False),
            ignore_builtin=self.config.get("table.ignore.builtin", True))

    def schema_history(self) -> Any:
        """The history `schema.history.internal` names (file or memory; the CONFIG helper decides
        which are accepted); without a file name, a file beside the offsets file (the runner's
        default: `.headwater/`)."""
        from headwater.connectors.sqlserver.config import schema_history
        from headwater.relational.schema_history import FileSchemaHistory, MemorySchemaHistory

        offsets = self.config.get("offset.storage.file.filename", None)
        in_memory = offsets == ":memory:" or str(self.config.get("offset.storage", "") or "").endswith(
            "MemoryOffsetBackingStore")
        kind, path = schema_history(self.config, in_memory)
        skip = self.config.get("schema.history.internal.skip.unparseable.ddl", False)
        if kind == "memory":
            history: Any = MemorySchemaHistory(skip_unparseable_ddl=skip)
        else:
            if not path:  # beside the offsets: the two belong together (a history without them is useless)
                folder = Path(offsets).parent if offsets and not in_memory else Path(".headwater")
                path = str(folder / f"{self.server}.schema-history.dat")
            history = FileSchemaHistory(path, skip_unparseable_ddl=skip)
        history.start()
        return history

    def database_schema(self) -> DatabaseSchema:
        from headwater.relational.schema_change import SchemaChangeEvents

        include = bool(self.config.get("include.schema.changes"))
        events = SchemaChangeEvents(CONNECTOR_NAME, self.topic_naming.sanitize(self.server), SOURCE_SCHEMA)
        return DatabaseSchema(self.config, self.topic_naming, column_filter=self.column_filter,
                              key_columns=self.key_columns, custom_converters=self.custom_converters,
                              history=self.schema_history(), schema_changes=events, include_schema_changes=include)

    def stream_settings(self, databases: list[str]) -> StreamSettings:
        from headwater.connectors.sqlserver.connection import read_only_intent

        heartbeat_ms = self.config.get("heartbeat.interval.ms") or 0
        return StreamSettings(
            server=self.server, databases=tuple(databases), query_mode=self.config.get("data.query.mode", "direct"),
            max_transactions=self.config.get("max.iteration.transactions", 500),
            page_rows=self.config.get("streaming.fetch.size", 0) or 0,
            fetch_size=self.config.get("query.fetch.size", 0) or 0,
            poll_interval_s=(self.config.get("poll.interval.ms", 500) or 500) / 1000,
            skipped=tuple(sorted(self.skipped_operations)),
            agent_status_query=self.config.get("database.sqlserver.agent.status.query", None),
            read_only=read_only_intent(self.config),
            heartbeat_interval_s=heartbeat_ms / 1000,
            heartbeat_topic=self.topic_naming.heartbeat_topic() if heartbeat_ms > 0 else None,
            provide_transaction_metadata=bool(self.config.get("provide.transaction.metadata")),
            failure_mode=self.config.get("event.processing.failure.handling.mode") or "fail",
            skip_unchanged=bool(self.config.get("skip.messages.without.change")))
