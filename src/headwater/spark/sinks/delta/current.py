"""The current state: one row per key of each topic in ``<path>/<topic>``, kept by the batches' events.

The table's columns plus ``__headwater_position`` / ``__headwater_op`` / ``__headwater_ts_ms`` (the
source position, op and commit time of the event the row comes from). Only for topics whose
records have a key (a primary key, or ``message.key.columns``): keyless tables go to the change
log only. Per batch and topic:

1. The last truncate ``t`` of the batch deletes every stored row whose position is older than it;
   events before it in the batch are dropped (whatever they did, the truncate undid).
2. The remaining events are reduced to the latest per key (by position); a delete wins if it is
   the latest. A primary-key change arrives as a delete of the old key and a create of the new one.
   Typed rows and JSON events are converted to the stored types and reduced together.
3. ``MERGE`` on the key: the event applies only when its position is newer than the stored
   ``__headwater_position`` — delete if ``d``, else update/insert from ``after``.
   A batch whose updates, deletes and snapshot reads reach ``rewrite.fraction`` (default 0.1)
   of the stored rows is applied instead by rewriting the table: one full outer join of the
   stored rows with the batch, the same rules, one overwrite commit. MERGE first finds the
   files the batch touches and then rewrites them, two passes over the table; when the batch
   touches most files anyway, one pass is the faster way (see bench/README.md, Measurements
   behind design choices). Batches of inserts always MERGE (they touch no stored row).
4. Unchanged-TOAST placeholders (``unavailable.value.placeholder``) never overwrite a value: a
   column takes the newest non-placeholder value of the batch, else keeps what is stored.
5. Columns new in the source schema are added to the table first (``ALTER TABLE … ADD COLUMNS``);
   dropped columns stay (NULL in rows inserted afterwards).

No idempotent-write id is needed: a replayed batch holds the same events, and the position guard
makes each of them a no-op (the stored row already carries that position; a key whose latest
event is a delete is gone and a delete inserts nothing; a truncate only removes rows older than
itself). The limit: rows are deleted physically, so re-applying an old *insert* after its row was
deleted by a later, committed batch would bring the row back.

A snapshot of typed rows into a table the sink has just created (a plain append), and a rewrite,
are written by the executors as Parquet files and committed with delta-rs when the table allows
it: see :mod:`headwater.spark.sinks.delta.files`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from headwater.engine import typed_rows
from headwater.spark.sinks import connect_types as ct
from headwater.spark.sinks.connect_types import quote
from headwater.spark.sinks.delta import files as delta_files
from headwater.spark.sinks.delta.decoding import Part
from headwater.spark.sinks.delta.options import SinkOptions
from headwater.spark.sinks.delta.schemas import TYPED_ROWS, Summary, Topic
from headwater.spark.sinks.delta.typed_changelog import PendingChangelog

log = logging.getLogger(__name__)

POSITION = "__headwater_position"
OP = "__headwater_op"
TS_MS = "__headwater_ts_ms"
KEY_PROPERTY = "headwater.key.columns"
# characters Delta accepts in column names only with column mapping
_SPECIAL = re.compile(r"[ ,;{}()\n\t=]")
# a committed version: a commit, a checkpoint (classic, multi-part, v2) or a compacted log file
_VERSION_FILE = re.compile(r"^\d{20}\.(json|checkpoint.*\.parquet|checkpoint\..*\.(json|parquet))$|"
                           r"^\d{20}\.\d{20}\.compacted\.json$|^_last_checkpoint$")


@dataclass
class StoredTable:
    """What the sink knows of a current-state table (cached per sink)."""

    columns: dict[str, Any]  # name → Spark type
    keys: list[str]
    mapped: bool  # column mapping on (any column name allowed)
    empty: bool = False  # created by this sink and never written: the first write can append
    change_feed: bool = False  # delta.enableChangeDataFeed: row-level changes matter, never rewrite


class CurrentState:
    """Writes the current-state tables; knows the tables it has met (cached per sink)."""

    def __init__(self, options: SinkOptions, timed: Callable[[str], AbstractContextManager[None]],
                 register: Callable[[Any, str, str], None]) -> None:
        self.options = options
        self._timed = timed  # the sink's timings of a step
        self._register = register  # a table into the session catalog (table.prefix)
        self._tables: dict[str, StoredTable | None] = {}

    def table(self, session: Any, path: str) -> StoredTable | None:
        if path in self._tables:
            return self._tables[path]
        described = self.described_by_log(path)
        if described is None:
            from delta.tables import DeltaTable

            if not DeltaTable.isDeltaTable(session, path):
                return None
            detail = DeltaTable.forPath(session, path).detail().select("properties").first()
            properties = dict(detail["properties"] or {}) if detail is not None else {}
            schema = session.read.format("delta").load(path).schema
        elif described is NO_TABLE:
            return None
        else:
            properties, schema = described
        keys = json.loads(properties.get(KEY_PROPERTY, "[]"))
        table = StoredTable({f.name: f.dataType for f in schema.fields}, keys,
                            properties.get("delta.columnMapping.mode", "none") != "none",
                            change_feed=properties.get("delta.enableChangeDataFeed", "false").lower() == "true")
        self._tables[path] = table
        return table

    @staticmethod
    def described_by_log(path: str) -> Any:
        """(properties, schema) of a local table without column mapping, read from its log by
        delta-rs; NO_TABLE when there is none; None when Spark has to tell (not a local path,
        column mapping — Spark's schema is the logical one —, or a log delta-rs cannot read)."""
        from deltalake.exceptions import DeltaError
        from pyspark.sql.types import StructType

        directory = delta_files.local_directory(path)
        if directory is None:
            return None
        try:
            described = delta_files.describe(directory)
        except (DeltaError, OSError) as exc:
            log.debug("delta table %s: read through Spark (delta-rs: %s)", path, exc)
            return None
        if described is None:
            return NO_TABLE
        configuration, schema = described
        if configuration.get("delta.columnMapping.mode", "none") != "none":
            return None
        return ({k: v for k, v in configuration.items() if v is not None},
                StructType.fromJson(json.loads(schema)))

    def _ensure_table(self, session: Any, path: str, topic: Topic, table: StoredTable | None,
                      name: str) -> StoredTable:
        """Create the table, or add the columns the source schema gained."""
        from delta.tables import DeltaTable
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        fmt = self.options.decimal_format
        wanted = {f["field"]: ct.spark_type(f, fmt) for f in topic.row["fields"]}
        for f in topic.key_fields:
            wanted.setdefault(f["field"], ct.spark_type(f, fmt))
        if table is None:
            fields = [StructField(n, t, True) for n, t in wanted.items()]
            fields += [StructField(POSITION, StringType(), True), StructField(OP, StringType(), True),
                       StructField(TS_MS, LongType(), True)]
            mapped = any(_needs_mapping(n, t) for n, t in wanted.items())
            properties = {KEY_PROPERTY: json.dumps([f["field"] for f in topic.key_fields]), "headwater.topic": name}
            _clear_uncommitted_log(session, path)
            if not self.create_by_files(session, path, StructType(fields), properties, mapped):
                builder = DeltaTable.createIfNotExists(session).location(path).addColumns(StructType(fields))
                for key, value in properties.items():
                    builder = builder.property(key, value)
                if mapped:
                    builder = (builder.property("delta.columnMapping.mode", "name")
                               .property("delta.minReaderVersion", "2").property("delta.minWriterVersion", "5"))
                builder.execute()
            # what was just created (no need to read it back); "empty" lets the first write append
            feed = session.conf.get("spark.databricks.delta.properties.defaults.enableChangeDataFeed", "false")
            table = StoredTable({f.name: f.dataType for f in fields}, [f["field"] for f in topic.key_fields],
                                mapped, empty=True, change_feed=feed.strip().lower() == "true")
            self._tables[path] = table
            self._register(session, name, path)
            return table
        known = {n.lower() for n in table.columns}
        new = {n: t for n, t in wanted.items() if n.lower() not in known}
        if new:
            target = f"delta.{quote(path)}"
            if not table.mapped and any(_needs_mapping(n, t) for n, t in new.items()):
                session.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
                            "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')")
            columns = ", ".join(f"{quote(n)} {ct.ddl(t)}" for n, t in new.items())
            log.info("delta table %s: adding column(s) %s", path, ", ".join(new))
            session.sql(f"ALTER TABLE {target} ADD COLUMNS ({columns})")
            empty = table.empty
            self._tables.pop(path, None)
            table = self.table(session, path)
            assert table is not None
            table.empty = empty
        return table

    def create_by_files(self, session: Any, path: str, schema: Any, properties: dict[str, str], mapped: bool) -> bool:
        """Create the table with delta-rs where its files may be written that way (see
        :meth:`_file_target`) and Spark would create exactly that table: plain column types and
        nothing the session adds to new tables (``spark.databricks.delta.properties.defaults.*``,
        protocol versions). False, having created nothing, otherwise."""
        directory = delta_files.local_directory(path) if self.options.files and not mapped else None
        if directory is None or not delta_files.plain_schema(schema):
            return False
        if delta_files.session_adds_to_new_tables(session):
            return False
        delta_files.create(directory, schema, properties)
        return True

    def apply(self, session: Any, parts: list[Part], topic: Topic, summary: Summary, table: StoredTable | None,
              path: str, batch_id: int, app: str, changelog: PendingChangelog | None = None) -> StoredTable | None:
        """Write the batch's events into the table. `changelog`: the batch's change log of snapshot
        rows, written with the table's files when the batch appends them, else before the table is
        written (the change log first, as always; the caller appends it when nothing is written here)."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        if summary.last_truncate is not None and table is not None:
            DeltaTable.forPath(session, path).delete(F.col(POSITION) < F.lit(summary.last_truncate))
        if summary.events == 0 or not topic.key_fields:
            return table
        with self._timed("current.table"):
            table = self._ensure_table(session, path, topic, table, summary.topic)
        merge_app = f"{app}:merge"
        if table.empty and self._append_snapshot_files(session, parts, summary, table, path, merge_app, batch_id,
                                                       changelog):
            table.empty = False
            return table
        if changelog is not None:
            changelog.append()
        source, columns, toast = self._merge_source(parts, topic, summary)
        values, updates, condition, newer = merge_clauses(columns, topic, toast, quote, "<=>")
        with self._timed("current.write"):
            if table.empty:
                # a table this sink just created: nothing to merge with, append the upserts
                inserted = source.filter("__hw_op <> 'd'").select(
                    *[F.col(f"__hw_c{i}").alias(f["field"]) for i, f in enumerate(columns)],
                    F.col("__hw_position").alias(POSITION), F.col("__hw_op").alias(OP),
                    F.col("__hw_ts_ms").alias(TS_MS))
                (inserted.write.format("delta").mode("append").option("txnAppId", merge_app)
                 .option("txnVersion", str(batch_id)).save(path))
            elif not table.change_feed and self._rewrites(session, path, summary):
                self._rewrite(session, path, topic, table, source, columns, toast, merge_app, batch_id)
            else:
                (DeltaTable.forPath(session, path).alias("t").merge(source.alias("s"), condition)
                 .whenMatchedDelete(condition=f"s.__hw_op = 'd' AND {newer}")
                 .whenMatchedUpdate(condition=f"s.__hw_op <> 'd' AND {newer}", set=updates)
                 .whenNotMatchedInsert(condition="s.__hw_op <> 'd'", values=values)
                 .execute())
        table.empty = False
        return table

    def _append_snapshot_files(self, session: Any, parts: list[Part], summary: Summary, table: StoredTable, path: str,
                               app: str, batch_id: int, changelog: PendingChangelog | None = None) -> bool:
        """A batch of snapshot reads only, all typed rows, into a table this sink has just
        created: the executors write the Parquet files themselves and delta-rs commits them (see
        :mod:`headwater.spark.sinks.delta.files`); the batch's `changelog`, when pending, in the
        same job (its commit first). False, having written nothing, when the batch or the table
        does not allow it (then Spark's writer appends)."""
        from pyspark.sql.types import StructField, StructType

        # every record typed (one part: the typed rows), every event a snapshot read
        if (summary.reads != summary.events or summary.typed != summary.records
                or summary.last_truncate is not None or len(parts) != 1 or parts[0].records is None):
            return False
        target = self._file_target(path, table)
        if target is None:
            return False
        directory, configuration = target
        with self._timed("current.files"):
            schema = StructType([StructField(name, kind, True) for name, kind in table.columns.items()])
            writer = delta_files.ParquetFileWriter(
                directory, schema, delta_files.indexed_columns(list(table.columns.items()), configuration),
                position=POSITION, op=OP, ts_ms=TS_MS)
            # a task per core (at most: coalesce never adds partitions) rather than per snapshot
            # chunk: fewer, larger files, and the tasks' fixed costs (launch, the Python worker's
            # set-up) paid a few times instead of once a chunk, where they weighed more than the
            # writing (bench/README.md)
            parallelism = session.sparkContext.defaultParallelism
            if changelog is not None and not changelog.written and changelog.changelog.pending(changelog.app_id,
                                                                                             batch_id):
                log_writer, log_columns = changelog.changelog.writer()
                paired = delta_files.PairedFileWriter((log_writer, log_columns), (writer, [TYPED_ROWS]))
                selected = list(dict.fromkeys([*log_columns, TYPED_ROWS]))
                written = (parts[0].records.select(*selected).coalesce(parallelism)
                           .mapInArrow(paired, delta_files.PAIRED_FILE_COLUMNS).collect())
                changelog.changelog.commit([_written(r) for r in written if r["writer"] == 0], changelog.app_id,
                                           batch_id)
                changelog.written = True
                written = [r for r in written if r["writer"] == 1]
            else:
                if changelog is not None:
                    changelog.append()  # nothing to write: the change log holds this batch already
                records = parts[0].records.select(TYPED_ROWS).coalesce(parallelism)
                written = records.mapInArrow(writer, delta_files.FILE_COLUMNS).collect()
        with self._timed("current.commit"):
            delta_files.commit(directory, [_written(r) for r in written], app, batch_id)
        return True

    def _file_target(self, path: str, table: StoredTable) -> tuple[str, dict[str, str | None]] | None:
        """The table's directory and configuration when the executors may write its files and
        delta-rs commit them (:mod:`~headwater.spark.sinks.delta.files`), else None."""
        directory = delta_files.local_directory(path) if self.options.files and not table.mapped else None
        configuration = delta_files.writable_configuration(directory) if directory is not None else None
        return (directory, configuration) if directory is not None and configuration is not None else None

    def _rewrites(self, session: Any, path: str, summary: Summary) -> bool:
        """Whether this batch rewrites the table rather than MERGE into it: its events other than
        creates (updates, deletes, snapshot reads of stored keys) reach `rewrite.fraction` of the
        rows stored (Delta counts them from the log's statistics, without reading data). Tables with
        Delta's change data feed always MERGE: a rewrite would record every row as changed."""
        touching = summary.events - summary.creates
        if self.options.rewrite_fraction == float("inf") or touching <= 0:
            return False
        # from the log's statistics: delta-rs reads them without the Spark job a count() costs
        directory = delta_files.local_directory(path)
        stored = delta_files.stored_rows(directory) if directory is not None else None
        if stored is None:
            stored = session.read.format("delta").load(path).count()
        return touching >= self.options.rewrite_fraction * stored

    def _rewrite(self, session: Any, path: str, topic: Topic, table: StoredTable, source: Any,
                 columns: list[ct.Schema], toast: dict[int, str], app: str, batch_id: int) -> None:
        """What the MERGE of :meth:`apply` does, as one full outer join of the stored rows with
        the batch's latest event per key, written over the table in one commit: an event applies
        when its key is new or its position is newer than the stored row's (a delete then drops
        the row, anything else takes the event's values; unchanged-TOAST columns keep the stored
        value); every other row stays as stored, columns the source no longer has included.

        Where the table allows it (as for a snapshot, see :meth:`_append_snapshot_files`) the
        executors write the result as Parquet and delta-rs commits it, replacing the files of the
        version read; otherwise Spark overwrites the table."""
        from pyspark.sql import functions as F

        file_target = self._file_target(path, table)
        if file_target is not None:
            # the version whose files the commit replaces, exactly
            version, stored = delta_files.version_rows(session, file_target[0])
            if not delta_files.arrow_writable(stored.schema):
                file_target = None
        if file_target is None:
            stored = session.read.format("delta").load(path)
        present = "__hw_stored"
        target = stored.select(*[F.col(quote(name)).alias(f"__hw_t{i}") for i, name in enumerate(stored.columns)],
                               F.lit(True).alias(present))
        by_name = {name.lower(): i for i, name in enumerate(stored.columns)}
        condition = None
        for i, f in enumerate(topic.key_fields):
            stored_key, key = F.col(f"__hw_t{by_name[f['field'].lower()]}"), F.col(f"__hw_key_{i}")
            test = stored_key == key if topic.key_not_null else stored_key.eqNullSafe(key)
            condition = test if condition is None else condition & test
        joined = target.join(source, condition, "full_outer")
        position = F.col(f"__hw_t{by_name[POSITION.lower()]}")
        applies = F.col("__hw_position").isNotNull() & (
            F.col(present).isNull() | F.coalesce(F.col("__hw_position") > position, F.lit(False)))
        from_source = {f["field"].lower(): i for i, f in enumerate(columns)}
        meta = {POSITION.lower(): "__hw_position", OP.lower(): "__hw_op", TS_MS.lower(): "__hw_ts_ms"}
        out = []
        for i, name in enumerate(stored.columns):
            kept = F.col(f"__hw_t{i}")
            if name.lower() in meta:
                new = F.col(meta[name.lower()])
            elif name.lower() in from_source:
                c = from_source[name.lower()]
                new = F.col(f"__hw_c{c}")
                if c in toast:
                    new = F.when(F.col(f"__hw_keep_{c}"), kept).otherwise(new)
            else:
                new = F.lit(None)
            out.append(F.when(applies, new.cast(stored.schema[name].dataType)).otherwise(kept).alias(name))
        rows = joined.filter(~(applies & (F.col("__hw_op") == "d"))).select(*out)
        if file_target is None:
            rows.write.format("delta").mode("overwrite").save(path)
            return
        directory, configuration = file_target
        with self._timed("current.files"):
            indexed = delta_files.indexed_columns([(f.name, f.dataType) for f in stored.schema.fields], configuration)
            writer = delta_files.TableFileWriter(directory, stored.schema, indexed)
            written = rows.mapInArrow(writer, delta_files.FILE_COLUMNS).collect()
        with self._timed("current.commit"):
            delta_files.commit(directory, [_written(r) for r in written], app, batch_id, replacing=version)

    def _merge_source(self, parts: list[Part], topic: Topic,
                      summary: Summary) -> tuple[Any, list[ct.Schema], dict[int, str]]:
        """The latest event per key, converted: __hw_key_<i>, __hw_position/op/ts_ms, __hw_c<i> per
        column and, for columns that may hold a TOAST placeholder, __hw_keep_<i> (keep the stored
        value). The parts (typed rows, JSON events) are converted to the stored types first and
        reduced together, so the order between them is the positions' alone. A batch of snapshot
        reads has every key once: there is nothing to reduce."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        rows, columns, toast = self.merge_rows(parts, topic, summary)
        keys = [F.col(f"__hw_key_{i}") for i in range(len(topic.key_fields))]
        values = [F.col(f"__hw_c{i}") for i in range(len(columns))]
        if summary.reads == summary.events and not toast:
            return rows.select(*keys, "__hw_position", "__hw_op", "__hw_ts_ms", *values), columns, toast
        if not toast:
            # the newest event per key as a window's first row: one sort by (key, position), whose
            # order the rewrite's join by key then reuses. max_by over a struct of the row sorts
            # twice (a partial and a final sort aggregation) and builds the struct: slower
            # (bench/README.md)
            newest = Window.partitionBy(*keys).orderBy(F.col("__hw_position").desc())
            latest = rows.withColumn("__hw_rank", F.row_number().over(newest)).filter(F.col("__hw_rank") == 1)
            return latest.select(*keys, "__hw_position", "__hw_op", "__hw_ts_ms", *values), columns, toast
        aggs = [F.max_by(F.struct("__hw_position", "__hw_op", "__hw_ts_ms", *values),
                         F.col("__hw_position")).alias("e")]
        for i in toast:
            # the newest value of the batch that is not the placeholder (a struct: NULL stays a value)
            aggs.append(F.expr(f"max_by(named_struct('v', __hw_c{i}), CASE WHEN __hw_op <> 'd' AND NOT "
                               f"__hw_placeholder_{i} THEN __hw_position END)").alias(f"__hw_toast_{i}"))
        latest = rows.groupBy(*keys).agg(*aggs)
        selected = [*keys, F.col("e.__hw_position").alias("__hw_position"), F.col("e.__hw_op").alias("__hw_op"),
                    F.col("e.__hw_ts_ms").alias("__hw_ts_ms")]
        for i in range(len(columns)):
            if i in toast:
                selected.append(F.col(f"__hw_toast_{i}.v").alias(f"__hw_c{i}"))
                selected.append(F.expr(f"__hw_toast_{i} IS NULL").alias(f"__hw_keep_{i}"))
            else:
                selected.append(F.col(f"e.__hw_c{i}").alias(f"__hw_c{i}"))
        return latest.select(*selected), columns, toast

    def merge_rows(self, parts: list[Part], topic: Topic,
                   summary: Summary) -> tuple[Any, list[ct.Schema], dict[int, str]]:
        """The batch's events converted, not yet reduced to one per key: __hw_key_<i>,
        __hw_position/op/ts_ms, __hw_c<i> and, for the columns `toast` names,
        __hw_placeholder_<i> (the event holds the unchanged-TOAST placeholder there). Also read
        by :mod:`.small_batch`, which reduces them on the driver."""
        from pyspark.sql import functions as F

        columns = list(topic.row["fields"])
        stored = self.options.decimal_format
        toast: dict[int, str] = {}
        if summary.updates and summary.placeholders:  # only JSON events carry placeholders
            for i, f in enumerate(columns):
                check = ct.placeholder_sql(f"v.after.{quote(f['field'])}", f, self.options.placeholder)
                if check is not None:
                    toast[i] = check
        frames = []
        for part in parts:
            if part.flat is not None:
                frames.append(self._flat_merge_rows(part.flat, topic, columns, toast, summary))
                continue
            events = part.parsed.filter(F.col("op") != "t")
            if summary.last_truncate is not None:
                events = events.filter(F.col("position") > F.lit(summary.last_truncate))

            def converted(expr: str, f: ct.Schema, fmt: str = part.fmt) -> Any:
                return F.expr(ct.convert_sql(expr, f, fmt)).cast(ct.spark_type(f, stored))

            selected = [converted(f"k.{quote(f['field'])}", f).alias(f"__hw_key_{i}")
                        for i, f in enumerate(topic.key_fields)]
            selected += [F.col("position").alias("__hw_position"), F.col("op").alias("__hw_op"),
                         F.col("ts_ms").alias("__hw_ts_ms")]
            selected += [converted(f"v.after.{quote(f['field'])}", f).alias(f"__hw_c{i}")
                         for i, f in enumerate(columns)]
            for i, check in toast.items():
                flag = F.lit(False) if part.fmt == ct.NATIVE else F.expr(f"coalesce({check}, false)")
                selected.append(flag.alias(f"__hw_placeholder_{i}"))
            frames.append(events.select(*selected))
        rows = frames[0]
        for frame in frames[1:]:
            rows = rows.unionByName(frame)
        return rows, columns, toast

    def _flat_merge_rows(self, rows: Any, topic: Topic, columns: list[ct.Schema], toast: dict[int, str],
                         summary: Summary) -> Any:
        """Typed rows (:func:`~headwater.spark.sinks.delta.decoding.typed_rows`) in
        :meth:`_merge_source`'s columns, taken straight from their flat columns (the values are
        already of their stored types; typed rows are never truncates and never hold a TOAST
        placeholder)."""
        from pyspark.sql import functions as F

        def col(name: str) -> Any:
            return F.col(quote(name))
        if summary.last_truncate is not None:
            rows = rows.filter(col(typed_rows.POSITION) > F.lit(summary.last_truncate))
        stored = self.options.decimal_format
        selected = [col(f["field"]).cast(ct.spark_type(f, stored)).alias(f"__hw_key_{i}")
                    for i, f in enumerate(topic.key_fields)]
        selected += [col(typed_rows.POSITION).alias("__hw_position"), col(typed_rows.OP).alias("__hw_op"),
                     F.floor(col(typed_rows.TS_US) / 1000).cast("BIGINT").alias("__hw_ts_ms")]
        selected += [col(f["field"]).cast(ct.spark_type(f, stored)).alias(f"__hw_c{i}") for i, f in enumerate(columns)]
        selected += [F.lit(False).alias(f"__hw_placeholder_{i}") for i in toast]
        return rows.select(*selected)


def merge_clauses(columns: list[ct.Schema], topic: Topic, toast: dict[int, str] | list[int],
                  name: Callable[[str], str], null_safe_equal: str) -> tuple[dict[str, str], dict[str, str], str, str]:
    """The MERGE of a batch's latest events per key (``s``, :meth:`CurrentState._merge_source`'s
    columns) into the table (``t``), as SQL for Spark's MERGE or delta-rs's: the insert values and
    the update assignments by column (`name` quotes a column name as the SQL dialect reads it; an
    unchanged-TOAST column keeps the stored value), the key condition (`null_safe_equal`: the
    dialect's NULL-safe equality, for keys that may be NULL) and the guard that the event is newer
    than the stored row."""
    values = {name(f["field"]): f"s.__hw_c{i}" for i, f in enumerate(columns)}
    values.update({name(POSITION): "s.__hw_position", name(OP): "s.__hw_op", name(TS_MS): "s.__hw_ts_ms"})
    updates = dict(values)
    for i in toast:
        column = name(columns[i]["field"])
        updates[column] = f"CASE WHEN s.__hw_keep_{i} THEN t.{column} ELSE s.__hw_c{i} END"
    equal = "=" if topic.key_not_null else null_safe_equal
    condition = " AND ".join(f"t.{name(f['field'])} {equal} s.__hw_key_{i}" for i, f in enumerate(topic.key_fields))
    return values, updates, condition, f"s.__hw_position > t.{name(POSITION)}"


def _written(row: Any) -> delta_files.WrittenFile:
    """A file's row of :data:`~headwater.spark.sinks.delta.files.FILE_COLUMNS`."""
    return delta_files.WrittenFile(row["path"], row["size"], row["rows"], row["stats"])


NO_TABLE = object()  # described_by_log: the log says there is no table


def _clear_uncommitted_log(session: Any, path: str) -> None:
    """Remove the ``_delta_log`` a creation left behind when the driver died before its first
    commit (only temporary files, no version): Delta takes such a directory for a table and then
    cannot find it. A log holding any commit or checkpoint is never touched."""
    jvm = session.sparkContext._jvm
    log_dir = jvm.org.apache.hadoop.fs.Path(f"{path}/_delta_log")
    fs = log_dir.getFileSystem(session.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(log_dir):
        return
    names = [status.getPath().getName() for status in fs.listStatus(log_dir)]
    if any(_VERSION_FILE.match(n) for n in names):
        return
    log.warning("delta table %s: removing the log of a creation that never committed (%d leftover "
                "entries: %s)", path, len(names), ", ".join(sorted(names)[:5]))
    fs.delete(log_dir, True)


def _needs_mapping(name: str, data_type: Any) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if _SPECIAL.search(name):
        return True
    if isinstance(data_type, StructType):
        return any(_needs_mapping(f.name, f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return _needs_mapping("", data_type.elementType)
    if isinstance(data_type, MapType):
        return _needs_mapping("", data_type.valueType)
    return False
