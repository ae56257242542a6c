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


@dataclass
class CreatedSlot:
    consistent_point: int
    snapshot_name: str | None


def read_slot(conn: Any, slot_name: str) -> SlotState | None:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT slot_name, plugin, database, active, active_pid, confirmed_flush_lsn::text, restart_lsn::text "
            "FROM pg_replication_slots WHERE slot_name = %s", (slot_name,))
        row = cur.fetchone()
    if row is None:
        return None
    return SlotState(row[0], row[1] or "", row[2] or "", row[3], row[4],
                     parse_lsn(row[5]) if row[5] else None, parse_lsn(row[6]) if row[6] else None)


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


def ensure_publication(conn: Any, name: str, mode: str, tables: Sequence[TableId]) -> None:
    """Debezium's `publication.autocreate.mode`: all_tables, filtered, no_tables, disabled."""
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
                    cur.execute(sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES").format(ident))
            elif mode == "no_tables":
                if row is None:
                    cur.execute(sql.SQL("CREATE PUBLICATION {}").format(ident))
            elif mode == "filtered":
                if not tables:
                    raise ConnectorError("publication.autocreate.mode=filtered but no table matches the "
                                         "include/exclude lists")
                if row is None:
                    cur.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(ident, table_list))
                elif row[0]:
                    raise ConnectorError(f"publication {name!r} is FOR ALL TABLES and cannot be filtered; "
                                         "drop it or use publication.autocreate.mode=all_tables")
                else:
                    cur.execute(sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(ident, table_list))
            else:
                raise ConnectorError(f"unknown publication.autocreate.mode {mode!r}")
        except psycopg2.Error as exc:
            raise ConnectorError(f"cannot manage publication {name!r}: {first_line(exc)}") from None
