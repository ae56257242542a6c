"""The Spark source after idle churn on tables outside the publication. psycopg2 reports the
server's keepalive position as flushed on its own once the last message it received is acknowledged
(tests/connectors/postgres/test_idle_position.py: the standalone runner stores that position as
an idle marker). Spark acknowledges a batch to its source only when it plans the next one (the
previous batch's offsets are committed to the source then), and a next batch exists only for new
messages: the reader's acknowledgement stays behind the last message it received, psycopg2 never
moves the slot past the checkpoint, and a restart from the checkpoint resumes there (not refused
as for a recreated slot, PG-243) with nothing lost or read twice."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from helpers.capture import insert_lsn, spark_properties
from helpers.spark_capture import SparkCapture, wait_first_batch

TOPIC = "dbserver1.public.t"


def _confirmed(db: Any, slot: str) -> int:
    return int(db.execute("SELECT pg_wal_lsn_diff(confirmed_flush_lsn, '0/0')::bigint FROM pg_replication_slots "
                          "WHERE slot_name = %s", (slot,))[0][0])


def _ids(capture: SparkCapture) -> list[int]:
    return [json.loads(r.value)["payload"]["after"]["id"] for r in capture.rows()
            if r.topic == TOPIC and r.value is not None]


def _committed_lsn(checkpoint: Path) -> int:
    """lsn_commit of the checkpoint's last committed batch (where a restart resumes)."""
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    lines = (checkpoint / "offsets" / str(last)).read_text().splitlines()
    return int(json.loads(lines[-1])["lsn_commit"])


def test_a_restart_after_idle_churn_resumes_from_the_checkpoint(spark: Any, pg_db: Any, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_db.execute("CREATE TABLE churn (id bigserial PRIMARY KEY, v text)")
    slot = "hws_idle"
    props = spark_properties(pg_db, tmp_path, slot, **{
        "snapshot.mode": "no_data", "table.include.list": "public.t", "publication.autocreate.mode": "filtered",
        "slot.drop.on.stop": "false", "status.update.interval.ms": "1000"})
    checkpoint = tmp_path / "checkpoint"
    first = SparkCapture(spark, props, checkpoint).start()
    try:
        wait_first_batch(first.query)
        for i in (1, 2):  # two batches: the first one's end is acknowledged when the second is planned
            pg_db.execute("INSERT INTO t VALUES (%s, 'before')", (i,))
            first.wait_for(lambda rows, i=i: i in _ids(first))
        churn_start = insert_lsn(pg_db)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            pg_db.execute("INSERT INTO churn (v) SELECT md5(g::text) FROM generate_series(1, 200) g")
            time.sleep(0.05)
        time.sleep(3.0)  # psycopg2 would report a keepalive position at its next status update (every second)
        first.check()
    finally:
        first.stop()
    assert insert_lsn(pg_db) > churn_start
    # the slot stays at or behind the checkpoint's last batch (the WAL since is kept, as Debezium
    # keeps it without heartbeats; docs/operations.md)
    assert _confirmed(pg_db, slot) <= _committed_lsn(checkpoint) <= churn_start

    pg_db.execute("INSERT INTO t VALUES (3, 'while down')")
    again = SparkCapture(spark, props, checkpoint).start()
    try:
        again.wait_for(lambda rows: 3 in _ids(again))  # a refused restart fails the query: raised here
        pg_db.execute("INSERT INTO t VALUES (4, 'after')")
        again.wait_for(lambda rows: 4 in _ids(again))
    finally:
        again.stop()
    assert _ids(first) == [1, 2]
    assert _ids(again) == [3, 4]
