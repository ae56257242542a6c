"""The change log: every event of a topic appended to ``<path>/<topic>__changelog``.

Columns: ``position``, ``op``, ``source_ts_ms``, ``commit_time`` (``source.ts_ms`` as a
timestamp), the source fields the connector's description names as columns of their own
(:attr:`headwater.engine.registry.SourceDescription.changelog_columns`; PostgreSQL: ``tx_id``
from ``source.txId`` and ``lsn``), ``snapshot``, ``key`` (a struct of the key columns),
``before``/``after``/``source``/``transaction`` (structs, converted like the table's columns),
the event's ``ts_ms`` and the ``batch_id`` that wrote it. New columns are merged into the structs
(``mergeSchema``). Appends carry Delta's idempotent-write id, so a replayed batch skips what a
change log already holds.
"""

from __future__ import annotations

import functools
from typing import Any

from headwater.engine.registry import ChangelogColumn, describe
from headwater.spark.sinks import connect_types as ct
from headwater.spark.sinks.connect_types import quote
from headwater.spark.sinks.delta.schemas import Topic

CHANGELOG_SUFFIX = "__changelog"


@functools.cache
def changelog_columns(connector: str | None) -> tuple[ChangelogColumn, ...]:
    """The source fields the change log of `connector`'s events (``source.connector``) keeps as
    columns of their own: none for a connector no registered one writes as."""
    description = describe(connector) if connector else None
    return description.changelog_columns if description is not None else ()


def frame(parsed: Any, topic: Topic, columns: tuple[ChangelogColumn, ...], fmt: str, batch_id: int) -> Any:
    """The change log's rows of the parsed events (position, op, ts_ms, k, v; values encoded as
    `fmt` says)."""
    from pyspark.sql import functions as F

    def source_field(name: str, sql_type: str, alias: str) -> Any:
        if topic.source is not None and ct.field(topic.source, name) is not None:
            return F.expr(f"CAST(v.source.{quote(name)} AS {sql_type})").alias(alias)
        return F.lit(None).cast(sql_type).alias(alias)

    selected = [
        F.col("position"), F.col("op"), F.col("ts_ms").alias("source_ts_ms"),
        F.expr("timestamp_millis(ts_ms)").alias("commit_time"),
        *[source_field(c.field, c.sql_type, c.column) for c in columns],
        source_field("snapshot", "STRING", "snapshot"),
    ]
    if topic.key_fields:
        key_struct = ct.convert_sql("k", {"type": "struct", "fields": topic.key_fields}, fmt)
        selected.append(F.expr(key_struct).alias("key"))
    selected += [F.expr(ct.convert_sql("v.before", topic.row, fmt)).alias("before"),
                 F.expr(ct.convert_sql("v.after", topic.row, fmt)).alias("after")]
    if topic.source is not None:
        selected.append(F.expr(ct.convert_sql("v.source", topic.source, fmt)).alias("source"))
    if topic.transaction is not None:
        selected.append(F.expr(ct.convert_sql("v.transaction", topic.transaction, fmt)).alias("transaction"))
    selected += [F.col("v.ts_ms").alias("ts_ms"), F.lit(batch_id).cast("BIGINT").alias("batch_id")]
    return parsed.select(*selected)


def append(parsed: Any, topic: Topic, columns: tuple[ChangelogColumn, ...], fmt: str, path: str, app_id: str,
           batch_id: int) -> None:
    """Append the parsed events (position, op, ts_ms, k, v; values encoded as `fmt` says) to the
    change log at `path`, as Delta's idempotent write (`app_id`, `batch_id`)."""
    (frame(parsed, topic, columns, fmt, batch_id).write.format("delta").mode("append")
     .option("mergeSchema", "true").option("txnAppId", app_id).option("txnVersion", str(batch_id))
     .save(path))
