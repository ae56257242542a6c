#!/usr/bin/env python
"""Commit-to-lake lag of the default Spark pipeline: how long after a transaction commits its row
is visible in the Delta current-state table.

One throwaway PostgreSQL 15 cluster, one table ``probe (id bigint primary key, payload text)``,
one pipeline as ``headwater pipeline`` runs it by default: the ``headwater`` source into one
``delta`` sink (current-state tables and change logs), trigger ``processingTime: 1 second``,
master ``local[*]`` unless ``--master``. Per rate of ``--rates`` (changes/s), a load of
``--duration`` seconds inserts rows at that steady rate, ``--rows-per-tx`` rows per transaction
(a schedule of absolute times: a late transaction is not made up by a burst).

Measured per row:
- commit time: ``time.time()`` right after ``COMMIT`` returned, on the client;
- visible: the time of the Delta commit that first holds the row's id, i.e. the modification time
  of that version's ``_delta_log/<version>.json``. Delta writers (Spark's and delta-rs) write the
  file and then publish it atomically (rename / link), so the mtime precedes visibility by the
  publishing step; and the kernel stamps mtimes with its coarse clock. The run measures that
  clock's error against ``time.time()`` (``--calibrate`` files written and stamped) and reports it
  with the figures: it is the method's own error, a few milliseconds at most.
Which ids a version first holds is read after the run with delta-rs, version by version (the
current-state table only; nothing polls it while the pipeline runs).

Rows of the first ``--warmup`` seconds of each rate are left out of its figures. Also reported:
the time from the query's start to the first visible version of the table (the first batch,
which holds the initial snapshot of one row), the pipeline's per-batch durations (Spark's
``addBatch``) and the load average. Run ``.venv/bin/python bench/spark_lag.py --help``; figures
in bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from headwater.embedded.postgres import ThrowawayPostgres

DB = "lag"
TOPIC = "lag.public.probe"
PAYLOAD = "x" * 100


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass
class RateResult:
    rate: int  # target changes/s
    achieved: float  # changes/s the load generator reached
    rows: int  # rows measured (after the warm-up)
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    batches: int  # micro-batches with input during the load
    add_batch_p50_ms: float | None  # Spark's addBatch (the sinks' time) per such batch, median
    load_avg: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass
class Report:
    rates: list[RateResult] = field(default_factory=list)
    first_batch_s: float | None = None  # query start → the table's first visible version
    session_start_s: float | None = None
    clock_error_ms: float | None = None  # the largest (time.time() - mtime) of the calibration
    master: str = ""
    load_avg_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    sink_timings: dict[str, float] = field(default_factory=dict)  # the Delta sink's steps, s, whole run


def mtime_error_ms(directory: Path, samples: int) -> float:
    """How far a freshly written file's mtime may lag ``time.time()`` taken just before writing it
    (the coarse clock the kernel stamps files with): the largest difference seen, in ms."""
    worst = 0.0
    for i in range(samples):
        path = directory / f"clock-{i}"
        before = time.time()
        path.write_bytes(b"x")
        worst = max(worst, (before - path.stat().st_mtime) * 1000)
        path.unlink()
        time.sleep(0.002)
    return worst


class Load(threading.Thread):
    """Inserts rows at a steady rate; records each row's commit time (after COMMIT returned)."""

    def __init__(self, pg: ThrowawayPostgres, first_id: int, rate: int, duration: float, rows_per_tx: int) -> None:
        super().__init__(name="lag-load", daemon=True)
        self.pg, self.first_id, self.rate, self.duration, self.rows_per_tx = pg, first_id, rate, duration, rows_per_tx
        self.committed: dict[int, float] = {}
        self.started = 0.0
        self.ended = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = self.pg.connect(DB, autocommit=False)
            interval = self.rows_per_tx / self.rate
            next_id = self.first_id
            self.started = time.time()
            deadline = self.started + self.duration
            due = self.started
            with conn.cursor() as cur:
                while due < deadline:
                    pause = due - time.time()
                    if pause > 0:
                        time.sleep(pause)
                    ids = list(range(next_id, next_id + self.rows_per_tx))
                    cur.executemany("INSERT INTO probe VALUES (%s, %s)", [(i, PAYLOAD) for i in ids])
                    conn.commit()
                    done = time.time()
                    for i in ids:
                        self.committed[i] = done
                    next_id += self.rows_per_tx
                    due += interval
            self.ended = time.time()
            conn.close()
        except BaseException as exc:  # reported by the main thread
            self.error = exc


def visible_times(table: Path, since_version: int) -> dict[int, float]:
    """id → the mtime of the first version (from `since_version` on) holding it."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    latest = DeltaTable(str(table)).version()
    seen: set[int] = set()
    out: dict[int, float] = {}
    if since_version > 0:
        seen.update(DeltaTable(str(table), version=since_version - 1).to_pyarrow_table(columns=["id"])
                    .column("id").to_pylist())
    for version in range(since_version, latest + 1):
        stamp = (table / "_delta_log" / f"{version:020d}.json").stat().st_mtime
        ids = DeltaTable(str(table), version=version).to_pyarrow_table(columns=["id"]).column("id")
        fresh = ids.filter(pc.invert(pc.is_in(ids, value_set=_array(seen)))) if seen else ids
        for i in fresh.to_pylist():
            out[i] = stamp
            seen.add(i)
    return out


def _array(values: set[int]) -> Any:
    import pyarrow as pa

    return pa.array(sorted(values), pa.int64())


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def wait_visible(table: Path, wanted: int, timeout: float) -> bool:
    """Until the table holds `wanted` rows (its log's statistics), or `timeout` passed."""
    import pyarrow as pa
    from deltalake import DeltaTable

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (table / "_delta_log").is_dir():
            try:
                counts = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True)).column("num_records")
                if sum(counts.to_pylist()) >= wanted:
                    return True
            except Exception as exc:  # a version being written: look again
                log(f"reading {table}: {exc}")
        time.sleep(0.2)
    return False


def run(args: argparse.Namespace) -> Report:
    from deltalake import DeltaTable

    from headwater.spark.pipeline import Pipeline, PipelineSpec, SinkSpec
    from headwater.spark.session import build_session
    from headwater.spark.sinks.jsonl import topic_directory

    report = Report(master=args.master, load_avg_start=os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="headwater-lag-"))
    pg = ThrowawayPostgres(keep=False)
    pipeline: Any = None
    spark: Any = None
    try:
        pg.start()
        pg.create_database(DB)
        with pg.connect(DB) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE probe (id bigint PRIMARY KEY, payload text)")
            cur.execute("INSERT INTO probe VALUES (0, 'seed')")
        report.clock_error_ms = mtime_error_ms(work, args.calibrate)
        log(f"file mtime vs time.time(): at most {report.clock_error_ms:.1f} ms behind ({args.calibrate} files)")
        t = time.monotonic()
        spark = build_session("headwater-spark-lag", master=args.master)
        report.session_start_s = time.monotonic() - t
        source = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                  "database.hostname": pg.host, "database.port": str(pg.port), "database.user": "postgres",
                  "database.dbname": DB, "topic.prefix": "lag", "plugin.name": "pgoutput", "slot.name": "hw_lag",
                  "publication.autocreate.mode": "filtered", "table.include.list": "public.probe"}
        spec = PipelineSpec(source=source, sinks=[SinkSpec("delta", {"path": "lake", **args.sink_option})],
                            checkpoint=Path("checkpoint"),
                            master=args.master, app_name="spark-lag", base_dir=work)
        pipeline = Pipeline(spec, spark=spark)
        table = work / "lake" / topic_directory(TOPIC)
        started = time.time()
        pipeline.start()
        if not wait_visible(table, 1, args.timeout):
            raise RuntimeError(f"the first batch did not reach {table} within {args.timeout} s")
        first_row = next(v for v in range(DeltaTable(str(table)).version() + 1) if _holds_rows(table, v))
        report.first_batch_s = (table / "_delta_log" / f"{first_row:020d}.json").stat().st_mtime - started
        log(f"first batch visible {report.first_batch_s:.1f} s after the query started "
            f"(session start {report.session_start_s:.1f} s)")
        next_id, expected = 1, 1
        for rate in args.rates:
            since = DeltaTable(str(table)).version() + 1
            batches_before = _batch_ids(pipeline)
            load = Load(pg, next_id, rate, args.duration, args.rows_per_tx)
            load.start()
            load.join()
            if load.error is not None:
                raise RuntimeError(f"the load failed: {load.error}") from load.error
            expected += len(load.committed)
            next_id += len(load.committed)
            if not wait_visible(table, expected, args.timeout):
                raise RuntimeError(f"{expected} rows not visible within {args.timeout} s of the load's end")
            loadavg = os.getloadavg()
            visible = visible_times(table, since)
            cutoff = load.started + args.warmup
            lags = [(visible[i] - c) * 1000 for i, c in load.committed.items() if c >= cutoff]
            missing = [i for i in load.committed if i not in visible]
            if missing:
                raise RuntimeError(f"{len(missing)} committed rows never became visible (first {missing[:5]})")
            progress = [p for p in _progress(pipeline) if p.get("batchId") not in batches_before
                        and p.get("numInputRows", 0)]
            adds = [p.get("durationMs", {}).get("addBatch", 0) for p in progress]
            result = RateResult(rate, len(load.committed) / max(1e-9, load.ended - load.started), len(lags),
                                _percentile(lags, 0.50), _percentile(lags, 0.99), max(lags) if lags else None,
                                len(progress), statistics.median(adds) if adds else None, loadavg)
            report.rates.append(result)
            log(f"{rate} changes/s (achieved {result.achieved:.0f}): lag p50 {_ms(result.p50_ms)}, p99 "
                f"{_ms(result.p99_ms)}, max {_ms(result.max_ms)} over {result.rows} rows; {result.batches} batches, "
                f"addBatch median {_ms(result.add_batch_p50_ms)}; load average {loadavg[0]:.2f} {loadavg[1]:.2f} "
                f"{loadavg[2]:.2f}")
            time.sleep(args.pause)
    finally:
        if pipeline is not None:
            report.sink_timings = {k: round(v, 2) for k, v in pipeline.sinks[0].timings.items()}
            pipeline.stop()
        if spark is not None:
            spark.stop()
        pg.stop()
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return report


def _holds_rows(table: Path, version: int) -> bool:
    import pyarrow as pa
    from deltalake import DeltaTable

    return pa.table(DeltaTable(str(table), version=version).get_add_actions(flatten=True)).num_rows > 0


def _progress(pipeline: Any) -> list[dict[str, Any]]:
    return [json.loads(p.json) for p in pipeline.query.recentProgress]


def _batch_ids(pipeline: Any) -> set[int]:
    return {p.get("batchId") for p in _progress(pipeline)}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rates", type=lambda s: [int(x) for x in s.split(",")], default=[100, 1000],
                   help="changes per second, comma-separated (default 100,1000)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of load per rate (default 30)")
    p.add_argument("--warmup", type=float, default=5.0, help="seconds of each load left out (default 5)")
    p.add_argument("--rows-per-tx", type=int, default=1, help="rows per transaction (default 1)")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*], as headwater pipeline)")
    p.add_argument("--pause", type=float, default=3.0, help="seconds between rates")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for rows to become visible")
    p.add_argument("--calibrate", type=int, default=200, help="files written to measure the mtime clock's error")
    p.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a delta sink option (repeatable), e.g. small.batch.rows=0 for Spark's writer only")
    p.add_argument("--json", help="also write the report here")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.sink_option = dict(option.split("=", 1) for option in args.sink_option)
    logging.basicConfig(level=logging.WARNING)
    report = run(args)
    options = args.sink_option or "default"
    print(f"spark_lag: master {report.master}, sink options {options}; "
          f"first batch {report.first_batch_s:.1f} s after the query started "
          f"(session start {report.session_start_s:.1f} s); mtime clock error <= {report.clock_error_ms:.1f} ms; "
          f"load average at start {' '.join(f'{x:.2f}' for x in report.load_avg_start)}")
    print(f"{'changes/s':>10} {'achieved':>9} {'rows':>7} {'p50':>8} {'p99':>8} {'max':>8} {'batches':>8} "
          f"{'addBatch':>9}  load average")
    for r in report.rates:
        print(f"{r.rate:>10} {r.achieved:>9.0f} {r.rows:>7} {_ms(r.p50_ms):>8} {_ms(r.p99_ms):>8} {_ms(r.max_ms):>8} "
              f"{r.batches:>8} {_ms(r.add_batch_p50_ms):>9}  {' '.join(f'{x:.2f}' for x in r.load_avg)}")
    print("delta sink steps (s, summed over the run and the table threads): "
          + ", ".join(f"{k} {v:.1f}" for k, v in sorted(report.sink_timings.items(), key=lambda kv: -kv[1])))
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(report), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
