"""The Spark source's feed keeps a transaction whole when transaction metadata is on (BEGIN/END
counts need it), and a table altered inside that transaction is still described per message:
the rows before the ALTER with the old columns, the rows after it with the new ones."""

from __future__ import annotations

import uuid
from pathlib import Path

from headwater.config import from_properties
from headwater.connectors.postgres.feed import PgChangeFeed
from helpers.capture import base_properties


def _records(pg_db, tmp_path: Path, workload: list[str]) -> list:
    slot = f"hw_feed_{uuid.uuid4().hex[:10]}"
    props = base_properties(pg_db, tmp_path, slot, **{"snapshot.mode": "no_data",
                                                      "provide.transaction.metadata": "true"})
    for key in ("offset.storage.file.filename", "offset.flush.interval.ms"):
        props.pop(key)
    feed = PgChangeFeed(from_properties(props).connector)
    try:
        start = feed.initial_offset()
        conn = pg_db.connect(autocommit=False)
        try:
            with conn.cursor() as cur:
                for statement in workload:
                    cur.execute(statement)
            conn.commit()
        finally:
            conn.close()
        feed.prepare_available_now()
        items = []
        while (end := feed.latest(start, None)) != start:
            items += feed.plan(start, end)
            start = end
        decoder = feed.decoder()
        return [positioned.record for item in items for positioned in decoder.decode(item)]
    finally:
        feed.close()
        pg_db.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                      (slot,))


def test_rows_before_and_after_an_alter_in_one_transaction_keep_their_own_columns(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE public.altered (id int PRIMARY KEY, a text)")
    records = _records(pg_db, tmp_path, [
        "INSERT INTO public.altered VALUES (1, 'before')",
        "ALTER TABLE public.altered ADD COLUMN b int",
        "INSERT INTO public.altered VALUES (2, 'after', 7)",
        "UPDATE public.altered SET a = 'changed' WHERE id = 1",
    ])
    rows = [r.value["after"] for r in records if r.topic.endswith("public.altered")]
    assert len(rows) == 3
    assert dict(rows[0]) == {"id": 1, "a": "before"}
    assert dict(rows[1]) == {"id": 2, "a": "after", "b": 7}
    assert dict(rows[2]) == {"id": 1, "a": "changed", "b": None}
    # one transaction: its BEGIN and END frame the three events
    ends = [r.value for r in records if r.topic.endswith("transaction") and r.value["status"] == "END"]
    assert len(ends) == 1 and ends[0]["event_count"] == 3
