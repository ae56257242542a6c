"""Small batches written by the driver: a topic's few changes into its change log and current-state
table with delta-rs (``deltalake``), without Spark's Delta writer and MERGE.

Why: Spark's Delta writes cost jobs, not rows. A change-log append and a MERGE of a few hundred
rows ran about a dozen Spark jobs per table (the MERGE's scans and rewrite, statistics, the
state reconstruction behind every commit), most of a demo micro-batch's time; the driver writes
the same rows in milliseconds (bench/README.md, ``spark_lag.py``).

What stays Spark's: decoding. The events are converted by the same Spark expressions as on the
Spark path (:mod:`.decoding`, :func:`.changelog.frame`,
:meth:`.current.CurrentState.merge_rows`); each table's converted rows come to the driver in one
job (``toArrow``). On the driver:

- change log: the rows are written as Parquet with Delta's statistics and committed by
  :func:`.files.commit` with the idempotent-write id the Spark path gives that append
  (``txn``: ``<app>:changelog[:rows]``, batch id), so a replayed batch skips what it wrote, whichever
  path wrote it;
- current state: the events are reduced to the newest per key (by position; for columns that may
  hold an unchanged-TOAST placeholder, the newest value that is not one, else the stored value),
  then merged with delta-rs on the same conditions as Spark's MERGE (an event applies only when
  its position is newer than the stored ``__headwater_position``). The commit carries the id
  ``<app>:merge`` / batch id, the one the Spark path's appends and rewrites of the table carry: a
  replay skips it; without the id the position guard would make it a no-op anyway.

Used for a topic when (checked before anything is written, else the Spark path runs): its batch
holds at most ``small.batch.rows`` events (default 10000; 0: never), no truncate, both tables are
local (or ``file:``) paths delta-rs may commit to as Spark would (:func:`.files.writable_configuration`:
Spark's plain protocols, no column mapping), the current-state table has no change data feed, and
the converted rows have exactly the types the tables store (a change-log schema change goes to
Spark, whose append merges the new fields). A change log that does not exist yet is created as
Spark's first append would create it when the session adds nothing to new tables.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

from headwater.spark.sinks import connect_types as ct
from headwater.spark.sinks.delta import changelog as changelog_module
from headwater.spark.sinks.delta import files as delta_files
from headwater.spark.sinks.delta.current import CurrentState, StoredTable, merge_clauses
from headwater.spark.sinks.delta.decoding import Part
from headwater.spark.sinks.delta.files import nullable_type
from headwater.spark.sinks.delta.options import SinkOptions
from headwater.spark.sinks.delta.schemas import Summary, Topic

log = logging.getLogger(__name__)

# session settings that change what Spark puts into a new table (as current.py checks them)


class SmallBatches:
    """Writes a topic's small batch on the driver (:meth:`write`), or tells the sink to use Spark."""

    def __init__(self, options: SinkOptions, current_state: CurrentState,
                 timed: Callable[[str], AbstractContextManager[None]],
                 register: Callable[[Any, str, str], None]) -> None:
        self.options = options
        self.current_state = current_state
        self._timed = timed
        self._register = register

    def applies(self, summary: Summary) -> bool:
        """Whether the topic's batch is small enough (and truncate-free) to try the driver."""
        limit = self.options.small_batch_rows  # 0: never
        return limit > 0 and summary.events <= limit and summary.last_truncate is None

    def write(self, session: Any, parts: list[Part], topic: Topic, summary: Summary, table: StoredTable | None,
              table_path: str, changelog_path: str, batch_id: int, app: str, *, changelog: bool,
              current: bool) -> bool:
        """Write the topic's batch (its change log if `changelog`, its current state if `current`);
        False when the batch or a table needs Spark's path, having written no rows (a missing
        current-state table is created, or gains new columns, first: what Spark's path does too)."""
        if not self.applies(summary):
            return False
        with self._timed("small.plan"):
            log_plan = self._changelog_plan(session, parts, topic, summary, changelog_path, batch_id, app) \
                if changelog else []
            if log_plan is None:
                log.debug("%s: change log through Spark (its table or schema needs it)", summary.topic)
                return False
            state_plan = self._current_plan(session, parts, topic, summary, table, table_path) \
                if current and summary.events and topic.key_fields else None
            if current and summary.events and topic.key_fields and state_plan is None:
                log.debug("%s: current state through Spark (its table or types need it)", summary.topic)
                return False
        with self._timed("small.collect"):  # the only Spark jobs: one per frame
            collected = [(directory, schema, create, app_id, frame.toArrow())
                         for directory, schema, create, app_id, frame in log_plan]
            merge_rows = state_plan[0].toArrow() if state_plan is not None else None
        with self._timed("small.changelog"):
            for directory, schema, create, app_id, rows in collected:
                if create:
                    delta_files.create(directory, schema, {})
                elif _written(directory, app_id, batch_id):
                    continue  # a replay: no files the commit would then skip
                indexed = delta_files.indexed_columns([(f.name, f.dataType) for f in schema.fields],
                                                      delta_files.writable_configuration(directory) or {})
                writer = delta_files.TableFileWriter(directory, schema, indexed)
                written = [b.to_pylist()[0] for b in writer(iter(rows.to_batches()))]
                files = [delta_files.WrittenFile(w["path"], w["size"], w["rows"], w["stats"]) for w in written]
                delta_files.commit(directory, files, app_id, batch_id)
            if changelog:
                self._register(session, summary.topic + changelog_module.CHANGELOG_SUFFIX, changelog_path)
        if state_plan is not None and merge_rows is not None:
            with self._timed("small.current"):
                _, stored, directory, columns, toast = state_plan
                self._merge(directory, stored, topic, columns, toast, merge_rows, f"{app}:merge", batch_id)
                stored.empty = False
        return True

    # -- the change log -------------------------------------------------------------------------

    def _changelog_plan(self, session: Any, parts: list[Part], topic: Topic, summary: Summary, path: str,
                        batch_id: int, app: str) -> list[tuple[str, Any, bool, str, Any]] | None:
        """(directory, the table's schema, create it first, txn app id, frame) per part, or None."""
        from pyspark.sql.types import StructType

        directory = delta_files.local_directory(path)
        if directory is None or not self.options.files:
            return None
        described = delta_files.describe(directory)
        columns = changelog_module.changelog_columns(summary.connector)
        plan = []
        for part in parts:
            frame = changelog_module.frame(part.parsed, topic, columns, part.fmt, batch_id)
            wanted = nullable_type(frame.schema)
            if described is None:
                if not delta_files.plain_schema(wanted) or delta_files.session_adds_to_new_tables(session):
                    return None
                if plan and plan[0][1] != wanted:
                    return None  # parts of different schemas: Spark's appends merge them
                schema, create = wanted, not plan  # the first part creates the table
            else:
                if delta_files.writable_configuration(directory) is None:
                    return None
                schema = StructType.fromJson(json.loads(described[1]))
                if nullable_type(schema) != wanted:
                    log.debug("%s: change log schema %s, the batch's %s", path, nullable_type(schema).simpleString(),
                              wanted.simpleString())
                    return None  # new fields: Spark's append merges them into the schema
                create = False
            plan.append((directory, schema, create, f"{app}:changelog{part.tag}", frame))
        return plan

    # -- the current state ----------------------------------------------------------------------

    def _current_plan(self, session: Any, parts: list[Part], topic: Topic, summary: Summary,
                      table: StoredTable | None, path: str) -> tuple[Any, StoredTable, str, list[ct.Schema],
                                                                     dict[int, str]] | None:
        """(converted rows, the stored table, its directory, the source columns, TOAST columns), or None."""
        directory = delta_files.local_directory(path)
        if directory is None or not self.options.files or (table is not None and (table.mapped or table.change_feed)):
            return None
        with self._timed("current.table"):
            stored = self.current_state._ensure_table(session, path, topic, table, summary.topic)
        if stored.mapped or stored.change_feed or delta_files.writable_configuration(directory) is None:
            return None
        rows, columns, toast = self.current_state.merge_rows(parts, topic, summary)
        by_name = {name.lower(): kind for name, kind in stored.columns.items()}
        for i, f in enumerate(topic.key_fields):
            if nullable_type(rows.schema[f"__hw_key_{i}"].dataType) != nullable_type(by_name.get(f["field"].lower())):
                return None
        for i, f in enumerate(columns):
            if nullable_type(rows.schema[f"__hw_c{i}"].dataType) != nullable_type(by_name.get(f["field"].lower())):
                return None  # Spark's MERGE would cast; the driver does not guess how
        return rows, stored, directory, columns, toast

    def _merge(self, directory: str, stored: StoredTable, topic: Topic, columns: list[ct.Schema],
               toast: dict[int, str], rows: Any, app_id: str, batch_id: int) -> None:
        from deltalake import DeltaTable
        from deltalake.transaction import CommitProperties, PostCommitHookProperties, Transaction

        if _written(directory, app_id, batch_id):
            return  # a replay: this batch is in the table
        table = DeltaTable(directory)
        source = latest_per_key(rows, len(topic.key_fields), list(toast))
        names = {name.lower(): name for name in stored.columns}

        def target(name: str) -> str:
            return _ident(names[name.lower()])
        values, updates, condition, newer = merge_clauses(columns, topic, toast, target, "IS NOT DISTINCT FROM")
        (table.merge(source=source, predicate=condition, source_alias="s", target_alias="t",
                     streamed_exec=False,  # a small source: delta-rs prunes the table's files by its keys
                     commit_properties=CommitProperties(app_transactions=[Transaction(app_id, batch_id)]),
                     post_commithook_properties=PostCommitHookProperties(create_checkpoint=False,
                                                                         cleanup_expired_logs=False))
         .when_matched_delete(predicate=f"s.__hw_op = 'd' AND {newer}")
         .when_matched_update(updates=updates, predicate=f"s.__hw_op <> 'd' AND {newer}")
         .when_not_matched_insert(updates=values, predicate="s.__hw_op <> 'd'")
         .execute())
        # checkpoints at Spark's interval, as the sink's other delta-rs commits make them
        delta_files._checkpoint_if_due(DeltaTable(directory))


def latest_per_key(rows: Any, keys: int, toast: Iterable[int]) -> Any:
    """:meth:`CurrentState.merge_rows`' rows (an Arrow table) reduced as the Spark path's
    ``_merge_source`` reduces them: per key the newest event (by position); for a column in
    `toast`, the newest value of an event that is not a delete and not the placeholder, with
    ``__hw_keep_<i>`` true when there is none (keep the stored value). Keys compare as Spark's
    grouping does: NULL equals NULL."""
    import pyarrow as pa

    key_values = [rows.column(f"__hw_key_{i}").to_pylist() for i in range(keys)]
    positions = rows.column("__hw_position").to_pylist()
    ops = rows.column("__hw_op").to_pylist()
    toast = list(toast)
    flags = {i: rows.column(f"__hw_placeholder_{i}").to_pylist() for i in toast}
    newest: dict[Any, int] = {}
    kept: dict[int, dict[Any, int]] = {i: {} for i in toast}
    for row in range(rows.num_rows):
        key = tuple(_hashable(values[row]) for values in key_values)
        best = newest.get(key)
        if best is None or positions[row] > positions[best]:
            newest[key] = row
        if ops[row] == "d":
            continue
        for i in toast:
            if not flags[i][row]:
                seen = kept[i].get(key)
                if seen is None or positions[row] > positions[seen]:
                    kept[i][key] = row
    order = list(newest)
    chosen = pa.array([newest[k] for k in order], pa.int64())
    names = [n for n in rows.column_names if not n.startswith("__hw_placeholder_")]
    out = {n: rows.column(n).take(chosen) for n in names}
    for i in toast:
        source = pa.array([kept[i].get(k) for k in order], pa.int64())
        out[f"__hw_c{i}"] = rows.column(f"__hw_c{i}").take(source)  # a NULL index takes NULL
        out[f"__hw_keep_{i}"] = pa.array([kept[i].get(k) is None for k in order], pa.bool_())
    return pa.table(out)


def _written(directory: str, app_id: str, batch_id: int) -> bool:
    from deltalake import DeltaTable

    done = DeltaTable(directory).transaction_version(app_id)
    return done is not None and done >= batch_id


def _ident(name: str) -> str:
    """A column name as delta-rs's SQL (DataFusion) reads it: quoted, case kept."""
    return '"' + name.replace('"', '""') + '"'


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value
