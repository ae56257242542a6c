"""Every recorded conformance scenario (shared and extra) through the Spark source: the same records
as Debezium, built in Spark's executors from raw replication messages, compared as serialized JSON."""

from __future__ import annotations

import pytest

from helpers.conformance import assert_events_equal, scenario_params
from helpers.spark_capture import run_scenario_through_spark


@pytest.mark.parametrize("scenario,golden", scenario_params())
def test_scenario_through_spark_matches_debezium(scenario, golden, spark, pg_db, tmp_path):
    got, want = run_scenario_through_spark(spark, scenario, golden, pg_db, tmp_path)
    assert_events_equal(got, want)
