"""The PostgreSQL connector: checks, publication and slot, snapshot per `snapshot.mode`, then
streaming from the slot."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

import psycopg2

from headwater.config import Configuration
from headwater.connectors.postgres import snapshot as snap
from headwater.connectors.postgres.config import lsn_flush_mode, parse_stream_params
from headwater.connectors.postgres.connection import (
    connect,
    connection_error,
    describe_target,
    first_line,
    is_connection_loss,
)
from headwater.connectors.postgres.events import BuilderSettings, SnapshotRows, StreamPosition
from headwater.connectors.postgres.metadata import CatalogReader
from headwater.connectors.postgres.pgoutput import format_lsn
from headwater.connectors.postgres.replica_identity import apply_autoset
from headwater.connectors.postgres.replication import (
    SlotState,
    create_slot,
    drop_slot,
    ensure_publication,
    publish_operations,
    read_slot,
    slot_catalog_xmin,
    wait_until_slot_free,
)
from headwater.connectors.postgres.schemas import CapturedTable, SchemaRegistry
from headwater.connectors.postgres.source_info import CONNECTOR_NAME, PgOffset
from headwater.connectors.postgres.spool import StreamSpools, directory_identity
from headwater.connectors.postgres.streaming import StreamingReader
from headwater.connectors.postgres.types import TypeSettings
from headwater.engine.connector import ConnectorError, Emit, SourceConnector, connector_error
from headwater.engine.dispatcher import EventDispatcher
from headwater.engine.registry import ChangelogColumn, SourceDescription
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
    description = SourceDescription(CONNECTOR_NAME, (ChangelogColumn("txId", "BIGINT", "tx_id"),
                                                     ChangelogColumn("lsn", "BIGINT", "lsn")))

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
        self.snapshot_mode = "no_data" if mode == "never" else mode
        if config.get("snapshot.locking.mode") == "custom":
            raise ConnectorError(f"snapshot.locking.mode=custom loads a Java SnapshotLock implementation "
                                 f"({config.get('snapshot.locking.mode.custom.name')}), which Headwater cannot run; "
                                 "use shared or none")
        if self.snapshot_mode not in _MODES:
            raise ConnectorError(f"snapshot.mode={mode} loads a Java Snapshotter implementation "
                                 f"({config.get('snapshot.mode.custom.name')}), which Headwater cannot run; use one of "
                                 f"{', '.join(sorted(_MODES))}")
        self.table_filter = TableFilter.build(
            schema_include=config.get("schema.include.list"), schema_exclude=config.get("schema.exclude.list"),
            table_include=config.get("table.include.list"), table_exclude=config.get("table.exclude.list"),
            system_schemas=SYSTEM_SCHEMAS, system_tables=SYSTEM_TABLES)
        self.column_filter = ColumnFilter.build(config.get("column.include.list"), config.get("column.exclude.list"))
        try:
            self.key_columns = KeyColumnMapper.from_spec(config.get("message.key.columns"))
        except ValueError as exc:
            raise ConnectorError(f"message.key.columns: {exc}") from None
        prefixes = (config.get("message.prefix.include.list"), config.get("message.prefix.exclude.list"))
        self.message_filter = PrefixFilter.build(*prefixes) if any(prefixes) else None
        self._include_patterns = [re.compile(p, re.IGNORECASE) for p in config.get("table.include.list") or []]
        try:  # the plug-ins load (and their names are checked) at start, not at the first event
            self.custom_converters = CustomConverters.from_config(config)
            self.snapshot_query = CustomSnapshotQuery.from_config(config)
        except PluginError as exc:
            raise ConnectorError(str(exc)) from None
        skipped = config.get("skipped.operations") or []
        self.skipped_operations = frozenset() if "none" in skipped else frozenset(skipped)
        self._conn: Any = None
        self._repl: Any = None
        self._streaming: StreamingReader | None = None
        self._pool: Any = None
        self._heartbeat_conn: Any = None
        self._xmin_conn: Any = None
        self._connected_once = False
        self._server_version = 0

    # -- SourceConnector ------------------------------------------------------------------

    def partition(self) -> dict[str, Any]:
        return {"server": self.server}

    def validate(self) -> None:
        conn = connect(self.config, application_name="headwater-validate")
        try:
            self._check_server(conn)
            self._captured_table_ids(CatalogReader(conn))
        finally:
            conn.close()

    def acknowledge(self, offset: dict[str, Any]) -> None:
        lsn = offset.get("lsn_commit")
        if self._streaming is not None and isinstance(lsn, int) and lsn > 0:
            self._streaming.acknowledge(lsn)

    def run(self, offset: dict[str, Any] | None, emit: Emit, stop: threading.Event) -> None:
        stored = self._parse_offset(offset)
        self._conn = connect(self.config, application_name="headwater")
        self._check_server(self._conn)
        self._connected_once = True  # from now on a lost connection is retried (errors.max.retries)
        catalog = CatalogReader(self._conn)
        table_ids = self._captured_table_ids(catalog)
        self.ensure_publication(self._conn, table_ids)
        slot = self.wait_for_slot(self._conn)
        if slot is not None and (slot.plugin != "pgoutput" or slot.database != self.dbname):
            raise ConnectorError(
                f"replication slot {self.slot_name!r} exists for plugin {slot.plugin!r} in database "
                f"{slot.database!r}; Headwater needs a pgoutput slot in {self.dbname!r} (choose another slot.name)")

        want_snapshot = self._wants_snapshot(stored, slot is not None, self._slot_problem(stored, slot))
        registry = self.builder_settings().registry(catalog)

        self._repl = connect(self.config, replication=True, application_name="headwater-stream")
        start = stored if stored is not None and not want_snapshot else None
        if want_snapshot:
            delay_ms = self.config.get("snapshot.delay.ms")
            if delay_ms > 0:
                log.info("waiting %d ms before the snapshot (snapshot.delay.ms)", delay_ms)
                if stop.wait(delay_ms / 1000):
                    return
            resume = slot.confirmed_flush_lsn if slot is not None and slot.wal_status != "lost" else None
            if resume:
                # The slot exists (a snapshot that did not finish, or mode=always). As Debezium
                # does, it is kept: a snapshot of the present is read (in one transaction of
                # `snapshot.isolation.mode`), then the stream sends everything since the slot's
                # position again. A new slot would start after changes the sinks never saw: a row
                # deleted since a partial snapshot would stay there as a ghost.
                log.warning("replication slot %s exists: taking a snapshot, then streaming from the slot's "
                            "position %s (changes since then arrive again)", self.slot_name, format_lsn(resume))
                start = self._snapshot(catalog, registry, table_ids, None, resume, emit, stop)
            else:
                if slot is not None:  # invalidated (wal_status=lost) or never confirmed: unusable
                    drop_slot(self._conn, self.slot_name)
                created = create_slot(self._repl, self.slot_name, export_snapshot=True)
                log.info("created replication slot %s at %s", self.slot_name,
                         format_lsn(created.consistent_point))
                start = self._snapshot(catalog, registry, table_ids, created.snapshot_name,
                                       created.consistent_point, emit, stop)
            if start is None or not self._streams() or stop.is_set():
                return
        elif slot is None:
            created = create_slot(self._repl, self.slot_name, export_snapshot=False)
            start = start or PgOffset(lsn_commit=created.consistent_point)
        elif start is None:
            # no offsets, no snapshot wanted, slot exists: stream from where the slot stands
            start = PgOffset(lsn_commit=slot.confirmed_flush_lsn or 0)
        if not self._streams():
            return
        self.apply_replica_identities(self._conn, table_ids)
        self._stream(registry, start, emit, stop)

    def is_retriable(self, error: BaseException) -> bool:
        """A lost or unreachable server, once this connector has connected at least once (a
        failure to connect at start-up is a configuration problem and stops, PG-414)."""
        return self._connected_once and is_connection_loss(error)

    def release(self) -> None:
        self._streaming = None
        if self._pool is not None:
            self._pool.close()
        for conn in (self._repl, self._conn, self._heartbeat_conn, self._xmin_conn):
            if conn is not None:
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
        self._repl = None
        self._heartbeat_conn = None
        self._xmin_conn = None
        self._conn = None

    def close(self) -> None:
        if self._streaming is not None:
            self._streaming.final_feedback()
        self.release()
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

    def _parse_offset(self, offset: dict[str, Any] | None) -> PgOffset | None:
        if offset is None:
            return None
        try:
            return PgOffset.from_dict(offset)
        except (ValueError, TypeError) as exc:
            raise ConnectorError(f"stored offset for server {self.server!r} is invalid ({exc}); "
                                 "remove the offsets file to start over") from None

    def _check_server(self, conn: Any) -> None:
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
        self._server_version = version

    def _stream_spools(self) -> StreamSpools | None:
        """The spool for streamed in-progress transactions, or None for protocol 1
        (`streaming.in.progress.transactions`)."""
        mode = self.config.get("streaming.in.progress.transactions")
        if mode == "off" or self._server_version < 140000:
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

    def configure_reader(self, reader: StreamingReader) -> None:
        """What a streaming reader takes from the configuration besides its constructor's
        arguments: the plug-in's options and the slot's xmin reads."""
        reader.stream_params = parse_stream_params(self.config.get("slot.stream.params"))
        xmin_ms = self.config.get("xmin.fetch.interval.ms")
        if xmin_ms > 0:
            reader.xmin_fetch = self._fetch_slot_xmin
            reader.xmin_interval_s = xmin_ms / 1000

    def _captured_table_ids(self, catalog: CatalogReader) -> list[tuple[TableId, str]]:
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

    def _streams(self) -> bool:
        if self.snapshot_mode == "initial_only":
            return False
        if self.snapshot_mode == "configuration_based":
            return self.config.get("snapshot.mode.configuration.based.start.stream")
        return True

    def _wants_snapshot(self, stored: PgOffset | None, slot_exists: bool, problem: str | None = None) -> bool:
        """Whether to snapshot. A stored offset the slot cannot serve (the slot is missing, or
        `problem`: it was recreated or moved past the offset, or invalidated) is never skipped
        silently: modes that may snapshot again do (when_needed, always, configuration_based with
        snapshot.on.data.error), the others fail with an error saying what was lost."""
        mode = self.snapshot_mode
        in_progress = stored is not None and stored.snapshot and not stored.snapshot_completed
        usable = slot_exists and problem is None
        if mode == "always":
            return True
        if mode == "configuration_based":
            on_data_error = self.config.get("snapshot.mode.configuration.based.snapshot.on.data.error")
            if stored is not None and not in_progress and not usable and not on_data_error:
                raise self._vanished_slot_error(stored, problem)
            wants_data = self.config.get("snapshot.mode.configuration.based.snapshot.data")
            return wants_data or (stored is not None and not usable)
        if mode == "no_data":
            if stored is not None and not usable:
                raise self._vanished_slot_error(stored, problem)
            return False
        if stored is None or in_progress:
            return True
        if not usable:
            if mode == "when_needed":
                log.warning("replication slot %s %s; taking a new snapshot (snapshot.mode=when_needed)",
                            self.slot_name, problem or "no longer exists")
                return True
            raise self._vanished_slot_error(stored, problem)
        return False

    def _slot_problem(self, stored: PgOffset | None, slot: SlotState | None) -> str | None:
        """Why an existing slot cannot resume at the stored offset, or None. A slot that was
        dropped and created again (a restore, pg_upgrade, a manual drop) or advanced by hand
        starts past the stored position: the server would silently resume from the slot and the
        changes in between would be lost (spec PG-243, a Headwater hardening)."""
        if stored is None or slot is None or (stored.snapshot and not stored.snapshot_completed):
            return None
        if slot.wal_status == "lost":
            return ("was invalidated by the server (wal_status=lost: max_slot_wal_keep_size removed WAL it "
                    "still needed)")
        position = slot.position()
        if stored.lsn_commit is None or position is None or position <= stored.lsn_commit:
            return None
        problem = (f"starts at {format_lsn(position)} (confirmed_flush_lsn "
                   f"{format_lsn(slot.confirmed_flush_lsn or 0)}, restart_lsn {format_lsn(slot.restart_lsn or 0)}: "
                   "it was dropped and created again, or advanced by hand)")
        if not self._flush_lsn_enabled():
            # lsn.flush.mode=manual: whoever advances the slot may have moved it past the offset
            log.warning("replication slot %s %s; the changes in between are not received again", self.slot_name,
                        problem)
            return None
        return problem

    def _vanished_slot_error(self, stored: PgOffset, problem: str | None = None, *, resumer: str | None = None,
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

    def use_encoding_pool(self, pool: Any) -> bool:
        """Let worker processes build and serialize streamed events (see
        headwater.serialization.parallel). Not with transaction metadata, whose BEGIN/END
        counts need every event of a transaction in one place."""
        if self.config.get("provide.transaction.metadata"):
            return False
        self._pool = pool
        return True

    def _snapshot(self, catalog: CatalogReader, registry: SchemaRegistry, table_ids: list[tuple[TableId, str]],
                  snapshot_name: str | None, lsn: int, emit: Emit, stop: threading.Event) -> PgOffset | None:
        """Read every captured table inside the slot's exported snapshot. Returns the streaming
        start position, or None when stopped before the snapshot completed."""
        reader_conn = connect(self.config, application_name="headwater-snapshot")
        try:
            txid, wal_lsn = snap.begin_snapshot_transaction(reader_conn, snapshot_name,
                                                            self.config.get("snapshot.isolation.mode"))
            # the records say where the snapshot was read (a new slot's consistent point, else the
            # WAL position of the snapshot transaction, as Debezium); streaming resumes at `lsn`
            record_lsn = wal_lsn or lsn  # wal_lsn is None with an exported snapshot
            include = self.config.get("snapshot.include.collection.list") or []
            patterns = [re.compile(p, re.IGNORECASE) for p in include]
            if self.config.get("snapshot.locking.mode") == "shared":
                snap.lock_tables(reader_conn, [t for t, _ in table_ids if not patterns or any(
                    p.fullmatch(t.identifier()) for p in patterns)], self.config.get("snapshot.lock.timeout.ms"))
            oids = [catalog.oid_of(t) for t, _ in table_ids]
            tables = registry.load([o for o in oids if o is not None])
            ordered = sorted(tables.values(), key=self._snapshot_order)
            if patterns:
                ordered = [c for c in ordered if any(p.fullmatch(c.collection) for p in patterns)]
            # select overrides, else the custom snapshot query (which may leave tables out)
            ordered, overrides = snap.snapshot_selects(self.config, self.snapshot_query, self.column_filter, ordered)
            buffer: list[Any] = []
            held: list[Any] = []  # the latest record, held back: the snapshot's last one says "last"

            offset = PgOffset(lsn_commit=lsn, lsn=lsn, tx_id=txid, snapshot=True)
            offset_dict = offset.to_dict()

            def next_offset() -> dict[str, Any]:
                return offset_dict

            def emit_one(item: Any) -> None:
                if held:
                    buffer.append(held.pop())
                held.append(item)
                if len(buffer) >= 512:
                    emit(buffer[:])
                    buffer.clear()

            dispatcher = self.builder_settings().dispatcher(emit_one, next_offset)
            last_index = len(ordered) - 1
            for index, captured in enumerate(ordered):
                if stop.is_set():
                    return None
                self._snapshot_table(reader_conn, captured, overrides, dispatcher, txid, record_lsn,
                                     index == 0, index == last_index, stop)
            reader_conn.commit()
            if held:
                # Debezium marks the snapshot's last record "last" even when empty tables follow it
                # (its position-based markers alone would say last_in_data_collection)
                held[0].value["source"]["snapshot"] = "last"
                buffer.append(held.pop())
            done = PgOffset(lsn_commit=lsn, lsn=lsn, tx_id=txid, snapshot_completed=True)
            dispatcher.dispatch_offset(done.to_dict())
            if buffer:
                emit(buffer[:])
                buffer.clear()
            return done
        except snap.SnapshotStopped:
            return None
        except psycopg2.Error as exc:
            raise connection_error("snapshot failed", exc) from None
        finally:
            reader_conn.close()

    def _snapshot_order(self, captured: CapturedTable) -> tuple[int, tuple[str, str, str]]:
        """Debezium snapshots tables in the order of `table.include.list` (the first pattern a
        table matches), and alphabetically among tables matched by the same pattern."""
        patterns = self._include_patterns
        rank = next((i for i, p in enumerate(patterns) if p.fullmatch(captured.collection)), len(patterns))
        return rank, captured.table.id.sort_key()

    def _snapshot_table(self, conn: Any, captured: CapturedTable, overrides: dict[str, str],
                        dispatcher: EventDispatcher, txid: int, lsn: int, first_table: bool, last_table: bool,
                        stop: threading.Event) -> None:
        rows = SnapshotRows(self.builder_settings(), captured, dispatcher, txid=txid, lsn=lsn,
                            first_table=first_table, last_table=last_table)
        snap.read_rows(conn, captured, overrides, stop, rows.on_row, self.config.get("database.query.timeout.ms"))
        rows.finish()

    def _stream(self, registry: SchemaRegistry, start: PgOffset, emit: Emit, stop: threading.Event) -> None:
        settings = self.builder_settings()
        if self._pool is not None:
            self._pool.start(settings)
        reader = StreamingReader(
            repl_conn=self._repl, registry=registry, settings=settings, slot_name=self.slot_name,
            publication=self.publication,
            status_interval_s=max(self.config.get("status.update.interval.ms") / 1000, 1.0),
            flush_lsn_to_server=self._flush_lsn_enabled(), emit=emit, position=StreamPosition.resume(start),
            pool=self._pool, heartbeat_interval_s=self.config.get("heartbeat.interval.ms") / 1000,
            heartbeat_action=self._heartbeat_action if self.config.get("heartbeat.action.query") else None,
            spools=self._stream_spools(), server_version=self._server_version)
        self._streaming = reader
        self.configure_reader(reader)
        reader.start()
        log.info("streaming from slot %s at %s%s", self.slot_name, format_lsn(start.lsn_commit or 0),
                 f" with {self._pool.workers} worker processes" if self._pool is not None else "")
        if reader.spools is not None:
            log.info("in-progress transactions are streamed (pgoutput protocol 2) and spooled in %s",
                     reader.spools.directory)
        try:
            reader.run(stop)
        except ConnectorError as exc:
            raise self._explain_stream_failure(exc) from None

    def _explain_stream_failure(self, exc: ConnectorError) -> ConnectorError:
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
        resnapshots = self.snapshot_mode in ("when_needed", "always") or (
            self.snapshot_mode == "configuration_based"
            and self.config.get("snapshot.mode.configuration.based.snapshot.on.data.error"))
        return connector_error(
            f"replication slot {self.slot_name!r} in database {self.dbname!r} was dropped while streaming "
            f"({exc}); the changes it still held are lost for this connector, and nothing past the last stored "
            "offset was acknowledged. "
            + ("A restart takes a new snapshot (snapshot.mode=" + self.snapshot_mode + ")" if resnapshots else
               "Restart with snapshot.mode=when_needed to take a new snapshot"),
            retriable=exc.retriable and resnapshots)

    def _fetch_slot_xmin(self) -> int | None:
        """The slot's catalog_xmin (Debezium's source.xmin), on its own connection (reader thread);
        None when it cannot be read, as Debezium's value before the first read."""
        try:
            if self._xmin_conn is None or self._xmin_conn.closed:
                self._xmin_conn = connect(self.config, application_name="headwater-xmin")
            return slot_catalog_xmin(self._xmin_conn, self.slot_name)
        except (psycopg2.Error, ConnectorError) as exc:
            reason = first_line(exc) if isinstance(exc, psycopg2.Error) else str(exc)
            log.warning("could not read the xmin of replication slot %s: %s", self.slot_name, reason)
            return None

    def _heartbeat_action(self) -> None:
        """Run `heartbeat.action.query` on its own autocommit connection (reader thread). A
        failure is logged with the query and does not stop capture; a broken connection is
        opened again at the next heartbeat (autocommit: a failed statement leaves no aborted
        transaction behind)."""
        query = self.config.get("heartbeat.action.query")
        try:
            if self._heartbeat_conn is None or self._heartbeat_conn.closed:
                self._heartbeat_conn = connect(self.config, application_name="headwater-heartbeat")
            with self._heartbeat_conn.cursor() as cur:
                cur.execute(query)
        except (psycopg2.Error, ConnectorError) as exc:
            reason = first_line(exc) if isinstance(exc, psycopg2.Error) else str(exc)
            log.error("heartbeat.action.query %r failed: %s", query, reason)

    def _flush_lsn_enabled(self) -> bool:
        """Whether this connector acknowledges to the slot (`lsn.flush.mode`, else `flush.lsn.source`)."""
        return lsn_flush_mode(self.config) != "manual"
