#!/usr/bin/env python
"""Standalone latency benchmark: commit-to-sink latency of `headwater run` at steady rates.

One throwaway PostgreSQL 15 cluster, one table ``t`` (the columns of standalone_stream.py's table),
and one ``headwater run`` with the settings a user gets by default (jsonl sink on tmpfs, JSON with
schemas, default poll/flush intervals, encoding workers, snapshot of the empty table), started once.
For every rate (default 100 and 1,000 transactions/s):

* a paced writer on its own connection runs one ``INSERT`` per transaction (autocommit off,
  ``COMMIT`` per row), on a fixed schedule (start + i/rate: a late transaction does not make the
  next ones burst); right after ``COMMIT`` returns it stamps the row's id with both clocks
  (CLOCK_MONOTONIC and CLOCK_REALTIME, system-wide on Linux, so comparable across processes);
* a detector process watches the jsonl file with inotify (IN_MODIFY, via libc): it sleeps in
  ``select`` on the inotify descriptor, reads what was appended as soon as the kernel reports a
  write, and stamps every complete line found with both clocks right after that read. Its
  resolution is the kernel's wake-up plus one read (tens of microseconds), and its stamp is an
  upper bound of the moment the line appeared. It then parses the line for the row id and
  ``source.ts_ms``;
* a warm-up (default 5 s) at the rate, not counted, then the measured phase (default 20 s).

Reported per rate: latency = line seen − COMMIT returned (client side, monotonic clock), p50 / p90 /
p99 / max, and the same from ``source.ts_ms`` (the server's commit time, realtime clock, ms
resolution); the rate the writer achieved and the rate lines arrived; Headwater's CPU time per
transaction (the runner and its worker processes, from /proc), so cheaper latency bought with more
CPU shows. Every transaction of a phase must arrive exactly once.

Run ``.venv/bin/python bench/standalone_latency.py --help``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import multiprocessing
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

# the throughput bench's table, rows, cluster set-up and headwater configuration
from standalone_stream import (
    DB,
    TABLE,
    log,
    parse_with_headwater,
    properties,
    row_sql,
    scratch,
    start_cluster,
)

TARGET_P99_MS = 50.0
# synchronous_commit as a server has it by default: the throwaway cluster turns it off, and then
# committed WAL reaches logical decoding only at the WAL writer's next round (wal_writer_delay, 200 ms)
SETTINGS = {"autovacuum": "off", "log_min_messages": "warning", "synchronous_commit": "on"}
IN_MODIFY = 0x00000002
PUB, FLOOR_SLOT = "lat_floor_pub", "lat_floor"
_INSERT = b"I"[0]

INSERT = f"INSERT INTO t VALUES ({row_sql('%(id)s')})"


# --------------------------------------------------------------------------------------------------
# The detector (its own process: the writer's work never delays a stamp)


def _inotify(path: Path) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "inotify_init1")
    if libc.inotify_add_watch(fd, os.fsencode(path), IN_MODIFY) < 0:
        raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
    return fd


def detect(path: Path, ready: Any, stop: Any, out: Any) -> None:
    """Stamp every line appended to `path` until `stop` is set; send {id: (mono_ns, real_ns,
    ts_ms, count)} through `out`."""
    ino = _inotify(path)
    f = path.open("rb", buffering=0)
    seen: dict[int, list[int]] = {}
    tail = b""
    ready.set()
    try:
        while True:
            r, _, _ = select.select([ino], [], [], 0.2)
            if r:
                with contextlib.suppress(BlockingIOError):
                    while os.read(ino, 65536):
                        pass
            elif stop.is_set():
                break
            data = f.read()
            if not data:
                continue
            mono, real = time.monotonic_ns(), time.time_ns()
            data = tail + data
            end = data.rfind(b"\n") + 1
            tail = data[end:]
            for line in data[:end].splitlines():
                value = orjson.loads(line)["value"]
                if value is None:
                    continue  # a tombstone (none in this workload)
                payload = value["payload"]
                row = payload["after"] or payload["before"]
                key = row["id"]
                entry = seen.get(key)
                if entry is None:
                    seen[key] = [mono, real, payload["source"]["ts_ms"], 1]
                else:
                    entry[3] += 1
    finally:
        f.close()
        os.close(ino)
    out.send(seen)
    out.close()


def receive(dsn: str, slot: str, ready: Any, stop: Any, out: Any) -> None:
    """The floor: a minimal psycopg2 client of the same server (pgoutput protocol 1, its own slot),
    stamping each INSERT's id when its message arrives; sends {id: mono_ns} through `out`."""
    import psycopg2.extras

    conn = psycopg2.connect(dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection)
    cur = conn.cursor()
    cur.start_replication(slot_name=slot, decode=False, options={"proto_version": "1", "publication_names": PUB})
    seen: dict[int, int] = {}
    ready.set()
    while not stop.is_set():
        m = cur.read_message()
        if m is None:
            select.select([cur], [], [], 0.2)
            continue
        p = m.payload
        if p[0] == _INSERT:  # 'I', relation oid, 'N', column count, then 't', length, text of column 1
            n = int.from_bytes(p[9:13], "big")
            seen[int(p[13:13 + n])] = time.monotonic_ns()
            cur.send_feedback(flush_lsn=m.data_start)
    conn.close()
    out.send(seen)
    out.close()


# --------------------------------------------------------------------------------------------------


@dataclass
class Phase:
    rate: int
    transactions: int
    offered_s: float            # first to last commit of the measured phase
    delivered_s: float          # first commit to the last line seen
    cpu_ms_per_tx: float | None  # headwater (runner + workers) CPU time per measured transaction
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    ts_p50_ms: float            # from source.ts_ms (server commit time, ms resolution)
    ts_p99_ms: float
    ts_max_ms: float
    floor_p50_ms: float         # the raw receiver: commit to message received
    floor_p99_ms: float
    missing: int
    duplicated: int

    @property
    def offered_rate(self) -> float:
        return (self.transactions - 1) / self.offered_s if self.offered_s > 0 else 0.0

    @property
    def delivered_rate(self) -> float:
        return self.transactions / self.delivered_s if self.delivered_s > 0 else 0.0


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 1000) - 1] if len(values) > 1 \
        else values[0]


def _cpu_ticks(pid: int) -> int:
    """utime+stime of `pid` and its live children (the encoding workers)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == pid or int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.pg, self.work, out_dir = scratch(args, SETTINGS, "headwater-latency-")
        self.out = out_dir / f"headwater-latency-{os.getpid()}.jsonl"
        self.proc: subprocess.Popen[bytes] | None = None
        self.next_id = 1

    def run(self) -> list[Phase]:
        admin = start_cluster(self.pg)
        with admin.cursor() as cur:
            cur.execute(f"CREATE TABLE {TABLE}")
            cur.execute(f"CREATE PUBLICATION {PUB} FOR TABLE t")
            cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (FLOOR_SLOT,))
        admin.close()
        self.out.write_bytes(b"")  # created here so the detector can watch it from the start
        props = self.work / "application.properties"
        props.write_text(properties(self.pg, self.work, self.out) + "".join(f"{kv}\n" for kv in self.args.set))
        ctx = multiprocessing.get_context("fork")
        ready, stop = ctx.Event(), ctx.Event()
        receiver, sender = ctx.Pipe(duplex=False)
        detector = ctx.Process(target=detect, args=(self.out, ready, stop, sender), daemon=True)
        detector.start()
        ready.wait(10)
        f_ready, f_receiver, f_sender = ctx.Event(), *ctx.Pipe(duplex=False)
        floor = ctx.Process(target=receive, args=(self.pg.dsn(DB), FLOOR_SLOT, f_ready, stop, f_sender), daemon=True)
        floor.start()
        f_ready.wait(10)
        logfile = (self.work / "headwater.log").open("wb")
        self.proc = subprocess.Popen([self.args.headwater, "run", str(props)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=logfile)
        conn = self.pg.connect(DB, autocommit=False)
        plans: list[tuple[int, int, int]] = []  # (rate, first id, last id) of each measured phase
        commits: dict[int, tuple[int, int]] = {}
        cpu: list[tuple[int, int]] = []
        try:
            self._wait_started(conn, commits)
            for rate in self.args.rate_list:
                log(f"rate {rate}/s: warm-up {self.args.warmup:g} s")
                self._write(conn, rate, int(rate * self.args.warmup), commits)
                before = _cpu_ticks(self.proc.pid)
                first = self.next_id
                log(f"rate {rate}/s: measuring {self.args.seconds:g} s")
                self._write(conn, rate, int(rate * self.args.seconds), commits)
                plans.append((rate, first, self.next_id - 1))
                time.sleep(self.args.drain)  # the last lines arrive; Headwater's CPU for them counts
                cpu.append((before, _cpu_ticks(self.proc.pid)))
                if self.proc.poll() is not None:
                    raise RuntimeError(f"headwater exited with {self.proc.returncode}")
        finally:
            conn.close()
            stop.set()
            seen: dict[int, list[int]] = receiver.recv() if detector.is_alive() or receiver.poll(1) else {}
            detector.join(10)
            floor_seen: dict[int, int] = f_receiver.recv() if floor.is_alive() or f_receiver.poll(1) else {}
            floor.join(10)
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(60)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            logfile.close()
            self.pg.stop()
            if not self.args.keep:
                self.out.unlink(missing_ok=True)
        hz = os.sysconf("SC_CLK_TCK")
        phases = []
        for (rate, first, last), (c0, c1) in zip(plans, cpu, strict=True):
            ids = range(first, last + 1)
            lat = [(seen[i][0] - commits[i][0]) / 1e6 for i in ids if i in seen]
            ts_lat = [seen[i][1] / 1e6 - seen[i][2] for i in ids if i in seen]
            floor_lat = [(floor_seen[i] - commits[i][0]) / 1e6 for i in ids if i in floor_seen]
            missing = sum(1 for i in ids if i not in seen)
            dup = sum(1 for i in ids if i in seen and seen[i][3] > 1)
            last_seen = max((seen[i][0] for i in ids if i in seen), default=commits[first][0])
            phases.append(Phase(
                rate, len(ids), (commits[last][0] - commits[first][0]) / 1e9,
                (last_seen - commits[first][0]) / 1e9, (c1 - c0) * 1000 / hz / len(ids),
                _quantile(lat, 0.5), _quantile(lat, 0.9), _quantile(lat, 0.99), max(lat, default=float("nan")),
                _quantile(ts_lat, 0.5), _quantile(ts_lat, 0.99), max(ts_lat, default=float("nan")),
                _quantile(floor_lat, 0.5), _quantile(floor_lat, 0.99), missing, dup))
        return phases

    def _wait_started(self, conn: Any, commits: dict[int, tuple[int, int]]) -> None:
        """Until a first row has come through (snapshot done, streaming started)."""
        deadline = time.monotonic() + self.args.timeout
        self._insert(conn, commits)
        while self.out.stat().st_size == 0:
            assert self.proc is not None
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.work / "headwater.log").read_text(errors="replace").splitlines()[-15:]
                raise RuntimeError("headwater did not deliver a first row:\n    " + "\n    ".join(tail))
            time.sleep(0.05)

    def _insert(self, conn: Any, commits: dict[int, tuple[int, int]]) -> None:
        i = self.next_id
        with conn.cursor() as cur:
            cur.execute(INSERT, {"id": i})
        conn.commit()
        commits[i] = (time.monotonic_ns(), time.time_ns())
        self.next_id += 1

    def _write(self, conn: Any, rate: int, n: int, commits: dict[int, tuple[int, int]]) -> None:
        start = time.monotonic()
        for k in range(n):
            delay = start + k / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self._insert(conn, commits)


# --------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter,
                                epilog=f"Target: p99 <= {TARGET_P99_MS:g} ms at every rate, nothing lost or "
                                       "duplicated.")
    p.add_argument("--rates", default="100,1000", help="transactions/s, comma list (default 100,1000)")
    p.add_argument("--seconds", type=float, default=20, help="measured seconds per rate (default 20)")
    p.add_argument("--warmup", type=float, default=5, help="seconds at each rate before measuring (default 5)")
    p.add_argument("--drain", type=float, default=2, help="seconds to wait for the last lines (default 2)")
    p.add_argument("--quick", action="store_true", help="smoke run: 5 s per rate, 2 s warm-up")
    p.add_argument("--output-dir", default=None, help="where the jsonl sink writes (default /dev/shm)")
    p.add_argument("--keep", action="store_true", help="keep the cluster, the work dir and the jsonl file")
    p.add_argument("--json", metavar="OUT", help="write the measurements as JSON")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an extra line for application.properties (e.g. debezium.source.encoding.workers=0); "
                        "repeatable. Without it, Headwater runs with the defaults")
    p.add_argument("--timeout", type=float, default=120, help="seconds to wait for the first row (default 120)")
    args = parse_with_headwater(p, argv)
    if args.quick:
        args.seconds, args.warmup = 5, 2
    args.rate_list = [int(r) for r in args.rates.split(",") if r.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.monotonic()
    bench = Bench(args)
    phases = bench.run()
    header = (f"{'tx/s':>6} {'offered/s':>9} {'lines/s':>8} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} "
              f"{'max ms':>7} {'ts_ms p50':>9} {'ts_ms p99':>9} {'floor p50':>9} {'floor p99':>9} "
              f"{'CPU ms/tx':>9} {'lost':>5} {'dup':>4}")
    print()
    print(header)
    print("-" * len(header))
    ok = True
    for ph in phases:
        kept_up = ph.offered_rate >= 0.95 * ph.rate
        good = ph.p99_ms <= TARGET_P99_MS and ph.missing == 0 and ph.duplicated == 0 and kept_up
        ok = ok and good
        cpu = "-" if ph.cpu_ms_per_tx is None else f"{ph.cpu_ms_per_tx:.2f}"
        print(f"{ph.rate:>6} {ph.offered_rate:>9.0f} {ph.delivered_rate:>8.0f} {ph.p50_ms:>7.1f} {ph.p90_ms:>7.1f} "
              f"{ph.p99_ms:>7.1f} {ph.max_ms:>7.1f} {ph.ts_p50_ms:>9.1f} {ph.ts_p99_ms:>9.1f} "
              f"{ph.floor_p50_ms:>9.1f} {ph.floor_p99_ms:>9.1f} {cpu:>9} "
              f"{ph.missing:>5} {ph.duplicated:>4}  {'PASS' if good else 'FAIL'}"
              + ("" if kept_up else "  (the writer fell behind the rate: the machine is too busy to measure it)"))
    print(f"\n{'PASS' if ok else 'FAIL'}: p99 <= {TARGET_P99_MS:g} ms at every rate (offered at >= 95 % of it), "
          "nothing lost or duplicated")
    print(f"total {time.monotonic() - t0:.0f} s on {os.cpu_count()} cores "
          f"(load average at end {os.getloadavg()[0]:.1f})")
    if args.json:
        doc = {"args": {k: v for k, v in vars(args).items()},
               "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                           "platform": platform.platform(), "loadavg": os.getloadavg()},
               "phases": [{**asdict(ph), "offered_rate": ph.offered_rate, "delivered_rate": ph.delivered_rate}
                          for ph in phases],
               "pass": ok}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
