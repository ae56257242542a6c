#!/usr/bin/env python
"""SQL Server connector benchmark: `headwater run` with the connector's defaults against the fastest
raw read of the same rows through the same driver and the same server (the SQL Server emulator).

One emulator process (tests/emulators/sqlserver/serve.py through tests/helpers/sqlserver.py), one
database ``bench`` with CDC enabled:

* snapshot — table ``dbo.snap`` (int key, nvarchar, varchar, decimal, datetime2, bit) of ``--rows``
  rows. Headwater: ``snapshot.mode=initial_only`` (it ends by itself), timed from process start
  until the jsonl file holds one line per row (and the table's CREATE on the schema-change topic).
  Ceiling: mssql-python running the SELECT the
  connector sends (built by the connector's own functions), ``fetchmany(snapshot.fetch.size)`` in a
  REPEATABLE READ transaction, rows discarded.
* streaming — table ``dbo.changes``, empty, CDC enabled. Headwater is started once with
  ``snapshot.mode=no_data`` until it streams, then stopped: its offsets and schema history are the
  starting point of every timed run. Then ``--changes`` inserts in transactions of ``--tx-rows``
  rows are written and the capture job has put them all in the change table. Each timed run starts
  Headwater on a copy of that starting point and times it until the jsonl file holds one line per
  change. Ceiling: mssql-python running Debezium's direct-mode change query (the connector's
  text) over the same LSN range, ``fetchmany(query.fetch.size)``; once as one query (Debezium's
  ``streaming.fetch.size=0``), once in pages of ``TOP 10000`` as the connector reads it; the
  faster is the ceiling.

Every run is verified: the number of rows, the last key, and for Headwater's output every event's
topic, operation, key and `after` row (each key 1..N exactly once). Best of ``--repeat``; the
ceilings are measured between Headwater's runs, in the same run of the benchmark.

Run ``.venv/bin/python bench/sqlserver_capture.py --help``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
TESTS_DIR = BENCH_DIR.parent / "tests"
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(TESTS_DIR))

from headwater.connectors.sqlserver.changes import change_query, query_params  # noqa: E402
from headwater.connectors.sqlserver.columns import CatalogColumn, column_from_catalog, columns_query  # noqa: E402
from headwater.connectors.sqlserver.lsn import ZERO, lsn_to_str  # noqa: E402
from headwater.connectors.sqlserver.snapshot import select_statement  # noqa: E402
from headwater.relational.table import Column, TableId  # noqa: E402
from helpers.sqlserver import SqlServerEmulator  # noqa: E402
from standalone_stream import LineCounter, _terminate, log  # noqa: E402

DB = "bench"
PREFIX = "hw"
SNAP_TABLE = "snap"
STREAM_TABLE = "changes"
CAPTURE_INSTANCE = f"dbo_{STREAM_TABLE}"
# the connector's defaults (Debezium 3.6's): snapshot.fetch.size, query.fetch.size, and the page
# the connector reads a range in when streaming.fetch.size=0 (changes.DEFAULT_PAGE_ROWS)
SNAPSHOT_FETCH = 2000
QUERY_FETCH = 10000
PAGE_ROWS = 10000

# what the connector logs when its streaming loop starts
STREAMING_LOGGED = "streaming databases"

COLUMNS = ("id int NOT NULL PRIMARY KEY, name nvarchar(50) NOT NULL, code varchar(20) NULL, "
           "amount decimal(12,2) NOT NULL, created datetime2(7) NOT NULL, active bit NOT NULL")
_DIGITS = "(VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9))"

PROPERTIES = """\
debezium.source.connector.class=io.debezium.connector.sqlserver.SqlServerConnector
debezium.source.database.hostname={host}
debezium.source.database.port={port}
debezium.source.database.user=sa
debezium.source.database.password={password}
debezium.source.database.encrypt=false
debezium.source.database.names={db}
debezium.source.topic.prefix={prefix}
debezium.source.table.include.list=dbo.{table}
debezium.source.snapshot.mode={mode}
debezium.source.schema.history.internal=io.debezium.storage.file.history.FileSchemaHistory
debezium.source.schema.history.internal.file.filename={dir}/schema-history.dat
debezium.source.offset.storage.file.filename={dir}/offsets.dat
debezium.format.key=json
debezium.format.value=json
debezium.sink.type=jsonl
debezium.sink.jsonl.path={out}
"""


# --------------------------------------------------------------------------------------------------
# Results


@dataclass
class Run:
    consumer: str
    rows: int
    elapsed_s: float                  # headwater: process start → the last row's line in the file
    first_s: float | None = None      # headwater: process start → the first line
    exit_s: float | None = None       # headwater: process start → exit (snapshot) or SIGTERM handled
    peak_rss_mib: float | None = None  # headwater: ru_maxrss of the process (wait4)
    children: int = 0                 # headwater: child processes seen while it ran
    cpu_s: float | None = None        # CPU of the reading process (headwater: user + system, wait4)

    @property
    def rate(self) -> float:
        return self.rows / self.elapsed_s

    @property
    def rate_after_first(self) -> float | None:
        if self.first_s is None or self.elapsed_s <= self.first_s:
            return None
        return (self.rows - 1) / (self.elapsed_s - self.first_s)


@dataclass
class Phase:
    name: str
    rows: int
    runs: list[Run]

    def best(self, consumer: str) -> Run | None:
        runs = [r for r in self.runs if r.consumer == consumer]
        return min(runs, key=lambda r: r.elapsed_s) if runs else None


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------------------------------
# The server


def numbers(lo: int, hi: int) -> str:
    """A T-SQL derived table `n(i)` of the integers lo..hi (cross joins of a digits table: one
    short statement for any count, which the emulator translates once)."""
    span = hi - lo + 1
    digits = max(1, len(str(span - 1)))
    terms = " + ".join(f"{10 ** k} * d{k}.d" if k else "d0.d" for k in range(digits))
    joins = " CROSS JOIN ".join(f"{_DIGITS} d{k}(d)" for k in range(digits))
    where = f" WHERE {terms} < {span}" if span != 10 ** digits else ""
    return f"(SELECT {lo} + {terms} AS i FROM {joins}{where}) n"


def insert_rows(table: str, lo: int, hi: int) -> str:
    return (f"INSERT INTO dbo.{table} (id, name, code, amount, created, active) "
            f"SELECT n.i, CONCAT(N'name ', n.i), CONCAT('c', n.i % 97), CAST(n.i AS decimal(12,2)) + 0.25, "
            f"DATEADD(second, n.i, CAST('2026-01-01 00:00:00.1234567' AS datetime2(7))), n.i % 2 "
            f"FROM {numbers(lo, hi)}")


def enable_cdc(table: str) -> str:
    return (f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', "
            "@role_name = NULL, @supports_net_changes = 0")


def table_columns(server: SqlServerEmulator, table: str) -> list[Column]:
    """The table's columns as the connector builds them (its catalog query and conversion)."""
    cols = [CatalogColumn.from_row(r) for r in server.execute(columns_query(DB), database=DB)]
    return [column_from_catalog(c) for c in cols if c.schema == "dbo" and c.table == table]


def wait_for_change_rows(server: SqlServerEmulator, expected: int, timeout: float) -> tuple[bytes, bytes, int]:
    """Wait until the capture job has written `expected` rows to the change table; the LSN range
    (first and last commit LSN) and the number of transactions."""
    deadline = time.monotonic() + timeout
    while True:
        ((count, first, last, txs),) = server.execute(
            f"SELECT COUNT(*), MIN([__$start_lsn]), MAX([__$start_lsn]), COUNT(DISTINCT [__$start_lsn]) "
            f"FROM cdc.[{CAPTURE_INSTANCE}_CT]", database=DB)
        if count >= expected:
            if count != expected:
                raise BenchError(f"{count:,} change rows, expected {expected:,}")
            return bytes(first), bytes(last), txs
        if time.monotonic() > deadline:
            raise BenchError(f"the capture job wrote {count:,} of {expected:,} change rows in {timeout:.0f} s")
        time.sleep(0.2)


# --------------------------------------------------------------------------------------------------
# Ceilings


def ceiling_snapshot(server: SqlServerEmulator, statement: str, rows: int) -> Run:
    """The connector's snapshot SELECT in a REPEATABLE READ transaction (its default isolation),
    `snapshot.fetch.size` rows per fetch, rows discarded."""
    t0, c0 = time.perf_counter(), time.process_time()
    conn = server.connect(DB, autocommit=False)
    try:
        cur = conn.cursor()
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute(statement)
        n, last = 0, None
        while batch := cur.fetchmany(SNAPSHOT_FETCH):
            n += len(batch)
            last = batch[-1]
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        conn.rollback()
    finally:
        conn.close()
    if n != rows or last is None or last[0] != rows:
        raise BenchError(f"ceiling snapshot: {n:,} rows, last key {last[0] if last else None}; expected {rows:,}")
    return Run("ceiling", n, elapsed, cpu_s=cpu)


def ceiling_changes(server: SqlServerEmulator, columns: list[Column], first: bytes, last: bytes, rows: int, *,
                    paged: bool) -> Run:
    """Debezium's direct-mode change query over [first, last]: one query (`paged=False`) or pages
    of TOP 10000 resumed after the last row's position (how the connector reads a range)."""
    query = change_query(DB, CAPTURE_INSTANCE, columns, mode="direct", page_rows=PAGE_ROWS if paged else 0)
    t0, c0 = time.perf_counter(), time.process_time()
    conn = server.connect(DB, autocommit=False)
    try:
        cur = conn.cursor()
        n, row = 0, None
        params = query_params("direct", first, last, ZERO, 0)
        while True:
            cur.execute(query, *params)
            page = 0
            while batch := cur.fetchmany(QUERY_FETCH):
                page += len(batch)
                row = batch[-1]
            n += page
            if not paged or page < PAGE_ROWS or row is None:
                break
            params = query_params("direct", bytes(row[0]), last, bytes(row[1]), int(row[2]))
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        conn.rollback()
    finally:
        conn.close()
    last_key = row[4] if row is not None else None
    if n != rows or last_key != rows:
        raise BenchError(f"ceiling changes: {n:,} rows, last key {last_key}; expected {rows:,}")
    return Run("ceiling paged" if paged else "ceiling", n, elapsed, cpu_s=cpu)


# --------------------------------------------------------------------------------------------------
# Headwater


_TOPIC = re.compile(rb'^\{"topic":"([^"]*)"')
_KEY_ID = re.compile(rb'"payload":\{"id":(\d+)\}')
_AFTER = re.compile(rb'"after":\{"id":(\d+),"name":"name (\d+)"')
_OP = re.compile(rb'"op":"([a-z])","ts_ms"')


def verify_output(path: Path, topic: str, op: str, rows: int, schema_changes: int) -> None:
    """`schema_changes` events of the schema-change topic, every other line an event of `topic`
    with operation `op` whose key and `after` row agree; the keys are 1..rows, each once, and the
    last event's key is `rows`."""
    seen = bytearray(rows + 1)
    n = changes = 0
    last = None
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            m = _TOPIC.match(line)
            got = m.group(1).decode() if m else None
            if got == PREFIX:
                changes += 1
                continue
            if got != topic:
                raise BenchError(f"{path.name}: line {number} is an event of {got!r}, expected {topic!r}")
            key, after, found_op = _KEY_ID.search(line), _AFTER.search(line), _OP.search(line)
            if key is None or after is None or found_op is None or found_op.group(1) != op.encode():
                raise BenchError(f"{path.name}: line {number}: not an {op!r} event with a key and an after row")
            k = int(key.group(1))
            if not 1 <= k <= rows or seen[k] or int(after.group(1)) != k or int(after.group(2)) != k:
                raise BenchError(f"{path.name}: line {number}: key {k} out of range, repeated or not the row's")
            seen[k] = 1
            last = k
            n += 1
    if n != rows or last != rows or changes != schema_changes:
        raise BenchError(f"{path.name}: {n:,} events, last key {last}, {changes} schema changes; expected "
                         f"{rows:,} ending with {rows}, {schema_changes} schema changes")


def _reap(proc: subprocess.Popen[bytes]) -> tuple[int, float, float] | None:
    """The exit code, peak RSS (MiB, wait4's ru_maxrss) and CPU seconds of an exited process; None
    while it runs."""
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    if not pid:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime  # KiB on Linux


def _stop(proc: subprocess.Popen[bytes], grace: float = 60.0) -> tuple[int, float, float]:
    """SIGTERM, then what `_reap` says once it exited (SIGKILL after `grace` seconds)."""
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (exited := _reap(proc)) is None:
        if time.monotonic() > deadline:
            proc.kill()
            deadline = float("inf")
        time.sleep(0.02)
    return exited


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            out.update(int(c) for c in (task / "children").read_text().split())
    return out


class Headwater:
    def __init__(self, server: SqlServerEmulator, headwater: str, work: Path, output_dir: Path,
                 timeout: float) -> None:
        self.server = server
        self.headwater = headwater
        self.work = work
        self.output_dir = output_dir
        self.timeout = timeout
        self.count = 0

    def properties(self, rundir: Path, table: str, mode: str, out: Path) -> Path:
        props = rundir / "application.properties"
        props.write_text(PROPERTIES.format(host=self.server.host, port=self.server.port, password=self.server.password,
                                           db=DB, prefix=PREFIX, table=table, mode=mode, dir=rundir, out=out))
        return props

    def rundir(self, name: str) -> tuple[Path, Path]:
        self.count += 1
        rundir = self.work / f"{name}-{self.count}"
        rundir.mkdir()
        out = self.output_dir / f"headwater-sqlserver-bench-{os.getpid()}-{name}-{self.count}.jsonl"
        out.unlink(missing_ok=True)
        return rundir, out

    def start_streaming(self, props: Path) -> None:
        """Run Headwater until it logs that it streams, then stop it: its offsets are where the
        no_data snapshot left it."""
        log_path = props.parent / "headwater.log"
        with log_path.open("wb") as logfile:
            proc = subprocess.Popen([self.headwater, "run", str(props)], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=logfile)
            try:
                deadline = time.monotonic() + self.timeout
                while STREAMING_LOGGED not in log_path.read_text(errors="replace"):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                code, _ = _terminate(proc)
            finally:
                if proc.returncode is None:
                    proc.kill()
                    proc.wait()
        text = log_path.read_text(errors="replace")
        if STREAMING_LOGGED not in text or code != 0 or not (props.parent / "offsets.dat").exists():
            tail = "\n    ".join(text.splitlines()[-15:])
            raise BenchError(f"streaming start: Headwater did not stream and stop cleanly (exit {code})\n    {tail}")

    def run(self, props: Path, out: Path, lines: int, *, stop: bool, name: str) -> Run:
        """Start `headwater run props`, wait until `out` holds `lines` lines; then wait for the
        process to exit (`stop=False`: it ends by itself) or SIGTERM it."""
        counter = LineCounter(out)
        log_path = props.parent / "headwater.log"
        first = done = None
        children: set[int] = set()
        with log_path.open("wb") as logfile:
            t0 = time.monotonic()
            proc = subprocess.Popen([self.headwater, "run", str(props)], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=logfile)
            error = None
            exited: tuple[int, float, float] | None = None
            try:
                deadline = t0 + self.timeout
                polls = 0
                while True:
                    n = counter.poll()
                    now = time.monotonic()
                    if first is None and n > 0:
                        first = now - t0
                    if n >= lines and done is None:
                        done = now - t0
                        if stop:
                            break
                    if polls % 25 == 0:
                        children |= _children(proc.pid)
                    polls += 1
                    exited = _reap(proc)
                    if exited is not None:
                        break
                    if now > deadline:
                        error = f"timeout after {self.timeout:.0f} s with {n:,} of {lines:,} lines"
                        break
                    time.sleep(0.01)
                if exited is None:
                    exited = _stop(proc)
                code, rss, cpu = exited
                exit_s = time.monotonic() - t0
            finally:
                if proc.returncode is None:
                    proc.kill()
                    proc.wait()
        n = counter.poll()
        if error is None and code != 0:
            error = f"headwater exited with {code}"
        if error is None and (done is None or n != lines):
            error = f"{n:,} lines in {out}, expected {lines:,}"
        if error is not None:
            tail = log_path.read_text(errors="replace").splitlines()[-15:]
            raise BenchError(f"{name}: {error}\n    " + "\n    ".join(tail))
        assert done is not None
        return Run("headwater", lines, done, first, exit_s, rss, len(children), cpu)


# --------------------------------------------------------------------------------------------------
# Phases


def snapshot_phase(server: SqlServerEmulator, hw: Headwater, args: argparse.Namespace) -> Phase:
    rows = args.rows
    log(f"snapshot: loading {rows:,} rows into dbo.{SNAP_TABLE}")
    t0 = time.monotonic()
    server.execute(f"CREATE TABLE dbo.{SNAP_TABLE} ({COLUMNS})", database=DB)
    server.execute(insert_rows(SNAP_TABLE, 1, rows), database=DB)
    server.execute(enable_cdc(SNAP_TABLE), database=DB)  # after the load: the capture job skips it
    log(f"snapshot: loaded in {time.monotonic() - t0:.1f} s")
    statement = select_statement(TableId(DB, "dbo", SNAP_TABLE), table_columns(server, SNAP_TABLE))
    phase = Phase("snapshot", rows, [])
    for i in range(args.repeat):
        r = ceiling_snapshot(server, statement, rows)
        phase.runs.append(r)
        log(f"snapshot #{i + 1} ceiling:   {r.elapsed_s:6.2f} s {r.rate:>9,.0f} rows/s (CPU {r.cpu_s:.1f} s)")
        rundir, out = hw.rundir("snapshot")
        props = hw.properties(rundir, SNAP_TABLE, "initial_only", out)
        # one line more: the table's CREATE on the schema-change topic (include.schema.changes=true)
        r = replace(hw.run(props, out, rows + 1, stop=False, name=f"snapshot #{i + 1}"), rows=rows)
        verify_output(out, f"{PREFIX}.{DB}.dbo.{SNAP_TABLE}", "r", rows, schema_changes=1)
        _discard(out, args)
        phase.runs.append(r)
        log(f"snapshot #{i + 1} headwater: {r.elapsed_s:6.2f} s {r.rate:>9,.0f} rows/s (first line {r.first_s:.2f} s, "
            f"after it {r.rate_after_first or 0:,.0f} rows/s; exit {r.exit_s:.2f} s; "
            f"peak RSS {r.peak_rss_mib:.0f} MiB, CPU {r.cpu_s:.1f} s)")
    return phase


def streaming_phase(server: SqlServerEmulator, hw: Headwater, args: argparse.Namespace) -> Phase:
    changes, tx_rows = args.changes, args.tx_rows
    server.execute(f"CREATE TABLE dbo.{STREAM_TABLE} ({COLUMNS})", database=DB)
    server.execute(enable_cdc(STREAM_TABLE), database=DB)
    columns = table_columns(server, STREAM_TABLE)

    # the starting point: Headwater streaming (snapshot.mode=no_data), stopped before the workload
    base, base_out = hw.rundir("streaming-start")
    props = hw.properties(base, STREAM_TABLE, "no_data", base_out)
    log("streaming: starting Headwater with snapshot.mode=no_data")
    hw.start_streaming(props)
    base_out.unlink(missing_ok=True)

    log(f"streaming: {changes:,} inserts in transactions of {tx_rows} rows")
    t0 = time.monotonic()
    conn = server.connect(DB)
    try:
        cur = conn.cursor()
        for lo in range(1, changes + 1, tx_rows):
            cur.execute(insert_rows(STREAM_TABLE, lo, min(lo + tx_rows - 1, changes)))  # autocommit: one transaction
    finally:
        conn.close()
    written = time.monotonic() - t0
    first, last, txs = wait_for_change_rows(server, changes, args.timeout)
    log(f"streaming: written in {written:.1f} s, in the change table after {time.monotonic() - t0:.1f} s "
        f"({txs:,} transactions, commit LSNs {lsn_to_str(first)} .. {lsn_to_str(last)})")

    phase = Phase("streaming", changes, [])
    for i in range(args.repeat):
        for paged in (False, True):
            r = ceiling_changes(server, columns, first, last, changes, paged=paged)
            phase.runs.append(r)
            log(f"streaming #{i + 1} {r.consumer + ':':<15} {r.elapsed_s:6.2f} s {r.rate:>9,.0f} rows/s "
                f"(CPU {r.cpu_s:.1f} s)")
        rundir, out = hw.rundir("streaming")
        for name in ("offsets.dat", "schema-history.dat"):
            shutil.copy(base / name, rundir / name)
        props = hw.properties(rundir, STREAM_TABLE, "no_data", out)
        r = hw.run(props, out, changes, stop=True, name=f"streaming #{i + 1}")
        verify_output(out, f"{PREFIX}.{DB}.dbo.{STREAM_TABLE}", "c", changes, schema_changes=0)
        _discard(out, args)
        phase.runs.append(r)
        log(f"streaming #{i + 1} headwater:     {r.elapsed_s:6.2f} s {r.rate:>9,.0f} rows/s (first line "
            f"{r.first_s:.2f} s, after it {r.rate_after_first or 0:,.0f} rows/s; peak RSS {r.peak_rss_mib:.0f} MiB, "
            f"CPU {r.cpu_s:.1f} s)")
    return phase


def _discard(out: Path, args: argparse.Namespace) -> None:
    if not args.keep:
        out.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------------------
# Report


def report(phases: list[Phase]) -> dict[str, Any]:
    header = (f"{'phase':<10} {'rows':>9} {'ceiling rows/s':>15} {'headwater rows/s':>17} {'ratio':>6} "
              f"{'hw after 1st line':>18} {'ratio':>6} {'1st line s':>10} {'peak RSS MiB':>13} {'CPU µs/row':>11}")
    print()
    print(header)
    print("-" * len(header))
    out: dict[str, Any] = {}
    for p in phases:
        ceilings = [r for r in (p.best("ceiling"), p.best("ceiling paged")) if r is not None]
        ceiling = min(ceilings, key=lambda r: r.elapsed_s)
        hw = p.best("headwater")
        assert hw is not None
        after = hw.rate_after_first or 0.0
        # CPU per row, median over the runs: it varies far less with the machine's load than rates do
        cpu_us = statistics.median(r.cpu_s or 0.0 for r in p.runs if r.consumer == "headwater") / p.rows * 1e6
        print(f"{p.name:<10} {p.rows:>9,} {ceiling.rate:>15,.0f} {hw.rate:>17,.0f} {hw.rate / ceiling.rate:>6.2f} "
              f"{after:>18,.0f} {after / ceiling.rate:>6.2f} {hw.first_s or 0:>10.2f} {hw.peak_rss_mib or 0:>13.0f} "
              f"{cpu_us:>11.1f}")
        out[p.name] = {"rows": p.rows, "ceiling": ceiling.consumer, "ceiling_rate": ceiling.rate,
                       "headwater_rate": hw.rate, "ratio": hw.rate / ceiling.rate,
                       "headwater_rate_after_first": after, "ratio_after_first": after / ceiling.rate,
                       "headwater_cpu_us_per_row": cpu_us,
                       "runs": [asdict(r) for r in p.runs]}
    print()
    for p in phases:
        paged = p.best("ceiling paged")
        if paged is not None:
            one = p.best("ceiling")
            assert one is not None
            print(f"{p.name}: ceiling as one query {one.rate:,.0f} rows/s, in pages of TOP {PAGE_ROWS} "
                  f"{paged.rate:,.0f} rows/s")
        hw = p.best("headwater")
        if hw is not None and hw.children:
            print(f"{p.name}: headwater started {hw.children} child process(es); peak RSS is the main process's")
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="snapshot table rows (default 200,000)")
    parser.add_argument("--changes", type=int, default=100_000, help="streamed inserts (default 100,000)")
    parser.add_argument("--tx-rows", type=int, default=100, help="rows per transaction of the streamed inserts")
    parser.add_argument("--repeat", type=int, default=3, help="runs per consumer and phase; the best counts")
    parser.add_argument("--phases", default="snapshot,streaming")
    parser.add_argument("--output-dir", type=Path,
                        default=Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir()),
                        help="where the jsonl sink writes (default /dev/shm: the benchmark measures Headwater, "
                        "not the disk)")
    parser.add_argument("--headwater", default=str(Path(sys.executable).parent / "headwater"))
    parser.add_argument("--timeout", type=float, default=300, help="seconds per Headwater run")
    parser.add_argument("--keep", action="store_true", help="keep the work directory and the jsonl files")
    parser.add_argument("--json", type=Path, help="write every run and the summary here")
    args = parser.parse_args(argv)
    args.phase_list = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = set(args.phase_list) - {"snapshot", "streaming"}
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not Path(args.headwater).exists():
        print(f"headwater not found at {args.headwater}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="sqlserver-capture-bench-"))
    started = time.monotonic()
    log("starting the SQL Server emulator")
    try:
        # the emulator's log is removed on success, kept (and named) on failure
        with SqlServerEmulator() as server:
            server.execute(f"CREATE DATABASE {DB}")
            server.execute("EXEC sys.sp_cdc_enable_db", database=DB)
            hw = Headwater(server, args.headwater, work, args.output_dir, args.timeout)
            phases = []
            if "snapshot" in args.phase_list:
                phases.append(snapshot_phase(server, hw, args))
            if "streaming" in args.phase_list:
                phases.append(streaming_phase(server, hw, args))
            summary = report(phases)
    except BenchError as exc:
        print(f"FAILED: {exc}\n(the emulator's log is kept: {tempfile.gettempdir()}/sqlserver-emulator-*.log)",
              file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept {work}")
    log(f"whole run {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
