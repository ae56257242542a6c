"""`slot.max.retries` / `slot.retry.delay.ms` in the Spark source: a slot another process holds
(the walsender of a run that is still exiting, another consumer) is waited for, as the standalone
runner waits (tests/connectors/postgres/test_connection_options.py), instead of failing the query."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras

from helpers.capture import spark_properties
from helpers.spark_capture import SparkCapture, wait_first_batch


def test_spark_source_waits_for_a_slot_another_process_holds(spark: Any, pg_db: Any, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    pg_db.execute("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    pg_db.execute("SELECT pg_create_logical_replication_slot('hws_busy', 'pgoutput')")
    holder = psycopg2.connect(host=pg_db.server.host, port=pg_db.server.port, user=pg_db.server.user,
                              dbname=pg_db.name, connection_factory=psycopg2.extras.LogicalReplicationConnection)
    holder.cursor().start_replication(slot_name="hws_busy", decode=False,
                                      options={"proto_version": "1", "publication_names": "dbz_publication"})
    assert pg_db.execute("SELECT active FROM pg_replication_slots WHERE slot_name = 'hws_busy'") == [(True,)]

    def release() -> None:
        """Close the holder once the feed's driver connection is open (it then looks at the slot
        at once) and has had time to find it held."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not pg_db.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'headwater-driver'")[0][0]:
            time.sleep(0.1)
        time.sleep(2.0)
        holder.close()

    releaser = threading.Thread(target=release, daemon=True)
    props = spark_properties(pg_db, tmp_path, "hws_busy", **{
        "snapshot.mode": "no_data", "slot.max.retries": "40", "slot.retry.delay.ms": "250"})
    releaser.start()
    capture = SparkCapture(spark, props, tmp_path / "checkpoint").start()
    try:
        wait_first_batch(capture.query)
        pg_db.execute("INSERT INTO t VALUES (7)")
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
        releaser.join(130)
        if not holder.closed:
            holder.close()
    creates = [r for r in capture.records() if r["topic"] == "dbserver1.public.t"]
    assert [r["value"]["payload"]["after"] for r in creates] == [{"id": 7}]
    assert holder.closed
