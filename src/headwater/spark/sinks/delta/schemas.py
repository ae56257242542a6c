"""Batch schemas: what the Delta sink learns of each topic from the records of a micro-batch.

The value and key schemas (Connect schemas, as the JSON converter writes them with
``schemas.enable=true``) give a topic's columns and key; they are learnt once per schema version
and recognised afterwards by a prefix comparison (:meth:`BatchSchemas.summaries`). One pass over
the batch also counts what steers the writes (:class:`Summary`); :meth:`BatchSchemas.topic`
merges a topic's schemas into the columns its writes take (:class:`Topic`). The connector that
wrote a topic's events (``source.connector``) is learnt with its first schema: the change log
takes its own columns from the connector's description.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from headwater.config import ConfigError
from headwater.serialization.json import ENVELOPE_START
from headwater.spark.sinks import connect_types as ct

log = logging.getLogger(__name__)

DATA_OPS = ("c", "u", "d", "r", "t")
# what a value with its Connect schema starts with; values of the source's valueFormat=payload do
# not, and their schemas come in schema records (no op, no key, value {"schema": …, "payload": null})
ENVELOPE_PREFIX = ENVELOPE_START.decode()
TYPED_ROWS = "typed_rows"  # the source column of typed rows (Arrow IPC): snapshot rows, streamed row changes
TYPED_COUNT = "typed_row_count"  # how many rows such a record carries


@dataclass
class Summary:
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
    connector: str | None = None  # source.connector of the topic's events, when known


@dataclass
class Topic:
    """A topic's merged schemas for this batch."""

    row: ct.Schema  # the before/after struct
    source: ct.Schema | None
    transaction: ct.Schema | None
    key_fields: list[ct.Schema]  # the key's fields, typed
    key_wrapped: bool  # key JSON carries {"schema","payload"}
    # every key schema seen for the topic has these fields, none optional (a primary key): keys are
    # matched with `=` rather than `<=>`, which Spark plans as a join on other expressions and so
    # shuffles the batch's latest-per-key rows once more (bench/README.md)
    key_not_null: bool = False


class BatchSchemas:
    """What the sink has learnt of each topic's records (cached per sink, across batches)."""

    def __init__(self, placeholder: bytes) -> None:
        self.placeholder = placeholder  # unavailable.value.placeholder, as values carry it
        # per topic: the schema prefixes seen (value: text up to ',"payload":' → envelope schema;
        # key: → (key fields, wrapped)); None as prefix: any key (keys without schemas)
        self._value_forms: dict[str, list[tuple[str | None, Any]]] = {}
        self._key_forms: dict[str, list[tuple[str | None, Any]]] = {}
        self._connectors: dict[str, str | None] = {}  # topic → source.connector (None: its records do not say)

    def summaries(self, data: Any, schema_records: Any) -> dict[str, Summary]:
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
                # sample and the second pass a new table's first batch took (bench/README.md)
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
                        self._learn_connector(topic, found)
                        found = None  # a payload (sampled for its key): its schema came in a schema record
                    self._learn(topic, found, sample[0]["key"] if sample[0]["op"] != "t" else None)
        else:
            raise RuntimeError("delta sink: the record schemas of a batch could not be identified")
        for r in rows:
            # values without a schema, whose schemas came in schema records (no payload): one of
            # them says which connector wrote the topic's events, once per topic
            if r["topic"] not in self._connectors:
                sample = data.filter(F.col("topic") == r["topic"]).select("value").limit(1).collect()
                if sample:
                    self._learn_connector(r["topic"], sample[0]["value"], last_try=True)
        summaries: dict[str, Summary] = {}
        for r in rows:
            topic = r["topic"]
            summaries[topic] = Summary(topic, [schema for _, schema in self._value_forms.get(topic, [])],
                                       events=r["events"], updates=r["updates"], creates=r["creates"],
                                       reads=r["reads"], placeholders=r["placeholders"], keyed=r["keyed"] > 0,
                                       records=r["records"], typed=r["typed"], bare=r["bare"],
                                       connector=self._connectors.get(topic))
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

    def _learn_connector(self, topic: str, value: str, last_try: bool = False) -> None:
        """Remember which connector wrote the topic's events (``source.connector``) from a value
        with its payload (with its schema or without); with `last_try`, remember too that this
        value does not say."""
        if topic in self._connectors:
            return
        schema, prefix = schema_prefix(value)
        try:
            payload = json.JSONDecoder().raw_decode(value, len(prefix))[0] if schema is not None else json.loads(value)
        except ValueError:
            payload = None
        source = payload.get("source") if isinstance(payload, dict) else None
        name = source.get("connector") if isinstance(source, dict) else None
        if isinstance(name, str) or last_try:
            self._connectors[topic] = name if isinstance(name, str) else None

    def _learn(self, topic: str, value: str | None, key: str | None) -> None:
        """Remember the schema prefix of this record's value (and key)."""
        if value is not None:
            schema, prefix = schema_prefix(value)
            if schema is None:
                raise ConfigError([
                    f"delta sink: the records of topic {topic!r} carry no value schema; the Delta sink "
                    "needs the Connect schema in every value (value.converter.schemas.enable=true, the "
                    "default) to know the columns and their types"])
            forms = self._value_forms.setdefault(topic, [])
            if all(p != prefix for p, _ in forms):
                forms.append((prefix, schema))
            self._learn_connector(topic, value)
        if key is not None:
            schema, prefix = schema_prefix(key)
            forms = self._key_forms.setdefault(topic, [])
            if schema is not None:
                fields = list(schema.get("fields") or [])
                entry: tuple[str | None, Any] = (prefix, (fields, True))
            else:  # key.converter.schemas.enable=false: the names from the JSON object, types from the row
                names = list(json.loads(key)) if key.startswith("{") else []
                entry = (None, (names, False))
            if all(p != entry[0] for p, _ in forms):
                forms.append(entry)

    def topic(self, summary: Summary, stored_keys: list[str] | None) -> Topic:
        """The columns of the topic's writes in this batch: its value schemas merged (every column
        any of them has), the newest key schema; `stored_keys`: the current-state table's key."""
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
            if stored_keys and [f["field"] for f in key_fields] != stored_keys:
                log.warning("delta table for topic %s: the key changed from %s to %s; merging on the new key",
                            summary.topic, stored_keys, [f["field"] for f in key_fields])
        names = [f["field"] for f in key_fields]
        not_null = bool(forms) and all(
            form_wrapped and [f["field"] for f in described] == names
            and all(f.get("optional") is False for f in described)
            for _, (described, form_wrapped) in forms or [])
        return Topic(row, ct.merge_structs(sources) if sources else None, txs[-1] if txs else None,
                     key_fields, wrapped, not_null)


def schema_prefix(text: str) -> tuple[Any, str]:
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
