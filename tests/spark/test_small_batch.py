"""Small batches written by the driver (delta-rs) against the same batches through Spark's writer:
the same current-state tables and change logs, row for row and column for column, and the same
exactly-once behaviour when a batch is replayed through either path.

Batches are Debezium's own events (the conformance golden files), as in test_delta_sink.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_delta_sink import SPARK_PATH, Feed, _with_column, golden, history_version, operations


def _batches() -> list[list[dict[str, Any]]]:
    """Batches covering inserts, updates, deletes, primary-key changes, keyless tables, every
    type of the types file, unchanged-TOAST placeholders (also a placeholder update of a row
    inserted in the same batch), a new column, and a truncate (whose batch goes through Spark on
    both sinks: the two paths then alternate on the same tables)."""
    crud, pk, nopk = golden("basic_crud"), golden("pk_change"), golden("no_pk")
    toast = [line for line in golden("toast") if line["topic"].endswith("toast_default")]
    types = golden("types")
    trunc = [line for line in golden("truncate") if line["topic"].endswith("tr_a")]
    pk = [line for line in pk if not line["topic"].endswith("pk_full")]
    nopk = [line for line in nopk if line["topic"].endswith("nopk_uniq")]
    return [crud[:3] + pk[:8] + nopk[:6] + toast[:1] + types,
            crud[3:] + pk[8:] + nopk[6:] + toast[1:2] + [_with_column(crud[3], "nickname", "Bob")],
            toast[2:] + trunc,
            crud[:2]]  # inserts of keys that exist: the position guard keeps the stored rows


def _table(spark: Any, path: str, order: str) -> list[dict[str, Any]]:
    rows = spark.read.format("delta").load(path)
    return [r.asDict(recursive=True) for r in rows.orderBy(*[c for c in order.split(",")]).collect()]


def _tables(spark: Any, root: Path) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for table in sorted(p for p in root.iterdir() if (p / "_delta_log").is_dir()):
        order = "position" if table.name.endswith("__changelog") else "__headwater_position"
        out[table.name] = _table(spark, str(table), order)
    return out


@pytest.mark.timeout(1500)  # Spark's path: a few seconds per Delta commit, dozens of commits (load: more)
def test_the_driver_and_spark_write_the_same_tables(spark, tmp_path):
    from headwater.spark.sinks.delta import DeltaSink

    feed = Feed()
    frames = [feed.frame(spark, lines) for lines in _batches()]
    small = DeltaSink(spark, str(tmp_path / "small"))
    through_spark = DeltaSink(spark, str(tmp_path / "spark"), options=SPARK_PATH)
    for batch_id, frame in enumerate(frames):
        small.write(frame, batch_id)
        through_spark.write(frame, batch_id)
    assert "small.current" in small.timings and "small.changelog" in small.timings
    assert not any(step.startswith("small.") for step in through_spark.timings)
    expected = _tables(spark, tmp_path / "spark")
    assert len(expected) >= 10 and any(name.endswith("__changelog") for name in expected)
    assert _tables(spark, tmp_path / "small") == expected
    toast_table = str(tmp_path / "small" / "dbserver1.public.toast_default")
    assert "MERGE" in operations(spark, toast_table)  # delta-rs's merge, as Delta records it

    # a replay (the same batch id) through the driver: every table skips it (the change logs'
    # and the merges' idempotent-write ids)
    small_root, spark_root = tmp_path / "small", tmp_path / "spark"
    versions = {p.name: history_version(spark, str(p)) for p in small_root.iterdir()}
    DeltaSink(spark, str(small_root)).write(frames[1], 1)
    assert {p.name: history_version(spark, str(p)) for p in small_root.iterdir()} == versions
    # replays across the paths: the change logs skip what the other path wrote (the same ids);
    # the current state applies the events as no-ops (positions)
    DeltaSink(spark, str(small_root), options=SPARK_PATH).write(frames[2], 2)
    DeltaSink(spark, str(spark_root)).write(frames[3], 3)
    logs = [p.name for p in small_root.iterdir() if p.name.endswith("__changelog")]
    assert {n: history_version(spark, str(small_root / n)) for n in logs} == {n: versions[n] for n in logs}
    assert _tables(spark, small_root) == expected
    assert _tables(spark, spark_root) == expected


def test_small_batch_rows_is_checked(spark, tmp_path):
    from headwater.config import ConfigError
    from headwater.spark.sinks.delta import DeltaSink

    with pytest.raises(ConfigError, match=r"small\.batch\.rows"):
        DeltaSink(spark, str(tmp_path), options={"small.batch.rows": "-1"})
    assert DeltaSink(spark, str(tmp_path), options={"small.batch.rows": "5"}).options.small_batch_rows == 5


def test_a_batch_above_the_threshold_goes_through_spark(spark, tmp_path):
    from headwater.spark.sinks.delta import DeltaSink

    lines = golden("basic_crud")
    sink = DeltaSink(spark, str(tmp_path / "lake"), options={"small.batch.rows": "2"})
    sink.write(Feed().frame(spark, lines), 0)
    assert not any(step.startswith("small.") for step in sink.timings)
    assert "changelog" in sink.timings
