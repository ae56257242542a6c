"""`headwater pipeline PIPELINE.yaml`: database → the headwater source → sinks, on Spark.

A pipeline file::

    source:                      # connector properties, as for `headwater run`
      connector.class: io.debezium.connector.postgresql.PostgresConnector
      database.hostname: 127.0.0.1
      database.dbname: inventory
      topic.prefix: dbserver1
      maxRowsPerBatch: 200000    # options of the Spark source (see headwater.spark.source)
    sinks:
      - type: delta              # current-state tables + change logs
        path: lake
      - type: jsonl              # one file per topic per micro-batch
        path: topics
      - type: kafka
        bootstrap.servers: 127.0.0.1:9092
    trigger: {processingTime: 1 second}   # or {availableNow: true}
    checkpoint: checkpoint       # Spark's checkpoint: the connector's offsets live here
    spark:
      master: local[*]           # ignored under spark-submit, which sets the master
      conf: {spark.sql.shuffle.partitions: "8"}

Relative paths are relative to the pipeline file. Every micro-batch goes to every sink in the
order listed (the batch is cached once); Spark commits the batch after all sinks returned, and
only then does the source acknowledge the position to the database.

Under `spark-submit`, run this module as the application (see docs/spark.md)::

    spark-submit --master spark://host:7077 "$(python -m headwater.spark.pipeline --path)" PIPELINE.yaml
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from headwater.config import ConfigError
from headwater.engine.coordinator import EngineSettings
from headwater.spark.failures import failure_reason, retriable_cause

log = logging.getLogger(__name__)

SINK_TYPES = ("delta", "jsonl", "kafka")
_TRIGGERS = ("processingTime", "availableNow", "once")


@dataclass
class SinkSpec:
    type: str
    options: dict[str, str]


@dataclass
class PipelineSpec:
    source: dict[str, str]
    sinks: list[SinkSpec]
    checkpoint: Path
    trigger: dict[str, Any] = field(default_factory=lambda: {"processingTime": "1 second"})
    master: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    app_name: str = "headwater-pipeline"
    base_dir: Path = field(default_factory=Path.cwd)

    def resolve(self, path: str) -> Path:
        p = Path(os.path.expanduser(path))
        return p if p.is_absolute() else (self.base_dir / p)


def _strings(mapping: Any, where: str) -> dict[str, str]:
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise ConfigError([f"{where}: expected a mapping of names to values, got {type(mapping).__name__}"])
    out = {}
    for k, v in mapping.items():
        out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def parse_pipeline(data: Any, base_dir: Path, source: str = "pipeline") -> PipelineSpec:
    """Validate a pipeline document; every problem is reported at once."""
    problems: list[str] = []
    if not isinstance(data, Mapping):
        raise ConfigError([f"{source}: expected a mapping with source, sinks, checkpoint"])
    unknown = sorted(set(data) - {"source", "sinks", "checkpoint", "trigger", "spark", "name"})
    if unknown:
        problems.append(f"unknown keys {', '.join(unknown)} (expected source, sinks, checkpoint, trigger, spark, name)")
    src = data.get("source")
    if not isinstance(src, Mapping) or not src:
        problems.append("source: the connector properties are missing")
    sinks: list[SinkSpec] = []
    raw_sinks = data.get("sinks")
    if not isinstance(raw_sinks, list) or not raw_sinks:
        problems.append(f"sinks: expected a list of sinks, each with a type ({', '.join(SINK_TYPES)})")
        raw_sinks = []
    for i, s in enumerate(raw_sinks):
        if not isinstance(s, Mapping) or s.get("type") not in SINK_TYPES:
            problems.append(f"sinks[{i}]: expected a mapping with type one of {', '.join(SINK_TYPES)}")
            continue
        options = _strings({k: v for k, v in s.items() if k != "type"}, f"sinks[{i}]")
        if s["type"] in ("delta", "jsonl") and "path" not in options:
            problems.append(f"sinks[{i}] ({s['type']}): path is required")
        if s["type"] == "kafka" and "bootstrap.servers" not in options:
            problems.append(f"sinks[{i}] (kafka): bootstrap.servers is required")
        sinks.append(SinkSpec(s["type"], options))
    checkpoint = data.get("checkpoint")
    if not isinstance(checkpoint, str) or not checkpoint:
        problems.append("checkpoint: a directory for Spark's checkpoint is required (it holds the offsets)")
    trigger = data.get("trigger", {"processingTime": "1 second"})
    if not isinstance(trigger, Mapping) or len(trigger) != 1 or next(iter(trigger)) not in _TRIGGERS:
        problems.append(f"trigger: expected one of {{processingTime: <interval>}}, {{availableNow: true}}, "
                        f"{{once: true}}, got {trigger!r}")
    spark = data.get("spark") or {}
    if not isinstance(spark, Mapping):
        problems.append("spark: expected a mapping (master, conf)")
        spark = {}
    if problems:
        raise ConfigError(problems, source=source)
    return PipelineSpec(
        source=_strings(src, "source"), sinks=sinks, checkpoint=Path(str(checkpoint)), trigger=dict(trigger),
        master=str(spark["master"]) if spark.get("master") else None, conf=_strings(spark.get("conf"), "spark.conf"),
        app_name=str(data.get("name") or "headwater-pipeline"), base_dir=base_dir)


def load_pipeline(path: str | Path) -> PipelineSpec:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ConfigError([f"cannot read pipeline file {p}: {exc.strerror}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"pipeline file {p} is not valid YAML: {exc}"]) from None
    spec = parse_pipeline(data, p.resolve().parent, source=str(p))
    from headwater.config import from_properties
    from headwater.spark.source import SourceSettings

    # the connector properties are checked here, before Spark starts (the source checks again)
    from_properties(SourceSettings.from_options(spec.source).connector_properties)
    return spec


def build_sinks(spec: PipelineSpec, spark: Any) -> list[Any]:
    sinks: list[Any] = []
    for s in spec.sinks:
        options = dict(s.options)
        if s.type == "jsonl":
            from headwater.spark.sinks.jsonl import JsonlSink

            sinks.append(JsonlSink(spec.resolve(options.pop("path"))))
        elif s.type == "delta":
            from headwater.spark.sinks.delta import DeltaSink

            sinks.append(DeltaSink(spark, str(spec.resolve(options.pop("path"))), options=options))
        elif s.type == "kafka":
            from headwater.spark.sinks.kafka import KafkaSink

            sinks.append(KafkaSink(spark, options.pop("bootstrap.servers"), options))
    return sinks


BatchObserver = Callable[[Any, int], None]


class Pipeline:
    """A running pipeline: ``start()``, then ``await_termination()`` or ``stop()``."""

    def __init__(self, spec: PipelineSpec, spark: Any | None = None,
                 observers: list[BatchObserver] | None = None) -> None:
        from headwater.spark.session import build_session

        self.spec = spec
        self.spark = spark or build_session(spec.app_name, master=spec.master, conf=spec.conf)
        self.sinks = build_sinks(spec, self.spark)
        self.observers = list(observers or [])
        self.query: Any = None
        self._stopping = threading.Event()
        self._batches_written = 0  # by the query of this run (see run())

    def _write(self, batch: Any, batch_id: int) -> None:
        # one partition per core at most: the source cuts a backlog into many tasks (a bounded
        # number of messages each), and every pass the sinks make over the cached batch would
        # otherwise launch as many tasks, each paying a task's fixed costs (bench/README.md)
        batch = batch.coalesce(batch.sparkSession.sparkContext.defaultParallelism).persist()
        spent: list[str] = []
        try:
            for sink in self.sinks:
                started = time.monotonic()
                sink.write(batch, batch_id)
                spent.append(f"{_sink_name(sink)} {time.monotonic() - started:.1f} s")
            for observe in self.observers:
                observe(batch, batch_id)
            self._batches_written += 1
        finally:
            batch.unpersist()
        log.info("batch %d written: %s", batch_id, ", ".join(spent) or "no sinks")

    def source_options(self) -> dict[str, str]:
        """The source's options: when every sink stores rows (Delta) and nothing else looks at the
        batches, snapshot rows and row changes go typed to the sinks (``snapshotDelivery=rows``,
        ``streamDelivery=rows``) and the other change values without their schemas
        (``valueFormat=payload``) and without headers (``headers=false``), unless those options are set.
        The snapshot runs as one task per core (``snapshotParallelism``: the session's default
        parallelism), each reading its share of the chunks in turn, unless that option is set."""
        from headwater.spark.sinks.delta import DeltaSink

        options = dict(self.spec.source)
        if not any(k.lower() == "snapshotparallelism" for k in options):
            # one task per chunk paid each task's fixed costs once a chunk, and tasks beyond the
            # cores cannot run at once anyway (bench/README.md, "the snapshot's files written by
            # the executors")
            options["snapshotParallelism"] = str(max(1, self.spark.sparkContext.defaultParallelism))
        rows_ok = bool(self.sinks) and all(isinstance(s, DeltaSink) for s in self.sinks) and not self.observers
        for name, lake_only, default in (("snapshotDelivery", "rows", "events"), ("streamDelivery", "rows", "events"),
                                         ("valueFormat", "payload", "json"), ("headers", "false", "true")):
            given = next((k for k in options if k.lower() == name.lower()), None)
            if given is None:
                options[name] = lake_only if rows_ok else default
            elif options[given].strip().lower() == lake_only and not rows_ok:
                raise ConfigError([f"pipeline {self.spec.app_name}: source option {name}={lake_only} needs every "
                                   "sink to be a delta sink (jsonl and kafka sinks write whole events)"])
        return options

    def start(self) -> Pipeline:
        spec = self.spec
        self._batches_written = 0
        _log_progress(self.spark)
        stream = self.spark.readStream.format("headwater").options(**self.source_options()).load()
        self.query = (stream.writeStream.foreachBatch(self._write)
                      .option("checkpointLocation", str(spec.resolve(str(spec.checkpoint))))
                      .queryName(spec.app_name).trigger(**spec.trigger).start())
        return self

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait for the query to end (raises its failure); False when `timeout` passed first."""
        if timeout is None:
            self.query.awaitTermination()
            return True
        return bool(self.query.awaitTermination(timeout))

    def run(self) -> None:
        """Start the query and wait for its end: the trigger's (availableNow, once) or `stop()`.

        A failure with a transient cause — the database connection lost, the Kafka broker
        unreachable — restarts the query from its checkpoint, as the standalone runner restarts its
        connector: `errors.max.retries` consecutive restarts at most (-1: no limit), after a delay
        doubling from `errors.retry.delay.initial.ms` up to `errors.retry.delay.max.ms`, never
        shorter than `retriable.restart.connector.wait.ms`. Spark replays the batch that was not
        committed, so nothing is lost. Any other failure, and the last one, is raised."""
        restarts = restart_settings(self.spec)
        failures = 0
        while not self._stopping.is_set():
            self.start()
            if self._stopping.is_set():  # stop() came while the query started
                self.query.stop()
            try:
                self.query.awaitTermination()
                return
            except Exception as exc:
                reason = retriable_cause(str(exc))
                if reason is None or self._stopping.is_set():
                    raise
                if self._batches_written:
                    failures = 0  # the last restart worked: only consecutive failures count
                limit = restarts.errors_max_retries
                if 0 <= limit <= failures:
                    raise PipelineFailed(f"{reason} (gave up after {failures} "
                                         f"{'restart' if failures == 1 else 'restarts'}: errors.max.retries={limit})"
                                         ) from exc
                failures += 1
                delay = restarts.retry_delay_s(failures)
                log.warning("the streaming query failed: %s; restarting it from the checkpoint in %.1f s "
                            "(restart %d%s)", reason, delay, failures, "" if limit < 0 else f" of {limit}")
                if self._stopping.wait(delay):
                    return

    def stop(self) -> None:
        """Stop the query after its current micro-batch (and end `run()`)."""
        self._stopping.set()
        if self.query is not None and self.query.isActive:
            self.query.stop()


class PipelineFailed(Exception):
    """The query failed for a transient cause once more than `errors.max.retries` allow."""


def restart_settings(spec: PipelineSpec) -> EngineSettings:
    """The source's retry properties (the standalone runner's), for restarting the query."""
    from headwater.config import from_properties
    from headwater.spark.source import SourceSettings

    return EngineSettings.from_connector(
        from_properties(SourceSettings.from_options(spec.source).connector_properties).connector)


def _sink_name(sink: Any) -> str:
    return type(sink).__name__.removesuffix("Sink").lower()


_listening: set[int] = set()  # sessions (by id of their JVM session) that log progress already


def _log_progress(spark: Any) -> None:
    """Log each micro-batch the session's streaming queries complete: its input rows and where its
    time went (Spark's own durations: planning the offsets, reading, the sinks, the checkpoint's
    logs). One listener per session, however many pipelines start in it."""
    from pyspark.sql.streaming import StreamingQueryListener

    session = id(spark._jsparkSession)
    if session in _listening:
        return
    _listening.add(session)

    class ProgressLog(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            log.info("query %s started (run %s)", event.name or event.id, event.runId)

        def onQueryProgress(self, event: Any) -> None:
            p = event.progress
            if p.numInputRows == 0 and "addBatch" not in p.durationMs:
                return  # a trigger that found nothing new
            spent = ", ".join(f"{k} {v / 1000:.1f} s" for k, v in sorted(p.durationMs.items(), key=lambda kv: -kv[1])
                              if k != "triggerExecution" and v >= 100)
            log.info("%s batch %d: %d source rows in %.1f s (%s)", p.name or p.id, p.batchId, p.numInputRows,
                     p.durationMs.get("triggerExecution", 0) / 1000, spent or "—")

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            log.info("query %s ended%s", event.id, f": {event.exception.splitlines()[0]}" if event.exception else "")

    spark.streams.addListener(ProgressLog())


def run_pipeline(path: str | Path) -> int:
    """Run until the trigger ends it (availableNow / once) or SIGTERM / Ctrl-C; 0 on success."""
    spec = load_pipeline(path)
    pipeline = Pipeline(spec)
    stopping = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if not stopping.is_set():
            stopping.set()
            log.info("signal %d: stopping the pipeline after the current micro-batch", signum)
            threading.Thread(target=pipeline.stop, daemon=True).start()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    try:
        pipeline.run()
    except Exception as exc:  # the query failed: its cause, in one line
        print(f"headwater pipeline: the streaming query failed: {failure_reason(exc)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point for `spark-submit …/pipeline.py PIPELINE.yaml`."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--path"]:  # where this file is, for spark-submit
        print(os.path.abspath(__file__))
        return 0
    if len(args) != 1:
        print("usage: pipeline.py PIPELINE.yaml", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        return run_pipeline(args[0])
    except ConfigError as exc:
        print(f"headwater pipeline: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
