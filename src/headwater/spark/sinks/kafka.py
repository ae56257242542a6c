"""Kafka topics from Spark: the records exactly as Debezium (through Kafka Connect) would produce them.

Each record of the headwater source becomes one Kafka record in the topic Debezium would use,
with the key and value bytes of the JSON converter (the source's ``key``/``value`` strings, UTF-8),
a NULL value as a tombstone, and the same headers (``__debezium.oldkey``, context headers, …).
No ``partition`` column is written: Kafka's default partitioner picks the partition from the key
bytes (murmur2), as it does for Debezium, so a key lands in the same partition as Debezium's records
of that key would. Records without a key (tables without a primary key or replica identity, truncate
events) are spread over the partitions by the producer's sticky partitioner, as in Kafka Connect:
their order survives only in a topic of one partition, as with Debezium.

Order: Kafka keeps order per partition, and Spark writes the partitions of a DataFrame in parallel
tasks whose sends interleave (even through one cached producer per executor). So the batch is
hash-partitioned by (topic, key) — all records of a key go through one task — and sorted by
``position`` within each task; the producer is idempotent (``enable.idempotence=true``,
``acks=all``), so retries inside the producer neither duplicate nor reorder. Hence the records of
one key arrive in the topic in position order. (``coalesce(1)`` would give the same order but
funnel every batch through one task; hashing keeps the write parallel and costs one small shuffle.)

Delivery is at least once: when Spark replays a micro-batch (a failed task, or a restart before
the batch was committed), its records are written again. A consumer then sees, for each key, a run
of records that is repeated from some point on — every change is there at least once and the last
record of each key is still the newest, which is what Debezium's own at-least-once delivery gives.

Topic names are passed through as the source built them (Debezium's topic naming already replaces
characters Kafka rejects). Options are Kafka producer settings, ``kafka.``-prefixed as for Spark's
Kafka connector (``kafka.compression.type``, ``kafka.security.protocol``, ``kafka.sasl.jaas.config``,
…), which override the defaults above, and ``partitions`` (Spark tasks writing a batch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from headwater.config import ConfigError
from headwater.spark.failures import RetriableSinkError, SinkError, failure_reason, is_retriable_kafka, java_cause

# ordering-relevant producer settings (the kafka-clients defaults since 3.0, stated so that they hold)
DEFAULT_PRODUCER_OPTIONS: dict[str, str] = {
    "kafka.enable.idempotence": "true",
    "kafka.acks": "all",
}
# chosen by Spark's Kafka connector itself: setting them is an error there
_RESERVED = ("kafka.key.serializer", "kafka.value.serializer")
PARTITIONS_OPTION = "partitions"


def _partitions(raw: str | int | None) -> int | None:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError([f"kafka sink option partitions={raw!r}: expected a positive number of Spark tasks"])
    return value


def producer_options(bootstrap_servers: str, options: Mapping[str, str] | None) -> dict[str, str]:
    """The options for ``df.write.format("kafka")``: defaults, then the caller's ``kafka.*`` settings."""
    problems = []
    if not bootstrap_servers or not str(bootstrap_servers).strip():
        problems.append("kafka sink: bootstrap.servers is empty (expected host:port[,host:port…])")
    given = {str(k): str(v) for k, v in (options or {}).items() if k != PARTITIONS_OPTION}
    unknown = sorted(k for k in given if not k.startswith("kafka."))
    if unknown:
        problems.append(f"kafka sink: unknown option(s) {', '.join(unknown)}: options are Kafka producer settings "
                        f"prefixed with 'kafka.' (e.g. kafka.compression.type), and {PARTITIONS_OPTION}")
    reserved = sorted(k for k in given if k in _RESERVED)
    if reserved:
        problems.append(f"kafka sink: {', '.join(reserved)} cannot be set: keys and values are written as the "
                        f"converter's bytes")
    if "kafka.bootstrap.servers" in given and given["kafka.bootstrap.servers"] != bootstrap_servers:
        problems.append(f"kafka sink: kafka.bootstrap.servers={given['kafka.bootstrap.servers']!r} contradicts "
                        f"bootstrap.servers={bootstrap_servers!r}")
    if problems:
        raise ConfigError(problems)
    return {**DEFAULT_PRODUCER_OPTIONS, **given, "kafka.bootstrap.servers": bootstrap_servers}


class KafkaSink:
    """`foreachBatch` destination: ``KafkaSink(spark, "host:9092").write(batch_df, batch_id)``.

    ``options``: ``kafka.*`` producer settings, and ``partitions`` — the number of Spark tasks writing
    one batch (default: ``spark.sql.shuffle.partitions``; the keyword argument wins over the option).
    """

    def __init__(self, spark: Any, bootstrap_servers: str, options: Mapping[str, str] | None = None, *,
                 partitions: int | None = None) -> None:
        self.spark = spark
        self.bootstrap_servers = bootstrap_servers
        self.options = producer_options(bootstrap_servers, options)
        self.partitions = _partitions(partitions if partitions is not None else
                                      (options or {}).get(PARTITIONS_OPTION))

    def write(self, batch: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        n = self.partitions or int(self.spark.conf.get("spark.sql.shuffle.partitions"))
        ordered = (batch.select("topic", "key", "value", "headers", "position")
                   .repartition(n, "topic", "key")
                   .sortWithinPartitions("position"))
        records = ordered.select(
            "topic",
            F.col("key").cast("binary").alias("key"),  # UTF-8: the converter's bytes
            F.col("value").cast("binary").alias("value"),  # NULL stays NULL: a tombstone
            "headers",
        )
        try:
            records.write.format("kafka").options(**self.options).save()
        except Exception as exc:  # Py4JJavaError: the producer's own exception is its innermost cause
            raise delivery_error(self.bootstrap_servers, batch_id, exc) from exc

    def __repr__(self) -> str:
        return f"KafkaSink({self.bootstrap_servers!r})"


def delivery_error(bootstrap_servers: str, batch_id: int, exc: BaseException) -> SinkError:
    """What failed a batch's write, in one line: the producer's exception. A retriable Kafka
    exception (the broker unreachable or hung: the producer's `delivery.timeout.ms` passed) gives a
    RetriableSinkError, which restarts the pipeline's query; the batch is written again then."""
    cause = java_cause(str(exc))
    if cause is None:
        return SinkError(f"kafka sink ({bootstrap_servers}): batch {batch_id} was not written: {failure_reason(exc)}")
    cls, message = cause
    what = f"kafka sink ({bootstrap_servers}): batch {batch_id} was not delivered: {cls.rsplit('.', 1)[-1]}: {message}"
    return RetriableSinkError(what) if is_retriable_kafka(cls) else SinkError(what)


__all__ = ["DEFAULT_PRODUCER_OPTIONS", "PARTITIONS_OPTION", "KafkaSink", "producer_options"]
