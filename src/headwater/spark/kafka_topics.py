"""Debezium-format Kafka topics as headwater records: materialize what a real Debezium (or Headwater's
:class:`~headwater.spark.sinks.kafka.KafkaSink`) wrote, with the same destinations as the source.

:func:`read_debezium_topics` subscribes Spark's Kafka source to topics (a list or a pattern) and
returns a streaming DataFrame with the schema of the ``headwater`` source
(:data:`headwater.spark.source.SCHEMA`):

- ``topic``, ``headers`` as in Kafka (no headers → an empty array);
- ``key``, ``value``: the record's bytes as UTF-8 strings (the JSON converter's output, with or
  without schemas); a NULL value is a tombstone;
- ``op``, ``ts_ms``, ``source_db``, ``source_schema``, ``source_table``: parsed from the value — the
  envelope is ``value.payload`` when the converter wrote schemas, else the value itself; ``ts_ms`` is
  ``source.ts_ms`` when the record has a ``source`` block, else the envelope's ``ts_ms``
  (transaction metadata, heartbeats) — exactly as the headwater source fills them;
- ``typed_rows``, ``typed_row_count``: always NULL (Kafka holds events, never typed rows);
- ``position``: the Kafka partition and offset in the source's fixed-width format
  (16 hex digits partition, 16 hex digits offset, 8 zero digits).
  Debezium writes all records of a key to one partition (the key decides it), and Kafka keeps a
  partition in order, so for one key the position sorts the records in the order Debezium
  produced them — which is what the sinks use it for (newest record per key). Positions of
  different partitions are not comparable; keyless records (tables without a key, truncate events)
  are only ordered when their topic has one partition — as for any Kafka consumer of Debezium.
  A topic whose partition count grows can move a key to another partition; the records written
  after that are not ordered after the older ones by position (Debezium warns against that too).

:func:`debezium_records` is the same transformation for a DataFrame already read from Kafka (e.g.
``spark.read.format("kafka")`` in batch mode).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from headwater.config import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _envelope_type():  # type: ignore[no-untyped-def]
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    source = StructType([StructField("ts_ms", LongType()), StructField("db", StringType()),
                         StructField("schema", StringType()), StructField("table", StringType())])
    fields = [StructField("op", StringType()), StructField("ts_ms", LongType()), StructField("source", source)]
    # fields the parser does not need are skipped, so the (large) "schema" part costs little
    return StructType([StructField("payload", StructType(fields)), *fields])


def debezium_records(kafka_df: DataFrame) -> DataFrame:
    """Rows of Spark's Kafka source (``includeHeaders`` on) → the headwater source's record schema."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    value = F.col("value").cast("string")
    parsed = F.from_json(value, _envelope_type())
    # with schemas.enable the envelope is under "payload"; a Debezium envelope has no top-level
    # "payload" field of its own, so its presence tells which layout a record has
    envelope = F.when(parsed["payload"].isNotNull(), parsed["payload"]).otherwise(
        F.struct(parsed["op"].alias("op"), parsed["ts_ms"].alias("ts_ms"), parsed["source"].alias("source")))
    source = F.col("_envelope.source")

    def text(c):  # type: ignore[no-untyped-def]
        return F.when(c != "", c)  # the headwater source reports an empty schema/table as NULL

    def hex16(c):  # type: ignore[no-untyped-def]
        return F.lpad(F.hex(c.cast("long")), 16, "0")

    headers = kafka_df["headers"] if "headers" in kafka_df.columns else F.lit(None)
    return (kafka_df
            .withColumn("_envelope", envelope)
            .select(
                F.col("topic").cast("string").alias("topic"),
                F.col("key").cast("string").alias("key"),
                value.alias("value"),
                F.coalesce(headers.cast(ArrayType(header)), F.array().cast(ArrayType(header))).alias("headers"),
                F.col("_envelope.op").alias("op"),
                F.concat(hex16(F.col("partition")), hex16(F.col("offset")), F.lit("0" * 8)).alias("position"),
                F.when(source.isNotNull(), source["ts_ms"]).otherwise(F.col("_envelope.ts_ms")).alias("ts_ms"),
                source["db"].alias("source_db"),
                text(source["schema"]).alias("source_schema"),
                text(source["table"]).alias("source_table"),
                F.lit(None).cast("binary").alias("typed_rows"), F.lit(None).cast("int").alias("typed_row_count"),
            ))


def kafka_source_options(bootstrap_servers: str, topics: str | Sequence[str] | None = None, *,
                         pattern: str | None = None, starting_offsets: str = "earliest",
                         options: Mapping[str, str] | None = None) -> dict[str, str]:
    """The options of Spark's Kafka source for :func:`read_debezium_topics` (validated)."""
    if not bootstrap_servers or not str(bootstrap_servers).strip():
        raise ConfigError("read_debezium_topics: bootstrap_servers is empty (expected host:port[,host:port…])")
    if (topics is None) == (pattern is None):
        raise ConfigError("read_debezium_topics: give either topics (a name or a list of names) or pattern "
                         "(a Java regular expression over topic names), not both or neither")
    given = {str(k): str(v) for k, v in (options or {}).items()}
    for reserved in ("subscribe", "subscribePattern", "assign", "includeHeaders", "kafka.bootstrap.servers"):
        if reserved in given:
            raise ConfigError(f"read_debezium_topics: option {reserved} is set by the arguments (topics, pattern, "
                             f"bootstrap_servers); remove it from options")
    result = {**given, "kafka.bootstrap.servers": bootstrap_servers, "startingOffsets": starting_offsets,
              "includeHeaders": "true"}
    if pattern is not None:
        result["subscribePattern"] = pattern
    else:
        names = [topics] if isinstance(topics, str) else list(topics or [])
        if not names or any(not n or "," in n for n in names):
            raise ConfigError(f"read_debezium_topics: topics={topics!r}: expected one or more topic names "
                             f"(without commas)")
        result["subscribe"] = ",".join(names)
    return result


def read_debezium_topics(spark: SparkSession, bootstrap_servers: str, topics: str | Sequence[str] | None = None,
                         *, pattern: str | None = None, starting_offsets: str = "earliest",
                         options: Mapping[str, str] | None = None) -> DataFrame:
    """A streaming DataFrame of the Debezium records in ``topics`` (or the topics matching ``pattern``),
    with the headwater source's schema — ready for the same ``foreachBatch`` sinks.

    ``starting_offsets``: ``earliest`` (default: materialize the whole topic), ``latest`` or Spark's
    per-partition JSON. ``options`` go to Spark's Kafka source unchanged: ``kafka.*`` consumer
    settings (security, …) and source options such as ``maxOffsetsPerTrigger``, ``failOnDataLoss``.
    Where to resume is kept in the query's checkpoint, as for any Kafka stream in Spark.
    """
    settings = kafka_source_options(bootstrap_servers, topics, pattern=pattern, starting_offsets=starting_offsets,
                                    options=options)
    return debezium_records(spark.readStream.format("kafka").options(**settings).load())


__all__ = ["debezium_records", "kafka_source_options", "read_debezium_topics"]
