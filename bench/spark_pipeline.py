#!/usr/bin/env python
"""Spark pipeline benchmark: Headwater's Spark source + Delta sink against the per-connection ceilings.

One throwaway PostgreSQL 15 cluster, one table ``t`` of ``--rows`` rows (6 columns), one local[2]
SparkSession for the whole run:

1. snapshot — the raw ``COPY (SELECT * FROM t) TO STDOUT`` rate of one psycopg2 connection into a
   null writer (the ceiling per connection) against an ``availableNow`` run of
   ``headwater.spark.pipeline.Pipeline`` (source ``headwater`` → ``DeltaSink``) over a fresh slot,
   a fresh checkpoint and a fresh Delta directory, timed from ``query.start()`` until
   ``awaitTermination()`` returned (SparkSession start-up excluded, everything else included);
   the Delta current-state table must then hold ``--rows`` rows with PostgreSQL's ``sum(amount)``.
   The pipeline is the default one, current-state tables *and* change logs (``--no-changelog``:
   current state only); the change log must then hold ``--rows`` snapshot reads.
2. streaming — per workload (``big``: one ``UPDATE`` of every row; ``small``: pgbench transactions
   of 10 rows), the raw pgoutput receive rate on a copy of a slot made before the workload — the
   fastest of ``--receivers``, by default ``bench/standalone_stream.py``'s four: psycopg2 counting
   clients and ``pg_recvlogical`` to /dev/null, each with proto 1 and with proto 2 +
   ``streaming=on`` (the source's own options) — against a timed
   ``availableNow`` run that consumes the same WAL into the Delta table the snapshot wrote. The
   pipeline's slot, checkpoint and Delta table all exist before the workload (they are the
   snapshot run's); every repeat runs on copies of them (``pg_copy_logical_replication_slot`` and
   directory copies, made before the clock starts). Verified: input rows = changed rows, and the
   Delta table's row count and ``sum(amount)`` equal PostgreSQL's; the change log holds one more
   update per changed row, and its newest image per key has PostgreSQL's rows and ``sum(amount)``.

Each ceiling is measured before the first Spark run of its phase and again after every one (the
COPY twice each time), and its median is the reference: the machine's speed drifts too much within
minutes for a ceiling measured once, before, to stand for the spell the Spark run had.

Targets (2-core machine): snapshot >= 25 % of the COPY ceiling, streaming >= 30 % of the receive
ceiling. Run ``.venv/bin/python bench/spark_pipeline.py --help``; see bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from headwater.embedded.postgres import drop_replication_slot
from standalone_stream import RECEIVERS, SETTINGS, Bench, Run, Segment, log

TARGET_SNAPSHOT = 0.25  # Spark snapshot rows/s ÷ COPY rows/s
TARGET_STREAM = 0.30  # Spark streaming rows/s ÷ pgoutput receive rows/s
TOPIC = "bench.public.t"
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class SparkRun:
    """One timed availableNow run of the pipeline."""

    name: str
    rows: int  # expected changed (or snapshot) rows
    elapsed_s: float  # query.start() → awaitTermination() returned
    input_rows: int  # numInputRows summed over the run's micro-batches
    batches: int
    delta_rows: int | None = None
    sum_ok: bool | None = None
    changelog_ops: dict[str, int] | None = None  # rows per op in the change log after the run
    sink_timings: dict[str, float] = field(default_factory=dict)  # DeltaSink.timings: summary, current.*
    batch_durations: list[dict[str, Any]] = field(default_factory=list)  # per batch durationMs from progress
    error: str | None = None

    @property
    def rate(self) -> float:
        return self.rows / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass
class Result:
    name: str
    rows: int
    ceiling_s: list[float]
    spark: list[SparkRun]
    target: float
    wal_bytes: int | None = None
    ceiling_errors: list[str] = field(default_factory=list)

    @property
    def ceiling_rate(self) -> float | None:
        return self.rows / statistics.median(self.ceiling_s) if self.ceiling_s else None

    @property
    def spark_rate(self) -> float | None:
        ok = [r.elapsed_s for r in self.spark if r.error is None]
        return self.rows / statistics.median(ok) if ok else None

    @property
    def ratio(self) -> float | None:
        c, s = self.ceiling_rate, self.spark_rate
        return s / c if c and s else None

    @property
    def passed(self) -> bool:
        return (self.ratio is not None and self.ratio >= self.target and not self.ceiling_errors
                and all(r.error is None for r in self.spark))


class NullWriter:
    """The COPY ceiling's destination: counts bytes, keeps nothing."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, data: Any) -> int:
        self.bytes += len(data)
        return len(data)


class SparkBench(Bench):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.spark: Any = None
        self.base: tuple[str, Path, Path] | None = None  # the pipeline's slot, checkpoint, Delta dir
        self.base_updates = 0  # the updates the base's change log holds (the workloads' changed rows)
        self.runs = 0

    # -- Spark ------------------------------------------------------------------------------
    def start_spark(self, spark: Any | None) -> float:
        """The SparkSession plus a warm-up (one Python task, one tiny Delta write): JVM start,
        class loading and the first Python worker fork are start-up, not pipeline work."""
        t = time.monotonic()
        if spark is None:
            from headwater.spark.session import build_session

            spark = build_session("headwater-bench", master=self.args.master, conf={
                "spark.driver.memory": self.args.driver_memory,
                "spark.sql.warehouse.dir": str(self.work / "warehouse"),
                "spark.sql.streaming.stopTimeout": "60s",
            })
        else:
            from headwater.spark.source import register

            register(spark)
        self.spark = spark
        spark.range(4).rdd.map(lambda x: x).count()
        spark.range(1).write.format("delta").mode("overwrite").save(str(self.work / "warmup"))
        elapsed = time.monotonic() - t
        log(f"SparkSession ({spark.sparkContext.master}) + warm-up: {elapsed:.1f} s")
        return elapsed

    def warm_up(self, rows: int, rounds: int = 1) -> float:
        """The whole pipeline once, on a table of its own (``w``, publication ``w_pub``): a snapshot,
        a batch that rewrites the table and one that merges into it. The JVM compiles the code of
        these paths on first use (the first 1M-row snapshot of a session took 23 s, the third
        8.8 s); a pipeline that runs for hours pays that once. Returns the seconds it took."""
        t = time.monotonic()
        self.sql("CREATE TABLE w(id int PRIMARY KEY, name text, amount numeric(12,2), ts timestamptz, flag bool, "
                 "doc jsonb)")
        self.sql("INSERT INTO w SELECT g, 'name-' || g, g / 100.0, now(), g %% 2 = 0, jsonb_build_object('id', g) "
                 "FROM generate_series(1, %s) g", (rows,))
        self.sql("CREATE PUBLICATION w_pub FOR TABLE public.w")
        try:
            for n in range(rounds):
                checkpoint, delta = self.work / f"warm-ckpt-{n}", self.work / f"warm-delta-{n}"
                props = {**self.source_props("hw_warm"), "publication.name": "w_pub", "table.include.list": "public.w"}
                try:
                    for statement in (None, "UPDATE w SET amount = amount + 1",
                                      "UPDATE w SET amount = amount + 1 WHERE id <= 10"):
                        if statement:
                            self.sql(statement)
                        run = self.spark_run("warm-up", 0, "hw_warm", checkpoint, delta, props=props, verify=False)
                        if run.error:
                            raise RuntimeError(f"warm-up pipeline failed: {run.error}")
                finally:
                    self._drop(("hw_warm", checkpoint, delta))
        finally:
            self.sql("DROP PUBLICATION w_pub")
            self.sql("DROP TABLE w")
        elapsed = time.monotonic() - t
        log(f"warm-up pipeline ({rows:,} rows: snapshot, rewrite, merge; {rounds} round(s)): {elapsed:.1f} s")
        return elapsed

    def source_props(self, slot: str) -> dict[str, str]:
        return {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": self.pg.host,
            "database.port": str(self.pg.port),
            "database.user": "postgres",
            "database.dbname": "bench",
            "topic.prefix": "bench",
            "plugin.name": "pgoutput",
            "slot.name": slot,
            "publication.name": "b_pub",
            "publication.autocreate.mode": "filtered",
            "table.include.list": "public.t",
            "snapshot.mode": "initial",
            **({"snapshotChunkRows": str(self.args.chunk_rows)} if self.args.chunk_rows else {}),
            **({"snapshotParallelism": str(self.args.parallelism)} if self.args.parallelism else {}),
            **({"maxRowsPerBatch": str(self.args.max_rows_per_batch)} if self.args.max_rows_per_batch else {}),
            **({"readAheadMessages": str(self.args.read_ahead_messages)} if self.args.read_ahead_messages else {}),
            **({"snapshotDelivery": self.args.snapshot_delivery} if self.args.snapshot_delivery else {}),
            **({"streamTaskMessages": str(self.args.stream_task_messages)} if self.args.stream_task_messages
               else {}),
        }

    def spark_run(self, name: str, rows: int, slot: str, checkpoint: Path, delta: Path,
                  props: dict[str, str] | None = None, verify: bool = True, updates: int = 0) -> SparkRun:
        from headwater.spark.pipeline import Pipeline, PipelineSpec, SinkSpec

        sink = {"path": str(delta), "changelog": "true" if self.args.changelog else "false"}
        spec = PipelineSpec(source=props or self.source_props(slot), sinks=[SinkSpec("delta", sink)],
                            checkpoint=checkpoint, trigger={"availableNow": True}, app_name=f"bench-{name}",
                            base_dir=self.work)
        pipeline = Pipeline(spec, spark=self.spark)
        error = None
        t0 = time.monotonic()
        try:
            pipeline.start()
            if not pipeline.await_termination(self.args.timeout):
                error = f"timeout after {self.args.timeout} s"
                pipeline.stop()
        except Exception as exc:  # the query failed: keep measuring the other runs
            error = f"query failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        elapsed = time.monotonic() - t0
        progress = [json.loads(p.json) for p in (pipeline.query.recentProgress if pipeline.query else [])]
        progress = [p for p in progress if p.get("numInputRows", 0) or p.get("durationMs", {}).get("addBatch")]
        run = SparkRun(name, rows, elapsed, sum(int(p.get("numInputRows", 0)) for p in progress), len(progress),
                       sink_timings=dict(pipeline.sinks[0].timings),
                       batch_durations=[{"batch": p.get("batchId"), "rows": p.get("numInputRows"),
                                         **p.get("durationMs", {})} for p in progress], error=error)
        if error is None and verify:
            self.verify(run, delta, updates)
        return run

    def verify(self, run: SparkRun, delta: Path, updates: int) -> None:
        """The current-state table against PostgreSQL; with change logs, the change log holds the
        snapshot's reads and `updates` updates, and its newest image per key is PostgreSQL's table."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from headwater.spark.sinks.delta import DeltaSink

        sink = DeltaSink(self.spark, str(delta))
        path = sink.table_path(TOPIC)
        row = self.spark.read.format("delta").load(path).agg(F.count(F.lit(1)).alias("n"),
                                                              F.sum("amount").alias("s")).first()
        run.delta_rows = int(row["n"])
        pg_sum = self.sql("SELECT sum(amount) FROM t")[0]
        run.sum_ok = Decimal(row["s"] or 0) == Decimal(pg_sum)
        problems = []
        if run.delta_rows != self.args.rows:
            problems.append(f"Delta table holds {run.delta_rows:,} rows, expected {self.args.rows:,}")
        if not run.sum_ok:
            problems.append(f"Delta sum(amount) {row['s']} != PostgreSQL's {pg_sum}")
        # typed snapshot rows arrive as a few records per chunk (the Delta table's count is the check);
        # valueFormat=payload (the default into Delta only) adds a schema record per task and schema
        schema_records = 0 <= run.input_rows - run.rows <= max(100, run.rows // 100)
        if run.input_rows != run.rows and "typed" not in run.sink_timings and not schema_records:
            problems.append(f"the query read {run.input_rows:,} rows, expected {run.rows:,}")
        if self.args.changelog:
            log_table = self.spark.read.format("delta").load(sink.changelog_path(TOPIC))
            run.changelog_ops = {r["op"]: int(r["n"]) for r in log_table.groupBy("op").agg(F.count(F.lit(1)).alias("n"))
                                 .collect()}
            if run.changelog_ops != {"r": self.args.rows, **({"u": updates} if updates else {})}:
                problems.append(f"change log holds {run.changelog_ops} rows per op, expected {self.args.rows:,} "
                                f"snapshot reads and {updates:,} updates")
            newest = Window.partitionBy(F.col("key.id")).orderBy(F.col("position").desc())
            last = (log_table.withColumn("n", F.row_number().over(newest)).filter("n = 1 AND op <> 'd'")
                    .agg(F.count(F.lit(1)).alias("n"), F.sum("after.amount").alias("s")).first())
            if int(last["n"]) != self.args.rows or Decimal(last["s"] or 0) != Decimal(pg_sum):
                problems.append(f"the change log's newest images: {last['n']:,} rows, sum(amount) {last['s']}; "
                                f"PostgreSQL's: {self.args.rows:,}, {pg_sum}")
        if problems:
            run.error = "; ".join(problems)

    # -- snapshot -----------------------------------------------------------------------------
    def copy_ceiling(self, runs: int, first: int = 0) -> list[float]:
        times = []
        for i in range(first, first + runs):
            conn = self.pg.connect("bench")
            try:
                sink = NullWriter()
                t = time.monotonic()
                with conn.cursor() as cur:
                    cur.copy_expert("COPY (SELECT * FROM t) TO STDOUT", sink, size=65536)
                times.append(time.monotonic() - t)
            finally:
                conn.close()
            log(f"snapshot #{i + 1} COPY ceiling: {times[-1]:6.2f} s  {self.args.rows / times[-1]:>9,.0f} rows/s "
                f"({sink.bytes / 2**20:.0f} MiB)")
        return times

    def snapshot(self) -> Result:
        # the ceiling is measured around every Spark run (two COPYs before the first run and after
        # each), so that both see the same spell of the machine: its speed drifts by half within an hour
        ceiling = self.copy_ceiling(2)
        runs: list[SparkRun] = []
        for i in range(self.args.repeat):
            self.runs += 1
            slot, checkpoint, delta = f"hw_snap_{self.runs}", *self._dirs()
            self.sql("CHECKPOINT")
            r = self.spark_run("snapshot", self.args.rows, slot, checkpoint, delta)
            runs.append(r)
            self._log_run(i, r)
            # the last repeat's slot, checkpoint and table are where streaming starts
            if self.base is not None:
                self._drop_base()
            self.base = (slot, checkpoint, delta)
            ceiling += self.copy_ceiling(2, first=len(ceiling))
        return Result("snapshot", self.args.rows, ceiling, runs, TARGET_SNAPSHOT)

    # -- streaming ----------------------------------------------------------------------------
    def stream(self, seg: Segment) -> Result:
        ceiling: list[float] = []
        errors: list[str] = []

        def measure_ceiling() -> None:  # before the first Spark run and after each (see snapshot())
            # the fastest of the --receivers this round (standalone_stream.py's receivers)
            best: float | None = None
            for name in self.args.receiver_list:
                r = self.receiver(seg, name)
                log(f"{seg.name} #{len(ceiling) + len(errors) + 1} receive ceiling ({name}): {r.elapsed_s:6.2f} s  "
                    f"{r.rate:>9,.0f} rows/s" + (f"  ERROR {r.error}" if r.error else ""))
                if r.error:
                    errors.append(f"{name}: {r.error}")
                elif best is None or r.elapsed_s < best:
                    best = r.elapsed_s
            if best is not None:
                ceiling.append(best)

        measure_ceiling()
        assert self.base is not None
        base_slot, base_ckpt, base_delta = self.base
        runs: list[SparkRun] = []
        last: tuple[str, Path, Path] | None = None
        for i in range(self.args.repeat):
            self.runs += 1
            slot, checkpoint, delta = f"hw_{seg.name}_{self.runs}", *self._dirs()
            self.sql("SELECT pg_copy_logical_replication_slot(%s, %s, false, 'pgoutput')", (base_slot, slot))
            shutil.copytree(base_ckpt, checkpoint)
            shutil.copytree(base_delta, delta)
            self.sql("CHECKPOINT")
            r = self.spark_run(seg.name, seg.rows, slot, checkpoint, delta, updates=self.base_updates + seg.rows)
            runs.append(r)
            self._log_run(i, r)
            if last is not None:
                self._drop(last)
            last = (slot, checkpoint, delta)
            measure_ceiling()
        # the next workload continues from this one's end state
        self._drop_base()
        self.base = last
        self.base_updates += seg.rows
        return Result(seg.name, seg.rows, ceiling, runs, TARGET_STREAM, wal_bytes=seg.wal_bytes, ceiling_errors=errors)

    def receiver(self, seg: Segment, name: str) -> Run:
        client, proto = name.rsplit("-p", 1)
        if client == "psycopg2":
            return self.psycopg2_receiver(seg, int(proto))
        return self.recvlogical_receiver(seg, int(proto))

    # -- helpers -------------------------------------------------------------------------------
    def _dirs(self) -> tuple[Path, Path]:
        return self.work / f"ckpt-{self.runs}", self.work / f"delta-{self.runs}"

    def _log_run(self, i: int, r: SparkRun) -> None:
        timings = ", ".join(f"{k} {v:.1f} s" for k, v in sorted(r.sink_timings.items()))
        log(f"{r.name} #{i + 1} spark: {r.elapsed_s:6.2f} s  {r.rate:>9,.0f} rows/s  ({r.batches} batch(es), "
            f"{r.input_rows:,} input rows; sink {timings})" + (f"  ERROR {r.error}" if r.error else ""))

    def _drop(self, triple: tuple[str, Path, Path]) -> None:
        slot, checkpoint, delta = triple
        drop_replication_slot(self.conn, slot)
        if not self.args.keep:
            shutil.rmtree(checkpoint, ignore_errors=True)
            shutil.rmtree(delta, ignore_errors=True)

    def _drop_base(self) -> None:
        if self.base is not None:
            self._drop(self.base)
            self.base = None


# --------------------------------------------------------------------------------------------------


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def report(results: list[Result]) -> bool:
    header = (f"{'phase':<10} {'rows':>10} {'ceiling':<17} {'ceiling rows/s':>15} {'spark rows/s':>13} "
              f"{'ratio':>6} {'target':>7}  verdict")
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        kind = "COPY TO STDOUT" if r.name == "snapshot" else "pgoutput receive"
        print(f"{r.name:<10} {r.rows:>10,} {kind:<17} {_fmt(r.ceiling_rate, ',.0f'):>15} "
              f"{_fmt(r.spark_rate, ',.0f'):>13} {_fmt(r.ratio, '.2f'):>6} {r.target:>7.2f}  "
              f"{'PASS' if r.passed else 'FAIL'}")
    for r in results:
        for e in r.ceiling_errors:
            print(f"  error in {r.name} ceiling: {e}")
        for run in r.spark:
            if run.error:
                print(f"  error in {r.name} spark: {run.error}")
    ok = bool(results) and all(r.passed for r in results)
    print(f"\n{'PASS' if ok else 'FAIL'}: " + "; ".join(f"{r.name} {'ok' if r.passed else 'FAILED'}" for r in results))
    return ok


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter,
                                epilog="Targets: snapshot >= 0.25 × COPY ceiling; streaming >= 0.30 × receive ceiling.")
    p.add_argument("--rows", type=int, default=None, help="table rows = snapshot rows = rows changed by big "
                   "(default 1,000,000; --small 50,000)")
    p.add_argument("--transactions", type=int, default=None,
                   help="small: pgbench transactions of 10 rows (default 100,000; --small 5,000; even)")
    p.add_argument("--phases", default="snapshot,big,small", help="comma list of snapshot, big, small "
                   "(big and small start from the snapshot's table, so snapshot always runs)")
    p.add_argument("--repeat", type=int, default=3, help="runs per consumer and phase (default 3); medians are "
                   "reported (each ceiling is measured before the first run and after each run: the COPY twice "
                   "each time, the receive once)")
    p.add_argument("--small", action="store_true", help="smoke run: 50,000 rows, 5,000 small transactions")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--driver-memory", default="4g", help="spark.driver.memory (default 4g)")
    p.add_argument("--chunk-rows", type=int, default=None, help="source option snapshotChunkRows")
    p.add_argument("--parallelism", type=int, default=None, help="source option snapshotParallelism")
    p.add_argument("--max-rows-per-batch", type=int, default=None, help="source option maxRowsPerBatch")
    p.add_argument("--read-ahead-messages", type=int, default=None, help="source option readAheadMessages")
    p.add_argument("--stream-task-messages", type=int, default=None, help="source option streamTaskMessages")
    p.add_argument("--snapshot-delivery", choices=("events", "rows"), default=None,
                   help="source option snapshotDelivery (default: the pipeline's choice, rows for Delta sinks)")
    p.add_argument("--changelog", action=argparse.BooleanOptionalAction, default=True,
                   help="write the change-log tables too, as the pipeline does by default (default: on; "
                   "--no-changelog: current-state tables only)")
    p.add_argument("--receivers", default=",".join(RECEIVERS),
                   help=f"the streaming ceiling: the fastest of these receivers (comma list of {', '.join(RECEIVERS)}; "
                   "default all four, as standalone_stream.py: the source's own protocol options (proto 2 with "
                   "streaming) and the alternatives; psycopg2-p1 was the ceiling of the figures before 2026-11-28 "
                   "04:00)")
    p.add_argument("--warmup-rounds", type=int, default=3, help="times the warm-up pipeline runs (default 3)")
    p.add_argument("--warmup-rows", type=int, default=20_000, help="rows of the warm-up pipeline run before "
                   "anything is measured (default 20,000; 0: none, the first snapshot then runs cold)")
    p.add_argument("--json", metavar="OUT", help="results JSON (default bench/results/spark_pipeline-<time>.json)")
    p.add_argument("--timeout", type=float, default=1200, help="seconds per consumer run (default 1200)")
    p.add_argument("--keep", action="store_true", help="keep the cluster and the work dir")
    args = p.parse_args(argv)
    args.rows = args.rows or (50_000 if args.small else 1_000_000)
    args.transactions = args.transactions or (5_000 if args.small else 100_000)
    args.phase_list = [w.strip() for w in args.phases.split(",") if w.strip()]
    args.receiver_list = [w.strip() for w in args.receivers.split(",") if w.strip()]
    if not args.receiver_list or set(args.receiver_list) - set(RECEIVERS):
        p.error(f"--receivers takes {', '.join(RECEIVERS)}")
    if set(args.phase_list) - {"snapshot", "big", "small"}:
        p.error("--phases takes snapshot, big, small")
    if args.rows < 100 or args.rows % 10:
        p.error("--rows must be a multiple of 10, at least 100")
    if args.transactions < 2 or args.transactions % 2:
        p.error("--transactions must be even (two pgbench clients)")
    # what standalone_stream.Bench reads
    args.output_dir, args.headwater, args.keep_output = None, "", False
    args.consumer_list = ["ceiling"]
    return args


def main(argv: list[str] | None = None, spark: Any | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    t_start = time.monotonic()
    bench = SparkBench(args)
    results: list[Result] = []
    startup = warmup = None
    try:
        bench.start()
        startup = bench.start_spark(spark)
        warmup = bench.warm_up(args.warmup_rows, args.warmup_rounds) if args.warmup_rows > 0 else None
        bench.load(args.rows)
        results.append(bench.snapshot())
        for phase in args.phase_list:
            if phase == "big":
                results.append(bench.stream(bench.update_all("big")))
            elif phase == "small":
                results.append(bench.stream(bench.pgbench("small", args.rows, args.transactions)))
    finally:
        with contextlib.suppress(Exception):
            bench._drop_base()
        if spark is None and bench.spark is not None:
            bench.spark.stop()
        bench.close()
    total = time.monotonic() - t_start
    ok = report(results)
    print(f"total {total:.0f} s on {os.cpu_count()} cores (SparkSession + warm-up {_fmt(startup, '.1f')} s, "
          f"warm-up pipeline {_fmt(warmup, '.1f')} s, load average at end {os.getloadavg()[0]:.1f})")
    out = Path(args.json) if args.json else RESULTS / f"spark_pipeline-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "command": " ".join([Path(sys.executable).name, "bench/spark_pipeline.py", *(argv or sys.argv[1:])]),
        "args": {k: v for k, v in vars(args).items() if k not in ("phase_list", "consumer_list", "output_dir",
                                                                   "headwater", "keep_output", "receiver_list")},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "loadavg_end": os.getloadavg()},
        "pg_settings": SETTINGS,
        "spark_startup_s": startup,
        "warmup_pipeline_s": warmup,
        "total_s": total,
        "results": [{"name": r.name, "rows": r.rows, "wal_bytes": r.wal_bytes, "ceiling_s": r.ceiling_s,
                     "ceiling_rows_per_s": r.ceiling_rate, "spark_rows_per_s": r.spark_rate, "ratio": r.ratio,
                     "target": r.target, "pass": r.passed, "ceiling_errors": r.ceiling_errors,
                     "spark_runs": [{**asdict(s), "rate": s.rate} for s in r.spark]} for r in results],
        "pass": ok,
    }
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(f"wrote {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
