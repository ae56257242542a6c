#!/usr/bin/env python
"""Standalone streaming benchmark: Headwater (`headwater run`) against the fastest raw receiver.

One throwaway PostgreSQL 15 cluster, one table ``t`` of ``--rows`` rows. For every workload:

1. create the publication (once) and a source slot ``b_src`` (pgoutput) BEFORE the workload, and
   read every row's ``amount`` (the state the workload starts from);
2. run the workload, take the end LSN with ``pg_current_wal_insert_lsn()`` and read ``amount``
   again (the state it left);
3. per consumer and repeat, copy the slot (``pg_copy_logical_replication_slot('b_src', …)``) and
   consume the copy, so every consumer decodes exactly the same WAL:

   * the ceiling is the FASTEST of four raw receivers, each timed from connect / process start until
     the end: a minimal psycopg2 ``LogicalReplicationConnection`` client with pgoutput protocol 1
     (``psycopg2-p1``) and with protocol 2 + ``streaming=on`` (``psycopg2-p2``, the options Headwater
     sends: it follows Stream Start/Stop/Commit/Abort), both counting changes until the Commit or
     Stream Commit whose end LSN >= the end LSN; and ``pg_recvlogical`` (PostgreSQL's C client) with
     each (``recvlogical-p1``, ``recvlogical-p2``), writing to /dev/null with ``--endpos`` = the end
     LSN; it must exit 0 with the copy's confirmed_flush_lsn at the end LSN (so it received it all);
   * headwater: ``headwater run application.properties`` (jsonl sink on tmpfs) as a subprocess, timed
     from process start until the jsonl file holds one line per changed row; then SIGTERM. Then its
     content is checked, streaming through the file with memory bounded by the table's row count:
     every event is an update of ``t`` whose ``amount`` is the previous amount of that id + 1 (the
     start state for the first), and at the end every id's last amount is the database's (so no
     change is lost, duplicated or out of order per key); then the file is deleted.

Workloads: ``big`` (one UPDATE of every row), ``small`` (pgbench, transactions of 10 rows),
``memory`` (Headwater's peak RSS for one UPDATE of rows/10 rows vs of all rows).

Run ``.venv/bin/python bench/standalone_stream.py --help``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import platform
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psycopg2
import psycopg2.extras

from headwater.embedded.postgres import ThrowawayPostgres, clean_env, drop_replication_slot

DB = "bench"
PUB = "b_pub"
SRC_SLOT = "b_src"
TARGET_RATIO = 0.50  # headwater rows/s ÷ the fastest receiver's rows/s, on big and small (issue 23)
MEMORY_TOLERANCE = 0.20  # peak RSS at rows at most 20 % above the peak at rows/10: no growth with transaction size
MAX_RSS_MIB = 256  # default --max-rss-mib: the peak RSS every Headwater run must stay under (bench/README.md)
SETTINGS = {
    "logical_decoding_work_mem": "64MB",
    "max_wal_size": "4GB",
    "min_wal_size": "1GB",
    "checkpoint_timeout": "30min",
    "autovacuum": "off",  # explicit VACUUM between workloads, never during a measurement
    "log_min_messages": "warning",
}
RECEIVERS = ("psycopg2-p1", "psycopg2-p2", "recvlogical-p1", "recvlogical-p2")
# pgoutput message types (first payload byte)
_B, _C, _I, _U, _D = b"B"[0], b"C"[0], b"I"[0], b"U"[0], b"D"[0]
_CHANGES = frozenset((_I, _U, _D))
_STREAM_START, _STREAM_STOP, _STREAM_COMMIT, _STREAM_ABORT = b"S"[0], b"E"[0], b"c"[0], b"A"[0]

# the bench table; `row_sql` gives a row's values from its id, so every bench writes the same rows
TABLE = "t(id int PRIMARY KEY, name text, amount numeric(12,2), ts timestamptz, flag bool, doc jsonb)"


def row_sql(i: str) -> str:
    """The select list of the row whose id is the SQL expression `i` (``%`` doubled, for a statement with
    parameters)."""
    return (f"{i}, 'name-' || {i}, ({i} %% 100000) / 100.0, "
            f"timestamptz '2024-01-01 00:00:00+00' + {i} * interval '1 second', {i} %% 2 = 0, "
            f"jsonb_build_object('id', {i}, 'tag', 'tag-' || ({i} %% 100), 'vals', "
            f"jsonb_build_array({i} %% 7, {i} %% 11))")


def properties(pg: ThrowawayPostgres, work: Path, out: Path, source: dict[str, str] | None = None) -> str:
    """application.properties of a `headwater run` capturing table t into the jsonl file `out`, its offsets in
    `work`: JSON with schemas, the connector's defaults but for what `source` (debezium.source.*) adds."""
    settings = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "database.hostname": pg.host, "database.port": str(pg.port), "database.user": "postgres",
                "database.dbname": DB, "topic.prefix": "bench", "plugin.name": "pgoutput",
                "table.include.list": "public.t", "offset.storage.file.filename": f"{work}/offsets.json",
                **(source or {})}
    return ("".join(f"debezium.source.{k}={v}\n" for k, v in settings.items())
            + f"debezium.format.key=json\ndebezium.format.value=json\ndebezium.sink.type=jsonl\n"
              f"debezium.sink.jsonl.path={out}\n")


def scratch(args: argparse.Namespace, settings: dict[str, str], prefix: str) -> tuple[ThrowawayPostgres, Path, Path]:
    """A throwaway cluster with `settings` (not started; kept with --keep), a new work dir, and the directory
    the jsonl sink writes to: --output-dir, else tmpfs (/dev/shm), else the work dir."""
    pg = ThrowawayPostgres(settings=settings, keep=args.keep)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    output_dir = Path(args.output_dir) if args.output_dir else (
        Path("/dev/shm") if Path("/dev/shm").is_dir() else work)
    return pg, work, output_dir


def start_cluster(pg: ThrowawayPostgres) -> Any:
    """Starts the cluster and creates the bench database; a connection to it (autocommit)."""
    pg.start()
    pg.create_database(DB)
    return pg.connect(DB)


def parse_with_headwater(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`p`'s arguments and --headwater, the executable benchmarked (argparse's exit code 2 when it is not one)."""
    default = Path(sys.executable).with_name("headwater")
    p.add_argument("--headwater", default=str(default), help=f"the headwater executable (default {default})")
    args = p.parse_args(argv)
    if not os.access(args.headwater, os.X_OK):
        p.error(f"headwater executable not found: {args.headwater}")
    return args


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# Results


@dataclass
class Run:
    consumer: str  # one of RECEIVERS | "headwater"
    rows: int  # changes received (psycopg2: I/U/D messages; recvlogical: the expected rows once it
    #            confirmed the end LSN; headwater: jsonl lines)
    elapsed_s: float  # start (connect / process start) until the last change arrived
    first_s: float | None  # start until the first change (psycopg2) / first jsonl line (headwater)
    startup_s: float | None = None  # headwater: process start until its slot became active
    peak_rss_mib: float | None = None  # headwater: ru_maxrss of the process (whole life)
    hwm_at_done_mib: float | None = None  # headwater: VmHWM when the last line arrived
    exit_code: int | None = None
    messages: dict[str, int] = field(default_factory=dict)  # psycopg2: count per pgoutput type
    error: str | None = None

    @property
    def rate(self) -> float:
        return self.rows / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def rate_after_first(self) -> float | None:
        if self.first_s is None or self.elapsed_s <= self.first_s:
            return None
        return self.rows / (self.elapsed_s - self.first_s)


@dataclass
class Segment:
    """One workload's WAL, between the creation of b_src and the end LSN."""

    name: str
    rows: int  # expected changed rows
    transactions: int
    workload_s: float
    wal_bytes: int
    end_lsn: str
    runs: list[Run] = field(default_factory=list)

    def ok_runs(self, consumer: str) -> list[Run]:
        return [r for r in self.runs if r.consumer == consumer and r.error is None]

    def median(self, consumer: str, attr: str) -> float | None:
        values = [v for r in self.ok_runs(consumer) if (v := getattr(r, attr)) is not None]
        return statistics.median(values) if values else None


# --------------------------------------------------------------------------------------------------
# Cluster, table, workloads


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.pg, self.work, self.output_dir = scratch(args, SETTINGS, "headwater-bench-")
        self.conn: Any = None
        self.copies = 0
        self.start_amounts: array[int] = array("q")
        self.amounts: dict[str, tuple[array[int], array[int]]] = {}  # segment -> amounts before, after
        self.headwater = args.headwater

    def start(self) -> None:
        t = time.monotonic()
        self.conn = start_cluster(self.pg)
        log(f"cluster {self.pg.host}:{self.pg.port} at {self.pg.root_dir} ({time.monotonic() - t:.1f} s); "
            f"work dir {self.work}")

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
        self.pg.stop()
        if self.args.keep:
            log(f"kept cluster {self.pg.root_dir if self.pg.root_dir else '(gone)'} and work dir {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> Any:
        with self.conn.cursor() as cur:
            cur.execute(statement, params or None)
            return cur.fetchone() if cur.description else None

    def load(self, rows: int) -> None:
        t = time.monotonic()
        self.sql(f"CREATE TABLE {TABLE}")
        self.sql(f"INSERT INTO t SELECT {row_sql('g')} FROM generate_series(1, %s) g", (rows,))
        self.sql(f"CREATE PUBLICATION {PUB} FOR TABLE public.t")
        self.sql("VACUUM ANALYZE t")
        self.sql("CHECKPOINT")
        size = self.sql("SELECT pg_total_relation_size('t')")[0]
        log(f"loaded {rows:,} rows ({size / 2**20:.0f} MiB with index) in {time.monotonic() - t:.1f} s")

    def begin_segment(self) -> str:
        """Fresh source slot before the workload; returns its start LSN."""
        drop_replication_slot(self.conn, SRC_SLOT)
        self.sql("VACUUM t")
        self.sql("CHECKPOINT")
        self.start_amounts = self.read_amounts()
        return self.sql("SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')", (SRC_SLOT,))[0]

    def end_segment(self, name: str, start_lsn: str, rows: int, transactions: int, workload_s: float) -> Segment:
        end_lsn = self.sql("SELECT pg_current_wal_insert_lsn()::text")[0]
        wal = int(self.sql("SELECT pg_wal_lsn_diff(%s, %s)", (end_lsn, start_lsn))[0])
        log(f"{name}: {transactions:,} transaction(s), {rows:,} rows in {workload_s:.1f} s, "
            f"{wal / 2**20:.0f} MiB WAL, end LSN {end_lsn}")
        self.amounts[name] = (self.start_amounts, self.read_amounts())
        return Segment(name, rows, transactions, workload_s, wal, end_lsn)

    def read_amounts(self) -> array[int]:
        """Every row's amount in cents, indexed by id (8 bytes a row: bounded by the table)."""
        amounts = array("q", bytes(8 * (self.args.rows + 1)))
        conn = self.pg.connect(DB, autocommit=False)
        try:
            with conn.cursor(name="amounts") as cur:
                cur.itersize = 50_000
                cur.execute("SELECT id, (amount * 100)::bigint FROM t")
                for i, cents in cur:
                    amounts[i] = cents
        finally:
            conn.close()
        return amounts

    def update_all(self, name: str, limit: int | None = None) -> Segment:
        start = self.begin_segment()
        t = time.monotonic()
        if limit is None:
            self.sql("UPDATE t SET amount = amount + 1")
            rows = self.args.rows
        else:
            self.sql("UPDATE t SET amount = amount + 1 WHERE id <= %s", (limit,))
            rows = limit
        return self.end_segment(name, start, rows, 1, time.monotonic() - t)

    def pgbench(self, name: str, rows: int, transactions: int) -> Segment:
        script = self.work / "small.sql"
        script.write_text(f"\\set a random(1, {rows - 9})\n"
                          "UPDATE t SET amount = amount + 1 WHERE id BETWEEN :a AND :a + 9;\n")
        per_client = transactions // 2
        cmd = [str(self.pg.bin_dir / "pgbench"), "-n", "-c", "2", "-j", "2", "-t", str(per_client), "-f", str(script),
               "-h", self.pg.host, "-p", str(self.pg.port), "-U", "postgres", DB]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        start = self.begin_segment()
        t = time.monotonic()
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        elapsed = time.monotonic() - t
        if res.returncode != 0:
            raise RuntimeError(f"pgbench failed (exit {res.returncode}):\n{res.stdout}\n{res.stderr}")
        return self.end_segment(name, start, per_client * 2 * 10, per_client * 2, elapsed)

    # -- consumers -------------------------------------------------------------------------------
    def copy_slot(self, tag: str) -> str:
        self.copies += 1
        name = f"b_{self.copies}_{tag.replace('-', '_')}"
        self.sql("SELECT pg_copy_logical_replication_slot(%s, %s, false, 'pgoutput')", (SRC_SLOT, name))
        return name

    def psycopg2_receiver(self, seg: Segment, proto: int) -> Run:
        """Count changes until the (Stream) Commit whose end LSN >= the end LSN. Protocol 2 with
        streaming: changes between Stream Start and Stop are counted per (transaction,
        subtransaction) and kept at Stream Commit, dropped at Stream Abort."""
        name = f"psycopg2-p{proto}"
        slot = self.copy_slot(name)
        target = _lsn(seg.end_lsn)
        counts: dict[int, int] = {}
        streamed: dict[bytes, dict[bytes, int]] = {}  # top-level xid -> subtransaction xid -> changes
        kept = 0  # changes of committed streamed transactions
        first: float | None = None
        options = {"proto_version": str(proto), "publication_names": PUB, "messages": "true"}
        if proto == 2:
            options["streaming"] = "on"
        t0 = time.monotonic()
        deadline = t0 + self.args.timeout
        conn = self.pg.connect(DB, connection_factory=psycopg2.extras.LogicalReplicationConnection)
        error = None
        try:
            cur = conn.cursor()
            cur.start_replication(slot_name=slot, decode=False, options=options)
            last_fb = time.monotonic()
            top: bytes | None = None  # inside Stream Start .. Stream Stop: the transaction's xid
            segment: dict[bytes, int] = {}
            while True:
                m = cur.read_message()
                if m is None:
                    # a keepalive at or past the end: the server sent everything before it. The end
                    # LSN is read after the workload, so a record written after its last commit
                    # (the background writer's running-transactions record) leaves no commit there
                    if cur.wal_end >= target and first is not None:
                        break
                    if time.monotonic() > deadline:
                        error = f"timeout after {self.args.timeout} s"
                        break
                    select.select([cur], [], [], 1.0)
                    continue
                p = m.payload
                kind = p[0]
                if top is not None:
                    if kind in _CHANGES:
                        xid = p[1:5]  # streamed changes carry their (sub)transaction's xid
                        segment[xid] = segment.get(xid, 0) + 1
                        continue
                    if kind == _STREAM_STOP:
                        top = None
                    counts[kind] = counts.get(kind, 0) + 1
                    continue
                counts[kind] = counts.get(kind, 0) + 1
                if first is None and kind in _CHANGES:
                    first = time.monotonic() - t0
                if time.monotonic() - last_fb > 5:
                    cur.send_feedback(flush_lsn=m.data_start)
                    last_fb = time.monotonic()
                if kind == _C:
                    if struct.unpack_from("!Q", p, 10)[0] >= target:
                        break
                elif kind == _STREAM_START:
                    top = p[1:5]
                    segment = streamed.setdefault(top, {})
                    if first is None:
                        first = time.monotonic() - t0
                elif kind == _STREAM_COMMIT:
                    kept += sum(streamed.pop(p[1:5], {}).values())
                    if struct.unpack_from("!Q", p, 14)[0] >= target:
                        break
                elif kind == _STREAM_ABORT:
                    xid, sub = p[1:5], p[5:9]
                    if xid == sub:
                        streamed.pop(xid, None)
                    else:
                        streamed.get(xid, {}).pop(sub, None)
            if error is None:
                cur.send_feedback(flush_lsn=cur.wal_end if m is None else m.data_start, reply=True)
            elapsed = time.monotonic() - t0
        finally:
            conn.close()
            drop_replication_slot(self.conn, slot)
        changes = counts.get(_I, 0) + counts.get(_U, 0) + counts.get(_D, 0) + kept
        if error is None and changes != seg.rows:
            error = f"received {changes:,} changes, expected {seg.rows:,}"
        if error is None and streamed:
            error = f"{len(streamed)} streamed transaction(s) neither committed nor aborted"
        return Run(name, changes, elapsed, first, messages={chr(k): v for k, v in sorted(counts.items())},
                   error=error)

    def recvlogical_receiver(self, seg: Segment, proto: int) -> Run:
        """pg_recvlogical to /dev/null until --endpos; it must exit 0 having confirmed the end LSN
        (it stops at the record at the end LSN, or at the first one past it)."""
        name = f"recvlogical-p{proto}"
        slot = self.copy_slot(name)
        cmd = [str(self.pg.bin_dir / "pg_recvlogical"), "-h", self.pg.host, "-p", str(self.pg.port), "-U", "postgres",
               "-d", DB, "--slot", slot, "--start", "--no-loop", "--endpos", seg.end_lsn, "-f", "/dev/null",
               "-o", f"proto_version={proto}", "-o", f"publication_names={PUB}", "-o", "messages=true"]
        if proto == 2:
            cmd += ["-o", "streaming=on"]
        error = None
        t0 = time.monotonic()
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), stdin=subprocess.DEVNULL,
                                 timeout=self.args.timeout)
            elapsed = time.monotonic() - t0
            if res.returncode != 0:
                error = f"pg_recvlogical exited with {res.returncode}: {res.stderr.strip()}"
            else:
                confirmed = self.sql("SELECT confirmed_flush_lsn::text, confirmed_flush_lsn >= %s::pg_lsn "
                                     "FROM pg_replication_slots WHERE slot_name = %s", (seg.end_lsn, slot))
                if not confirmed or not confirmed[1]:
                    error = (f"pg_recvlogical exited before the end: the slot confirmed "
                             f"{confirmed[0] if confirmed else '?'}, the end LSN is {seg.end_lsn}")
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - t0
            error = f"timeout after {self.args.timeout} s"
        finally:
            drop_replication_slot(self.conn, slot)
        # it does not count: a run that confirmed the end LSN received what the counting clients did
        return Run(name, seg.rows if error is None else 0, elapsed, None, error=error)

    def headwater_run(self, seg: Segment) -> Run:
        slot = self.copy_slot("hw")
        rundir = self.work / f"{seg.name}-{self.copies}"
        rundir.mkdir()
        props = rundir / "application.properties"
        out = self.output_dir / f"headwater-bench-{os.getpid()}-{seg.name}-{self.copies}.jsonl"
        props.write_text(properties(self.pg, rundir, out, {
            "slot.name": slot, "publication.name": PUB, "publication.autocreate.mode": "filtered",
            "snapshot.mode": "no_data", "offset.flush.interval.ms": "1000"}))
        logfile = (rundir / "headwater.log").open("wb")
        counter = LineCounter(out)
        first = startup = hwm = None
        error = None
        t0 = time.monotonic()
        proc = subprocess.Popen([self.headwater, "run", str(props)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=logfile)
        try:
            deadline = t0 + self.args.timeout
            while True:
                lines = counter.poll()
                now = time.monotonic()
                if first is None and lines > 0:
                    first = now - t0
                if lines >= seg.rows:
                    elapsed = now - t0
                    hwm = _vm_hwm_mib(proc.pid)
                    break
                if startup is None and _slot_active(self.conn, slot):
                    startup = time.monotonic() - t0
                if proc.poll() is not None:
                    elapsed = now - t0
                    error = f"headwater exited with {proc.returncode} after {lines:,} of {seg.rows:,} lines"
                    break
                if now > deadline:
                    elapsed = now - t0
                    error = f"timeout after {self.args.timeout} s with {lines:,} of {seg.rows:,} lines"
                    break
                time.sleep(0.02)
            code, rss = _terminate(proc)
        finally:
            if proc.returncode is None:
                proc.kill()
                proc.wait()
            logfile.close()
            drop_replication_slot(self.conn, slot)
        lines = counter.poll()  # the final drain on SIGTERM may add nothing, or duplicates would show here
        if error is None and lines != seg.rows:
            error = f"{lines:,} lines after exit, expected {seg.rows:,}"
        if error is None and code != 0:
            error = f"headwater exited with {code} after SIGTERM"
        if error is None:
            t = time.monotonic()
            error = check_content(out, *self.amounts[seg.name])
            log(f"{seg.name}: content of {lines:,} events {'checked' if error is None else 'WRONG'} "
                f"in {time.monotonic() - t:.1f} s")
        if error is not None:
            tail = (rundir / "headwater.log").read_text(errors="replace").splitlines()[-15:]
            error += "\n    " + "\n    ".join(tail)
        if not self.args.keep_output:
            out.unlink(missing_ok=True)
        return Run("headwater", lines, elapsed, first, startup_s=startup, peak_rss_mib=rss, hwm_at_done_mib=hwm,
                   exit_code=code, error=error)

    def measure(self, seg: Segment, *, ceiling: bool = True) -> Segment:
        receivers = {
            "psycopg2-p1": lambda: self.psycopg2_receiver(seg, 1),
            "psycopg2-p2": lambda: self.psycopg2_receiver(seg, 2),
            "recvlogical-p1": lambda: self.recvlogical_receiver(seg, 1),
            "recvlogical-p2": lambda: self.recvlogical_receiver(seg, 2),
        }
        for i in range(self.args.repeat):
            for name in RECEIVERS:
                if ceiling and name in self.args.consumer_list:
                    r = receivers[name]()
                    seg.runs.append(r)
                    log(f"{seg.name} #{i + 1} {name:<15} {r.elapsed_s:6.2f} s  {r.rate:>9,.0f} rows/s"
                        + (f"  ERROR {r.error}" if r.error else ""))
            if "headwater" not in self.args.consumer_list:
                continue
            r = self.headwater_run(seg)
            seg.runs.append(r)
            after = f"{r.rate_after_first:,.0f}" if r.rate_after_first else "-"
            log(f"{seg.name} #{i + 1} headwater:      {r.elapsed_s:6.2f} s  {r.rate:>9,.0f} rows/s "
                f"(after first line {after} rows/s, start-up {_fmt(r.startup_s, '.2f')} s), "
                f"peak RSS {_fmt(r.peak_rss_mib, '.0f')} MiB" + (f"  ERROR {r.error}" if r.error else ""))
        return seg


def check_content(path: Path, before: array[int], after: array[int]) -> str | None:
    """Every line is an update of t whose amount is the previous amount of its id + 1.00 (the
    state before the workload for the first), and each id ends at the database's amount after it:
    a lost change leaves an id short, a duplicated or reordered one breaks its chain. Reads the
    file in 8 MiB pieces; the state is one integer per row."""
    current = array("q", before)
    broken = 0
    example = ""
    tail = b""
    with path.open("rb") as f:
        while chunk := f.read(8 << 20):
            data = tail + chunk
            end = data.rfind(b"\n") + 1
            tail = data[end:]
            for line in data[:end].splitlines():
                payload = _value_payload(line)
                row = payload["after"] if payload is not None else None
                if payload is None or payload["op"] != "u" or row is None:
                    return f"not an update of t: {line[:200]!r}"
                key = row["id"]
                cents = _cents(row["amount"])
                if not 0 < key < len(current) or cents != current[key] + 100:
                    broken += 1
                    if not example:
                        have = current[key] if 0 < key < len(current) else None
                        example = f"id {key}: amount {cents / 100} after {None if have is None else have / 100}"
                    if not 0 < key < len(current):
                        continue
                current[key] = cents
    problems = []
    if tail:
        problems.append(f"a partial last line ({len(tail)} bytes)")
    if broken:
        problems.append(f"{broken:,} events out of sequence (duplicated, reordered or wrong value; first: {example})")
    short = [i for i in range(1, len(current)) if current[i] != after[i]]
    if short:
        i = short[0]
        problems.append(f"{len(short):,} ids whose last amount differs from the database (changes lost; first: "
                        f"id {i} at {current[i] / 100}, database {after[i] / 100})")
    return "content: " + "; ".join(problems) if problems else None


def _value_payload(line: bytes) -> Any:
    """The value's payload of a line {"topic","key","value":{"schema","payload"},"headers"}: parsed
    alone when it can be cut out (the schema is most of the line), else from the whole line."""
    i = line.find(b'"payload":{"before":')  # the key's payload has no "before"
    j = line.rfind(b'},"headers":')
    if 0 <= i < j:
        with contextlib.suppress(orjson.JSONDecodeError):
            return orjson.loads(line[i + 10:j])
    value = orjson.loads(line)["value"]
    return value["payload"] if value is not None else None


def _cents(amount: Any) -> int:
    """numeric(12,2) as the JSON converter renders it: base64 of the unscaled value (precise,
    the default), or a number / string (decimal.handling.mode double / string)."""
    if isinstance(amount, str):
        try:
            return int.from_bytes(base64.b64decode(amount, validate=True), "big", signed=True)
        except ValueError:
            return round(float(amount) * 100)
    return round(amount * 100)


class LineCounter:
    """Counts newlines in a growing file incrementally (reads only what was appended)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0
        self._f: Any = None

    def poll(self) -> int:
        if self._f is None:
            try:
                self._f = self.path.open("rb")
            except FileNotFoundError:
                return 0
        size = os.fstat(self._f.fileno()).st_size
        while self.offset < size:
            chunk = self._f.read(min(size - self.offset, 8 << 20))
            if not chunk:
                break
            self.offset += len(chunk)
            self.lines += chunk.count(b"\n")
        return self.lines

    def __del__(self) -> None:
        if self._f is not None:
            self._f.close()


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def _slot_active(conn: Any, slot: str) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        row = cur.fetchone()
    return bool(row and row[0])


def _vm_hwm_mib(pid: int) -> float | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


def _terminate(proc: subprocess.Popen[bytes], grace: float = 60.0) -> tuple[int | None, float | None]:
    """SIGTERM, reap with wait4 (for this child's own ru_maxrss); SIGKILL after `grace` seconds."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:  # already reaped by proc.poll(); no rusage then
            return proc.returncode, None
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_maxrss / 1024  # KiB on Linux
        if time.monotonic() > deadline:
            proc.kill()
            deadline = float("inf")
        time.sleep(0.05)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


# --------------------------------------------------------------------------------------------------
# Report


def fastest(seg: Segment) -> tuple[str | None, float | None]:
    """The ceiling: the receiver with the highest median rate (only receivers without errors)."""
    rates = {name: rate for name in RECEIVERS if (rate := seg.median(name, "rate")) is not None}
    if not rates:
        return None, None
    name = max(rates, key=lambda n: rates[n])
    return name, rates[name]


def report(segments: list[Segment], memory: tuple[Segment, Segment] | None, workloads: list[str],
           max_rss_mib: float) -> dict[str, Any]:
    verdicts: list[tuple[str, bool, str]] = []
    for seg in segments:
        failed = [r for r in seg.runs if r.error]
        print(f"\n{seg.name}: {seg.rows:,} rows in {seg.transactions:,} transaction(s), "
              f"{seg.wal_bytes / 2**20:.0f} MiB WAL" + (f"  ({len(failed)} failed run(s))" if failed else ""))
        ceiling_name, ceil = fastest(seg)
        for name in (*RECEIVERS, "headwater"):
            rate = seg.median(name, "rate")
            if rate is None:
                continue
            extra = ""
            if name == "headwater":
                after = seg.median("headwater", "rate_after_first")
                extra = (f"  after 1st line {_fmt(after, ',.0f')} rows/s, start-up "
                         f"{_fmt(seg.median('headwater', 'startup_s'), '.2f')} s, peak RSS "
                         f"{_fmt(seg.median('headwater', 'peak_rss_mib'), ',.0f')} MiB")
            mark = "  <- ceiling" if name == ceiling_name else ""
            print(f"  {name:<15} {rate:>10,.0f} rows/s  {_fmt(rate / ceil if ceil else None, '.2f'):>5} of fastest"
                  f"{mark}{extra}")
        hw = seg.median("headwater", "rate")
        ratio = hw / ceil if hw and ceil else None
        if seg.name in ("big", "small"):
            ok = ratio is not None and ratio >= TARGET_RATIO and not failed
            verdicts.append((seg.name, ok, f"headwater {_fmt(ratio, '.2f')} of the fastest receiver "
                                           f"({ceiling_name or '-'}; target >= {TARGET_RATIO:.2f})"))
    if memory is not None:
        low, high = (m.median("headwater", "peak_rss_mib") for m in memory)
        failed = any(r.error for m in memory for r in m.runs if r.consumer == "headwater")
        if low and high:
            spread = (high - low) / low
            # what must not happen is growth with the transaction; a smaller transaction may peak
            # higher (it arrives after its commit at once, not streamed, and queues for the workers)
            ok = spread <= MEMORY_TOLERANCE and not failed
            detail = (f"peak RSS {low:,.0f} MiB at {memory[0].rows:,} rows vs {high:,.0f} MiB at "
                      f"{memory[1].rows:,} rows: {spread:+.0%} (target at most {MEMORY_TOLERANCE:+.0%})")
        else:
            ok, detail = False, "peak RSS not measured"
        verdicts.append(("memory", ok, detail))
    peaks = [(r.peak_rss_mib, seg.name) for seg in segments for r in seg.runs if r.consumer == "headwater"]
    if peaks:
        # the growth check above cannot fail when both sides grow alike; this bound can
        measured = [(peak, name) for peak, name in peaks if peak is not None]
        if len(measured) == len(peaks):
            peak, where = max(measured)
            verdicts.append(("rss", peak <= max_rss_mib, f"highest peak RSS of a Headwater run {peak:,.0f} MiB "
                                                         f"({where}; target at most {max_rss_mib:,.0f} MiB)"))
        else:
            verdicts.append(("rss", False, "peak RSS not measured"))
    print()
    for name, ok, detail in verdicts:
        print(f"  {name:<7} {'PASS' if ok else 'FAIL'}  {detail}")
    for seg in segments:
        for r in seg.runs:
            if r.error:
                print(f"  error in {seg.name} {r.consumer}: {r.error}")
    overall = bool(verdicts) and all(ok for _, ok, _ in verdicts)
    checks = "; ".join(f"{n} {'ok' if ok else 'FAILED'}" for n, ok, _ in verdicts)
    print(f"\n{'PASS' if overall else 'FAIL'}: {checks}")
    return {"verdicts": [{"check": n, "pass": ok, "detail": d} for n, ok, d in verdicts], "pass": overall}


# --------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter,
                                epilog="Targets: headwater / fastest receiver >= 0.50 on big and small; "
                                       "peak RSS at 1,000,000 rows at most 20% above the peak at 100,000; "
                                       f"peak RSS of every Headwater run at most --max-rss-mib ({MAX_RSS_MIB}).")
    p.add_argument("--rows", type=int, default=None, help="table rows = rows changed by big (default 1,000,000)")
    p.add_argument("--transactions", type=int, default=None,
                   help="small: pgbench transactions of 10 rows (default 100,000; must be even)")
    p.add_argument("--workload", default="big,small,memory", help="comma list of big, small, memory")
    p.add_argument("--repeat", type=int, default=1, help="runs per consumer and workload; medians are reported")
    p.add_argument("--quick", action="store_true", help="smoke run: 100,000 rows, 10,000 small transactions")
    p.add_argument("--keep", action="store_true", help="keep the cluster and the work dir (configs, logs)")
    p.add_argument("--keep-output", action="store_true", help="also keep each run's out.jsonl (GBs at 1M rows)")
    p.add_argument("--output-dir", default=None,
                   help="where the jsonl sink writes (default /dev/shm when present: 1M events with schemas are "
                        "~3.7 GB, and this machine's disk takes ~200 MB/s, so on disk the benchmark measures "
                        "the disk; pass a disk path to include it)")
    p.add_argument("--json", metavar="OUT", help="write all measurements as JSON")
    p.add_argument("--timeout", type=float, default=600, help="seconds per consumer run (default 600)")
    p.add_argument("--max-rss-mib", type=float, default=MAX_RSS_MIB,
                   help=f"the peak RSS (MiB) no Headwater run may exceed (default {MAX_RSS_MIB})")
    p.add_argument("--consumers", default="ceiling,headwater",
                   help=f"comma list of {', '.join(RECEIVERS)}, headwater; ceiling = all four receivers")
    args = parse_with_headwater(p, argv)
    args.rows = args.rows or (100_000 if args.quick else 1_000_000)
    args.transactions = args.transactions or (10_000 if args.quick else 100_000)
    args.workloads = [w.strip() for w in args.workload.split(",") if w.strip()]
    unknown = set(args.workloads) - {"big", "small", "memory"}
    if unknown:
        p.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
    args.consumer_list = []
    for c in (c.strip() for c in args.consumers.split(",")):
        args.consumer_list += list(RECEIVERS) if c == "ceiling" else [c] if c else []
    if set(args.consumer_list) - {*RECEIVERS, "headwater"}:
        p.error(f"--consumers takes ceiling, {', '.join(RECEIVERS)} and/or headwater")
    if args.rows < 100 or args.rows % 10:
        p.error("--rows must be a multiple of 10, at least 100")
    if args.transactions < 2 or args.transactions % 2:
        p.error("--transactions must be even (two pgbench clients)")
    if args.max_rss_mib <= 0:
        p.error("--max-rss-mib must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.monotonic()
    bench = Bench(args)
    segments: list[Segment] = []
    memory: tuple[Segment, Segment] | None = None
    try:
        bench.start()
        bench.load(args.rows)
        low: Segment | None = None
        for w in args.workloads:
            if w == "big":
                segments.append(bench.measure(bench.update_all("big")))
            elif w == "small":
                segments.append(bench.measure(bench.pgbench("small", args.rows, args.transactions)))
            elif w == "memory":
                low = bench.update_all(f"memory-{_short(args.rows // 10)}", args.rows // 10)
                segments.append(bench.measure(low, ceiling=False))
        if low is not None:
            # the high side is the big workload's Headwater run (same UPDATE of all rows), else its own run
            high = next((s for s in segments if s.name == "big"), None)
            if high is None:
                high = bench.measure(bench.update_all(f"memory-{_short(args.rows)}"), ceiling=False)
                segments.append(high)
            memory = (low, high)
    finally:
        bench.close()
    total = time.monotonic() - t_start
    summary = report(segments, memory, args.workloads, args.max_rss_mib)
    print(f"total {total:.0f} s on {os.cpu_count()} cores (load average at end {os.getloadavg()[0]:.1f})")
    if args.json:
        doc = {
            "args": {k: v for k, v in vars(args).items() if k not in ("workloads", "consumer_list")},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
            "settings": SETTINGS,
            "total_s": total,
            "segments": [
                {**{k: v for k, v in asdict(s).items() if k != "runs"},
                 "runs": [{**asdict(r), "rate": r.rate, "rate_after_first": r.rate_after_first} for r in s.runs]}
                for s in segments
            ],
            **summary,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0 if summary["pass"] else 1


def _short(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


if __name__ == "__main__":
    sys.exit(main())
