"""The demo's Spark back-end: local Spark running the headwater source into Delta Lake
current-state tables and change logs (``<workdir>/lake``) and JSONL topic files
(``<workdir>/topics``). The view adds the micro-batches, the lag from commit to the lake and one
table's current state as the lake has it; the summary compares every lake table with its source."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from headwater.cli.demo.backend import DemoBackend, sample_topic
from headwater.cli.demo.progress import CaptureProgress

SHOWN_TABLE = "products_on_hand"
TRIGGER = "1 second"
LAKE_EVERY_S = 2.0


class _LakeReader:
    """Reads the lake's current state of one table (a small Spark job), at most every :data:`LAKE_EVERY_S`."""

    def __init__(self, spark: Any, path: str) -> None:
        self.spark = spark
        self.path = path
        self.rows: list[tuple[Any, ...]] = []
        self.error: str | None = None
        self._read_at = 0.0

    def read(self) -> list[tuple[Any, ...]]:
        if time.monotonic() - self._read_at < LAKE_EVERY_S:
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


def _comparable(value: Any) -> str:
    """A value as text both sides agree on: psycopg gives timestamptz as an aware datetime, PySpark
    gives Spark timestamps as naive datetimes in this process's local time zone."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.astimezone()  # naive = local time
        return value.astimezone(UTC).isoformat()
    return str(value)


def compare_with_source(spark: Any, cluster: Any, dbname: str, sink: Any) -> list[tuple[str, int, int, bool]]:
    """(table, rows in PostgreSQL, rows in the lake, equal) for every sample table."""
    from headwater.embedded.sample import SCHEMA, TABLES

    out = []
    conn = cluster.connect(dbname)
    try:
        for table in TABLES:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM {SCHEMA}.{table}")
                names = [d[0] for d in cur.description]
                source = {tuple(_comparable(v) for v in row) for row in cur.fetchall()}
            lake_df = spark.read.format("delta").load(sink.table_path(sample_topic(table)))
            lake = {tuple(_comparable(r[n]) for n in names) for r in lake_df.select(*names).collect()}
            out.append((table, len(source), len(lake), lake == source))
    finally:
        conn.close()
    return out


class SparkPipelineBackend(DemoBackend):
    """``headwater demo``: the Spark pipeline (``headwater.spark.pipeline``) in local mode;
    ``spark`` an existing session to use (tests), else one is built and stopped at the end."""

    title = "PostgreSQL → Spark → Delta Lake + JSONL"
    outputs = ("lake", "topics", "checkpoint")
    # Spark commits a micro-batch per trigger: quiet for a few triggers and no batch running or
    # data waiting means the lake has every change
    catch_up_quiet_s = 4.0
    catch_up_max_s = 300.0

    def __init__(self, spark: Any = None) -> None:
        self._given_spark = spark
        self._pipeline: Any = None
        self._delta_sink: Any = None
        self._lake: _LakeReader | None = None
        self._progress: CaptureProgress | None = None
        self._cluster: Any = None
        self._dbname = ""
        self._batches = 0
        self._lag_ms: int | None = None

    def destination(self, workdir: Path) -> str:
        return f"{workdir}/lake, {workdir}/topics"

    def starting(self, workdir: Path) -> str:
        return "starting Spark (local[2]) with the headwater source, Delta Lake and JSONL sinks…"

    def _spec(self, source: dict[str, str], workdir: Path) -> Any:
        from headwater.spark.pipeline import PipelineSpec, SinkSpec

        return PipelineSpec(
            source=source,
            sinks=[SinkSpec("delta", {"path": "lake"}), SinkSpec("jsonl", {"path": "topics"})],
            checkpoint=Path("checkpoint"), trigger={"processingTime": TRIGGER}, master="local[2]",
            conf={"spark.sql.shuffle.partitions": "2"}, app_name="headwater-demo", base_dir=workdir)

    def start(self, cluster: Any, source: dict[str, str], progress: CaptureProgress, workdir: Path) -> None:
        from headwater.spark.pipeline import Pipeline

        self._cluster = cluster
        self._dbname = source["database.dbname"]
        self._progress = progress
        self._pipeline = Pipeline(self._spec(source, workdir), spark=self._given_spark, observers=[self._observe])
        self._pipeline.start()
        self._delta_sink = next(s for s in self._pipeline.sinks if type(s).__name__ == "DeltaSink")
        self._lake = _LakeReader(self._pipeline.spark, self._delta_sink.table_path(sample_topic(SHOWN_TABLE)))

    def _observe(self, batch: Any, _batch_id: int) -> None:
        """The pipeline's per-batch observer (on Spark's foreachBatch thread)."""
        from pyspark.sql import functions as F

        if self._progress is None:
            return
        rows = (batch.groupBy("topic", "op")
                .agg(F.count("*").alias("n"), F.max("ts_ms").alias("ts"),
                     F.max(F.col("value").contains('"snapshot":"last"').cast("int")).alias("last"))
                .collect())
        now_ms = time.time() * 1000
        changed = [r["ts"] for r in rows if r["op"] in ("c", "u", "d") and r["ts"] is not None]
        if changed:
            self._lag_ms = int(now_ms - max(changed))
        self._batches += 1
        self._progress.add(((r["topic"], r["op"] or "other", r["n"]) for r in rows),
                           snapshot_last=any(r["last"] for r in rows))

    def check(self) -> None:
        query = self._pipeline.query if self._pipeline is not None else None
        if query is None:
            return
        if query.exception() is not None:
            raise RuntimeError(f"the pipeline failed: {query.exception()}")
        if not query.isActive:  # ended without an exception: a fatal JVM error on its thread
            raise RuntimeError("the pipeline's streaming query stopped unexpectedly (see the log above)")

    def idle(self) -> bool:
        status = self._pipeline.query.status
        return not status.get("isTriggerActive") and not status.get("isDataAvailable")

    def busy_details(self) -> str:
        query = self._pipeline.query
        progress = query.lastProgress or {}
        sources = progress.get("sources", [])
        return (f"; status {query.status}; last batch {progress.get('batchId')}: {progress.get('numInputRows')} "
                f"source rows, offsets {[s.get('startOffset') for s in sources]} → "
                f"{[s.get('endOffset') for s in sources]}")

    def stats(self) -> list[str]:
        lag = "-" if self._lag_ms is None else f"{self._lag_ms / 1000:.1f}s"
        return [f"{self._batches} micro-batches", f"lag {lag}"]

    def panels(self) -> list[Any]:
        rows = self._lake.read() if self._lake is not None else []
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
        if self._lake is not None and self._lake.error:
            lake.caption = f"(retrying: {self._lake.error})"
        return [lake]

    def stop(self) -> None:
        if self._pipeline is not None:
            self._pipeline.stop()

    def close(self) -> None:
        if self._pipeline is None:
            return
        with contextlib.suppress(Exception):
            self._pipeline.stop()
        if self._given_spark is None:
            with contextlib.suppress(Exception):
                self._pipeline.spark.stop()

    def summary(self, progress: CaptureProgress, elapsed: float) -> Table:
        ops, total = progress.counts()
        table = Table(title=f"Captured {total} change events in {self._batches} micro-batches", title_justify="left")
        table.add_column("table")
        table.add_column("events", justify="right")
        table.add_column("rows in PostgreSQL", justify="right")
        table.add_column("rows in the lake", justify="right")
        table.add_column("lake = source")
        for name, pg_rows, lake_rows, equal in compare_with_source(self._pipeline.spark, self._cluster, self._dbname,
                                                                   self._delta_sink):
            events = sum(ops.get(sample_topic(name), {}).values())
            table.add_row(name, str(events), str(pg_rows), str(lake_rows), "yes" if equal else "NO")
        return table

    def notes(self, workdir: Path) -> list[str]:
        return [
            f"Delta tables: {workdir}/lake/<topic> (current state) and <topic>__changelog; "
            f"JSONL topics: {workdir}/topics/<topic>/<batch>.jsonl",
            "Try: .venv/bin/python -c \"from headwater.spark.session import build_session; "
            f"build_session().read.format('delta').load('{workdir}/lake/{sample_topic('customers')}').show()\"",
        ]
