"""A local Spark session for the Spark tests (one per test session: starting the JVM takes seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from headwater.spark.session import build_session
    from helpers.jvm import tiered_jvm

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    with tiered_jvm():  # this JVM runs for the whole session: C2 pays off
        session = build_session("headwater-tests", master="local[2]",
                                conf={"spark.sql.warehouse.dir": str(warehouse),
                                      "spark.sql.streaming.stopTimeout": "30s",
                                      # the tests' Delta tables have a few commits each: their
                                      # state in one task, not four (a table's first read pays
                                      # each task's set-up), and two shuffle partitions for two cores
                                      "spark.databricks.delta.snapshotPartitions": "1",
                                      "spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka() -> Iterator[Any]:
    """One throwaway Apache Kafka broker (KRaft, 127.0.0.1, free ports) for the session. Topics get
    3 partitions on first use, so that "in order per key" is tested across partitions."""
    from helpers.kafka import running_broker

    yield from running_broker(partitions=3)
