"""`replica.identity.autoset.values` through the Spark source: the driver's feed sets the replica
identities when streaming starts (after the snapshot batch), as Debezium does, so the streamed
updates and deletes of a table made FULL carry the whole old row. The recorded scenarios
(replica_identity_autoset*) also run through Spark in test_source_conformance.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.capture import drop_sentinels, spark_properties
from helpers.spark_capture import SparkCapture, wait_first_batch


def test_spark_source_sets_identities_when_streaming_starts(spark: Any, pg_db: Any, tmp_path: Path) -> None:
    pg_db.execute("""
        CREATE TABLE full_me (id int PRIMARY KEY, name text, qty int);
        CREATE TABLE by_index (id int PRIMARY KEY, code text NOT NULL, note text);
        CREATE UNIQUE INDEX by_index_code ON by_index (code);
        INSERT INTO full_me VALUES (1, 'one', 10), (2, 'two', 20);
        INSERT INTO by_index VALUES (1, 'c1', 'n1');
    """)
    props = spark_properties(pg_db, tmp_path, "hws_ri_autoset", **{
        "replica.identity.autoset.values": "public.full_me:FULL,public.by_index:INDEX by_index_code"})
    capture = SparkCapture(spark, props, tmp_path / "checkpoint").start()
    try:
        wait_first_batch(capture.query)
        # the snapshot batch is read before streaming starts; the next batch starts it
        capture.wait_for(lambda rows: pg_db.execute(
            "SELECT string_agg(relname || '=' || relreplident::text, ',' ORDER BY relname) FROM pg_class "
            "WHERE relname IN ('full_me', 'by_index')") == [("by_index=i,full_me=f",)], timeout=120)
        pg_db.execute("UPDATE full_me SET qty = 11 WHERE id = 1")
        pg_db.execute("DELETE FROM full_me WHERE id = 2")
        pg_db.execute("UPDATE by_index SET code = 'c1b' WHERE id = 1")
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
    streamed = [r["value"]["payload"] for r in drop_sentinels(capture.records())
                if r["value"] is not None and r["value"]["payload"]["op"] != "r"]
    assert [(p["source"]["table"], p["op"], json.dumps(p["before"])) for p in streamed] == [
        ("full_me", "u", '{"id": 1, "name": "one", "qty": 10}'),
        ("full_me", "d", '{"id": 2, "name": "two", "qty": 20}'),
        # USING INDEX: the old tuple holds the index column only, so Debezium's old key is id=0
        ("by_index", "d", '{"id": 0, "code": "c1", "note": null}'),
        ("by_index", "c", "null"),
    ]
