"""Delta Lake tables from the headwater Spark source: a current-state table and a change log per topic.

``DeltaSink(spark, path).write(batch_df, batch_id)`` (a ``foreachBatch`` destination) takes the
data-change records of a micro-batch (``op`` c/u/d/r/t; heartbeats, transaction metadata, logical
messages and tombstones are skipped) and, for every topic in it, keeps:

- ``<path>/<topic>`` — the **current state**: one row per key, the table's columns plus
  ``__headwater_position`` / ``__headwater_op`` / ``__headwater_ts_ms`` (the source position, op and
  commit time of the event the row comes from). Updated by one ``MERGE`` per batch. Only for
  topics whose records have a key (a primary key, or ``message.key.columns``): keyless tables go
  to the change log only.
- ``<path>/<topic>__changelog`` — the **change log**: every event appended, with ``position``,
  ``op``, ``source_ts_ms`` and ``commit_time`` (source.ts_ms), ``tx_id`` (source.txId), ``lsn``,
  ``snapshot``, ``key``, ``before``/``after``/``source``/``transaction`` as structs, the event's
  ``ts_ms`` and the ``batch_id`` that wrote it.

Decoding: the value's Connect schema (``value.converter.schemas.enable=true`` is required) gives
the columns; it is read once per distinct schema per batch, then every record is parsed with
``from_json`` and converted with SQL expressions (see :mod:`headwater.spark.sinks.connect_types`).

Typed rows (source options ``snapshotDelivery=rows`` and ``streamDelivery=rows``): records whose
``typed_rows`` holds snapshot rows or streamed row changes as Arrow IPC are decoded in the
executors (``mapInArrow``) straight into the table's column types and given the fields the
events would carry. Their change-log appends carry a transaction id of their own
(``…:changelog:rows``), so a batch with typed rows and events of one topic stays idempotent; for
the current state both are converted to the stored types and reduced together.

Current state, per batch and topic:

1. The last truncate ``t`` of the batch deletes every stored row whose position is older than it;
   events before it in the batch are dropped (whatever they did, the truncate undid).
2. The remaining events are reduced to the latest per key (by position); a delete wins if it is
   the latest. A primary-key change arrives as a delete of the old key and a create of the new one.
3. ``MERGE`` on the key: the event applies only when its position is newer than the stored
   ``__headwater_position`` — delete if ``d``, else update/insert from ``after``.
   A batch whose updates, deletes and snapshot reads reach ``rewrite.fraction`` (default 0.1)
   of the stored rows is applied instead by rewriting the table: one full outer join of the
   stored rows with the batch, the same rules, one overwrite commit. MERGE first finds the
   files the batch touches and then rewrites them, two passes over the table; when the batch
   touches most files anyway, one pass is about twice as fast (500k updates into 1M rows on 2
   cores: 4.7 s instead of 7.8 s). Batches of inserts always MERGE (they touch no stored row).
4. Unchanged-TOAST placeholders (``unavailable.value.placeholder``) never overwrite a value: a
   column takes the newest non-placeholder value of the batch, else keeps what is stored.
5. Columns new in the source schema are added to the table first (``ALTER TABLE … ADD COLUMNS``);
   dropped columns stay (NULL in rows inserted afterwards).

Exactly-once per batch. Change-log appends carry Delta's idempotent-write id (``txnAppId`` =
``headwater-delta:<streaming query id>:changelog``, ``txnVersion`` = batch id), so a batch Spark
replays after a crash skips the change logs it already wrote. The current state needs no id: a
replayed batch holds the same events, and the position guard makes each of them a no-op (the
stored row already carries that position; a key whose latest event is a delete is gone and a
delete inserts nothing; a truncate only removes rows older than itself). The limit: rows are
deleted physically, so re-applying an old *insert* after its row was deleted by a later,
committed batch would bring the row back. Spark never replays a committed batch, so this only
matters if a checkpoint is reset while the tables are kept — start such a run with a fresh table
directory.

The topics of a batch are written concurrently (``parallelism``, default 4, from a small thread
pool): each table's commits are independent, and one at a time a batch spends most of its time
in per-commit overhead (planning, Delta log work) while the executors idle. Nothing here uses
session-wide settings, so the threads cannot disturb each other's commits.

Options (``options=`` or the pipeline's sink entry): ``unavailable.value.placeholder`` (as set
on the connector), ``decimal.format`` (``base64``/``numeric``, as ``value.converter.decimal.format``),
``changelog`` / ``current`` (``true``/``false``: write either kind of table), ``txn.app.id``
(replaces the streaming query id in the transaction ids), ``table.prefix`` (also register the
tables in the session catalog as ``<prefix><topic>``, non-alphanumerics as ``_``),
``parallelism`` (tables written at once), ``rewrite.fraction`` (0–1, or ``inf`` to always MERGE),
``files`` (``false``: snapshots into new tables and rewrites go through Spark's writer, see below;
``snapshot.files`` is its older name).

A snapshot of typed rows into a table the sink has just created (a plain append), and a rewrite,
are written by the executors as Parquet files and committed with delta-rs when the table allows
it: see :mod:`headwater.spark.sinks.delta_files`.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from headwater.config import ConfigError
from headwater.serialization.json import ENVELOPE_START
from headwater.spark.sinks import connect_types as ct
from headwater.spark.sinks.connect_types import quote, sql_string
from headwater.spark.sinks.jsonl import topic_directory

log = logging.getLogger(__name__)

DATA_OPS = ("c", "u", "d", "r", "t")
# what a value with its Connect schema starts with; values of the source's valueFormat=payload do
# not, and their schemas come in schema records (no op, no key, value {"schema": …, "payload": null})
ENVELOPE_PREFIX = ENVELOPE_START.decode()
TYPED_ROWS = "typed_rows"  # the source column of typed rows (Arrow IPC): snapshot rows, streamed row changes
TYPED_COUNT = "typed_row_count"  # how many rows such a record carries
POSITION = "__headwater_position"
OP = "__headwater_op"
TS_MS = "__headwater_ts_ms"
CHANGELOG_SUFFIX = "__changelog"
KEY_PROPERTY = "headwater.key.columns"
DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"
DEFAULT_APP_ID = "headwater-delta"
OPTIONS = ("unavailable.value.placeholder", "decimal.format", "value.converter.decimal.format", "changelog",
           "current", "txn.app.id", "table.prefix", "parallelism", "rewrite.fraction", "files",
           "snapshot.files")
DEFAULT_PARALLELISM = 4
# a batch whose events may touch at least this share of a current-state table's rows rewrites the
# table in one pass instead of MERGE's two (find the touched files, then rewrite them): on 2 cores a
# MERGE of 500k changes into 1M rows took 7.8 s, the rewrite 4.7 s; a MERGE of 2,048 took 5 s
DEFAULT_REWRITE_FRACTION = 0.1
# characters Delta accepts in column names only with column mapping
_SPECIAL = re.compile(r"[ ,;{}()\n\t=]")
# a committed version: a commit, a checkpoint (classic, multi-part, v2) or a compacted log file
_VERSION_FILE = re.compile(r"^\d{20}\.(json|checkpoint.*\.parquet|checkpoint\..*\.(json|parquet))$|"
                           r"^\d{20}\.\d{20}\.compacted\.json$|^_last_checkpoint$")


@dataclass
class _Summary:
    """What the first pass over a batch found for one topic."""

    topic: str
    schemas: list[ct.Schema] = field(default_factory=list)  # envelope schemas, oldest first
    last_truncate: str | None = None
    events: int = 0  # c/u/d/r (rows: a typed record counts as the rows it carries)
    updates: int = 0  # u: only updates carry unchanged-TOAST placeholders
    creates: int = 0  # c: the events that (usually) touch no stored row
    reads: int = 0  # r: snapshot rows, one per key
    placeholders: int = 0  # u whose value may hold an unchanged-TOAST placeholder (0: none can)
    keyed: bool = False  # some c/u/d/r record has a key
    records: int = 0  # every record of the topic (typed ones included)
    typed: int = 0  # records carrying typed rows (source options snapshotDelivery/streamDelivery=rows)
    bare: int = 0  # values without their schema (source option valueFormat=payload)


@dataclass
class _Part:
    """Events of one topic in one form, parsed: columns position, op, ts_ms, k, v (what the change
    log stores). Typed rows also keep their flat form, which the current-state table reads: the
    envelope's structs would be built for every row just to take the values out again."""

    parsed: Any  # None for typed rows when no change log is written
    fmt: str  # how values are encoded (ct.NATIVE: already of their stored types)
    tag: str  # the suffix of its writes' transaction ids
    flat: Any = None  # typed rows: the table's columns plus typed_snapshot's row columns
    records: Any = None  # typed rows: the records carrying them (Arrow IPC, not decoded)


@dataclass
class _Table:
    """What the sink knows of a current-state table (cached per sink)."""

    columns: dict[str, Any]  # name → Spark type
    keys: list[str]
    mapped: bool  # column mapping on (any column name allowed)
    empty: bool = False  # created by this sink and never written: the first write can append
    change_feed: bool = False  # delta.enableChangeDataFeed: row-level changes matter, never rewrite


@dataclass
class _Topic:
    """A topic's merged schemas for this batch."""

    row: ct.Schema  # the before/after struct
    source: ct.Schema | None
    transaction: ct.Schema | None
    key_fields: list[ct.Schema]  # the key's fields, typed
    key_wrapped: bool  # key JSON carries {"schema","payload"}
    # every key schema seen for the topic has these fields, none optional (a primary key): keys are
    # matched with `=` rather than `<=>`, which Spark plans as a join on other expressions and so
    # shuffles the batch's latest-per-key rows once more (~0.7 s per 1M rows, measured)
    key_not_null: bool = False


def _flag(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.pop(name, None)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError([f"delta sink option {name}={raw!r}: expected true or false"])


class DeltaSink:
    """`foreachBatch` destination: ``DeltaSink(spark, path).write(batch_df, batch_id)``."""

    def __init__(self, spark: Any, path: str, *, table_prefix: str | None = None,
                 options: Mapping[str, str] = {}) -> None:
        opts = {str(k): str(v) for k, v in options.items()}
        unknown = sorted(set(opts) - set(OPTIONS))
        if unknown:
            raise ConfigError([f"delta sink: unknown option(s) {', '.join(unknown)} (known: {', '.join(OPTIONS)})"])
        self.spark = spark
        self.path = _absolute(path)
        placeholder = opts.pop("unavailable.value.placeholder", DEFAULT_PLACEHOLDER)
        self.placeholder = bytes.fromhex(placeholder[4:]) if placeholder.startswith("hex:") else placeholder.encode()
        fmt = opts.pop("decimal.format", None) or opts.pop("value.converter.decimal.format", "base64")
        self.decimal_format = fmt.strip().lower()
        if self.decimal_format not in ("base64", "numeric"):
            raise ConfigError([f"delta sink option decimal.format={fmt!r}: expected base64 or numeric"])
        self.changelog = _flag(opts, "changelog", True)
        self.current = _flag(opts, "current", True)
        # snapshot.files: this option's name when it covered snapshots only
        self.files = _flag(opts, "files", _flag(opts, "snapshot.files", True))
        self.app_id = opts.pop("txn.app.id", None)
        self.table_prefix = table_prefix if table_prefix is not None else opts.pop("table.prefix", None)
        raw = opts.pop("parallelism", str(DEFAULT_PARALLELISM))
        if not raw.strip().isdigit() or int(raw) < 1:
            raise ConfigError([f"delta sink option parallelism={raw!r}: expected a whole number >= 1"])
        self.parallelism = int(raw)
        raw = opts.pop("rewrite.fraction", str(DEFAULT_REWRITE_FRACTION))
        try:
            self.rewrite_fraction = float(raw)
        except ValueError:
            self.rewrite_fraction = -1.0
        if not 0 <= self.rewrite_fraction <= 1 and self.rewrite_fraction != float("inf"):
            raise ConfigError([f"delta sink option rewrite.fraction={raw!r}: expected a number from 0 to 1 "
                               "(or inf: always MERGE)"])
        self._lock = threading.Lock()  # the timings, when tables are written concurrently
        self._tables: dict[str, _Table | None] = {}
        # per topic: the schema prefixes seen (value: text up to ',"payload":' → envelope schema;
        # key: → (key fields, wrapped)); None as prefix: any key (keys without schemas)
        self._value_forms: dict[str, list[tuple[str | None, Any]]] = {}
        self._key_forms: dict[str, list[tuple[str | None, Any]]] = {}
        self._registered: set[str] = set()
        self.timings: dict[str, float] = {}  # seconds spent per step, summed over batches

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
            summaries = self._summaries(data, schema_records)
        if not summaries:
            return
        app = self._app_id(session)
        topics = sorted(summaries)
        if len(topics) == 1 or self.parallelism == 1:
            for topic in topics:
                self._write_topic(session, data.filter(F.col("topic") == topic), summaries[topic], batch_id, app)
            return
        from headwater.spark.session import thread_target

        write = thread_target(session, self._write_topic)
        with ThreadPoolExecutor(max_workers=min(self.parallelism, len(topics)),
                                thread_name_prefix="headwater-delta") as pool:
            futures = [pool.submit(write, session, data.filter(F.col("topic") == topic), summaries[topic],
                                   batch_id, app) for topic in topics]
            for future in futures:  # the first failure fails the batch; Spark replays it
                future.result()

    def _app_id(self, session: Any) -> str:
        if self.app_id:
            return self.app_id
        # stable across restarts from the same checkpoint; a new checkpoint gets a new id, so its
        # batch ids (from 0 again) are not mistaken for ones already written
        query = session.sparkContext.getLocalProperty("sql.streaming.queryId")
        return f"{DEFAULT_APP_ID}:{query}" if query else DEFAULT_APP_ID

    def _summaries(self, data: Any, schema_records: Any) -> dict[str, _Summary]:
        """Per topic: event counts, the last truncate, and the value/key schemas in the batch.

        The JSON converter writes ``{"schema":…,"payload":…}`` with the same schema text for every
        record of a table version, so a record's schema is recognised by a prefix comparison
        (memcmp) against the schemas already seen. Records with an unknown prefix are rare (a new
        topic or a schema change): one of them is fetched and decoded on the driver, then the pass
        is repeated until every record is known. Searching or parsing each record's JSON here would
        cost more than decoding the batch. Values without a schema (valueFormat=payload) take their
        schemas from the batch's schema records, which are few (one per schema and task)."""
        from pyspark.sql import functions as F

        op, value, key = F.col("op"), F.col("value"), F.col("key")
        keyed_event = key.isNotNull() & (op != "t")
        has_typed = TYPED_ROWS in data.columns
        typed_records = (F.count(F.col(TYPED_ROWS)) if has_typed else F.lit(0)).alias("typed")
        untyped = F.col(TYPED_ROWS).isNull() if has_typed else F.lit(True)
        weight = F.coalesce(F.col(TYPED_COUNT), F.lit(1)) if has_typed else F.lit(1)  # rows a record stands for

        def count_rows(condition: Any, name: str) -> Any:
            return F.coalesce(F.sum(F.when(condition, weight)), F.lit(0)).alias(name)
        bare = ~value.startswith(ENVELOPE_PREFIX)
        stated_read = False
        schema_topics: set[str] = set()  # topics with schema records in this batch
        strays: set[str] = set()
        for passes in range(1, 1000):  # each round learns at least one schema: a bound against a bug looping
            value_known = self._known_expr(self._value_forms, value) | bare
            key_known = self._known_expr(self._key_forms, key)
            unknown_value, unknown_key = ~value_known, keyed_event & ~key_known
            rows = (data.groupBy("topic")
                    .agg(count_rows(op != "t", "events"), count_rows(op == "u", "updates"),
                         count_rows(op == "c", "creates"), count_rows(op == "r", "reads"),
                         F.count(F.when((op == "u") & untyped & self._may_hold_placeholder(value), F.lit(1)))
                         .alias("placeholders"),
                         F.count(F.lit(1)).alias("records"),
                         F.count(F.when(op == "t", F.lit(1))).alias("truncates"),
                         F.count(F.when(keyed_event, F.lit(1))).alias("keyed"),
                         F.count(F.when(unknown_value | unknown_key, F.lit(1))).alias("unknown"),
                         F.count(F.when((unknown_value | unknown_key) & untyped, F.lit(1))).alias("unknown_untyped"),
                         F.count(F.when(bare, F.lit(1))).alias("bare"),
                         typed_records)
                    .collect())
            if not stated_read:
                # what the batch states itself, read once: the schema records of topics whose values
                # come without a schema, and the key and value of the typed records of topics with
                # unknown schemas (few: each stands for up to 65,536 rows and carries its table's
                # schemas). A topic whose unknown records were all typed is known then, without the
                # sample and the second pass a new table's first batch took (0.2–0.9 s for 1M rows)
                stated_read = True
                bare_topics = [r["topic"] for r in rows if r["bare"]]
                typed_topics = [r["topic"] for r in rows if r["unknown"] and r["typed"]]
                if bare_topics or typed_topics:
                    stated = schema_records.filter(F.col("topic").isin(*bare_topics)).select(
                        "topic", F.lit(None).cast("string").alias("key"), "value", "op")
                    if typed_topics:
                        stated = stated.unionByName(data.filter(F.col(TYPED_ROWS).isNotNull()
                                                                & F.col("topic").isin(*typed_topics))
                                                    .select("topic", "key", "value", "op"))
                    for r in stated.collect():
                        if r["op"] is None:  # a schema record
                            schema_topics.add(r["topic"])
                        self._learn(r["topic"], r["value"], r["key"] if r["op"] != "t" else None)
                # values without a schema and without schema records: not the source's payload
                # format (e.g. a converter with schemas.enable=false); learning one says what is wrong
                strays = {topic for topic in bare_topics if topic not in schema_topics}
                unknown = [r["topic"] for r in rows if r["unknown_untyped"] or r["topic"] in strays]
            else:
                unknown = [r["topic"] for r in rows if r["unknown"] or r["topic"] in strays]
            if not unknown:
                log.debug("delta sink: the schemas of %d topic(s) known after %d pass(es) over the batch",
                          len(rows), passes)
                break
            value_known = self._known_expr(self._value_forms, value) | bare  # with what was just learnt
            key_known = self._known_expr(self._key_forms, key)
            for topic in unknown:
                stray = bare if topic in strays else F.lit(False)
                sample = (data.filter((F.col("topic") == topic)
                                      & (~value_known | stray | (keyed_event & ~key_known)))
                          .select("value", "key", "op").limit(1).collect())
                if sample:
                    found = sample[0]["value"]
                    if topic in schema_topics and found is not None and not found.startswith(ENVELOPE_PREFIX):
                        found = None  # a payload (sampled for its key): its schema came in a schema record
                    self._learn(topic, found, sample[0]["key"] if sample[0]["op"] != "t" else None)
        else:
            raise RuntimeError("delta sink: the record schemas of a batch could not be identified")
        summaries: dict[str, _Summary] = {}
        for r in rows:
            topic = r["topic"]
            summaries[topic] = _Summary(topic, [schema for _, schema in self._value_forms.get(topic, [])],
                                        events=r["events"], updates=r["updates"], creates=r["creates"],
                                        reads=r["reads"], placeholders=r["placeholders"], keyed=r["keyed"] > 0,
                                        records=r["records"], typed=r["typed"], bare=r["bare"])
        if any(r["truncates"] for r in rows):
            for r in data.filter(op == "t").groupBy("topic").agg(F.max("position").alias("last")).collect():
                summaries[r["topic"]].last_truncate = r["last"]
        return summaries

    def _may_hold_placeholder(self, value: Any) -> Any:
        """True for a value whose JSON contains some form of the unchanged-TOAST placeholder (the
        text, its base64, the uuid[] form, the signed bytes of an integer array: what
        ``connect_types.placeholder_sql`` matches). False means no column of it can be the
        placeholder, and the batch's reduction needs no per-column search for older real values.
        A placeholder that JSON might escape is assumed present everywhere."""
        from pyspark.sql import functions as F

        text = self.placeholder.decode("utf-8", "replace")
        if not re.fullmatch(r"[A-Za-z0-9_ .:-]+", text):
            return F.lit(True)
        signed = ",".join(str(b - 256 if b > 127 else b) for b in self.placeholder)
        forms = {text, base64.b64encode(self.placeholder).decode(), ct.uuid_placeholder(self.placeholder), signed}
        test: Any = F.lit(False)
        for form in sorted(forms):
            test = test | value.contains(form)
        return test

    @staticmethod
    def _known_expr(forms: dict[str, list[tuple[str | None, Any]]], column: Any) -> Any:
        from pyspark.sql import functions as F

        known: Any = F.lit(False)
        for topic, entries in forms.items():
            test: Any = F.lit(False)
            for prefix, _ in entries:
                test = test | (column.isNotNull() if prefix is None else column.startswith(prefix))
            known = F.when(F.col("topic") == topic, test).otherwise(known)
        return known

    def _learn(self, topic: str, value: str | None, key: str | None) -> None:
        """Remember the schema prefix of this record's value (and key)."""
        if value is not None:
            schema, prefix = _schema_prefix(value)
            if schema is None:
                raise ConfigError([
                    f"delta sink: the records of topic {topic!r} carry no value schema; the Delta sink "
                    "needs the Connect schema in every value (value.converter.schemas.enable=true, the "
                    "default) to know the columns and their types"])
            forms = self._value_forms.setdefault(topic, [])
            if all(p != prefix for p, _ in forms):
                forms.append((prefix, schema))
        if key is not None:
            schema, prefix = _schema_prefix(key)
            forms = self._key_forms.setdefault(topic, [])
            if schema is not None:
                fields = list(schema.get("fields") or [])
                entry: tuple[str | None, Any] = (prefix, (fields, True))
            else:  # key.converter.schemas.enable=false: the names from the JSON object, types from the row
                names = list(json.loads(key)) if key.startswith("{") else []
                entry = (None, (names, False))
            if all(p != entry[0] for p, _ in forms):
                forms.append(entry)

    # -- one topic ------------------------------------------------------------------------------

    def _topic(self, summary: _Summary, table: _Table | None) -> _Topic:
        def part(envelope: ct.Schema, name: str) -> ct.Schema | None:
            f = ct.field(envelope, name)
            return f if f is not None and f.get("type") == "struct" else None

        rows = [r for r in (part(e, "after") or part(e, "before") for e in summary.schemas) if r is not None]
        if not rows:
            raise ct.SchemaError(f"topic {summary.topic!r}: the value schema has no before/after struct; "
                                 "is it a Debezium change event?")
        row = ct.merge_structs(rows)
        sources = [s for s in (part(e, "source") for e in summary.schemas) if s is not None]
        txs = [s for s in (part(e, "transaction") for e in summary.schemas) if s is not None]
        key_fields: list[ct.Schema] = []
        wrapped = True
        forms = self._key_forms.get(summary.topic)
        if summary.keyed and forms:
            described, wrapped = forms[-1][1]  # the newest key schema
            if wrapped:
                key_fields = described
            else:
                key_fields = [ct.field(row, name) or {"type": "string", "field": name} for name in described]
            if table is not None and table.keys and [f["field"] for f in key_fields] != table.keys:
                log.warning("delta table for topic %s: the key changed from %s to %s; merging on the new key",
                            summary.topic, table.keys, [f["field"] for f in key_fields])
        names = [f["field"] for f in key_fields]
        not_null = bool(forms) and all(
            form_wrapped and [f["field"] for f in described] == names
            and all(f.get("optional") is False for f in described)
            for _, (described, form_wrapped) in forms or [])
        return _Topic(row, ct.merge_structs(sources) if sources else None, txs[-1] if txs else None,
                      key_fields, wrapped, not_null)

    def _write_topic(self, session: Any, events: Any, summary: _Summary, batch_id: int, app: str) -> None:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        table_path = self.table_path(summary.topic)
        table = self._table(session, table_path) if self.current else None
        topic = self._topic(summary, table)
        # keyless topics go to the change log only; a batch of only truncates has no key to see
        current = self.current and (bool(topic.key_fields) or table is not None)
        both = self.changelog and current and bool(topic.key_fields)
        persisted: list[Any] = []  # parsed (decoded) once, read by both writes

        def once(frame: Any) -> Any:
            if both:
                frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
                persisted.append(frame)
            return frame
        # the batch's events in the two forms they arrive in, each parsed into (position, op, ts_ms,
        # k, v): typed rows (Arrow IPC, already of the table's types) and JSON events
        parts: list[_Part] = []
        if summary.typed:
            with self._timed("typed"):
                records = events.filter(F.col(TYPED_ROWS).isNotNull())
                flat = once(self._typed_rows(records, topic))
                parsed = self._typed_envelopes(flat, records, topic) if self.changelog else None
                parts.append(_Part(parsed, ct.NATIVE, ":rows", flat=flat, records=records))
            events = events.filter(F.col(TYPED_ROWS).isNull())
        if summary.records > summary.typed:
            parts.append(_Part(once(self._json_events(events, topic, summary)), self.decimal_format, ""))
        try:
            if self.changelog:
                with self._timed("changelog"):
                    for part in parts:
                        self._append_changelog(session, part.parsed, topic, summary, batch_id, app, fmt=part.fmt,
                                               tag="changelog" + part.tag)
            if current:
                with self._timed("current"):
                    self._apply_current(session, parts, topic, summary, table, table_path, batch_id, app)
        finally:
            for frame in persisted:
                frame.unpersist()

    def _json_events(self, events: Any, topic: _Topic, summary: _Summary) -> Any:
        """JSON records parsed with their Connect schemas (values of :func:`ct.json_type`)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        fmt = self.decimal_format
        row_type = ct.json_type(topic.row, fmt)
        payload = [StructField("before", row_type), StructField("after", row_type), StructField("ts_ms", LongType())]
        if topic.source is not None:
            payload.append(StructField("source", ct.json_type(topic.source, fmt)))
        if topic.transaction is not None:
            payload.append(StructField("transaction", ct.json_type(topic.transaction, fmt)))
        value_type = StructType([StructField("payload", StructType(payload))])
        value = F.from_json("value", value_type)["payload"]
        if summary.bare:
            value = F.when(F.col("value").startswith(ENVELOPE_PREFIX), value).otherwise(
                F.from_json("value", StructType(payload)))
        key_struct = StructType([StructField(f["field"], ct.json_type(f, fmt)) for f in topic.key_fields])
        key_type = StructType([StructField("payload", key_struct)]) if topic.key_wrapped else key_struct
        parsed = events.select(
            "position", "op", "ts_ms",
            (F.from_json("key", key_type).alias("k") if topic.key_fields else F.lit(None).alias("k")),
            value.alias("v"))
        if topic.key_fields and topic.key_wrapped:
            parsed = parsed.withColumn("k", F.col("k")["payload"])
        return parsed

    # -- typed rows ----------------------------------------------------------------------------

    def _typed_rows(self, records: Any, topic: _Topic) -> Any:
        """Typed rows (Arrow IPC in ``typed_rows``: snapshot chunks, see
        ``headwater.connectors.postgres.typed_snapshot``, and streamed row changes, see
        ``typed_changes``), decoded in the executors: the table's columns, already of their stored
        types, and typed_snapshot's row columns (position, op, times, …)."""
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        from headwater.connectors.postgres import typed_snapshot as ts

        fmt = self.decimal_format
        extra = [(ts.POSITION, StringType()), (ts.MARKER, StringType()), (ts.TS_US, LongType()),
                 (ts.LSN, LongType()), (ts.TXID, LongType()), (ts.OP, StringType()),
                 (ts.LAST_COMMIT_LSN, LongType()), (ts.EVENT_MS, LongType())]
        if not self.changelog:  # the current-state table's merge reads no more (Spark cannot prune a mapInArrow)
            extra = [(name, kind) for name, kind in extra if name in (ts.POSITION, ts.OP, ts.TS_US)]
        flat = StructType([StructField(f["field"], ct.spark_type(f, fmt), True) for f in topic.row["fields"]]
                          + [StructField(name, kind, True) for name, kind in extra])
        return records.select(TYPED_ROWS).mapInArrow(_IpcDecoder(flat), flat)

    def _typed_envelopes(self, rows: Any, records: Any, topic: _Topic) -> Any:
        """Typed rows (:meth:`_typed_rows`) given the event fields the events would carry: position
        and op, ``before``/``after`` (a delete's row is its before), ``source`` from the table's
        template record plus each row's snapshot marker, times, LSN, transaction id and sequence.
        Parsed like the JSON events, with values already of their stored types."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructField, StructType

        from headwater.connectors.postgres import typed_snapshot as ts

        fmt = self.decimal_format
        fields = list(topic.row["fields"])
        template = records.select("value").first()
        envelope = json.loads(template["value"])["payload"] if template is not None else {}
        constant = envelope.get("source") or {}

        def col(name: str) -> Any:
            return F.col(quote(name))

        ts_us, lsn, last = col(ts.TS_US), col(ts.LSN), col(ts.LAST_COMMIT_LSN)
        op = F.coalesce(col(ts.OP), F.lit("r"))
        sequence = F.concat(F.lit("["), F.coalesce(F.concat(F.lit('"'), last.cast("string"), F.lit('"')),
                                                   F.lit("null")),
                            F.lit(","), F.coalesce(F.concat(F.lit('"'), lsn.cast("string"), F.lit('"')), F.lit("null")),
                            F.lit("]"))
        per_row = {"snapshot": F.coalesce(col(ts.MARKER), F.lit(constant.get("snapshot"))),
                   "ts_ms": F.floor(ts_us / 1000), "ts_us": ts_us, "ts_ns": ts_us * 1000, "lsn": lsn,
                   "txId": col(ts.TXID), "sequence": sequence}

        def source_column(f: ct.Schema) -> Any:
            name = f["field"]
            value = per_row[name] if name in per_row else F.lit(constant.get(name))
            return value.cast(ct.json_type(f, fmt)).alias(name)

        row_type = StructType([StructField(f["field"], ct.spark_type(f, fmt), True) for f in fields])
        row = F.struct(*[col(f["field"]) for f in fields])
        deleted = op == "d"
        payload = [F.when(deleted, row).otherwise(F.lit(None).cast(row_type)).alias("before"),
                   F.when(deleted, F.lit(None).cast(row_type)).otherwise(row).alias("after"),
                   F.coalesce(col(ts.EVENT_MS), F.floor(ts_us / 1000)).cast("BIGINT").alias("ts_ms")]
        if topic.source is not None:
            payload.append(F.struct(*[source_column(f) for f in topic.source["fields"]]).alias("source"))
        if topic.transaction is not None:
            payload.append(F.lit(None).cast(ct.json_type(topic.transaction, fmt)).alias("transaction"))
        key = (F.struct(*[col(f["field"]) for f in topic.key_fields]).alias("k") if topic.key_fields
               else F.lit(None).alias("k"))
        return rows.select(col(ts.POSITION).alias("position"), op.alias("op"),
                           F.floor(ts_us / 1000).cast("BIGINT").alias("ts_ms"), key, F.struct(*payload).alias("v"))

    # -- change log ----------------------------------------------------------------------------

    def _append_changelog(self, session: Any, parsed: Any, topic: _Topic, summary: _Summary, batch_id: int,
                          app: str, fmt: str | None = None, tag: str = "changelog") -> None:
        from pyspark.sql import functions as F

        fmt = fmt or self.decimal_format

        def source_field(name: str, sql_type: str, alias: str) -> Any:
            if topic.source is not None and ct.field(topic.source, name) is not None:
                return F.expr(f"CAST(v.source.{quote(name)} AS {sql_type})").alias(alias)
            return F.lit(None).cast(sql_type).alias(alias)

        columns = [
            F.col("position"), F.col("op"), F.col("ts_ms").alias("source_ts_ms"),
            F.expr("timestamp_millis(ts_ms)").alias("commit_time"), source_field("txId", "BIGINT", "tx_id"),
            source_field("lsn", "BIGINT", "lsn"), source_field("snapshot", "STRING", "snapshot"),
        ]
        if topic.key_fields:
            key_struct = ct.convert_sql("k", {"type": "struct", "fields": topic.key_fields}, fmt)
            columns.append(F.expr(key_struct).alias("key"))
        columns += [F.expr(ct.convert_sql("v.before", topic.row, fmt)).alias("before"),
                    F.expr(ct.convert_sql("v.after", topic.row, fmt)).alias("after")]
        if topic.source is not None:
            columns.append(F.expr(ct.convert_sql("v.source", topic.source, fmt)).alias("source"))
        if topic.transaction is not None:
            columns.append(F.expr(ct.convert_sql("v.transaction", topic.transaction, fmt)).alias("transaction"))
        columns += [F.col("v.ts_ms").alias("ts_ms"), F.lit(batch_id).cast("BIGINT").alias("batch_id")]
        path = self.changelog_path(summary.topic)
        (parsed.select(*columns).write.format("delta").mode("append")
         .option("mergeSchema", "true").option("txnAppId", f"{app}:{tag}").option("txnVersion", str(batch_id))
         .save(path))
        self._register(session, summary.topic + CHANGELOG_SUFFIX, path)

    # -- current state -------------------------------------------------------------------------

    def _table(self, session: Any, path: str) -> _Table | None:
        if path in self._tables:
            return self._tables[path]
        described = self._described_by_log(path)
        if described is None:
            from delta.tables import DeltaTable

            if not DeltaTable.isDeltaTable(session, path):
                return None
            detail = DeltaTable.forPath(session, path).detail().select("properties").first()
            properties = dict(detail["properties"] or {}) if detail is not None else {}
            schema = session.read.format("delta").load(path).schema
        elif described is _NO_TABLE:
            return None
        else:
            properties, schema = described
        keys = json.loads(properties.get(KEY_PROPERTY, "[]"))
        table = _Table({f.name: f.dataType for f in schema.fields}, keys,
                       properties.get("delta.columnMapping.mode", "none") != "none",
                       change_feed=properties.get("delta.enableChangeDataFeed", "false").lower() == "true")
        self._tables[path] = table
        return table

    @staticmethod
    def _described_by_log(path: str) -> Any:
        """(properties, schema) of a local table without column mapping, read from its log by
        delta-rs; _NO_TABLE when there is none; None when Spark has to tell (not a local path,
        column mapping — Spark's schema is the logical one —, or a log delta-rs cannot read)."""
        from deltalake.exceptions import DeltaError
        from pyspark.sql.types import StructType

        from headwater.spark.sinks import delta_files

        directory = delta_files.local_directory(path)
        if directory is None:
            return None
        try:
            described = delta_files.describe(directory)
        except (DeltaError, OSError) as exc:
            log.debug("delta table %s: read through Spark (delta-rs: %s)", path, exc)
            return None
        if described is None:
            return _NO_TABLE
        configuration, schema = described
        if configuration.get("delta.columnMapping.mode", "none") != "none":
            return None
        return ({k: v for k, v in configuration.items() if v is not None},
                StructType.fromJson(json.loads(schema)))

    def _ensure_table(self, session: Any, path: str, topic: _Topic, table: _Table | None, name: str) -> _Table:
        """Create the table, or add the columns the source schema gained."""
        from delta.tables import DeltaTable
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        fmt = self.decimal_format
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
            if not self._create_by_files(session, path, StructType(fields), properties, mapped):
                builder = DeltaTable.createIfNotExists(session).location(path).addColumns(StructType(fields))
                for key, value in properties.items():
                    builder = builder.property(key, value)
                if mapped:
                    builder = (builder.property("delta.columnMapping.mode", "name")
                               .property("delta.minReaderVersion", "2").property("delta.minWriterVersion", "5"))
                builder.execute()
            # what was just created (no need to read it back); "empty" lets the first write append
            feed = session.conf.get("spark.databricks.delta.properties.defaults.enableChangeDataFeed", "false")
            table = _Table({f.name: f.dataType for f in fields}, [f["field"] for f in topic.key_fields], mapped,
                           empty=True, change_feed=feed.strip().lower() == "true")
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
            table = self._table(session, path)
            assert table is not None
            table.empty = empty
        return table

    def _create_by_files(self, session: Any, path: str, schema: Any, properties: dict[str, str], mapped: bool) -> bool:
        """Create the table with delta-rs where its files may be written that way (see
        :meth:`_file_target`) and Spark would create exactly that table: plain column types and
        nothing the session adds to new tables (``spark.databricks.delta.properties.defaults.*``,
        protocol versions). False, having created nothing, otherwise."""
        from headwater.spark.sinks import delta_files

        directory = delta_files.local_directory(path) if self.files and not mapped else None
        if directory is None or not delta_files.plain_schema(schema):
            return False
        if any(key.startswith(_SESSION_TABLE_DEFAULTS) for key in session.conf.getAll):
            return False
        delta_files.create(directory, schema, properties)
        return True

    def _apply_current(self, session: Any, parts: list[_Part], topic: _Topic, summary: _Summary,
                       table: _Table | None, path: str, batch_id: int, app: str) -> _Table | None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        if summary.last_truncate is not None and table is not None:
            DeltaTable.forPath(session, path).delete(F.col(POSITION) < F.lit(summary.last_truncate))
        if summary.events == 0 or not topic.key_fields:
            return table
        with self._timed("current.table"):
            table = self._ensure_table(session, path, topic, table, summary.topic)
        merge_app = f"{app}:merge"
        if table.empty and self._append_snapshot_files(session, parts, summary, table, path, merge_app, batch_id):
            table.empty = False
            return table
        source, columns, toast = self._merge_source(parts, topic, summary)
        values = {quote(f["field"]): f"s.__hw_c{i}" for i, f in enumerate(columns)}
        values.update({quote(POSITION): "s.__hw_position", quote(OP): "s.__hw_op", quote(TS_MS): "s.__hw_ts_ms"})
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
                updates = dict(values)
                for i in toast:
                    name = quote(columns[i]["field"])
                    updates[name] = f"CASE WHEN s.__hw_keep_{i} THEN t.{name} ELSE s.__hw_c{i} END"
                equal = "=" if topic.key_not_null else "<=>"
                condition = " AND ".join(f"t.{quote(f['field'])} {equal} s.__hw_key_{i}"
                                         for i, f in enumerate(topic.key_fields))
                newer = f"s.__hw_position > t.{quote(POSITION)}"
                (DeltaTable.forPath(session, path).alias("t").merge(source.alias("s"), condition)
                 .whenMatchedDelete(condition=f"s.__hw_op = 'd' AND {newer}")
                 .whenMatchedUpdate(condition=f"s.__hw_op <> 'd' AND {newer}", set=updates)
                 .whenNotMatchedInsert(condition="s.__hw_op <> 'd'", values=values)
                 .execute())
        table.empty = False
        return table

    def _append_snapshot_files(self, session: Any, parts: list[_Part], summary: _Summary, table: _Table, path: str,
                               app: str, batch_id: int) -> bool:
        """A batch of snapshot reads only, all typed rows, into a table this sink has just
        created: the executors write the Parquet files themselves and delta-rs commits them (see
        :mod:`headwater.spark.sinks.delta_files`). False, having written nothing, when the batch
        or the table does not allow it (then Spark's writer appends)."""
        from pyspark.sql.types import StructField, StructType

        from headwater.spark.sinks import delta_files

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
            # set-up) paid a few times instead of once a chunk (1M benchmark rows in 10 chunks on
            # 2 cores: 0.7–1.1 s instead of 1.3–1.9 s)
            records = parts[0].records.select(TYPED_ROWS).coalesce(session.sparkContext.defaultParallelism)
            written = records.mapInArrow(writer, delta_files.FILE_COLUMNS).collect()
        with self._timed("current.commit"):
            files = [delta_files.WrittenFile(r["path"], r["size"], r["rows"], r["stats"]) for r in written]
            delta_files.commit(directory, files, app, batch_id)
        return True

    def _file_target(self, path: str, table: _Table) -> tuple[str, dict[str, str | None]] | None:
        """The table's directory and configuration when the executors may write its files and
        delta-rs commit them (:mod:`~headwater.spark.sinks.delta_files`), else None."""
        from headwater.spark.sinks import delta_files

        directory = delta_files.local_directory(path) if self.files and not table.mapped else None
        configuration = delta_files.writable_configuration(directory) if directory is not None else None
        return (directory, configuration) if directory is not None and configuration is not None else None

    def _rewrites(self, session: Any, path: str, summary: _Summary) -> bool:
        """Whether this batch rewrites the table rather than MERGE into it: its events other than
        creates (updates, deletes, snapshot reads of stored keys) reach `rewrite.fraction` of the
        rows stored (Delta counts them from the log's statistics, without reading data). Tables with
        Delta's change data feed always MERGE: a rewrite would record every row as changed."""
        from headwater.spark.sinks import delta_files

        touching = summary.events - summary.creates
        if self.rewrite_fraction == float("inf") or touching <= 0:
            return False
        # from the log's statistics: delta-rs reads them in milliseconds, Spark's count took 0.3 s
        directory = delta_files.local_directory(path)
        stored = delta_files.stored_rows(directory) if directory is not None else None
        if stored is None:
            stored = session.read.format("delta").load(path).count()
        return touching >= self.rewrite_fraction * stored

    def _rewrite(self, session: Any, path: str, topic: _Topic, table: _Table, source: Any,
                 columns: list[ct.Schema], toast: dict[int, str], app: str, batch_id: int) -> None:
        """What the MERGE of `_apply_current` does, as one full outer join of the stored rows with
        the batch's latest event per key, written over the table in one commit: an event applies
        when its key is new or its position is newer than the stored row's (a delete then drops
        the row, anything else takes the event's values; unchanged-TOAST columns keep the stored
        value); every other row stays as stored, columns the source no longer has included.

        Where the table allows it (as for a snapshot, see :meth:`_append_snapshot_files`) the
        executors write the result as Parquet and delta-rs commits it, replacing the files of the
        version read; otherwise Spark overwrites the table."""
        from pyspark.sql import functions as F

        from headwater.spark.sinks import delta_files

        file_target = self._file_target(path, table)
        if file_target is not None:
            from deltalake import DeltaTable

            version = DeltaTable(file_target[0]).version()
            # the version whose files the commit replaces, exactly
            stored = session.read.format("delta").option("versionAsOf", version).load(path)
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
            files = [delta_files.WrittenFile(r["path"], r["size"], r["rows"], r["stats"]) for r in written]
            delta_files.commit(directory, files, app, batch_id, replacing=version)

    def _merge_source(self, parts: list[_Part], topic: _Topic,
                      summary: _Summary) -> tuple[Any, list[ct.Schema], dict[int, str]]:
        """The latest event per key, converted: __hw_key_<i>, __hw_position/op/ts_ms, __hw_c<i> per
        column and, for columns that may hold a TOAST placeholder, __hw_keep_<i> (keep the stored
        value). The parts (typed rows, JSON events) are converted to the stored types first and
        reduced together, so the order between them is the positions' alone. A batch of snapshot
        reads has every key once: there is nothing to reduce."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        columns = list(topic.row["fields"])
        stored = self.decimal_format
        toast: dict[int, str] = {}
        if summary.updates and summary.placeholders:  # only JSON events carry placeholders
            for i, f in enumerate(columns):
                check = ct.placeholder_sql(f"v.after.{quote(f['field'])}", f, self.placeholder)
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
        keys = [F.col(f"__hw_key_{i}") for i in range(len(topic.key_fields))]
        values = [F.col(f"__hw_c{i}") for i in range(len(columns))]
        if summary.reads == summary.events and not toast:
            return rows.select(*keys, "__hw_position", "__hw_op", "__hw_ts_ms", *values), columns, toast
        if not toast:
            # the newest event per key as a window's first row: one sort by (key, position), whose
            # order the rewrite's join by key then reuses. max_by over a struct of the row sorts
            # twice (a partial and a final sort aggregation) and builds the struct: 1M rows took
            # 2.0–2.6 s that way against 1.5–1.7 s (bench/README.md)
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

    def _flat_merge_rows(self, rows: Any, topic: _Topic, columns: list[ct.Schema], toast: dict[int, str],
                         summary: _Summary) -> Any:
        """Typed rows (:meth:`_typed_rows`) in :meth:`_merge_source`'s columns, taken straight
        from their flat columns (the values are already of their stored types; typed rows are
        never truncates and never hold a TOAST placeholder)."""
        from pyspark.sql import functions as F

        from headwater.connectors.postgres import typed_snapshot as ts

        def col(name: str) -> Any:
            return F.col(quote(name))
        if summary.last_truncate is not None:
            rows = rows.filter(col(ts.POSITION) > F.lit(summary.last_truncate))
        stored = self.decimal_format
        selected = [col(f["field"]).cast(ct.spark_type(f, stored)).alias(f"__hw_key_{i}")
                    for i, f in enumerate(topic.key_fields)]
        selected += [col(ts.POSITION).alias("__hw_position"), F.coalesce(col(ts.OP), F.lit("r")).alias("__hw_op"),
                     F.floor(col(ts.TS_US) / 1000).cast("BIGINT").alias("__hw_ts_ms")]
        selected += [col(f["field"]).cast(ct.spark_type(f, stored)).alias(f"__hw_c{i}") for i, f in enumerate(columns)]
        selected += [F.lit(False).alias(f"__hw_placeholder_{i}") for i in toast]
        return rows.select(*selected)

    # -- catalog ---------------------------------------------------------------------------------

    def _register(self, session: Any, topic_name: str, path: str) -> None:
        if not self.table_prefix or path in self._registered:
            return
        prefix = self.table_prefix
        database, _, name_prefix = prefix.rpartition(".")
        name = quote(name_prefix + re.sub(r"[^0-9A-Za-z_]", "_", topic_name))
        full = f"{quote(database)}.{name}" if database else name
        session.sql(f"CREATE TABLE IF NOT EXISTS {full} USING DELTA LOCATION {sql_string(path)}")
        self._registered.add(path)


class _IpcDecoder:
    """``mapInArrow`` function: the Arrow IPC streams of ``snapshot_rows`` → batches of `schema`
    (columns by name; one the rows lack — a column added since — is NULL)."""

    def __init__(self, schema: Any) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.schema = to_arrow_schema(schema, timezone="UTC")  # Spark exchanges instants in UTC

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from headwater.connectors.postgres.typed_snapshot import from_ipc

        target = self.schema
        for part in from_ipc(batches):
            names = set(part.schema.names)
            arrays = [part.column(f.name).cast(f.type) if f.name in names
                      else pa.nulls(part.num_rows, f.type) for f in target]
            yield pa.RecordBatch.from_arrays(arrays, schema=target)


_NO_TABLE = object()  # _described_by_log: the log says there is no table
# session settings that change what Spark puts into a new table (properties, protocol)
_SESSION_TABLE_DEFAULTS = ("spark.databricks.delta.properties.defaults.", "spark.databricks.delta.protocol.")


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


def _schema_prefix(text: str) -> tuple[Any, str]:
    """(schema, text up to and including ',"payload":') of a converter value with schemas, or
    (None, "") when the text does not start with a schema."""
    if not text.startswith(ENVELOPE_PREFIX):
        return None, ""
    try:
        schema, end = json.JSONDecoder().raw_decode(text, len(ENVELOPE_PREFIX))
    except ValueError:
        return None, ""
    tail = ',"payload":'
    if not isinstance(schema, dict) or not text.startswith(tail, end):
        return None, ""
    return schema, text[:end + len(tail)]


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


def _absolute(path: str) -> str:
    """Local paths made absolute (executors may run elsewhere); URIs (s3a://, abfss://…) kept."""
    import os

    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path) or path.startswith("file:"):
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path))


__all__ = ["CHANGELOG_SUFFIX", "OP", "POSITION", "TS_MS", "DeltaSink"]
