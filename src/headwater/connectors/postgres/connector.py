"""The PostgreSQL connector: its configuration, the checks of the server, the publication and
the slot; the engine runs it through :class:`~headwater.connectors.postgres.capture.PgCaptureSource`."""

from __future__ import annotations

import logging
import re
from typing import Any

import psycopg2

from headwater.config import Configuration
from headwater.connectors.postgres.capture import PgCaptureSource
from headwater.connectors.postgres.config import lsn_flush_mode, parse_stream_params
from headwater.connectors.postgres.connection import (
    connect,
    connect_kwargs,
    describe_target,
    is_connection_loss,
)
from headwater.connectors.postgres.events import BuilderSettings
from headwater.connectors.postgres.incremental import READ_ONLY_MIN_VERSION, SignalTableFilter, signal_table
from headwater.connectors.postgres.metadata import CatalogReader
from headwater.connectors.postgres.pgoutput import format_lsn
from headwater.connectors.postgres.replica_identity import apply_autoset
from headwater.connectors.postgres.replication import (
    SlotState,
    drop_slot,
    ensure_publication,
    publish_operations,
    read_slot,
    wait_until_slot_free,
)
from headwater.connectors.postgres.source_info import CONNECTOR_NAME, SEQUENCE, PgOffset
from headwater.connectors.postgres.spool import StreamSpools, directory_identity
from headwater.connectors.postgres.types import TypeSettings
from headwater.connectors.postgres.work import PgWorkDecoder
from headwater.engine.connector import ConnectorError, SourceConnector, connector_error
from headwater.engine.registry import ChangelogColumn, SourceDescription
from headwater.engine.snapshot_policy import SnapshotMode
from headwater.relational.column_mappers import ColumnMappers
from headwater.relational.converters import CustomConverters
from headwater.relational.filters import ColumnFilter, PrefixFilter, TableFilter
from headwater.relational.key_mapper import KeyColumnMapper
from headwater.relational.plugins import PluginError
from headwater.relational.snapshot_query import CustomSnapshotQuery
from headwater.relational.table import TableId
from headwater.relational.topic_naming import NamingError, TopicNaming

log = logging.getLogger(__name__)

SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")
# Debezium's SystemTablesPredicate: tables an extension creates in a user schema (recorded, types_postgis)
SYSTEM_TABLES = ("spatial_ref_sys",)

# The built-in modes of Debezium's Snapshotter SPI (spec PG-34); `custom` loads Java code.
_MODES = {"always", "initial", "initial_only", "no_data", "when_needed", "configuration_based"}


class PostgresConnector(SourceConnector):
    connector_name = CONNECTOR_NAME
    description = SourceDescription(
        CONNECTOR_NAME, (ChangelogColumn("txId", "BIGINT", "tx_id"), ChangelogColumn("lsn", "BIGINT", "lsn")),
        derived_row_fields=(SEQUENCE,))

    def __init__(self, config: Configuration) -> None:
        self.config = config
        self.server = config.get("topic.prefix")
        self.dbname = config.get("database.dbname")
        self.slot_name = config.get("slot.name")
        try:
            self.topic_naming = TopicNaming.from_config(config)
        except NamingError as exc:
            raise ConnectorError(str(exc)) from None
        self.publication = config.get("publication.name")
        mode = config.get("snapshot.mode")
        self.snapshot_mode = SnapshotMode.from_config(config)
        if config.get("snapshot.locking.mode") == "custom":
            raise ConnectorError(f"snapshot.locking.mode=custom loads a Java SnapshotLock implementation "
                                 f"({config.get('snapshot.locking.mode.custom.name')}), which Headwater cannot run; "
                                 "use shared or none")
        if self.snapshot_mode.mode not in _MODES:
            raise ConnectorError(f"snapshot.mode={mode} loads a Java Snapshotter implementation "
                                 f"({config.get('snapshot.mode.custom.name')}), which Headwater cannot run; use one of "
                                 f"{', '.join(sorted(_MODES))}")
        self.table_filter = TableFilter.build(
            schema_include=config.get("schema.include.list"), schema_exclude=config.get("schema.exclude.list"),
            table_include=config.get("table.include.list"), table_exclude=config.get("table.exclude.list"),
            system_schemas=SYSTEM_SCHEMAS, system_tables=SYSTEM_TABLES)
        signal = signal_table(config)
        if signal is not None:  # captured whatever the filters say (Debezium's RelationalTableFilters)
            self.table_filter = SignalTableFilter(self.table_filter, signal)
        self.column_filter = ColumnFilter.build(config.get("column.include.list"), config.get("column.exclude.list"))
        try:
            self.key_columns = KeyColumnMapper.from_spec(config.get("message.key.columns"))
        except ValueError as exc:
            raise ConnectorError(f"message.key.columns: {exc}") from None
        prefixes = (config.get("message.prefix.include.list"), config.get("message.prefix.exclude.list"))
        self.message_filter = PrefixFilter.build(*prefixes) if any(prefixes) else None
        try:  # the plug-ins load (and their names are checked) at start, not at the first event
            self.custom_converters = CustomConverters.from_config(config)
            self.snapshot_query = CustomSnapshotQuery.from_config(config)
        except PluginError as exc:
            raise ConnectorError(str(exc)) from None
        skipped = config.get("skipped.operations") or []
        self.skipped_operations = frozenset() if "none" in skipped else frozenset(skipped)
        self.pool: Any = None  # worker processes that build streamed events (use_encoding_pool)
        self._connected_once = False
        self.server_version = 0

    # -- SourceConnector ------------------------------------------------------------------

    def spark_no_effect(self, runner: dict[str, str]) -> dict[str, str]:
        return {**runner, "snapshot.isolation.mode": "the Spark source's parallel readers share one exported "
                                                     "snapshot, read in REPEATABLE READ"}

    def partition(self) -> dict[str, Any]:
        return {"server": self.server}

    def validate(self) -> None:
        conn = connect(self.config, application_name="headwater-validate")
        try:
            self.check_server(conn)
            self.captured_table_ids(CatalogReader(conn))
        finally:
            conn.close()

    def capture_source(self, *, parallel: bool) -> PgCaptureSource:
        return PgCaptureSource(self, parallel=parallel)

    def connected(self) -> None:
        """The server was reached and checked: from now on a lost connection is retried
        (errors.max.retries)."""
        self._connected_once = True

    def work_decoder(self) -> PgWorkDecoder:
        return PgWorkDecoder(self.builder_settings(),
                             connect_kwargs(self.config, application_name="headwater-executor"))

    def is_retriable(self, error: BaseException) -> bool:
        """A lost or unreachable server, once this connector has connected at least once (a
        failure to connect at start-up is a configuration problem and stops, PG-414)."""
        return self._connected_once and is_connection_loss(error)

    def close(self) -> None:
        if self.config.get("slot.drop.on.stop") and self._connected_once:
            try:
                conn = connect(self.config, application_name="headwater-cleanup")
                try:
                    drop_slot(conn, self.slot_name)
                finally:
                    conn.close()
            except (psycopg2.Error, ConnectorError) as exc:
                log.warning("could not drop replication slot %s: %s", self.slot_name, exc)

    # -- steps ----------------------------------------------------------------------------

    def check_server(self, conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute("SHOW wal_level")
            wal_level = cur.fetchone()[0]
            cur.execute("SHOW server_version_num")
            version = int(cur.fetchone()[0])
        if wal_level != "logical":
            raise ConnectorError(
                f"{describe_target(self.config)} has wal_level={wal_level}; logical decoding needs "
                "wal_level=logical (set it in postgresql.conf and restart the server)")
        if version < 100000:
            raise ConnectorError(f"{describe_target(self.config)} runs PostgreSQL {version}; pgoutput needs 10+")
        if version < 140000 and self.config.get("streaming.in.progress.transactions") == "on":
            raise ConnectorError(
                f"{describe_target(self.config)} runs PostgreSQL {version}; streaming.in.progress.transactions=on "
                "needs PostgreSQL 14+ (pgoutput protocol 2); set it to auto or off")
        if self.config.get("read.only") and version < READ_ONLY_MIN_VERSION:
            raise ConnectorError(f"{describe_target(self.config)} runs PostgreSQL {version}; read.only=true needs "
                                 "PostgreSQL 13+ (pg_current_snapshot() watermarks)")
        self.server_version = version

    def stream_spools(self) -> StreamSpools | None:
        """The spool for streamed in-progress transactions, or None for protocol 1
        (`streaming.in.progress.transactions`)."""
        mode = self.config.get("streaming.in.progress.transactions")
        if mode == "off" or self.server_version < 140000:
            return None
        identity = directory_identity(self.config.get("database.hostname"), self.config.get("database.port"),
                                      self.dbname, self.server)
        directory = StreamSpools.default_directory(self.config.get("streaming.spool.directory"), self.slot_name,
                                                   identity)
        return StreamSpools(directory, self.config.get("streaming.spool.memory.bytes"))

    def ensure_publication(self, conn: Any, table_ids: list[tuple[TableId, str]]) -> None:
        """The publication as `publication.autocreate.mode`, `publish.via.partition.root` and
        `skipped.operations` say (for the standalone runner and the Spark source alike)."""
        ensure_publication(conn, self.publication, self.config.get("publication.autocreate.mode"),
                           [t for t, kind in table_ids if kind in ("r", "p")],
                           via_partition_root=self.config.get("publish.via.partition.root"),
                           publish=publish_operations(self.config.get("skipped.operations")
                                                      if self.config.is_set("skipped.operations") else None))

    def wait_for_slot(self, conn: Any) -> SlotState | None:
        """The slot's state once no other process holds it, checked `slot.max.retries` times
        `slot.retry.delay.ms` apart (ConnectorError when it stays held)."""
        return wait_until_slot_free(conn, self.slot_name, retries=self.config.get("slot.max.retries"),
                                    delay_s=self.config.get("slot.retry.delay.ms") / 1000)

    def apply_replica_identities(self, conn: Any, table_ids: list[tuple[TableId, str]]) -> None:
        """`replica.identity.autoset.values` on the captured tables; as Debezium, when streaming
        starts (after the snapshot)."""
        apply_autoset(conn, self.config.get("replica.identity.autoset.values"), [t for t, _ in table_ids])

    def captured_table_ids(self, catalog: CatalogReader) -> list[tuple[TableId, str]]:
        tables = [(table_id, kind) for _, table_id, kind in catalog.list_tables()]
        captured = [(t, k) for t, k in tables if self.table_filter(t)]
        includes = self.config.get("table.include.list") or []
        if includes:
            for pattern in includes:
                rx = re.compile(pattern, re.IGNORECASE)
                if not any(rx.fullmatch(t.identifier()) for t, _ in tables):
                    raise ConnectorError(
                        f"table.include.list entry {pattern!r} matches no table in database {self.dbname!r}")
        return captured

    def vanished_slot_error(self, stored: PgOffset, problem: str | None = None, *, resumer: str | None = None,
                             fresh_start: str = "remove the offsets file") -> ConnectorError:
        """The slot cannot serve the position `resumer` (default: the stored offset) resumes at;
        `fresh_start` is how to start over without it (a Spark pipeline: a new checkpoint)."""
        where = format_lsn(stored.lsn_commit) if stored.lsn_commit is not None else "an unknown position"
        state = problem or "does not exist"
        resumer = resumer or f"the stored offset of server {self.server!r}"
        return ConnectorError(
            f"replication slot {self.slot_name!r} in database {self.dbname!r} {state}, but {resumer} resumes at "
            f"{where}: the changes committed since then cannot be streamed and may be lost. Set "
            "snapshot.mode=when_needed to take a new snapshot from a new slot (or always; rows deleted in between "
            f"may then remain in materialized tables), or, accepting the loss, {fresh_start} and start with "
            "snapshot.mode=no_data")

    def builder_settings(self) -> BuilderSettings:
        delimiter = self.config.get("topic.delimiter")
        naming = self.topic_naming
        return BuilderSettings(
            server=self.server, dbname=self.dbname, message_topic=naming.message_topic(),
            topic_delimiter=delimiter, table_filter=self.table_filter, column_filter=self.column_filter,
            key_columns=self.key_columns, include_unknown=self.config.get("include.unknown.datatypes"),
            tombstones_on_delete=self.config.get("tombstones.on.delete"),
            skipped_operations=self.skipped_operations,
            provide_transaction_metadata=self.config.get("provide.transaction.metadata"),
            transaction_topic=naming.transaction_topic(),
            unavailable_placeholder=self.config.get("unavailable.value.placeholder"),
            column_mappers=ColumnMappers.from_config(self.config),
            heartbeat_topic=naming.heartbeat_topic() if self.config.get("heartbeat.interval.ms") > 0 else None,
            topic_naming=naming, schema_name_adjustment=self.config.get("schema.name.adjustment.mode"),
            field_name_adjustment=self.config.get("field.name.adjustment.mode"),
            failure_mode=self.config.get("event.processing.failure.handling.mode"),
            type_settings=TypeSettings.from_config(self.config),
            custom_converters=self.custom_converters,
            message_filter=self.message_filter,
            skip_unchanged=self.config.get("skip.messages.without.change"),
        )

    def stream_params(self) -> dict[str, str]:
        """The plug-in's options from `slot.stream.params`."""
        return parse_stream_params(self.config.get("slot.stream.params"))

    def use_encoding_pool(self, pool: Any) -> bool:
        """Let worker processes build and serialize streamed events (see
        headwater.serialization.parallel). Not with transaction metadata, whose BEGIN/END
        counts need every event of a transaction in one place."""
        if self.config.get("provide.transaction.metadata"):
            return False
        if signal_table(self.config) is not None:
            # the signal stage (headwater.engine.signals) reads the signal table's records and
            # de-duplicates incremental-snapshot windows against streamed ones: it must see the
            # records, which the pool's workers serialize out of its reach
            if self.config.get("encoding.workers") > 0:
                log.warning("encoding.workers=%d has no effect with signal.data.collection set: events are built "
                            "on the reader thread, where incremental-snapshot windows see them",
                            self.config.get("encoding.workers"))
            return False
        self.pool = pool
        return True

    def explain_stream_failure(self, exc: ConnectorError) -> ConnectorError:
        """A stream that fails because its slot was dropped (the walsender terminated, then
        pg_drop_replication_slot) says so: the changes the slot held are gone, and nothing after
        the last stored offset was acknowledged."""
        try:
            conn = connect(self.config, application_name="headwater-check")
            try:
                slot = read_slot(conn, self.slot_name)
            finally:
                conn.close()
        except (psycopg2.Error, ConnectorError):
            return exc  # the server is unreachable: the original error says why
        if slot is not None:
            return exc
        # retrying helps only where a restart takes a new snapshot; otherwise it would just fail again
        resnapshots = self.snapshot_mode.snapshots_when_lost
        return connector_error(
            f"replication slot {self.slot_name!r} in database {self.dbname!r} was dropped while streaming "
            f"({exc}); the changes it still held are lost for this connector, and nothing past the last stored "
            "offset was acknowledged. "
            + (f"A restart takes a new snapshot (snapshot.mode={self.config.get('snapshot.mode')})" if resnapshots else
               "Restart with snapshot.mode=when_needed to take a new snapshot"),
            retriable=exc.retriable and resnapshots)

    def flush_lsn_enabled(self) -> bool:
        """Whether this connector acknowledges to the slot (`lsn.flush.mode`, else `flush.lsn.source`)."""
        return lsn_flush_mode(self.config) != "manual"
