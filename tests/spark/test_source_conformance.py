"""The shared conformance scenarios through the Spark source: the same records as Debezium (and so
as the standalone runner), built in Spark's executors from raw replication messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.capture import base_properties, drop_sentinels
from helpers.conformance import describe_diff, normalize, read_props
from helpers.spark_capture import SparkCapture, wait_first_batch

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"
SCENARIOS = CONFORMANCE / "scenarios"
GOLDEN = CONFORMANCE / "golden"

FOUNDATION = ["basic_crud", "replica_identity", "pk_change", "no_pk", "tombstones_off", "truncate",
              "truncate_default_skipped", "messages", "tx_metadata", "partitioned_leaf"]


@pytest.mark.parametrize("name", FOUNDATION)
def test_scenario_through_spark_matches_debezium(name, spark, pg_db, tmp_path):
    scenario = SCENARIOS / name
    pg_db.psql(scenario / "setup.sql")
    slot = f"hws_{name}"[:60]
    props = base_properties(pg_db, tmp_path, slot, **read_props(scenario / "props.txt"))
    for key in ("offset.storage.file.filename", "offset.flush.interval.ms"):
        props.pop(key)  # Spark's checkpoint is the offset store
    capture = SparkCapture(spark, props, tmp_path / "checkpoint").start()
    try:
        wait_first_batch(capture.query)
        pg_db.psql(scenario / "workload.sql")
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
    rows = capture.rows()
    positions = [r.position for r in rows]
    assert positions == sorted(positions), "records are not in position order"
    got = [normalize.normalize_event(r) for r in drop_sentinels(capture.records())]
    want = normalize.load(str(GOLDEN / f"{name}.jsonl"))
    assert got == want, describe_diff(got, want)
