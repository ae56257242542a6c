"""Cleanup of change data (SQL Server's ``cdc.<db>_cleanup`` job and
``sys.sp_cdc_cleanup_change_table``): delete change rows below a low-water mark and raise the
capture instances' ``start_lsn`` to it, so ``sys.fn_cdc_get_min_lsn`` moves forward.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg2
from psycopg2 import sql


def low_water_mark_for_retention(cur: Any, retention_minutes: int, now: dt.datetime) -> bytes | None:
    """The newest commit LSN older than the retention window (None: nothing to clean). ``now`` is
    the server's local time, as ``tran_end_time`` is."""
    cur.execute("SELECT public.max(start_lsn) FROM cdc.lsn_time_mapping WHERE tran_end_time < %s",
                (now - dt.timedelta(minutes=retention_minutes),))
    row = cur.fetchone()
    return bytes(row[0]) if row and row[0] is not None else None


def clean_instance(cur: Any, capture_instance: str, low_water_mark: bytes, threshold: int | None = None) -> int:
    """Delete the change rows of one instance with ``__$start_lsn < low_water_mark`` and raise its
    ``start_lsn``; returns the number of rows deleted. ``threshold`` is SQL Server's delete batch
    size: it changes how SQL Server deletes, not what, so every batch runs here."""
    cur.execute("SELECT o.pg_name, ct.start_lsn FROM cdc.change_tables ct "
                "JOIN hw_emulator.objects o ON o.object_id = ct.object_id "
                "WHERE lower(ct.capture_instance) = lower(%s)", (capture_instance,))
    row = cur.fetchone()
    if row is None:
        return 0
    table, start_lsn = row
    if start_lsn is not None and bytes(start_lsn) >= low_water_mark:
        return 0
    cur.execute(sql.SQL('DELETE FROM cdc.{} WHERE "__$start_lsn" < %s').format(sql.Identifier(table)),
                (psycopg2.Binary(low_water_mark),))
    deleted = cur.rowcount
    cur.execute("UPDATE cdc.change_tables SET start_lsn = %s WHERE lower(capture_instance) = lower(%s)",
                (psycopg2.Binary(low_water_mark), capture_instance))
    return deleted


def trim_lsn_time_mapping(cur: Any) -> int:
    """Delete ``cdc.lsn_time_mapping`` rows below every instance's low endpoint (all of them below
    the given mark when no instance remains)."""
    cur.execute("SELECT public.min(start_lsn) FROM cdc.change_tables")
    low = cur.fetchone()[0]
    if low is None:
        return 0
    cur.execute("DELETE FROM cdc.lsn_time_mapping WHERE start_lsn < %s", (low,))
    return cur.rowcount


def run_cleanup(cur: Any, *, retention_minutes: int | None = None, low_water_mark: bytes | None = None,
                now: dt.datetime | None = None) -> bytes | None:
    """The cleanup job: with ``retention_minutes`` (default: the cleanup job's retention, 4320) the
    mark is the newest commit older than that; or an explicit ``low_water_mark``. Every instance is
    cleaned to the mark and lsn_time_mapping trimmed. Returns the mark used (None: nothing to do)."""
    if low_water_mark is None:
        if retention_minutes is None:
            cur.execute("SELECT retention FROM hw_emulator.cdc_jobs WHERE job_type = 'cleanup'")
            row = cur.fetchone()
            retention_minutes = int(row[0]) if row and row[0] is not None else 4320
        if now is None:
            cur.execute("SELECT localtimestamp")
            now = cur.fetchone()[0]
        low_water_mark = low_water_mark_for_retention(cur, retention_minutes, now)
        if low_water_mark is None:
            return None
    cur.execute("SELECT capture_instance FROM cdc.change_tables")
    for (instance,) in cur.fetchall():
        clean_instance(cur, instance, low_water_mark)
    trim_lsn_time_mapping(cur)
    return low_water_mark

