"""The initial snapshot: every captured table read inside one consistent database snapshot.

When the replication slot was just created, the snapshot imports the slot's exported snapshot
(`SET TRANSACTION SNAPSHOT`), so the rows read are exactly the state at the slot's consistent
point and streaming from there neither overlaps nor leaves a gap. Rows are read with
`COPY (SELECT …) TO STDOUT` in text format — the fastest way out of PostgreSQL and the same text
form pgoutput sends, so both paths share one set of value converters — and parsed chunk by
chunk, so memory does not grow with table size.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg2
import psycopg2.errors
from psycopg2 import sql

from headwater.connectors.postgres.connection import connection_error
from headwater.connectors.postgres.schemas import CapturedTable
from headwater.engine.connector import ConnectorError
from headwater.relational.table import TableId

log = logging.getLogger(__name__)

_COPY_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.DOTALL)
_SIMPLE_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _unescape_match(m: re.Match[str]) -> str:
    octal, hexa, other = m.groups()
    if octal is not None:
        return chr(int(octal, 8))
    if hexa is not None:
        return chr(int(hexa, 16))
    return _SIMPLE_ESCAPES.get(other, other)


def parse_copy_line(line: str) -> list[str | None]:
    """One line of COPY text format -> column texts (None for \\N)."""
    out: list[str | None] = []
    for field in line.split("\t"):
        if "\\" not in field:
            out.append(field)
        elif field == "\\N":
            out.append(None)
        else:
            out.append(_COPY_ESCAPE.sub(_unescape_match, field))
    return out


class _LineSink:
    """A file-like target for psycopg2's copy_expert that hands complete lines onward."""

    def __init__(self, on_line: Callable[[str], None], stop: threading.Event) -> None:
        self._on_line = on_line
        self._tail = b""
        self._stop = stop

    def write(self, data: bytes | str) -> int:
        if self._stop.is_set():
            raise SnapshotStopped()
        chunk = data if isinstance(data, bytes) else data.encode("utf-8")
        buf = self._tail + chunk
        lines = buf.split(b"\n")
        self._tail = lines.pop()
        for line in lines:
            self._on_line(line.decode("utf-8"))
        return len(data)


class SnapshotStopped(Exception):
    """The engine is stopping; the snapshot is abandoned (the next start takes it again)."""


def select_statement(captured: CapturedTable, overrides: dict[str, str], conn: Any = None) -> sql.Composable:
    """The table's SELECT: its custom SELECT in `overrides` (a select override or the custom
    snapshot query's), else every column. With `conn`, a custom SELECT's result columns are
    matched to the table's by name (`aligned_select`)."""
    override = overrides.get(captured.collection)
    if override:
        return aligned_select(conn, captured, override) if conn is not None else sql.SQL(override)
    table = captured.table
    columns = sql.SQL(", ").join(sql.Identifier(c) for c in captured.raw_columns)
    return sql.SQL("SELECT {} FROM {}").format(columns, sql.Identifier(table.id.schema or "public", table.id.table))


def aligned_select(conn: Any, captured: CapturedTable, statement: str) -> sql.Composable:
    """A custom SELECT whose rows come in `captured.raw_columns` order: as Debezium does with a
    select override's (or a custom snapshot query's) result set, its columns are matched to the
    table's by name (exactly, else ignoring case), a table column the query does not return is
    NULL, and a column the table does not have is an error. The result's names are read with
    LIMIT 0 (the query is planned, not run); the columns are renamed by position, so duplicate or
    unnamed result columns cannot make a reference ambiguous."""
    inner = sql.SQL(statement.strip().rstrip(";"))
    try:
        with conn.cursor() as cur:
            cur.execute(sql.SQL("SELECT * FROM ({}) AS headwater_custom LIMIT 0").format(inner))
            names = [d.name for d in cur.description]
    except psycopg2.Error as exc:
        raise connection_error(f"snapshot of table {captured.collection}: the custom SELECT fails", exc) from None
    exact = {n: i for i, n in enumerate(captured.raw_columns)}
    folded = {n.lower(): i for i, n in reversed(list(enumerate(captured.raw_columns)))}
    position: dict[int, int] = {}  # raw column -> result column
    for result, name in enumerate(names):
        raw = exact.get(name, folded.get(name.lower()))
        if raw is None:
            raise ConnectorError(
                f"snapshot of table {captured.collection}: the custom SELECT returns column {name!r}, which the "
                f"table does not have (its columns: {', '.join(captured.raw_columns)})")
        position.setdefault(raw, result)
    aliases = [sql.Identifier(f"c{i}") for i in range(len(names))]
    items = [sql.SQL("q.{}").format(aliases[position[i]]) if i in position else sql.SQL("NULL")
             for i in range(len(captured.raw_columns))]
    return sql.SQL("SELECT {} FROM ({}) AS q ({})").format(
        sql.SQL(", ").join(items), inner, sql.SQL(", ").join(aliases))


# `snapshot.isolation.mode` -> the transaction Debezium opens when there is no exported snapshot
ISOLATION_STATEMENTS = {
    "serializable": "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE",
    "repeatable_read": "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    "read_committed": "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY",
    "read_uncommitted": "BEGIN ISOLATION LEVEL READ UNCOMMITTED READ ONLY",
}


def begin_snapshot_transaction(conn: Any, snapshot_name: str | None,
                               isolation: str = "serializable") -> tuple[int, int | None]:
    """Open the snapshot transaction; returns (txid for source.txId, WAL insert LSN or None).

    With an exported snapshot: REPEATABLE READ + SET TRANSACTION SNAPSHOT (the LSN is the slot's
    consistent point, known to the caller); `snapshot.isolation.mode` does not apply, as in
    Debezium. Without one (the slot existed already): the isolation level of
    `snapshot.isolation.mode` (Debezium's default SERIALIZABLE READ ONLY DEFERRABLE), positioned
    at the current WAL insert LSN."""
    from headwater.connectors.postgres.pgoutput import parse_lsn

    conn.autocommit = False
    with conn.cursor() as cur:
        if snapshot_name is not None:
            cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot_name,))
            cur.execute("SELECT txid_snapshot_xmax(txid_current_snapshot())")
            return cur.fetchone()[0], None
        cur.execute(ISOLATION_STATEMENTS[isolation])
        cur.execute("SELECT txid_snapshot_xmax(txid_current_snapshot()), pg_current_wal_insert_lsn()::text")
        txid, lsn = cur.fetchone()
        return txid, parse_lsn(lsn)


def lock_tables(conn: Any, tables: list[TableId], timeout_ms: int) -> None:
    """`snapshot.locking.mode=shared`: ACCESS SHARE locks, taken before the schemas are read (as
    Debezium does) and held until the snapshot transaction ends."""
    with conn.cursor() as cur:
        cur.execute("SET LOCAL lock_timeout = %s", (f"{timeout_ms}ms",))
        for t in tables:
            try:
                cur.execute(sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(
                    sql.Identifier(t.schema or "public", t.table)))
            except psycopg2.errors.LockNotAvailable:
                raise ConnectorError(
                    f"snapshot: could not lock table {t.identifier()} within snapshot.lock.timeout.ms={timeout_ms} "
                    "(snapshot.locking.mode=shared); another transaction holds an exclusive lock on it") from None


def read_rows(conn: Any, captured: CapturedTable, overrides: dict[str, str], stop: threading.Event,
              on_row: Callable[[list[str | None]], None], first_rows_timeout_ms: int = 0) -> None:
    """Stream the table's rows to `on_row` (text tuples in `captured.raw_columns` order).

    `database.query.timeout.ms` limits the wait for the first rows, not the whole read: Debezium's
    JDBC query timeout covers executing the SELECT, which returns after the first fetch, so a
    large table is read however long it takes. The session's statement_timeout is lifted for the
    COPY and a timer cancels it instead if no data has arrived in time."""
    statement = sql.SQL("COPY ({}) TO STDOUT").format(select_statement(captured, overrides, conn))
    timer: threading.Timer | None = None
    timed_out = threading.Event()

    def cancel() -> None:
        timed_out.set()
        conn.cancel()

    def on_line(line: str) -> None:
        if timer is not None:
            timer.cancel()
        on_row(parse_copy_line(line))

    sink = _LineSink(on_line, stop)
    with conn.cursor() as cur:
        try:
            cur.execute("SET LOCAL statement_timeout = 0")
            if first_rows_timeout_ms > 0:
                timer = threading.Timer(first_rows_timeout_ms / 1000, cancel)
                timer.daemon = True
                timer.start()
            cur.copy_expert(statement, sink, size=1 << 16)
        except psycopg2.Error as exc:
            if timed_out.is_set() and isinstance(exc, psycopg2.errors.QueryCanceled):
                raise ConnectorError(
                    f"snapshot of table {captured.collection}: no rows within database.query.timeout.ms="
                    f"{first_rows_timeout_ms} (the query was cancelled); raise the timeout or check "
                    "for locks on the table") from None
            raise connection_error(f"snapshot of table {captured.collection} failed", exc) from None
        finally:
            if timer is not None:
                timer.cancel()


def now_us() -> int:
    return time.time_ns() // 1000


def resume_problem(stored_lsn: int | None, slot: Any) -> str | None:
    """Why an initial snapshot interrupted by a crash cannot be resumed from the slot `slot`
    (a :class:`~headwater.connectors.postgres.replication.SlotState` or None), or None. Resuming
    reads the rest at a new REPEATABLE READ transaction and streams from the slot, which must
    still stand at (or before) the interrupted snapshot's position `stored_lsn`: then every
    change since the first snapshot point is streamed after the rows read now."""
    if stored_lsn is None:
        return "the stored offset has no log position"
    if slot is None:
        return "its replication slot no longer exists"
    if slot.wal_status == "lost":
        return "its replication slot was invalidated (wal_status=lost)"
    if not slot.confirmed_flush_lsn:
        return "its replication slot has no confirmed position"
    if slot.confirmed_flush_lsn > stored_lsn:
        return "its replication slot has moved past the snapshot's position"
    return None
