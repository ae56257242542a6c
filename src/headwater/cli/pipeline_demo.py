"""``headwater demo``: the Spark pipeline on the embedded default, with a live view.

A throwaway PostgreSQL with the sample ``inventory`` database; local Spark running the headwater
source into Delta Lake current-state tables and change logs (``<workdir>/lake``) and JSONL topic
files (``<workdir>/topics``); once the initial snapshot is in, a generator of random
transactions. The live view shows events per table, the lag from commit to the lake, and a table's
current state as the lake has it. ``--duration`` counts from the end of the snapshot (how long the
generator runs); Ctrl-C or the duration stops the generator first, then the pipeline once it has
caught up (no micro-batch is cut off), then a summary compares every lake table with its source.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import sys
import threading
import time
from collections import Counter, deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from headwater.cli.demo import DBNAME, OPS, SLOT_NAME, TOPIC_PREFIX, _expected_topics, _logging_through, _Signals

log = logging.getLogger("headwater.demo")

DEFAULT_WORKDIR = Path(".headwater") / "demo"
SHOWN_TABLE = "products_on_hand"
REFRESH_PER_SECOND = 2
PLAIN_EVERY_S = 5.0
TRIGGER = "1 second"
CATCH_UP_QUIET_S = 4.0     # after the generator stops: no new events for this long, and Spark idle
CATCH_UP_MAX_S = 300.0
SNAPSHOT_MAX_S = 900.0     # the sample snapshot takes seconds; this only bounds a stuck pipeline


class PipelineState:
    """Filled by the pipeline's per-batch observer (on Spark's foreachBatch thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: dict[str, Counter[str]] = {topic: Counter() for topic in _expected_topics()}
        self.total = 0
        self.batches = 0
        self.lag_ms: int | None = None
        self.snapshot_done = threading.Event()
        self.last_event_at = time.monotonic()
        self.recent_batches: deque[tuple[int, int, float]] = deque(maxlen=5)  # (batch id, records, seconds)
        self._samples: deque[tuple[float, int]] = deque()

    def observe(self, batch: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        started = time.monotonic()
        rows = (batch.groupBy("topic", "op")
                .agg(F.count("*").alias("n"), F.max("ts_ms").alias("ts"),
                     F.max(F.col("value").contains('"snapshot":"last"').cast("int")).alias("last"))
                .collect())
        now_ms = time.time() * 1000
        with self.lock:
            newest = None
            for r in rows:
                self.ops.setdefault(r["topic"], Counter())[r["op"] or "other"] += r["n"]
                self.total += r["n"]
                if r["op"] in ("c", "u", "d") and r["ts"] is not None:
                    newest = max(newest or 0, r["ts"])
                if r["last"]:
                    self.snapshot_done.set()
            if newest is not None:
                self.lag_ms = int(now_ms - newest)
            self.batches += 1
            n = sum(r["n"] for r in rows)
            self.recent_batches.append((batch_id, n, time.monotonic() - started))
            if n:
                self.last_event_at = time.monotonic()

    def snapshot(self) -> tuple[dict[str, Counter[str]], int, int, int | None]:
        with self.lock:
            return {t: Counter(c) for t, c in self.ops.items()}, self.total, self.batches, self.lag_ms

    def events_per_second(self, total: int) -> float:
        now = time.monotonic()
        self._samples.append((now, total))
        while len(self._samples) > 2 and now - self._samples[0][0] > 5.0:
            self._samples.popleft()
        t0, n0 = self._samples[0]
        return (total - n0) / (now - t0) if now - t0 > 0.5 else 0.0


class _LakeReader:
    """Reads the lake's current state of one table (a small Spark job), at most every 2 s."""

    def __init__(self, spark: Any, path: str) -> None:
        self.spark = spark
        self.path = path
        self.rows: list[tuple[Any, ...]] = []
        self.error: str | None = None
        self._read_at = 0.0

    def read(self) -> list[tuple[Any, ...]]:
        if time.monotonic() - self._read_at < 2.0:
            return self.rows
        self._read_at = time.monotonic()
        try:
            from delta.tables import DeltaTable

            if DeltaTable.isDeltaTable(self.spark, self.path):
                df = self.spark.read.format("delta").load(self.path)
                self.rows = [tuple(r) for r in df.select("product_id", "quantity").orderBy("product_id").collect()]
            self.error = None
        except Exception as exc:  # a read racing a commit: try again next time
            self.error = (str(exc).strip().splitlines() or [repr(exc)])[0][:120]
        return self.rows


class _View:
    def __init__(self, state: PipelineState, lake: _LakeReader, cluster: Any, workdir: Path,
                 duration: float | None) -> None:
        self.state = state
        self.lake = lake
        self.cluster = cluster
        self.workdir = workdir
        self.duration = duration
        self.generator: Any = None
        self.started = time.monotonic()
        self.generator_started: float | None = None
        self.stopping = False

    def phase(self) -> str:
        if self.stopping:
            return "catching up, then stopping"
        if self.generator is None:
            return "initial snapshot"
        return "streaming changes"

    def render(self) -> Group:
        ops, total, batches, lag = self.state.snapshot()
        rate = self.state.events_per_second(total)
        since = self.generator_started or self.started
        elapsed = time.monotonic() - since
        limit = f" of {self.duration:.0f}s" if self.duration is not None and self.generator is not None else ""
        header = Text.assemble(
            ("Headwater demo: PostgreSQL → Spark → Delta Lake + JSONL", "bold cyan"),
            f"\n{self.cluster.host}:{self.cluster.port}/{DBNAME} → {self.workdir}/lake, {self.workdir}/topics\n",
            (self.phase(), "bold"),
            f"  ·  {min(elapsed, self.duration or elapsed):.0f}s{limit}  ·  {batches} micro-batches  ·  "
            f"{total} events  ·  {rate:.1f} events/s  ·  lag {'-' if lag is None else f'{lag / 1000:.1f}s'}"
            "  ·  Ctrl-C to stop",
        )
        topics = Table(title="Change events per table", title_justify="left")
        topics.add_column("topic")
        for op in OPS:
            topics.add_column(op, justify="right", header_style="bold")
        topics.add_column("total", justify="right")
        sums: Counter[str] = Counter()
        for topic in sorted(ops):
            sums.update(ops[topic])
            topics.add_row(topic, *(str(ops[topic].get(op, 0)) for op in OPS), str(sum(ops[topic].values())))
        topics.add_section()
        topics.add_row(Text("all", style="bold"), *(str(sums.get(op, 0)) for op in OPS), str(sum(sums.values())))

        gen = Table(title="Generated transactions", title_justify="left")
        gen.add_column("kind")
        gen.add_column("count", justify="right")
        if self.generator is None:
            gen.add_row("(waiting for the snapshot)", "")
        else:
            for kind, count in dict(self.generator.counts).items():
                gen.add_row(kind.replace("_", " "), str(count))

        rows = self.lake.read()
        per_column = 5
        groups = max(1, -(-len(rows) // per_column))
        lake = Table(title=f"inventory.{SHOWN_TABLE}, current state in the lake (Delta)", title_justify="left")
        for _ in range(groups):
            lake.add_column("product", justify="right", style="dim")
            lake.add_column("qty", justify="right")
        for i in range(per_column):
            cells: list[str] = []
            for g in range(groups):
                j = g * per_column + i
                cells += [str(rows[j][0]), str(rows[j][1])] if j < len(rows) else ["", ""]
            lake.add_row(*cells)
        if self.lake.error:
            lake.caption = f"(retrying: {self.lake.error})"
        top = Table.grid(padding=(0, 2))
        top.add_row(topics, gen)
        return Group(Panel(header), top, lake)

    def plain_line(self) -> str:
        ops, total, batches, lag = self.state.snapshot()
        rate = self.state.events_per_second(total)
        sums: Counter[str] = Counter()
        for counts in ops.values():
            sums.update(counts)
        by_op = " ".join(f"{op}={sums.get(op, 0)}" for op in OPS)
        lag_text = "-" if lag is None else f"{lag / 1000:.1f}s"
        return (f"[{time.monotonic() - self.started:5.1f}s] {self.phase()}: {batches} batches, {total} events "
                f"({by_op}), {rate:.1f}/s, lag {lag_text}")


def pipeline_spec(cluster: Any, workdir: Path) -> Any:
    from headwater.spark.pipeline import PipelineSpec, SinkSpec

    return PipelineSpec(
        source={
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": cluster.host, "database.port": str(cluster.port),
            "database.user": cluster.user, "database.dbname": DBNAME, "topic.prefix": TOPIC_PREFIX,
            "schema.include.list": "inventory", "slot.name": SLOT_NAME,
        },
        sinks=[SinkSpec("delta", {"path": "lake"}), SinkSpec("jsonl", {"path": "topics"})],
        checkpoint=Path("checkpoint"), trigger={"processingTime": TRIGGER}, master="local[2]",
        conf={"spark.sql.shuffle.partitions": "2"}, app_name="headwater-demo", base_dir=workdir)


def compare_with_source(spark: Any, cluster: Any, sink: Any) -> list[tuple[str, int, int, bool]]:
    """(table, rows in PostgreSQL, rows in the lake, equal) for every sample table."""
    from headwater.embedded.sample import SCHEMA, TABLES

    out = []
    conn = cluster.connect(DBNAME)
    try:
        for table in TABLES:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM {SCHEMA}.{table}")
                names = [d[0] for d in cur.description]
                source = {tuple(_comparable(v) for v in row) for row in cur.fetchall()}
            lake_df = spark.read.format("delta").load(sink.table_path(f"{TOPIC_PREFIX}.{SCHEMA}.{table}"))
            lake = {tuple(_comparable(r[n]) for n in names) for r in lake_df.select(*names).collect()}
            out.append((table, len(source), len(lake), lake == source))
    finally:
        conn.close()
    return out


def _comparable(value: Any) -> str:
    """A value as text both sides agree on: psycopg gives timestamptz as an aware datetime, PySpark
    gives Spark timestamps as naive datetimes in this process's local time zone."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.astimezone()  # naive = local time
        return value.astimezone(UTC).isoformat()
    return str(value)


def run_pipeline_demo(duration: float | None = None, rate: float = 20.0, workdir: str | Path | None = None,
                      spark: Any = None) -> int:
    """Run the demo; ``duration`` None = until Ctrl-C; ``spark`` an existing session (tests)."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 120))
    err = Console(stderr=True, soft_wrap=True)
    if (duration is not None and duration <= 0) or rate <= 0:
        err.print("headwater demo: --duration and --rate must be positive")
        return 1
    workdir = (Path(workdir) if workdir is not None else DEFAULT_WORKDIR).resolve()
    signals = _Signals()
    signals.install()
    cluster: Any = None
    generator: Any = None
    pipeline: Any = None
    try:
        from headwater.embedded.postgres import PostgresNotFoundError, ThrowawayPostgres
        from headwater.embedded.sample import ChangeGenerator, create_sample_database
        from headwater.spark.pipeline import Pipeline

        for part in ("lake", "topics", "checkpoint"):  # a new cluster: earlier outputs do not apply
            shutil.rmtree(workdir / part, ignore_errors=True)
        workdir.mkdir(parents=True, exist_ok=True)
        console.print("Starting a throwaway PostgreSQL 15 cluster (wal_level=logical)…")
        try:
            cluster = ThrowawayPostgres().start()
        except PostgresNotFoundError as exc:
            err.print(f"headwater demo: {exc}", markup=False, highlight=False)
            return 1
        cluster.create_database(DBNAME)
        conn = cluster.connect(DBNAME)
        try:
            create_sample_database(conn)
        finally:
            conn.close()
        console.print(f"Created the sample database {DBNAME!r}; starting Spark (local[2]) with the headwater "
                      "source, Delta Lake and JSONL sinks…")
        state = PipelineState()
        pipeline = Pipeline(pipeline_spec(cluster, workdir), spark=spark, observers=[state.observe]).start()
        delta_sink = next(s for s in pipeline.sinks if type(s).__name__ == "DeltaSink")
        lake = _LakeReader(pipeline.spark, delta_sink.table_path(f"{TOPIC_PREFIX}.inventory.{SHOWN_TABLE}"))
        view = _View(state, lake, cluster, workdir, duration)
        deadline: float | None = None

        def check_query() -> None:
            query = pipeline.query
            if query.exception() is not None:
                raise RuntimeError(f"the pipeline failed: {query.exception()}")
            if not query.isActive:  # ended without an exception: a fatal JVM error on its thread
                raise RuntimeError("the pipeline's streaming query stopped unexpectedly (see the log above)")

        def tick() -> bool:
            nonlocal generator, deadline
            check_query()
            if generator is None:
                if state.snapshot_done.is_set():
                    generator = ChangeGenerator(cluster.dsn(DBNAME), rate=rate).start()
                    view.generator = generator
                    view.generator_started = time.monotonic()
                    deadline = None if duration is None else time.monotonic() + duration
                elif time.monotonic() - view.started > SNAPSHOT_MAX_S:
                    raise RuntimeError(f"the initial snapshot did not complete within {SNAPSHOT_MAX_S:.0f} s")
            return not signals.stop.is_set() and (deadline is None or time.monotonic() < deadline)

        def catch_up() -> None:
            """Stop the generator, then wait until every change it made is in the lake: no events for a
            while and Spark neither running a batch nor seeing data (stopping the query mid-batch would
            leave the tables a batch behind and the summary wrong)."""
            view.stopping = True
            if generator is not None:
                generator.stop()
            if not state.snapshot_done.is_set():
                return
            end = time.monotonic() + CATCH_UP_MAX_S
            busy = 0  # polls that found a batch running or data waiting
            while time.monotonic() < end and not signals.hurry.is_set():
                check_query()
                status = pipeline.query.status
                idle = not status.get("isTriggerActive") and not status.get("isDataAvailable")
                busy += not idle
                if idle and time.monotonic() - state.last_event_at >= CATCH_UP_QUIET_S:
                    return
                signals.hurry.wait(0.25)
            if not signals.hurry.is_set():
                # what kept it from looking idle (seen once in CI, 300 s, not reproduced since)
                progress = pipeline.query.lastProgress or {}
                log.warning("catching up: the query did not look idle within %.0f s (%d polls found a batch "
                            "running or data waiting; last event %.1f s ago); status %s; last batch %s: %s "
                            "source rows, offsets %s → %s", CATCH_UP_MAX_S, busy,
                            time.monotonic() - state.last_event_at, pipeline.query.status,
                            progress.get("batchId"), progress.get("numInputRows"),
                            [s.get("startOffset") for s in progress.get("sources", [])],
                            [s.get("endOffset") for s in progress.get("sources", [])])

        if console.is_terminal:
            with Live(view.render(), console=console, refresh_per_second=REFRESH_PER_SECOND,
                      transient=True) as live, _logging_through(sys.stderr):
                while tick():
                    live.update(view.render())
                    signals.stop.wait(1 / REFRESH_PER_SECOND)
                catch_up()
                live.update(view.render())
        else:
            next_line = view.started
            while tick():
                if time.monotonic() >= next_line:
                    print(view.plain_line(), flush=True)
                    next_line += PLAIN_EVERY_S
                signals.stop.wait(0.25)
            catch_up()
            print(view.plain_line(), flush=True)
        pipeline.stop()
        if not state.snapshot_done.is_set():
            raise RuntimeError("stopped before the initial snapshot completed")
        _summary(console, pipeline.spark, cluster, delta_sink, state, generator, workdir)
        return 0
    except KeyboardInterrupt:
        err.print("headwater demo: interrupted")
        return 1
    except Exception as exc:
        message = (str(exc).strip() or repr(exc)).splitlines()[0]
        err.print(f"headwater demo failed: {type(exc).__name__}: {message}", markup=False, highlight=False)
        log.debug("demo failure", exc_info=True)
        return 1
    finally:
        if generator is not None:
            with contextlib.suppress(Exception):
                generator.stop()
        if pipeline is not None:
            with contextlib.suppress(Exception):
                pipeline.stop()
            if spark is None:
                with contextlib.suppress(Exception):
                    pipeline.spark.stop()
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.stop()
        signals.restore()


def _summary(console: Console, spark: Any, cluster: Any, sink: Any, state: PipelineState, generator: Any,
             workdir: Path) -> None:
    ops, total, batches, _ = state.snapshot()
    table = Table(title=f"Captured {total} change events in {batches} micro-batches", title_justify="left")
    table.add_column("table")
    table.add_column("events", justify="right")
    table.add_column("rows in PostgreSQL", justify="right")
    table.add_column("rows in the lake", justify="right")
    table.add_column("lake = source")
    for name, pg_rows, lake_rows, equal in compare_with_source(spark, cluster, sink):
        events = sum(ops.get(f"{TOPIC_PREFIX}.inventory.{name}", Counter()).values())
        table.add_row(name, str(events), str(pg_rows), str(lake_rows), "yes" if equal else "NO")
    console.print(table)
    if generator is not None:
        console.print(f"Generated {generator.counts.get('transactions', 0)} transactions.")
    console.print(f"Delta tables: {workdir}/lake/<topic> (current state) and <topic>__changelog; "
                  f"JSONL topics: {workdir}/topics/<topic>/<batch>.jsonl")
    console.print("Try: .venv/bin/python -c \"from headwater.spark.session import build_session; "
                  f"build_session().read.format('delta').load('{workdir}/lake/{TOPIC_PREFIX}.inventory.customers')"
                  ".show()\"")
