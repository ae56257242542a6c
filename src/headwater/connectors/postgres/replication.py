"""Replication slot and publication management."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg2
from psycopg2 import sql

from headwater.connectors.postgres.connection import first_line
from headwater.connectors.postgres.pgoutput import parse_lsn
from headwater.engine.connector import ConnectorError
from headwater.relational.table import TableId

log = logging.getLogger(__name__)


@dataclass
class SlotState:
    name: str
    plugin: str
    database: str
    active: bool
    active_pid: int | None
    confirmed_flush_lsn: int | None
    restart_lsn: int | None
    wal_status: str | None = None  # PostgreSQL 13+: "lost" once max_slot_wal_keep_size removed WAL it needs

    def position(self) -> int | None:
        """Where the slot can resume from at the earliest: changes committed before it are gone."""
        known = [lsn for lsn in (self.confirmed_flush_lsn, self.restart_lsn) if lsn is not None]
        return max(known) if known else None


@dataclass
class CreatedSlot:
    consistent_point: int
    snapshot_name: str | None


def read_slot(conn: Any, slot_name: str) -> SlotState | None:
    with conn.cursor() as cur:
        # wal_status through to_jsonb: the column exists from PostgreSQL 13 on only
        cur.execute(
            "SELECT slot_name, plugin, database, active, active_pid, confirmed_flush_lsn::text, restart_lsn::text, "
            "to_jsonb(s) ->> 'wal_status' FROM pg_replication_slots s WHERE slot_name = %s", (slot_name,))
        row = cur.fetchone()
    if row is None:
        return None
    return SlotState(row[0], row[1] or "", row[2] or "", row[3], row[4],
                     parse_lsn(row[5]) if row[5] else None, parse_lsn(row[6]) if row[6] else None, row[7])


def slot_catalog_xmin(conn: Any, slot_name: str) -> int | None:
    """The slot's catalog_xmin: what Debezium puts in source.xmin (`xmin.fetch.interval.ms`)."""
    with conn.cursor() as cur:
        cur.execute("SELECT catalog_xmin::text FROM pg_replication_slots WHERE slot_name = %s", (slot_name,))
        row = cur.fetchone()
    return int(row[0]) if row is not None and row[0] is not None else None


def create_slot(repl_conn: Any, slot_name: str, *, export_snapshot: bool) -> CreatedSlot:
    mode = "EXPORT_SNAPSHOT" if export_snapshot else "NOEXPORT_SNAPSHOT"
    cur = repl_conn.cursor()
    try:
        cur.execute(f'CREATE_REPLICATION_SLOT "{slot_name}" LOGICAL pgoutput {mode}')
        row = cur.fetchone()
    except psycopg2.Error as exc:
        raise ConnectorError(f"cannot create replication slot {slot_name!r}: {first_line(exc)}") from None
    return CreatedSlot(parse_lsn(row[1]), row[2] if export_snapshot else None)


def drop_slot(conn: Any, slot_name: str, *, attempts: int = 20, delay: float = 0.5) -> None:
    """Drop a slot, retrying while a just-closed walsender still holds it."""
    for attempt in range(attempts):
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                            "WHERE slot_name = %s", (slot_name,))
            return
        except psycopg2.errors.ObjectInUse:
            if attempt == attempts - 1:
                raise
            time.sleep(delay)


def wait_until_slot_free(conn: Any, slot_name: str, *, retries: int, delay_s: float) -> SlotState | None:
    """Debezium retries `slot.max.retries` times when the slot is active (another consumer, or
    the walsender of a previous run still exiting)."""
    state = read_slot(conn, slot_name)
    for _ in range(max(retries, 0)):
        if state is None or not state.active:
            return state
        log.warning("replication slot %s is active for PID %s; retrying in %.1f s", slot_name,
                    state.active_pid, delay_s)
        time.sleep(delay_s)
        state = read_slot(conn, slot_name)
    if state is not None and state.active:
        raise ConnectorError(
            f"replication slot {slot_name!r} is in use by another process (PID {state.active_pid}); "
            "stop the other consumer or choose another slot.name")
    return state


def publish_operations(skipped: Sequence[str] | None) -> str | None:
    """The `publish` option Debezium gives the publications it creates or alters: only when
    `skipped.operations` is set explicitly, the operations not skipped (None: leave the default)."""
    if skipped is None:
        return None
    ops = set(skipped) - {"none"}
    if not ops:
        return None
    return ", ".join(name for code, name in (("c", "insert"), ("u", "update"), ("d", "delete"), ("t", "truncate"))
                     if code not in ops)


def ensure_publication(conn: Any, name: str, mode: str, tables: Sequence[TableId], *,
                       via_partition_root: bool = False, publish: str | None = None) -> None:
    """Debezium's `publication.autocreate.mode`: all_tables, filtered, no_tables, disabled.

    As Debezium 3.6: a publication it creates gets `WITH (publish_via_partition_root = true)` when
    `publish.via.partition.root` is set and `publish = '...'` when `skipped.operations` is (see
    `publish_operations`); an existing publication is used as it is, except that `filtered`
    replaces its table list (and its `publish` option) — its publish_via_partition_root is never
    changed, so a publication made before the option was set keeps publishing the partitions."""
    options = []
    if via_partition_root:
        options.append(sql.SQL("publish_via_partition_root = true"))
    if publish is not None:
        options.append(sql.SQL("publish = {}").format(sql.Literal(publish)))
    with_clause = sql.SQL(" WITH ({})").format(sql.SQL(", ").join(options)) if options else sql.SQL("")
    with conn.cursor() as cur:
        cur.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s", (name,))
        row = cur.fetchone()
        ident = sql.Identifier(name)
        table_list = sql.SQL(", ").join(sql.Identifier(t.schema or "public", t.table) for t in tables)
        try:
            if mode == "disabled":
                if row is None:
                    raise ConnectorError(
                        f"publication {name!r} does not exist and publication.autocreate.mode=disabled; "
                        f"create it (CREATE PUBLICATION {name} FOR ...) or choose another mode")
            elif mode == "all_tables":
                if row is None:
                    cur.execute(sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES{}").format(ident, with_clause))
            elif mode == "no_tables":
                if row is None:
                    cur.execute(sql.SQL("CREATE PUBLICATION {}{}").format(ident, with_clause))
            elif mode == "filtered":
                if not tables:
                    raise ConnectorError("publication.autocreate.mode=filtered but no table matches the "
                                         "include/exclude lists")
                if row is None:
                    cur.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}{}").format(ident, table_list,
                                                                                        with_clause))
                elif row[0]:
                    raise ConnectorError(f"publication {name!r} is FOR ALL TABLES and cannot be filtered; "
                                         "drop it or use publication.autocreate.mode=all_tables")
                else:
                    cur.execute(sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(ident, table_list))
                    if publish is not None:
                        cur.execute(sql.SQL("ALTER PUBLICATION {} SET (publish = {})").format(
                            ident, sql.Literal(publish)))
            else:
                raise ConnectorError(f"unknown publication.autocreate.mode {mode!r}")
        except psycopg2.Error as exc:
            raise ConnectorError(f"cannot manage publication {name!r}: {first_line(exc)}") from None
