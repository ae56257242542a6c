"""The capture job: one thread per CDC-enabled database turns PostgreSQL's logical replication stream
(slot + ``pgoutput``) into change-table rows, as SQL Server's capture job turns its log into them.

Per scan: force the WAL to disk up to "now" (T), read the stream until every transaction that
committed before T has arrived (or ``maxtrans`` transactions), write all their ``_CT`` rows, their
``cdc.lsn_time_mapping`` rows, the job's position and a ``sys.dm_cdc_log_scan_sessions`` entry in ONE
PostgreSQL transaction, then confirm the slot position. A crash before that commit replays the
transactions (nothing lost); one after it is caught by the stored position (nothing twice).
Changes are therefore invisible until the scan after their commit — the capture latency SQL Server has.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import select
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

import psycopg2
import psycopg2.extras
from psycopg2 import sql

from . import lsn as lsns
from . import pgoutput
from .objects import PUBLICATION

log = logging.getLogger(__name__)

DEFAULT_JOB = {"maxtrans": 500, "maxscans": 10, "continuous": True, "pollinginterval": 5,
               "retention": 4320, "threshold": 5000}
STATE_GRACE_SECONDS = 60.0  # how long a new job waits for sp_cdc_enable_db's transaction to commit
READ_TIMEOUT_SECONDS = 60.0
EMPTY_SCAN_LSN = "00000000:00000000:0000"  # SQL Server appends U+0000, which PostgreSQL text cannot hold
# PostgreSQL's WAL page headers (SizeOfXLogShortPHD, SizeOfXLogLongPHD at a segment's first page)
SHORT_PAGE_HEADER, LONG_PAGE_HEADER = 24, 40

# LOB rules of SQL Server's change tables (cdc.<capture_instance>_CT docs)
NULL_ON_DELETE_AND_OLD = frozenset({"text", "ntext", "image"})
MAX_TYPES = re.compile(r"^(n?varchar|varbinary)\(max\)$", re.IGNORECASE)


def slot_name_for(database: str) -> str:
    """A cluster-unique replication slot name for a database (slot names are cluster-wide)."""
    stem = re.sub(r"[^a-z0-9_]", "_", database.lower())[:30]
    return f"hw_cdc_{stem}_{uuid.uuid4().hex[:12]}"


def round_datetime(value: dt.datetime) -> dt.datetime:
    """SQL Server's ``datetime`` precision: 1/300 s, shown as .000/.003/.007."""
    day = dt.datetime.combine(value.date(), dt.time())
    micros = (value - day) // dt.timedelta(microseconds=1)
    ticks = (micros * 300 + 500_000) // 1_000_000
    return day + dt.timedelta(milliseconds=(ticks * 10 + 1) // 3)


def record_end(insert_lsn: int, block_size: int, segment_size: int) -> int:
    """The WAL position a walsender reaches once it has read every record before ``insert_lsn``
    (``pg_current_wal_insert_lsn()``).

    At the start of a page the insert position lies past the page header, but a record that ends
    on the page boundary ends *at* the boundary: the walsender's ``wal_end`` stops there, short of
    the insert position, until some other record is written (the background writer's next one up
    to 15 s later). No record ends inside a header, so the boundary stands for the same point."""
    if insert_lsn % segment_size == LONG_PAGE_HEADER:
        return insert_lsn - LONG_PAGE_HEADER
    if insert_lsn % block_size == SHORT_PAGE_HEADER:
        return insert_lsn - SHORT_PAGE_HEADER
    return insert_lsn


def create_slot(cur: Any, slot: str, dsn: str) -> str:
    """Create the logical replication slot ``slot`` on ``cur``; returns its consistent LSN (text).

    PostgreSQL makes a new slot wait for the transactions running at that moment and then for the
    next record of running transactions, which the background writer logs only every 15 s. A
    CHECKPOINT logs one too: issue it from a side connection while the creation is waiting."""
    done = threading.Event()

    def nudge() -> None:
        if done.wait(0.2):
            return
        try:
            conn = psycopg2.connect(dsn)
        except psycopg2.Error:
            return
        conn.autocommit = True
        try:
            while not done.is_set():
                with conn.cursor() as side:
                    side.execute("CHECKPOINT")
                done.wait(0.5)
        except psycopg2.Error:  # no right to checkpoint: the slot is ready within 15 s anyway
            pass
        finally:
            conn.close()

    helper = threading.Thread(target=nudge, name=f"cdc-slot-{slot}", daemon=True)
    helper.start()
    try:
        cur.execute("SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        return cur.fetchone()[0]
    finally:
        done.set()
        helper.join(timeout=10)


@dataclass
class _Txn:
    begin: pgoutput.Begin
    begin_lsn: int
    # each change with its WAL position and the relation as it was when the change was made
    changes: list[tuple[pgoutput.Insert | pgoutput.Update | pgoutput.Delete, int, pgoutput.Relation | None]] = \
        field(default_factory=list)
    commit: pgoutput.Commit | None = None


@dataclass
class _Instance:
    name: str
    object_id: int
    start_lsn: bytes
    table: str                      # PostgreSQL name of cdc.<ci>_CT
    columns: list[tuple[str, str, str]]  # (source pg_name, registry type, CT pg type) by column_ordinal


@dataclass
class _Source:
    object_id: int
    # columns (pg names) of the primary key and of every unique index: SQL Server logs an update of
    # any of them as a "deferred update", i.e. a delete and an insert (KB 238254, KB 302341)
    key: frozenset[str]
    instances: list[_Instance]


class CaptureJobs:
    """The server's capture jobs (SQL Server Agent's ``cdc.<db>_capture`` jobs).

    ``pg``: anything with ``dsn(dbname)`` (ThrowawayPostgres). ``interval``: seconds between scans,
    overriding each database's ``pollinginterval`` (tests, the emulator's ``capture_interval``).
    ``time_zone``: the server's local time zone for ``tran_begin_time``/``tran_end_time``
    (default: PostgreSQL's TimeZone setting). ``agent_running``: SQL Server Agent's status — while
    False nothing is captured; the slot keeps every change for when it runs again.
    """

    def __init__(self, pg: Any, *, interval: float | None = None, time_zone: str | None = None) -> None:
        self._pg = pg
        self.interval = interval
        self.time_zone = time_zone
        self._agent_running = True
        self._jobs: dict[str, _CaptureJob] = {}
        self._lock = threading.Lock()

    @property
    def agent_running(self) -> bool:
        return self._agent_running

    @agent_running.setter
    def agent_running(self, running: bool) -> None:
        self._agent_running = running
        for job in list(self._jobs.values()):
            if not running:
                job.finish_cycle()
            job.wake()

    def dsn(self, database: str) -> str:
        return self._pg.dsn(database.lower())

    def start(self, database: str, *, new_slot: str | None = None) -> None:
        """Make sure the job of ``database`` runs (sp_cdc_enable_db, server start). Idempotent.
        ``new_slot``: a slot sp_cdc_enable_db created in its (uncommitted) transaction; the job drops
        it if that transaction never commits."""
        key = database.lower()
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and job.is_alive() and not job.exiting:
                return
            if job is not None:
                job.join(timeout=10)
            job = _CaptureJob(self, database, new_slot)
            self._jobs[key] = job
            job.start()

    def start_enabled(self, databases: Iterable[str]) -> None:
        """At server start: start the job of every database whose CDC is enabled."""
        for database in databases:
            conn = psycopg2.connect(self.dsn(database))
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT to_regclass('hw_emulator.cdc_state') IS NOT NULL")
                    enabled = cur.fetchone()[0]
            finally:
                conn.close()
            if enabled:
                self.start(database)

    def wake(self, database: str) -> None:
        job = self._jobs.get(database.lower())
        if job is not None:
            job.wake()

    def job_running(self, database: str) -> bool:
        job = self._jobs.get(database.lower())
        return job is not None and job.is_alive() and job.job_running

    def set_job_running(self, database: str, running: bool) -> None:
        """sys.sp_cdc_start_job / sp_cdc_stop_job for the capture job."""
        if running:
            self.start(database)
        job = self._jobs.get(database.lower())
        if job is not None:
            job.job_running = running
            if not running:
                job.finish_cycle()
            job.wake()

    def run_capture(self, database: str, timeout: float = 60.0) -> bool:
        """Run one capture cycle now and wait for it (tests; SQL Server's sys.sp_cdc_scan). False when
        the agent or the job is stopped (nothing captured)."""
        job = self._jobs.get(database.lower())
        if job is None or not job.is_alive() or not self._agent_running or not job.job_running:
            return False
        return job.request_and_wait(timeout)

    def wait_for_slot(self, database: str, slot_name: str, conn: Any, timeout: float = 30.0) -> bool:
        """Wait until the job's replication slot is consistent (its changes decodable from now on).
        ``conn`` must not hold a transaction id (slot creation waits for such transactions)."""
        self.start(database)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with conn.cursor() as cur:
                cur.execute("SELECT confirmed_flush_lsn IS NOT NULL FROM pg_replication_slots WHERE slot_name = %s",
                            (slot_name,))
                row = cur.fetchone()
            if row is not None and row[0]:
                return True
            self.wake(database)
            time.sleep(0.02)
        return False

    def stop(self, database: str) -> None:
        with self._lock:
            job = self._jobs.pop(database.lower(), None)
        if job is not None:
            job.stop()

    def close(self) -> None:
        """Stop every job (the slots stay: a new CaptureJobs continues where these stopped)."""
        with self._lock:
            jobs = list(self._jobs.values())
            self._jobs.clear()
        for job in jobs:
            job.stop()


class _CaptureJob(threading.Thread):
    def __init__(self, jobs: CaptureJobs, database: str, new_slot: str | None = None) -> None:
        super().__init__(name=f"cdc-capture-{database}", daemon=True)
        self.jobs = jobs
        self.database = database
        self.job_running = True
        self.exiting = False
        self._stopping = False
        self._cond = threading.Condition()
        self._cycle_lock = threading.Lock()  # held while a scan runs
        self._requested = 0
        self._done = 0
        self._woken = False
        self._ok = True
        self._ctl: Any = None
        self._repl: Any = None
        self._cur: Any = None
        self._slot: str | None = None
        self._new_slot = new_slot
        self._seen_state = False
        self._born = time.monotonic()
        self._relations: dict[int, pgoutput.Relation] = {}
        self._partial: _Txn | None = None
        self._prev_end: int | None = None
        self._polling = float(DEFAULT_JOB["pollinginterval"])
        self._tz: dt.tzinfo | None = None
        self._wal_sizes = (8192, 16 << 20)  # wal_block_size, wal_segment_size (read by _control)

    # --- thread control ----------------------------------------------------------------------

    def wake(self) -> None:
        with self._cond:
            self._woken = True  # not lost when the thread is busy scanning right now
            self._cond.notify_all()

    def stop(self) -> None:
        self._stopping = True
        self.wake()
        self.join(timeout=30)

    def request_and_wait(self, timeout: float) -> bool:
        with self._cond:
            self._requested += 1
            ticket = self._requested
            self._cond.notify_all()
            deadline = time.monotonic() + timeout
            while self._done < ticket and self.is_alive():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"capture job of {self.database} did not finish a scan in {timeout} s")
                self._cond.wait(min(remaining, 0.5))
            return self._ok and self._done >= ticket

    def _interval(self) -> float:
        if self.jobs.interval is not None:
            return max(self.jobs.interval, 0.01)
        return max(self._polling, 0.05)  # pollinginterval 0 = no wait; keep the thread polite

    def run(self) -> None:
        state = "first"
        try:
            while not self._stopping:
                with self._cond:
                    if self._done >= self._requested and state != "first" and not self._woken:
                        # until sp_cdc_enable_db has committed, look often: the slot should exist soon
                        wait = 0.05 if state == "waiting" else self._interval()
                        self._cond.wait(timeout=min(wait, 10.0))
                    self._woken = False
                    ticket = self._requested
                if self._stopping:
                    break
                ok = True
                state = "failed"
                try:
                    state = self._prepare()
                    if state == "disabled":
                        break
                    if state == "ready" and self.jobs.agent_running and self.job_running:
                        with self._cycle_lock:
                            if self.jobs.agent_running and self.job_running:
                                self._cycle()
                    elif self._repl is not None:
                        # keep the walsender from timing out while the agent is stopped
                        self._cur.send_feedback(force=True)
                    else:
                        ok = state == "ready" and self.jobs.agent_running and self.job_running
                except Exception:  # a failed scan is retried; SQL Server's job retries likewise
                    log.exception("capture job of %s: scan failed", self.database)
                    ok = False
                    self._reset()
                with self._cond:
                    self._ok = ok
                    self._done = max(self._done, ticket)
                    self._cond.notify_all()
        finally:
            self.exiting = True
            self._reset()
            with self._cond:
                self._done = self._requested
                self._cond.notify_all()

    def finish_cycle(self) -> None:
        """Wait for a scan in progress: once the agent or the job is stopped, nothing more is
        captured (a step the Agent already started completes, as with SQL Server's jobs). Bounded:
        a scan blocked on a lock of the caller's own open transaction must not hang the caller."""
        if self._cycle_lock.acquire(timeout=30):
            self._cycle_lock.release()

    def _reset(self) -> None:
        for conn in (self._repl, self._ctl):
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # closing a broken connection may fail; it is gone either way
                    pass
        self._repl = self._cur = self._ctl = None
        self._relations.clear()
        self._partial = None

    # --- connections, state, slot ------------------------------------------------------------

    def _control(self) -> Any:
        if self._ctl is None:
            self._ctl = psycopg2.connect(self.jobs.dsn(self.database))
            with self._ctl.cursor() as cur:
                # commits of this connection flush the WAL: that is how a scan makes the walsender see
                # every commit made before it (the cluster runs with synchronous_commit = off)
                cur.execute("SET synchronous_commit TO on")
                if self.jobs.time_zone:
                    cur.execute("SELECT set_config('TimeZone', %s, false)", (self.jobs.time_zone,))
                cur.execute("SHOW TimeZone")
                name = cur.fetchone()[0]
                cur.execute("SELECT current_setting('wal_block_size')::int, "
                            "pg_size_bytes(current_setting('wal_segment_size'))")
                block, segment = cur.fetchone()
                self._wal_sizes = (int(block), int(segment))
            self._ctl.commit()
            try:
                self._tz = ZoneInfo(name)
            except Exception:
                self._tz = dt.UTC
        return self._ctl

    def _prepare(self) -> str:
        """'ready', 'waiting' (CDC not enabled yet) or 'disabled' (sp_cdc_disable_db committed)."""
        ctl = self._control()
        row = None
        with ctl.cursor() as cur:
            cur.execute("SELECT to_regclass('hw_emulator.cdc_state') IS NOT NULL")
            if cur.fetchone()[0]:
                cur.execute("SELECT s.slot_name, j.pollinginterval FROM hw_emulator.cdc_state s "
                            "LEFT JOIN hw_emulator.cdc_jobs j ON j.job_type = 'capture'")
                row = cur.fetchone()
        ctl.commit()
        if row is not None and row[1] is not None:
            self._polling = float(row[1])
        if row is None:
            if self._seen_state or time.monotonic() - self._born > STATE_GRACE_SECONDS:
                self._drop_slot(self._slot or self._new_slot)
                return "disabled"
            return "waiting"
        self._seen_state = True
        slot = row[0]
        if slot != self._slot:
            if self._slot is not None:  # CDC was disabled and enabled again: a new slot
                self._reset()
                self._drop_slot(self._slot)
            self._slot = slot
            self._prev_end = None
        self._ensure_slot(slot)
        return "ready"

    def _ensure_slot(self, slot: str) -> None:
        ctl = self._control()
        with ctl.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (slot,))
            exists = cur.fetchone() is not None
        ctl.commit()
        if exists:
            return
        with ctl.cursor() as cur:
            # waits for the transactions running now (e.g. the caller of sp_cdc_enable_table)
            slot_lsn = create_slot(cur, slot, self.jobs.dsn(self.database))
        ctl.commit()
        with ctl.cursor() as cur:
            cur.execute("UPDATE hw_emulator.cdc_state SET slot_lsn = %s", (slot_lsn,))
            # an instance created before the slot existed starts where the slot does: earlier
            # changes cannot be decoded, and SQL Server's start_lsn means "changes from here on"
            start = psycopg2.Binary(lsns.from_pg(lsns.parse_pg(slot_lsn)))
            cur.execute("UPDATE cdc.change_tables SET start_lsn = %s WHERE start_lsn < %s", (start, start))
        ctl.commit()

    def _drop_slot(self, slot: str | None) -> None:
        if slot is None:
            return
        self._reset()
        conn = psycopg2.connect(self.jobs.dsn(self.database))
        conn.autocommit = True
        try:
            for _ in range(100):
                try:
                    with conn.cursor() as cur:
                        cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                                    "WHERE slot_name = %s", (slot,))
                    return
                except psycopg2.errors.ObjectInUse:  # our walsender is still exiting
                    time.sleep(0.1)
        finally:
            conn.close()

    def _replication(self) -> Any:
        if self._repl is None:
            self._repl = psycopg2.connect(self.jobs.dsn(self.database),
                                          connection_factory=psycopg2.extras.LogicalReplicationConnection)
            self._cur = self._repl.cursor()
            self._cur.start_replication(slot_name=self._slot, decode=False,
                                        options={"proto_version": "1", "publication_names": PUBLICATION})
            self._relations.clear()
            self._partial = None
        return self._cur

    # --- one cycle: up to maxscans scans of up to maxtrans transactions ----------------------

    def _cycle(self) -> None:
        ctl = self._control()
        with ctl.cursor() as cur:
            cur.execute("SELECT maxtrans, maxscans FROM hw_emulator.cdc_jobs WHERE job_type = 'capture'")
            row = cur.fetchone()
        ctl.commit()
        maxtrans = row[0] if row and row[0] else DEFAULT_JOB["maxtrans"]
        maxscans = row[1] if row and row[1] else DEFAULT_JOB["maxscans"]
        for _ in range(maxscans):
            if self._scan(maxtrans):
                break

    def _wal_insert_lsn(self) -> int:
        with self._ctl.cursor() as cur:
            cur.execute("SELECT pg_current_wal_insert_lsn()::text")
            value = lsns.parse_pg(cur.fetchone()[0])
        self._ctl.commit()
        return value

    def _scan(self, maxtrans: int) -> bool:
        """One scan; True when it reached the WAL position of its start."""
        started = self._now()
        ctl = self._control()
        before = self._wal_insert_lsn()
        foreign_wal = self._prev_end is None or before > self._prev_end
        with ctl.cursor() as cur:
            # A transaction that writes WAL commits synchronously (one that only took an id would not):
            # its commit flushes every earlier commit, so the walsender can decode them now, not after
            # the WAL writer's next round. The message itself is not published (pgoutput's messages=off).
            cur.execute("SELECT pg_logical_emit_message(true, 'hw_cdc_scan', '')")
        ctl.commit()
        # where the stream stands once it has read up to now (not the insert position: when the
        # last commit ends on a page boundary, the stream would stop 24 bytes short of it)
        target = record_end(self._wal_insert_lsn(), *self._wal_sizes)
        cur = self._replication()
        txns: list[_Txn] = []
        messages = 0
        caught_up = False
        deadline = time.monotonic() + READ_TIMEOUT_SECONDS
        last_ask = 0.0
        while True:
            msg = cur.read_message()
            if msg is None:
                if self._partial is None and (cur.wal_end or 0) >= target:
                    caught_up = True
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"capture: the replication stream did not reach {target:X}")
                if time.monotonic() - last_ask > 0.02:
                    cur.send_feedback(reply=True, force=True)  # the keepalive answer carries wal_end
                    last_ask = time.monotonic()
                select.select([self._repl], [], [], 0.02)
                continue
            messages += 1
            m = pgoutput.decode(msg.payload)
            if isinstance(m, pgoutput.Begin):
                self._partial = _Txn(m, msg.data_start)
            elif isinstance(m, pgoutput.Relation):
                self._relations[m.relid] = m
            elif isinstance(m, pgoutput.Insert | pgoutput.Update | pgoutput.Delete):
                if self._partial is None:
                    raise RuntimeError("pgoutput: a change outside a transaction")
                self._partial.changes.append((m, msg.data_start, self._relations.get(m.relid)))
            elif isinstance(m, pgoutput.Commit):
                txn, self._partial = self._partial, None
                if txn is not None and txn.changes:
                    txn.commit = m
                    txns.append(txn)
                if len(txns) >= maxtrans:
                    break
        self._write(txns, started, target if caught_up else None, foreign_wal, messages)
        self._prev_end = self._wal_insert_lsn()
        confirmed = target if caught_up else (txns[-1].commit.end_lsn if txns else 0)
        if confirmed:
            cur.send_feedback(flush_lsn=confirmed, force=True)
        return caught_up

    def _now(self) -> dt.datetime:
        return round_datetime(dt.datetime.now(self._tz or dt.UTC).replace(tzinfo=None))

    def _local(self, pg_ts: int) -> dt.datetime:
        utc = dt.datetime.fromtimestamp((pg_ts + pgoutput.PG_EPOCH_US) / 1_000_000, dt.UTC)
        return round_datetime(utc.astimezone(self._tz or dt.UTC).replace(tzinfo=None))

    # --- writing ------------------------------------------------------------------------------

    def _sources(self, cur: Any) -> dict[int, _Source]:
        """Captured source tables by PostgreSQL relation OID, with their capture instances."""
        cur.execute("""
            SELECT to_regclass(quote_ident(o.pg_schema) || '.' || quote_ident(o.pg_name))::oid, ct.source_object_id,
                   ct.capture_instance, ct.object_id, ct.start_lsn, t.pg_name
            FROM cdc.change_tables ct
            JOIN hw_emulator.objects o ON o.object_id = ct.source_object_id
            JOIN hw_emulator.objects t ON t.object_id = ct.object_id
            ORDER BY ct.create_date, ct.object_id""")
        sources: dict[int, _Source] = {}
        for relid, source_id, name, object_id, start_lsn, table in cur.fetchall():
            if relid is None:
                continue
            cur.execute("""
                SELECT c.pg_name, c.type, format_type(a.atttypid, a.atttypmod)
                FROM cdc.captured_columns cc
                JOIN hw_emulator.columns c ON c.object_id = cc.object_id AND c.name = cc.column_name
                JOIN pg_attribute a ON a.attrelid = ('cdc.' || quote_ident(%s))::regclass AND a.attname = c.pg_name
                WHERE cc.object_id = %s ORDER BY cc.column_ordinal""", (table, object_id))
            instance = _Instance(name, object_id, bytes(start_lsn), table, cur.fetchall())
            if relid not in sources:
                cur.execute("""
                    SELECT c.pg_name FROM hw_emulator.indexes i CROSS JOIN LATERAL unnest(i.column_ids) AS k(id)
                    JOIN hw_emulator.columns c ON c.object_id = i.object_id AND c.column_id = k.id
                    WHERE i.object_id = %s AND (i.is_primary_key OR i.is_unique)""", (source_id,))
                sources[relid] = _Source(source_id, frozenset(r[0] for r in cur.fetchall()), [])
            sources[relid].instances.append(instance)
        return sources

    def _write(self, txns: list[_Txn], started: dt.datetime, reached: int | None, foreign_wal: bool,
               messages: int) -> None:
        ctl = self._control()
        with ctl.cursor() as cur:
            cur.execute("SELECT last_commit_lsn FROM hw_emulator.cdc_state FOR UPDATE")
            state = cur.fetchone()
            if state is None:  # disabled meanwhile; the next cycle notices
                ctl.rollback()
                return
            last = bytes(state[0]) if state[0] is not None else lsns.ZERO
            sources = self._sources(cur) if txns else {}
            written: list[tuple[_Txn, bytes]] = []
            commands = 0
            for txn in txns:
                commit_lsn = lsns.from_pg(txn.commit.commit_lsn)
                if commit_lsn <= last:
                    continue  # written before a restart; the slot replays it once more
                commands += self._write_txn(cur, txn, commit_lsn, sources)
                end_time = self._local(txn.commit.commit_ts)
                cur.execute("INSERT INTO cdc.lsn_time_mapping VALUES (%s, %s, %s, %s, %s)",
                            (psycopg2.Binary(commit_lsn), self._local(txn.begin.commit_ts), end_time,
                             psycopg2.Binary(txn.begin.xid.to_bytes(10, "big")),
                             psycopg2.Binary(lsns.from_pg(txn.begin_lsn))))
                written.append((txn, commit_lsn))
            if written:
                cur.execute("UPDATE hw_emulator.cdc_state SET last_commit_lsn = %s",
                            (psycopg2.Binary(written[-1][1]),))
            elif reached is not None and foreign_wal:
                # No CDC transaction, but the log moved: record that processing got this far
                # (tran_id 0x00), so fn_cdc_get_max_lsn advances in quiet periods. One byte before
                # the scan's end position: past every commit read, before any commit still to come.
                idle = lsns.from_pg(reached - 1)
                cur.execute("SELECT public.max(start_lsn) FROM cdc.lsn_time_mapping")
                top = cur.fetchone()[0]
                if top is None or idle > bytes(top):
                    now = self._now()
                    cur.execute("INSERT INTO cdc.lsn_time_mapping VALUES (%s, %s, %s, %s, %s)",
                                (psycopg2.Binary(idle), now, now, psycopg2.Binary(b"\0"), psycopg2.Binary(idle)))
                    cur.execute("UPDATE hw_emulator.cdc_state SET idle_lsn = %s", (psycopg2.Binary(idle),))
            self._log_session(cur, started, written, reached, messages, commands)
        ctl.commit()

    def _write_txn(self, cur: Any, txn: _Txn, commit_lsn: bytes, sources: dict[int, _Source]) -> int:
        rows: dict[str, list[tuple[Any, ...]]] = {}
        instances: dict[str, _Instance] = {}
        previous_lsn, slot = -1, 0
        for command_id, (change, change_lsn, relation) in enumerate(txn.changes, start=1):
            slot = slot + 1 if change_lsn == previous_lsn else 0
            previous_lsn = change_lsn
            source = sources.get(change.relid)
            if source is None or relation is None:
                continue
            seqval = lsns.from_pg(change_lsn, slot)
            names = {c.name: i for i, c in enumerate(relation.columns)}
            for inst in source.instances:
                if commit_lsn < inst.start_lsn:
                    continue  # committed before the instance existed
                for op, values, mask in _images(change, names, inst, source.key):
                    rows.setdefault(inst.table, []).append(
                        (psycopg2.Binary(commit_lsn), None, psycopg2.Binary(seqval), op, psycopg2.Binary(mask),
                         *values, command_id))
                    instances[inst.table] = inst
        for table, table_rows in rows.items():
            inst = instances[table]
            template = "(%s, %s, %s, %s, %s" + "".join(f", %s::{t}" for _, _, t in inst.columns) + ", %s)"
            psycopg2.extras.execute_values(
                cur, sql.SQL("INSERT INTO cdc.{} VALUES %s").format(sql.Identifier(table)).as_string(cur),
                table_rows, template=template)
        return len(txn.changes)

    def _log_session(self, cur: Any, started: dt.datetime, written: list[tuple[_Txn, bytes]],
                     reached: int | None, messages: int, commands: int) -> None:
        ended = self._now()
        cur.execute("SELECT session_id, tran_count FROM sys.dm_cdc_log_scan_sessions "
                    "ORDER BY session_id DESC LIMIT 1")
        last = cur.fetchone()
        current = lsns.to_string(lsns.from_pg(reached)) if reached is not None else None
        if not written:
            if last is not None and last[1] == 0:  # consecutive empty scans share one row, as SQL Server's do
                cur.execute("UPDATE sys.dm_cdc_log_scan_sessions SET end_time = %s, current_lsn = coalesce(%s, "
                            "current_lsn), empty_scan_count = empty_scan_count + 1, "
                            "log_record_count = log_record_count + %s WHERE session_id = %s",
                            (ended, current, messages, last[0]))
                return
            first_lsn = last_lsn = EMPTY_SCAN_LSN
            first_begin = last_time = None
            duration = 0
        else:
            first_lsn = lsns.to_string(written[0][1])
            last_lsn = lsns.to_string(written[-1][1])
            first_begin = lsns.to_string(lsns.from_pg(written[0][0].begin_lsn))
            last_time = self._local(written[-1][0].commit.commit_ts)
            duration = max(int((ended - started).total_seconds()), 0)
        latency = int((ended - last_time).total_seconds()) if last_time else 0
        cur.execute("""
            INSERT INTO sys.dm_cdc_log_scan_sessions VALUES (
              coalesce((SELECT max(session_id) FROM sys.dm_cdc_log_scan_sessions), 0) + 1,
              %s, %s, %s, 'Done', 0, %s, %s, %s, %s, %s, %s, %s, 0, %s, %s, %s, %s, %s, %s, 0)""",
                    (started, ended, duration, first_lsn, current, last_lsn, len(written),
                     None if not written else last_lsn, last_time, messages, commands, first_begin,
                     None if not written else last_lsn, last_time, latency, 0 if written else 1))


def _images(change: Any, names: dict[str, int], inst: _Instance, key: frozenset[str]
            ) -> list[tuple[int, list[Any], bytes]]:
    """The change-table rows (operation, captured values, update mask) of one row change."""
    count = len(inst.columns)
    all_bits = _mask(count, range(1, count + 1))

    def values(row: tuple[object, ...] | None, fallback: tuple[object, ...] | None = None) -> list[Any]:
        out: list[Any] = []
        for pg_name, _, _ in inst.columns:
            index = names.get(pg_name)
            value = None if index is None or row is None else row[index]
            if value is pgoutput.UNCHANGED_TOAST:
                value = fallback[index] if fallback is not None and index is not None else None
                if value is pgoutput.UNCHANGED_TOAST:
                    value = None
            out.append(value)
        return out

    def null_lobs(vals: list[Any], op: int, changed: set[int]) -> list[Any]:
        for i, (_, type_, _) in enumerate(inst.columns):
            base = type_.split("(")[0].lower()
            if base in NULL_ON_DELETE_AND_OLD and op in (1, 3):
                vals[i] = None
            elif op == 3 and MAX_TYPES.match(type_) and i + 1 not in changed:
                vals[i] = None
        return vals

    if isinstance(change, pgoutput.Insert):
        return [(2, values(change.new), all_bits)]
    if isinstance(change, pgoutput.Delete):
        return [(1, null_lobs(values(change.old), 1, set()), all_bits)]
    old = values(change.old) if change.old is not None else None
    new = values(change.new, change.old)
    if old is None:  # no before image (REPLICA IDENTITY not FULL): cannot tell what changed
        return [(4, new, all_bits)]
    changed = {i + 1 for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b}
    key_changed = any(old[i] != new[i] for i, (pg_name, _, _) in enumerate(inst.columns) if pg_name in key)
    if not key_changed and key:
        # a key column the instance does not capture may still have changed
        for pg_name in key:
            index = names.get(pg_name)
            if index is not None and change.old[index] != change.new[index] \
                    and change.new[index] is not pgoutput.UNCHANGED_TOAST:
                key_changed = True
    if key_changed:  # SQL Server logs an update of a primary-key or unique-index column as delete + insert
        return [(1, null_lobs(old, 1, set()), all_bits), (2, new, all_bits)]
    if not changed:
        return []  # only columns this instance does not capture changed
    mask = _mask(count, changed)
    return [(3, null_lobs(old, 3, changed), mask), (4, new, mask)]


def _mask(count: int, ordinals: Iterable[int]) -> bytes:
    """``__$update_mask``: bit (ordinal - 1) counted from the least significant bit of the last byte."""
    mask = bytearray((count + 7) // 8)
    for ordinal in ordinals:
        mask[len(mask) - 1 - (ordinal - 1) // 8] |= 1 << ((ordinal - 1) % 8)
    return bytes(mask)
