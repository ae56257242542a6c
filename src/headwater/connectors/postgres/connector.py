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
from headwater.connectors.postgres.config import lsn_flush_mode
from headwater.connectors.postgres.connection import connect, describe_target, first_line
from headwater.connectors.postgres.events import BuilderSettings, StreamPosition
from headwater.connectors.postgres.metadata import CatalogReader
from headwater.connectors.postgres.pgoutput import format_lsn
from headwater.connectors.postgres.replication import (
    create_slot,
    drop_slot,
    ensure_publication,
    wait_until_slot_free,
)
from headwater.connectors.postgres.schemas import CapturedTable, SchemaRegistry
from headwater.connectors.postgres.source_info import CONNECTOR_NAME, PgOffset, source_block
from headwater.connectors.postgres.streaming import StreamingReader
from headwater.engine.connector import ConnectorError, Emit, SourceConnector
from headwater.engine.dispatcher import EventDispatcher
from headwater.model.envelope import OP_READ
from headwater.relational.column_mappers import ColumnMappers
from headwater.relational.filters import ColumnFilter, TableFilter
from headwater.relational.table import TableId

log = logging.getLogger(__name__)

SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")

# The built-in modes of Debezium's Snapshotter SPI (spec PG-34); `custom` loads Java code.
_MODES = {"always", "initial", "initial_only", "no_data", "when_needed", "configuration_based"}


def parse_key_columns(spec: str | None) -> dict[str, list[str]]:
    """`message.key.columns`: `schema.table:col1,col2;schema.table2:col` -> {"schema.table": [...]}."""
    out: dict[str, list[str]] = {}
    if not spec:
        return out
    for entry in spec.split(";"):
        entry = entry.strip()
        if not entry:
            continue
        if ":" not in entry:
            raise ConnectorError(f"message.key.columns entry {entry!r} is not of the form <schema>.<table>:<col>,...")
        table, cols = entry.split(":", 1)
        out[table.strip()] = [c.strip() for c in cols.split(",") if c.strip()]
    return out


class PostgresConnector(SourceConnector):
    connector_name = CONNECTOR_NAME

    def __init__(self, config: Configuration) -> None:
        self.config = config
        self.server = config.get("topic.prefix")
        self.dbname = config.get("database.dbname")
        self.slot_name = config.get("slot.name")
        self.publication = config.get("publication.name")
        mode = config.get("snapshot.mode")
        self.snapshot_mode = "no_data" if mode == "never" else mode
        if self.snapshot_mode not in _MODES:
            raise ConnectorError(f"snapshot.mode={mode} loads a Java Snapshotter implementation, which Headwater "
                                 f"cannot run; use one of {', '.join(sorted(_MODES))}")
        self.table_filter = TableFilter.build(
            schema_include=config.get("schema.include.list"), schema_exclude=config.get("schema.exclude.list"),
            table_include=config.get("table.include.list"), table_exclude=config.get("table.exclude.list"),
            system_schemas=SYSTEM_SCHEMAS)
        self.column_filter = ColumnFilter.build(config.get("column.include.list"), config.get("column.exclude.list"))
        self.key_columns = parse_key_columns(config.get("message.key.columns"))
        self._include_patterns = [re.compile(p, re.IGNORECASE) for p in config.get("table.include.list") or []]
        skipped = config.get("skipped.operations") or []
        self.skipped_operations = frozenset() if "none" in skipped else frozenset(skipped)
        self._conn: Any = None
        self._repl: Any = None
        self._streaming: StreamingReader | None = None
        self._pool: Any = None
        self._heartbeat_conn: Any = None

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
        catalog = CatalogReader(self._conn)
        table_ids = self._captured_table_ids(catalog)
        ensure_publication(self._conn, self.publication, self.config.get("publication.autocreate.mode"),
                           [t for t, kind in table_ids if kind in ("r", "p")])
        slot = wait_until_slot_free(self._conn, self.slot_name, retries=self.config.get("slot.max.retries"),
                                    delay_s=self.config.get("slot.retry.delay.ms") / 1000)
        if slot is not None and (slot.plugin != "pgoutput" or slot.database != self.dbname):
            raise ConnectorError(
                f"replication slot {self.slot_name!r} exists for plugin {slot.plugin!r} in database "
                f"{slot.database!r}; Headwater needs a pgoutput slot in {self.dbname!r} (choose another slot.name)")

        want_snapshot = self._wants_snapshot(stored, slot is not None)
        registry = self.builder_settings().registry(catalog)

        self._repl = connect(self.config, replication=True, application_name="headwater-stream")
        start = stored if stored is not None and not want_snapshot else None
        if want_snapshot:
            if slot is not None:
                # The slot predates this snapshot (a snapshot that did not finish, or mode=always):
                # recreate it so the snapshot reads exactly the slot's consistent point.
                drop_slot(self._conn, self.slot_name)
            created = create_slot(self._repl, self.slot_name, export_snapshot=True)
            log.info("created replication slot %s at %s", self.slot_name, format_lsn(created.consistent_point))
            start = self._snapshot(catalog, registry, table_ids, created.snapshot_name, created.consistent_point,
                                   emit, stop)
            if start is None or not self._streams() or stop.is_set():
                return
        elif slot is None:
            created = create_slot(self._repl, self.slot_name, export_snapshot=False)
            start = start or PgOffset(lsn_commit=created.consistent_point)
        elif start is None:
            # no offsets, no snapshot wanted, slot exists: stream from where the slot stands
            start = PgOffset(lsn_commit=slot.confirmed_flush_lsn or 0)
        if stored is not None and slot is not None and not want_snapshot and slot.confirmed_flush_lsn is not None \
                and stored.lsn_commit is not None and slot.confirmed_flush_lsn > stored.lsn_commit:
            log.warning("slot %s confirmed %s, beyond the stored offset %s; the server resumes from the slot",
                        self.slot_name, format_lsn(slot.confirmed_flush_lsn), format_lsn(stored.lsn_commit))
        if not self._streams():
            return
        self._stream(registry, start, emit, stop)

    def close(self) -> None:
        if self._streaming is not None:
            self._streaming.final_feedback()
        if self._pool is not None:
            self._pool.close()
        for conn in (self._repl, self._conn, self._heartbeat_conn):
            if conn is not None:
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
        self._repl = None
        self._heartbeat_conn = None
        if self.config.get("slot.drop.on.stop") and self._conn is not None:
            try:
                conn = connect(self.config, application_name="headwater-cleanup")
                try:
                    drop_slot(conn, self.slot_name)
                finally:
                    conn.close()
            except (psycopg2.Error, ConnectorError) as exc:
                log.warning("could not drop replication slot %s: %s", self.slot_name, exc)
        self._conn = None

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

    def _based(self, name: str) -> bool:
        return bool(self.config.get(f"snapshot.mode.configuration.based.{name}"))

    def _streams(self) -> bool:
        if self.snapshot_mode == "initial_only":
            return False
        if self.snapshot_mode == "configuration_based":
            return self._based("start.stream")
        return True

    def _wants_snapshot(self, stored: PgOffset | None, slot_exists: bool) -> bool:
        mode = self.snapshot_mode
        in_progress = stored is not None and stored.snapshot and not stored.snapshot_completed
        if mode == "always":
            return True
        if mode == "configuration_based":
            if stored is not None and not slot_exists and not self._based("snapshot.on.data.error"):
                raise self._vanished_slot_error(stored)
            return self._based("snapshot.data") or (stored is not None and not slot_exists)
        if mode == "no_data":
            if stored is not None and not slot_exists:
                raise self._vanished_slot_error(stored)
            return False
        if stored is None or in_progress:
            return True
        if not slot_exists:
            if mode == "when_needed":
                log.warning("replication slot %s no longer exists; taking a new snapshot (snapshot.mode=when_needed)",
                            self.slot_name)
                return True
            raise self._vanished_slot_error(stored)
        return False

    def _vanished_slot_error(self, stored: PgOffset) -> ConnectorError:
        where = format_lsn(stored.lsn_commit) if stored.lsn_commit is not None else "an unknown position"
        return ConnectorError(
            f"replication slot {self.slot_name!r} does not exist, but the stored offset expects to resume at "
            f"{where}; changes since then may be lost. Set snapshot.mode=when_needed (or always) to take a new "
            "snapshot, or remove the offsets file")

    def builder_settings(self) -> BuilderSettings:
        delimiter = self.config.get("topic.delimiter")
        return BuilderSettings(
            server=self.server, dbname=self.dbname, message_topic=f"{self.server}{delimiter}message",
            topic_delimiter=delimiter, table_filter=self.table_filter, column_filter=self.column_filter,
            key_columns=self.key_columns, include_unknown=self.config.get("include.unknown.datatypes"),
            tombstones_on_delete=self.config.get("tombstones.on.delete"),
            skipped_operations=self.skipped_operations,
            provide_transaction_metadata=self.config.get("provide.transaction.metadata"),
            transaction_topic=f"{self.server}{delimiter}{self.config.get('topic.transaction')}",
            unavailable_placeholder=self.config.get("unavailable.value.placeholder"),
            column_mappers=ColumnMappers.from_config(self.config),
            heartbeat_topic=(f"{self.config.get('topic.heartbeat.prefix')}{delimiter}{self.server}"
                             if self.config.get("heartbeat.interval.ms") > 0 else None),
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
            txid, _ = snap.begin_snapshot_transaction(reader_conn, snapshot_name)
            include = self.config.get("snapshot.include.collection.list") or []
            oids = [catalog.oid_of(t) for t, _ in table_ids]
            tables = registry.load([o for o in oids if o is not None])
            ordered = sorted(tables.values(), key=self._snapshot_order)
            if include:
                patterns = [re.compile(p, re.IGNORECASE) for p in include]
                ordered = [c for c in ordered if any(p.fullmatch(c.collection) for p in patterns)]
            if self.config.get("snapshot.locking.mode") == "shared":
                snap.lock_tables(reader_conn, ordered, self.config.get("snapshot.lock.timeout.ms"))
            overrides = {}
            for name in self.config.get("snapshot.select.statement.overrides") or []:
                stmt = self.config.raw.get(f"snapshot.select.statement.overrides.{name}")
                if stmt:
                    overrides[name] = stmt
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
                self._snapshot_table(reader_conn, captured, overrides, dispatcher, txid, lsn,
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
            raise ConnectorError(f"snapshot failed: {first_line(exc)}") from None
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
        schema = captured.schema
        table_id = captured.table.id
        pending: list[Any] = []
        first = [True]

        def emit_row(raw: list[str | None], last_in_table: bool) -> None:
            marker = snap.snapshot_marker(first[0], last_in_table, first_table, last_table)
            first[0] = False
            source = source_block(self.server, self.dbname, ts_us=snap.now_us(), snapshot=marker,
                                  schema=table_id.schema or "", table=table_id.table, tx_id=txid, lsn=lsn,
                                  last_commit_lsn=None)
            dispatcher.dispatch_change(schema, captured.topic, OP_READ, None, schema.row(raw), source,
                                       collection=captured.collection)

        def on_row(raw: list[str | None]) -> None:
            if pending:
                emit_row(pending[0], False)
                pending[0] = raw
            else:
                pending.append(raw)

        snap.read_rows(conn, captured, overrides, stop, on_row)
        if pending:
            emit_row(pending[0], True)

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
            heartbeat_action=self._heartbeat_action if self.config.get("heartbeat.action.query") else None)
        self._streaming = reader
        reader.start()
        log.info("streaming from slot %s at %s%s", self.slot_name, format_lsn(start.lsn_commit or 0),
                 f" with {self._pool.workers} worker processes" if self._pool is not None else "")
        reader.run(stop)

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
