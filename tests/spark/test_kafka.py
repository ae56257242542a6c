"""Kafka both ways, against a real Apache Kafka broker (KRaft) and Spark's Kafka connector:

- KafkaSink writes the records as Debezium would (topic, key and value bytes, tombstones, headers,
  the key's partition by Kafka's default partitioner), in position order per key;
- read_debezium_topics turns Debezium-format topics (here: real Debezium output from the golden
  files) back into the headwater source's records;
- PostgreSQL → headwater source → KafkaSink: the topics hold what Debezium's golden file holds,
  in order per key.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from headwater.config import ConfigError
from headwater.spark.kafka_topics import debezium_records, kafka_source_options, read_debezium_topics
from headwater.spark.pipeline import Pipeline, PipelineSpec, SinkSpec
from headwater.spark.sinks.kafka import KafkaSink, producer_options
from headwater.spark.source import SCHEMA
from helpers.capture import spark_properties
from helpers.conformance import assert_events_equal, normalize, read_props, serialized
from helpers.spark_capture import RunningPipeline, wait_first_batch

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"
SCENARIOS = CONFORMANCE / "scenarios"
GOLDEN = CONFORMANCE / "golden"
PARTITIONS = 3  # the kafka fixture's partitions per topic


def kafka_position(partition: int, offset: int) -> str:
    """What the Kafka topics source writes in `position`: partition, offset, 8 zero digits."""
    return f"{partition:016X}{offset:016X}{0:08X}"


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as an unsigned 32-bit value."""
    m, length = 0x5BD1E995, len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = data[length - length % 4:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


def default_partition(key: bytes, partitions: int = PARTITIONS) -> int:
    """The partition Kafka's default partitioner (so Debezium's Kafka Connect producer) picks for a key."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def test_murmur2_matches_kafka():
    # values of org.apache.kafka.common.utils.UtilsTest.testMurmur2 (as signed Java ints)
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829, b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
             b"abc": 479470107}
    for data, want in cases.items():
        assert murmur2(data) == want & 0xFFFFFFFF, data


def golden_lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (GOLDEN / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def envelope(line: dict[str, Any]) -> dict[str, Any] | None:
    value = line["value"]
    return value.get("payload") if isinstance(value, dict) and "schema" in value else value


def source_rows(lines: list[dict[str, Any]], topic_prefix: str) -> list[tuple[Any, ...]]:
    """Golden lines as rows of the headwater source (topics renamed to a prefix of this test)."""
    rows = []
    for i, line in enumerate(lines):
        env = envelope(line)
        src = (env or {}).get("source") or {}
        rows.append((line["topic"].replace("dbserver1.", f"{topic_prefix}.", 1),
                     None if line["key"] is None else compact(line["key"]),
                     None if line["value"] is None else compact(line["value"]),
                     [(h["key"], compact(h["value"]).encode()) for h in line["headers"]],
                     (env or {}).get("op"), kafka_position(1, i), src.get("ts_ms"), src.get("db"),
                     src.get("schema"), src.get("table"), None, None))
    return rows


def read_topics(spark: Any, kafka: Any, topics: list[str]) -> list[Any]:
    """Everything in the topics (batch read), sorted by topic, partition, offset."""
    options = kafka_source_options(kafka.bootstrap_servers, topics)
    rows = spark.read.format("kafka").options(**options).load().collect()
    return sorted(rows, key=lambda r: (r.topic, r.partition, r.offset))


def per_key(records: list[tuple[str, Any, Any]]) -> dict[tuple[str, str], list[Any]]:
    """(topic, key) → that key's records in order."""
    out: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for topic, key, record in records:
        out[(topic, json.dumps(key, sort_keys=True))].append(record)
    return dict(out)


def kafka_line(row: Any) -> dict[str, Any]:
    """A Kafka record (Spark's Kafka source row) as a conformance line."""
    return {"topic": row.topic,
            "key": None if row.key is None else json.loads(bytes(row.key)),
            "value": None if row.value is None else json.loads(bytes(row.value)),
            "headers": [{"key": h.key, "value": json.loads(bytes(h.value))} for h in (row.headers or [])]}


# --------------------------------------------------------------------------------------------------
# options


def test_sink_options_are_kafka_producer_settings(spark):
    options = producer_options("h:1", {"kafka.compression.type": "lz4", "kafka.acks": "1", "partitions": "2"})
    assert options == {"kafka.enable.idempotence": "true", "kafka.acks": "1", "kafka.compression.type": "lz4",
                       "kafka.bootstrap.servers": "h:1"}
    assert KafkaSink(spark, "h:1", {"partitions": "2"}).partitions == 2
    assert KafkaSink(spark, "h:1", {"partitions": "2"}, partitions=5).partitions == 5
    with pytest.raises(ConfigError, match=r"unknown option.*compression\.type"):
        producer_options("h:1", {"compression.type": "lz4"})
    with pytest.raises(ConfigError, match=r"kafka\.value\.serializer cannot be set"):
        producer_options("h:1", {"kafka.value.serializer": "x"})
    with pytest.raises(ConfigError, match=r"bootstrap\.servers is empty"):
        producer_options(" ", None)
    with pytest.raises(ConfigError, match="contradicts"):
        producer_options("h:1", {"kafka.bootstrap.servers": "h:2"})
    with pytest.raises(ConfigError, match="partitions='0'"):
        KafkaSink(spark, "h:1", {"partitions": "0"})


def test_pipeline_file_kafka_sink(spark, tmp_path):
    from headwater.spark.pipeline import build_sinks, parse_pipeline

    spec = parse_pipeline({"source": {"database.hostname": "db"}, "checkpoint": "c",
                           "sinks": [{"type": "kafka", "bootstrap.servers": "h:1", "kafka.linger.ms": 5,
                                      "partitions": 2}]}, tmp_path)
    [sink] = build_sinks(spec, spark)
    assert isinstance(sink, KafkaSink)
    assert (sink.bootstrap_servers, sink.partitions, sink.options["kafka.linger.ms"]) == ("h:1", 2, "5")


def test_reader_options():
    assert kafka_source_options("h:1", ["a", "b"], options={"maxOffsetsPerTrigger": "10"}) == {
        "maxOffsetsPerTrigger": "10", "kafka.bootstrap.servers": "h:1", "startingOffsets": "earliest",
        "includeHeaders": "true", "subscribe": "a,b"}
    assert kafka_source_options("h:1", pattern=r"db\..*", starting_offsets="latest")["subscribePattern"] == r"db\..*"
    with pytest.raises(ConfigError, match="either topics"):
        kafka_source_options("h:1", "a", pattern="b")
    with pytest.raises(ConfigError, match="either topics"):
        kafka_source_options("h:1")
    with pytest.raises(ConfigError, match="subscribe is set by the arguments"):
        kafka_source_options("h:1", "a", options={"subscribe": "b"})


# --------------------------------------------------------------------------------------------------
# KafkaSink with Debezium's golden records


def test_sink_writes_debezium_records_in_order_per_key(spark, kafka):
    lines = golden_lines("basic_crud") + golden_lines("pk_change")
    prefix = f"sink{uuid.uuid4().hex[:8]}"
    rows = source_rows(lines, prefix)
    # reversed, so that records only come out in order if the sink orders them by position
    batch = spark.createDataFrame(list(reversed(rows)), SCHEMA)
    KafkaSink(spark, kafka.bootstrap_servers).write(batch, 0)

    topics = sorted({r[0] for r in rows})
    got = read_topics(spark, kafka, topics)
    assert len(got) == len(rows)
    for record in got:
        if record.key is not None:
            assert record.partition == default_partition(bytes(record.key)), "not Kafka's partition for the key"
    want_bytes = {(r[0], r[1], r[2], tuple((k, v) for k, v in r[3])) for r in rows}
    got_bytes = {(r.topic, None if r.key is None else bytes(r.key).decode(),
                  None if r.value is None else bytes(r.value).decode(),
                  tuple((h.key, bytes(h.value)) for h in (r.headers or []))) for r in got}
    assert got_bytes == want_bytes  # the exact bytes: keys, values, tombstones (NULL value), headers
    assert sum(1 for r in got if r.value is None) == sum(1 for line in lines if line["value"] is None) > 0
    assert any(r.headers for r in got), "the key-change headers are missing"

    want = per_key([(r[0], json.loads(r[1]), r[5]) for r in rows])
    positions = {(r[0], r[1], r[2]): r[5] for r in rows}

    def position(r: Any) -> str:
        return positions[(r.topic, bytes(r.key).decode(), None if r.value is None else bytes(r.value).decode())]

    got_order = per_key([(r.topic, json.loads(bytes(r.key)), position(r)) for r in got])
    assert got_order == want  # every key's records in position order


# --------------------------------------------------------------------------------------------------
# read_debezium_topics with real Debezium output


def produce(spark: Any, kafka: Any, rows: list[tuple[Any, ...]]) -> None:
    """A plain Spark batch write of (topic, key, value, headers), one task: the file order."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(rows, SCHEMA).coalesce(1)
    (df.select("topic", F.col("key").cast("binary").alias("key"), F.col("value").cast("binary").alias("value"),
               "headers")
     .write.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers).save())


def collect_stream(df: Any, checkpoint: Path) -> list[Any]:
    batches: list[Any] = []
    query = (df.writeStream.foreachBatch(lambda batch, _: batches.extend(batch.collect()))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    return batches


def test_read_debezium_topics_parses_debezium_records(spark, kafka, tmp_path):
    lines = golden_lines("basic_crud") + golden_lines("pk_change")
    prefix = f"read{uuid.uuid4().hex[:8]}"
    with_schemas = source_rows(lines, prefix)
    # the same records as the JSON converter writes them with schemas.enable=false
    plain_lines = [{**line, "key": envelope({"value": line["key"]}), "value": envelope(line)} for line in lines]
    without_schemas = source_rows(plain_lines, f"{prefix}plain")
    produce(spark, kafka, with_schemas + without_schemas)

    stream = read_debezium_topics(spark, kafka.bootstrap_servers, pattern=f"{prefix}(plain)?\\..*")
    assert stream.isStreaming
    assert stream.schema.simpleString() == spark.createDataFrame([], SCHEMA).schema.simpleString()
    got = collect_stream(stream, tmp_path / "checkpoint")
    assert len(got) == len(with_schemas) + len(without_schemas)

    expected = {(r[0], r[1], r[2]): r for r in with_schemas + without_schemas}
    for row in got:
        want = expected[(row.topic, row.key, row.value)]
        assert [(h.key, bytes(h.value)) for h in row.headers] == want[3]
        assert (row.op, row.ts_ms, row.source_db, row.source_schema, row.source_table) == want[4:5] + want[6:10], row
        assert len(row.position) == 40
    assert {row.op for row in got} == {"r", "c", "u", "d", None}
    assert sum(1 for row in got if row.value is None) == 2 * sum(1 for line in lines if line["value"] is None)

    # position orders the records of each key as Debezium produced them (Kafka partition + offset)
    got_order = per_key([(r.topic, json.loads(r.key), expected[(r.topic, r.key, r.value)][5])
                         for r in sorted(got, key=lambda r: r.position)])
    assert got_order == per_key([(r[0], json.loads(r[1]), r[5]) for r in with_schemas + without_schemas])


def test_debezium_records_position_is_partition_and_offset(spark, kafka):
    prefix = f"pos{uuid.uuid4().hex[:8]}"
    produce(spark, kafka, source_rows(golden_lines("basic_crud"), prefix))
    raw = (spark.read.format("kafka").options(**kafka_source_options(kafka.bootstrap_servers, pattern=f"{prefix}\\..*"))
           .load())
    kafka_rows = raw.collect()
    rows = debezium_records(raw).collect()  # a projection of the same scan: the same rows, in the same order
    assert len(rows) == len(kafka_rows) == 14
    for row, record in zip(rows, kafka_rows):
        assert (row.topic, row.key) == (record.topic, bytes(record.key).decode())
        assert row.position == kafka_position(record.partition, record.offset)


# --------------------------------------------------------------------------------------------------
# PostgreSQL → headwater source → KafkaSink → Kafka, compared with real Debezium


class KafkaPipeline:
    """A streaming query from the headwater source into Kafka through KafkaSink; notices a sentinel."""

    def __init__(self, spark: Any, kafka: Any, props: dict[str, str], checkpoint: Path,
                 crash_after: Callable[[Any], bool] | None = None, sentinel: str | None = None) -> None:
        self.sink = KafkaSink(spark, kafka.bootstrap_servers)
        self.sentinel = sentinel or f"__hw_sentinel_{uuid.uuid4().hex}"
        self.seen = threading.Event()
        self.crash_after = crash_after  # fail a batch after it was written (before Spark commits it)
        stream = spark.readStream.format("headwater").options(**props).load()
        self.query = (stream.writeStream.foreachBatch(self._write).option("checkpointLocation", str(checkpoint))
                      .trigger(processingTime="300 milliseconds").start())

    def _write(self, batch: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        batch.persist()  # written and searched: read the replication messages once
        try:
            self.sink.write(batch, batch_id)
            if self.crash_after is not None and self.crash_after(batch):
                raise RuntimeError(f"simulated crash after writing batch {batch_id}")
            if batch.filter(F.col("key").contains(self.sentinel)).limit(1).count():
                self.seen.set()
        finally:
            batch.unpersist()

    def wait_for_sentinel(self, db: Any, timeout: float = 180, emit: bool = True) -> None:
        if emit:
            db.execute("SELECT pg_logical_emit_message(false, %s, 'end')", (self.sentinel,))
        deadline = time.monotonic() + timeout
        while not self.seen.wait(0.2):
            if self.query.exception() is not None:
                raise AssertionError(f"the streaming query failed: {self.query.exception()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the sentinel did not reach Kafka within {timeout} s")

    def stop(self) -> None:
        self.query.stop()


@pytest.mark.parametrize("name", ["basic_crud", "pk_change"])
def test_postgres_to_kafka_matches_debezium(name, spark, kafka, pg_db, tmp_path):
    scenario = SCENARIOS / name
    pg_db.psql(scenario / "setup.sql")
    slot = f"hwk_{name}"
    props = spark_properties(pg_db, tmp_path, slot, **read_props(scenario / "props.txt"))
    pipeline = KafkaPipeline(spark, kafka, props, tmp_path / "checkpoint")
    try:
        wait_first_batch(pipeline.query)
        pg_db.psql(scenario / "workload.sql")
        pipeline.wait_for_sentinel(pg_db)
    finally:
        pipeline.stop()

    want_lines = [normalize.normalize_event(line) for line in golden_lines(name)]
    topics = sorted({line["topic"] for line in want_lines})  # not the message topic of the sentinels
    got_rows = read_topics(spark, kafka, topics)
    for row in got_rows:
        if row.key is not None:
            assert row.partition == default_partition(bytes(row.key)), "not Kafka's partition for the key"
    got_lines = [normalize.normalize_event(kafka_line(row)) for row in got_rows]
    got = per_key([(line["topic"], line["key"], line) for line in got_lines])
    want = per_key([(line["topic"], line["key"], line) for line in want_lines])
    assert got.keys() == want.keys()
    for topic_key, records in want.items():
        assert_events_equal(got[topic_key], records, topic_key)



def test_replayed_batch_keeps_every_change_in_order_per_key(spark, kafka, pg_db, tmp_path):
    """At least once: a batch that reached Kafka but failed before Spark committed it is written
    again after the restart; Kafka then holds every change, and each key's records in order."""
    from pyspark.sql import functions as F

    scenario = SCENARIOS / "basic_crud"
    pg_db.psql(scenario / "setup.sql")
    prefix = f"replay{uuid.uuid4().hex[:8]}"  # topics of their own; renamed back to compare
    slot = "hwk_replay"
    props = spark_properties(pg_db, tmp_path, slot, **{"topic.prefix": prefix, "slot.drop.on.stop": "false"})
    checkpoint = tmp_path / "checkpoint"
    crashed = threading.Event()

    def crash_once(batch: Any) -> bool:  # the first batch with an update, once
        if not crashed.is_set() and batch.filter(F.col("op") == "u").limit(1).count():
            crashed.set()
            return True
        return False

    first = KafkaPipeline(spark, kafka, props, checkpoint, crash_after=crash_once)
    try:
        wait_first_batch(first.query)
        pg_db.psql(scenario / "workload.sql")
        first.query.awaitTermination(180)
    except Exception as exc:  # the simulated crash ends the query
        assert "simulated crash" in str(exc)
    finally:
        first.stop()
    assert crashed.is_set()
    second = KafkaPipeline(spark, kafka, props, checkpoint)  # the same checkpoint: the batch is replayed
    try:
        second.wait_for_sentinel(pg_db)
    finally:
        second.stop()

    want_lines = [normalize.normalize_event(line) for line in golden_lines("basic_crud")]
    topics = sorted({line["topic"].replace("dbserver1.", f"{prefix}.", 1) for line in want_lines})
    got_rows = read_topics(spark, kafka, topics)
    got_lines = []
    for row in got_rows:
        line = kafka_line(row)
        line = json.loads(json.dumps(line).replace(prefix, "dbserver1"))  # the golden file's topic.prefix
        got_lines.append(normalize.normalize_event(line))
    assert len(got_lines) > len(want_lines), "no record was written twice: the replay did not happen"
    got = per_key([(line["topic"], line["key"], line) for line in got_lines])
    want = per_key([(line["topic"], line["key"], line) for line in want_lines])
    assert got.keys() == want.keys()
    for topic_key, records in want.items():
        seen = serialized(got[topic_key])  # strict: types and key order count
        firsts = list(dict.fromkeys(seen))  # each change in the order it first arrived
        assert firsts == serialized(records), topic_key
        assert seen[-1] == serialized(records)[-1], f"{topic_key}: the newest record is not the last"


def test_a_hung_broker_fails_the_batch_and_the_restarted_query_delivers_it(spark, kafka, pg_db, tmp_path, caplog):
    """The broker hangs (SIGSTOP) while `headwater pipeline` writes the snapshot: the producer
    gives up after its delivery timeout, the batch fails with that cause in one line, `run()`
    restarts the query from the checkpoint until the broker answers again, and the batch is then
    delivered."""
    pg_db.execute("CREATE TABLE hung (id int PRIMARY KEY, v text)")
    pg_db.execute("INSERT INTO hung SELECT g, 'row ' || g FROM generate_series(1, 20) g")
    prefix = f"hung{uuid.uuid4().hex[:8]}"
    props = spark_properties(pg_db, tmp_path, "hwk_hung", **{"topic.prefix": prefix,
                                                              "retriable.restart.connector.wait.ms": "200",
                                                              "errors.retry.delay.initial.ms": "200"})
    # a producer that gives up within seconds (the defaults: 2 minutes)
    sink = SinkSpec("kafka", {"bootstrap.servers": kafka.bootstrap_servers, "kafka.delivery.timeout.ms": "3000",
                              "kafka.request.timeout.ms": "1000", "kafka.max.block.ms": "3000"})
    spec = PipelineSpec(source=props, sinks=[sink], checkpoint=tmp_path / "checkpoint",
                        trigger={"availableNow": True})
    caplog.set_level(logging.INFO, logger="headwater.spark.pipeline")
    with kafka.hung():
        running = RunningPipeline(Pipeline(spec, spark=spark))
        deadline = time.monotonic() + 180
        while caplog.text.count("restarting it from the checkpoint") < 2:  # failed, restarted, failed again
            assert running.thread.is_alive(), f"the pipeline ended while the broker hung: {running.error!r}"
            assert time.monotonic() < deadline, f"no two restarts within 180 s:\n{caplog.text}"
            time.sleep(0.1)
    running.thread.join(180)  # availableNow: the query ends once the batch is delivered
    assert not running.thread.is_alive() and running.error is None, running.error
    assert re.search(r"the streaming query failed: kafka sink \(127\.0\.0\.1:\d+\): batch 0 was not delivered: "
                     r"TimeoutException: [^\n]+; restarting it from the checkpoint in 0\.\d s \(restart 1\)",
                     caplog.text), caplog.text
    rows = read_topics(spark, kafka, [f"{prefix}.public.hung"])
    assert {json.loads(bytes(r.key))["payload"]["id"] for r in rows} == set(range(1, 21))


# --------------------------------------------------------------------------------------------------
# Debezium topics → read_debezium_topics → DeltaSink: the tables Debezium's events describe


def canonical(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True)


def final_state(lines: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """topic → key → row: Debezium's events applied one after the other (the oracle)."""
    state: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for line in lines:
        env = envelope(line)
        if env is None or env.get("op") not in ("r", "c", "u", "d"):
            continue
        key = json.dumps(envelope({"value": line["key"]}), sort_keys=True)
        if env["op"] == "d":
            state[line["topic"]].pop(key, None)
        else:
            state[line["topic"]][key] = env["after"]
    return state


def test_debezium_topics_materialize_in_delta(spark, kafka, tmp_path):
    from headwater.spark.sinks.delta import DeltaSink

    # two tables: plain changes, and key changes (the records of one row move between keys, so
    # between Kafka partitions); Delta's first commits in a JVM are slow, more tables add little
    lines = [line for line in golden_lines("basic_crud") + golden_lines("pk_change")
             if line["topic"] in ("dbserver1.public.customers", "dbserver1.public.pk_full")]
    prefix = f"lake{uuid.uuid4().hex[:8]}"
    rows = source_rows(lines, prefix)
    produce(spark, kafka, rows)
    sink = DeltaSink(spark, str(tmp_path / "lake"), options={"changelog": "false"})
    stream = read_debezium_topics(spark, kafka.bootstrap_servers, pattern=f"{prefix}\\..*")
    query = (stream.writeStream.foreachBatch(sink.write).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()

    renamed = [{**line, "topic": row[0]} for line, row in zip(lines, rows)]
    want = final_state(renamed)
    assert want[f"{prefix}.public.pk_full"] == {'{"id": 2}': {"id": 2, "val": "one"},
                                                '{"id": 10}': {"id": 10, "val": "two"}}  # the key swap
    for topic, rows_by_key in want.items():
        table = spark.read.format("delta").load(sink.table_path(topic))
        columns = [c for c in table.columns if not c.startswith("__headwater_")]
        got = [r.asDict() for r in table.select(*columns).collect()]
        assert sorted(got, key=canonical) == sorted(rows_by_key.values(), key=canonical), topic
