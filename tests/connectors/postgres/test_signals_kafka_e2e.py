"""Signals through the kafka channel to a running `headwater run`, end to end: a real Apache Kafka
broker (tests/helpers/kafka.py), `headwater signal --channel kafka` as a user sends them, and the
capture acting on them: an execute-snapshot that reads every row, a log signal in the run's log."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.capture import (
    HeadwaterRun,
    base_properties,
    drop_sentinels,
    emit_sentinel_and_wait,
    notifications,
    payload,
    read_records,
    wait_for_run,
    wait_slot_active,
)

SIGNAL = "public.debezium_signal"
TOPIC = "dbserver1.public.t"
NOTIFICATIONS = "dbserver1.notifications"
ROWS = 300


@pytest.fixture(scope="module")
def kafka() -> Iterator[Any]:
    """A broker of this module's own: topics created on first use get one partition, as a signal topic must."""
    from helpers.kafka import running_broker

    yield from running_broker(partitions=1)








def _send(run: HeadwaterRun, *args: str) -> str:
    headwater = Path(sys.executable).parent / "headwater"
    sent = subprocess.run([str(headwater), "signal", str(run.properties), "--channel", "kafka", *args],
                          capture_output=True, text=True, timeout=60)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    return sent.stdout


def test_headwater_signal_through_kafka_reaches_a_running_capture(pg_db, kafka, tmp_path):
    pg_db.execute("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                  "data varchar(2048))")
    pg_db.execute("CREATE TABLE t (id integer PRIMARY KEY, v integer NOT NULL)")
    pg_db.execute("INSERT INTO t SELECT g, g FROM generate_series(1, %s) g", (ROWS,))
    signal_topic = f"hw-signals-{uuid.uuid4().hex[:8]}"
    # no initial snapshot: every row must come from the snapshot the kafka signal asks for
    props = base_properties(pg_db, tmp_path, f"hw_sig_kafka_{os.getpid()}_{time.monotonic_ns() % 10**8}", **{
        "snapshot.mode": "no_data",
        "signal.data.collection": SIGNAL,
        "signal.enabled.channels": "source,kafka",
        "signal.kafka.bootstrap.servers": kafka.bootstrap_servers,
        "signal.kafka.topic": signal_topic,
        "signal.kafka.poll.timeout.ms": "100",
        "signal.poll.interval.ms": "100",
        "incremental.snapshot.chunk.size": "100",
        "notification.enabled.channels": "sink",
        "notification.sink.topic.name": NOTIFICATIONS,
    })
    run = HeadwaterRun(props, tmp_path / "out.jsonl").start()
    marker = f"kafka log signal {uuid.uuid4().hex}"
    try:
        wait_slot_active(pg_db, props["slot.name"], run)
        wait_for_run(lambda: f"topic '{signal_topic}'" in run.log_tail(100_000), "the kafka signal channel to start",
                     run)
        out = _send(run, "--type", "execute-snapshot", "--id", "sig-kafka-1",
                    "--data", '{"data-collections": ["public.t"], "type": "incremental"}')
        assert "'sig-kafka-1'" in out and f"topic '{signal_topic}'" in out, out
        # Debezium's log action puts the signal's offset in place of the first `{}`
        _send(run, "--type", "log", "--data", f'{{"message": "{marker} at {{}}"}}')
        wait_for_run(lambda: any(n["aggregate_type"] == "Incremental Snapshot" and n["type"] == "COMPLETED"
                                 for n in notifications(read_records(run.out), NOTIFICATIONS)),
                     "the snapshot the kafka signal asked for", run)
        # the log action's own line: the message alone, its `{}` filled in
        logged = re.compile(rf"^\S+ \S+ INFO [\w.]+: {re.escape(marker)} at (?!\{{\}})\S", re.MULTILINE)
        wait_for_run(lambda: logged.search(run.log_tail(100_000)) is not None, "the log signal in the run's log", run)
        emit_sentinel_and_wait(pg_db, run)
    finally:
        run.stop()
    records = drop_sentinels(run.records())
    values = [payload(r["value"]) for r in records if r["topic"] == TOPIC and r["value"] is not None]
    reads = [v["after"]["id"] for v in values if v["source"]["snapshot"] == "incremental"]
    assert sorted(reads) == list(range(1, ROWS + 1))
    ids = {(n["id"], n["type"]) for n in notifications(records, NOTIFICATIONS)
           if n["aggregate_type"] == "Incremental Snapshot"}
    assert {("sig-kafka-1", "STARTED"), ("sig-kafka-1", "COMPLETED")} <= ids
    # a kafka signal is not a signal-table row: only the watermark rows appear on the signal topic
    signal_rows = [payload(r["value"])["after"]["type"] for r in records
                   if r["topic"] == "dbserver1.public.debezium_signal" and r["value"] is not None]
    assert signal_rows and set(signal_rows) <= {"snapshot-window-open", "snapshot-window-close"}
    assert pg_db.execute("SELECT count(*) FROM debezium_signal WHERE type IN ('execute-snapshot', 'log')") == [(0,)]
