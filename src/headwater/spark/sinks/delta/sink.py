"""The Delta sink: a micro-batch's topics, each into its tables (see the package's docstring).

Per batch: one pass over the records learns each topic's schemas (:mod:`.schemas`); per topic,
its records are decoded (:mod:`.decoding`) once and written to the change log (:mod:`.changelog`)
and the current-state table (:mod:`.current`). The topics of a batch are written concurrently.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from headwater.spark.sinks import connect_types as ct
from headwater.spark.sinks.connect_types import quote, sql_string
from headwater.spark.sinks.delta import changelog, decoding
from headwater.spark.sinks.delta.changelog import CHANGELOG_SUFFIX
from headwater.spark.sinks.delta.current import CurrentState
from headwater.spark.sinks.delta.decoding import Part
from headwater.spark.sinks.delta.options import SinkOptions, absolute
from headwater.spark.sinks.delta.schemas import DATA_OPS, ENVELOPE_PREFIX, TYPED_ROWS, BatchSchemas, Summary
from headwater.spark.sinks.delta.small_batch import SmallBatches
from headwater.spark.sinks.delta.typed_changelog import PendingChangelog, TypedChangelog
from headwater.spark.sinks.jsonl import topic_directory

log = logging.getLogger(__name__)

DEFAULT_APP_ID = "headwater-delta"


class DeltaSink:
    """`foreachBatch` destination: ``DeltaSink(spark, path).write(batch_df, batch_id)``."""

    def __init__(self, spark: Any, path: str, *, table_prefix: str | None = None,
                 options: Mapping[str, str] = {}) -> None:
        self.spark = spark
        self.path = absolute(path)
        self.options = SinkOptions.parse(options, table_prefix)
        self._lock = threading.Lock()  # the timings, when tables are written concurrently
        self._registered: set[str] = set()
        self.timings: dict[str, float] = {}  # seconds spent per step, summed over batches
        self.schemas = BatchSchemas(self.options.placeholder)
        self.current_state = CurrentState(self.options, self._timed, self._register)
        self.small_batches = SmallBatches(self.options, self.current_state, self._timed, self._register)

    @contextmanager
    def _timed(self, step: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            with self._lock:
                self.timings[step] = self.timings.get(step, 0.0) + elapsed
            log.debug("delta sink: %s took %.2f s", step, elapsed)

    def __repr__(self) -> str:
        return f"DeltaSink({self.path!r})"

    # -- layout ---------------------------------------------------------------------------------

    def table_path(self, topic: str) -> str:
        return f"{self.path}/{topic_directory(topic)}"

    def changelog_path(self, topic: str) -> str:
        return f"{self.path}/{topic_directory(topic)}{CHANGELOG_SUFFIX}"

    # -- the batch ------------------------------------------------------------------------------

    def write(self, batch: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        session = batch.sparkSession
        data = batch.filter(F.col("op").isin(*DATA_OPS) & F.col("value").isNotNull())
        schema_records = batch.filter(F.col("op").isNull() & F.col("key").isNull()
                                      & F.col("value").startswith(ENVELOPE_PREFIX))
        with self._timed("summary"):
            summaries = self.schemas.summaries(data, schema_records)
        if not summaries:
            return
        app = self._app_id(session)
        topics = sorted(summaries)
        if len(topics) == 1 or self.options.parallelism == 1:
            for topic in topics:
                self._write_topic(session, data.filter(F.col("topic") == topic), summaries[topic], batch_id, app)
            return
        from headwater.spark.session import thread_target

        write = thread_target(session, self._write_topic)
        with ThreadPoolExecutor(max_workers=min(self.options.parallelism, len(topics)),
                                thread_name_prefix="headwater-delta") as pool:
            futures = [pool.submit(write, session, data.filter(F.col("topic") == topic), summaries[topic],
                                   batch_id, app) for topic in topics]
            for future in futures:  # the first failure fails the batch; Spark replays it
                future.result()

    def _app_id(self, session: Any) -> str:
        if self.options.app_id:
            return self.options.app_id
        # stable across restarts from the same checkpoint; a new checkpoint gets a new id, so its
        # batch ids (from 0 again) are not mistaken for ones already written
        query = session.sparkContext.getLocalProperty("sql.streaming.queryId")
        return f"{DEFAULT_APP_ID}:{query}" if query else DEFAULT_APP_ID

    # -- one topic ------------------------------------------------------------------------------

    def _write_topic(self, session: Any, events: Any, summary: Summary, batch_id: int, app: str) -> None:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        options = self.options
        table_path = self.table_path(summary.topic)
        table = self.current_state.table(session, table_path) if options.current else None
        topic = self.schemas.topic(summary, table.keys if table is not None else None)
        # keyless topics go to the change log only; a batch of only truncates has no key to see
        current = options.current and (bool(topic.key_fields) or table is not None)
        both = options.changelog and current and bool(topic.key_fields)
        persisted: list[Any] = []  # parsed (decoded) once, read by both writes

        def once(frame: Any) -> Any:
            if both:
                frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
                persisted.append(frame)
            return frame
        # the batch's events in the two forms they arrive in, each parsed into (position, op, ts_ms,
        # k, v): typed rows (Arrow IPC, already of the table's types) and JSON events
        parts: list[Part] = []
        if summary.typed:
            with self._timed("typed"):
                records = events.filter(F.col(TYPED_ROWS).isNotNull())
                source = decoding.typed_source(records, topic, summary.connector) if options.changelog else None
                flat = decoding.typed_rows(records, topic, options.decimal_format, source)
                parsed = (decoding.typed_envelopes(flat, topic, options.decimal_format, source)
                          if source is not None else None)
                # the change log written from the records by the executors (typed_changelog), else
                # by Spark from the decoded rows, which the current state reads too (persisted)
                log_files = None if source is None else TypedChangelog.plan(
                    session, records, parsed, topic, source, changelog.changelog_columns(summary.connector),
                    self.changelog_path(summary.topic), batch_id, options.files)
                flat = (decoding.typed_rows(records, topic, options.decimal_format, None) if log_files is not None
                        else once(flat))
                parts.append(Part(parsed, ct.NATIVE, ":rows", flat=flat, records=records, changelog=log_files))
            events = events.filter(F.col(TYPED_ROWS).isNull())
        if summary.records > summary.typed:
            parts.append(Part(once(decoding.json_events(events, topic, summary, options.decimal_format)),
                              options.decimal_format, ""))
        try:
            # a small batch: written by the driver with delta-rs, unless a table needs Spark's path
            if self.small_batches.applies(summary) and self.small_batches.write(
                    session, parts, topic, summary, table, table_path, self.changelog_path(summary.topic), batch_id,
                    app, changelog=options.changelog, current=current):
                return
            pending: PendingChangelog | None = None
            if options.changelog:
                with self._timed("changelog"):
                    path = self.changelog_path(summary.topic)
                    columns = changelog.changelog_columns(summary.connector)
                    for part in parts:
                        if part.changelog is not None:
                            log_app = f"{app}:changelog{part.tag}"
                            if (current and len(parts) == 1 and topic.key_fields and summary.events
                                    and summary.reads == summary.events and summary.last_truncate is None):
                                # snapshot rows: written with the current state's files when it
                                # appends them (one job), else before the current state is written
                                pending = PendingChangelog(part.changelog, log_app, batch_id)
                                continue
                            part.changelog.append(log_app, batch_id)
                            continue
                        changelog.append(part.parsed, topic, columns, part.fmt, path, f"{app}:changelog{part.tag}",
                                         batch_id)
                    self._register(session, summary.topic + CHANGELOG_SUFFIX, path)
            if current:
                with self._timed("current"):
                    self.current_state.apply(session, parts, topic, summary, table, table_path, batch_id, app,
                                             pending)
            if pending is not None and not pending.written:
                with self._timed("changelog"):
                    pending.append()
        finally:
            for frame in persisted:
                frame.unpersist()

    # -- catalog ---------------------------------------------------------------------------------

    def _register(self, session: Any, topic_name: str, path: str) -> None:
        if not self.options.table_prefix or path in self._registered:
            return
        prefix = self.options.table_prefix
        database, _, name_prefix = prefix.rpartition(".")
        name = quote(name_prefix + re.sub(r"[^0-9A-Za-z_]", "_", topic_name))
        full = f"{quote(database)}.{name}" if database else name
        session.sql(f"CREATE TABLE IF NOT EXISTS {full} USING DELTA LOCATION {sql_string(path)}")
        self._registered.add(path)
