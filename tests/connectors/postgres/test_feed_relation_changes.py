"""The Spark source's feed keeps a transaction whole when transaction metadata is on (BEGIN/END
counts need it), and a table altered inside that transaction is still described per message:
the rows before the ALTER with the old columns, the rows after it with the new ones."""

from __future__ import annotations

from pathlib import Path

from helpers.feed import available_now_batches, streaming_feed


def _records(pg_db, tmp_path: Path, workload: list[str], *, metadata: bool = True,
             typed: list | None = None) -> list:
    """The records of the workload; with `typed`, the feed's typed row changes are asked for
    (streamDelivery=rows) and what they convert is appended to it."""
    with streaming_feed(pg_db, tmp_path, **{"provide.transaction.metadata": str(metadata).lower()}) as (feed, start):
        conn = pg_db.connect(autocommit=False)
        try:
            with conn.cursor() as cur:
                for statement in workload:
                    cur.execute(statement)
            conn.commit()
        finally:
            conn.close()
        items = [item for batch in available_now_batches(feed, start) for item in batch]
        decoder = feed.decoder()
        if typed is None:
            return [positioned.record for item in items for positioned in decoder.decode(item)]
        changes = decoder.typed_row_changes()
        records = [positioned.record for item in items for positioned in decoder.decode_changes(item, changes)]
        typed += changes.finish()
        return records


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


def _workload(table: str) -> list[str]:
    return [f"CREATE TABLE {table} (id int PRIMARY KEY, a text)", f"INSERT INTO {table} VALUES (1, 'before')",
            f"ALTER TABLE {table} ADD COLUMN b int", f"INSERT INTO {table} VALUES (2, 'after', 7)",
            f"UPDATE {table} SET a = 'changed' WHERE id = 1"]


def test_typed_row_changes_follow_the_alter_and_leave_transaction_metadata_to_events(pg_db, tmp_path):
    """streamDelivery=rows: each table version's rows are typed with its own columns; with
    transaction metadata every change stays an event (each carries its transaction block, and
    the END record counts them)."""
    typed: list = []
    records = _records(pg_db, tmp_path, _workload("public.typed_alter"), metadata=False, typed=typed)
    assert not [r for r in records if r.topic.endswith("public.typed_alter")]
    got = [(change.op, change.rows.select([n for n in change.rows.schema.names if not n.startswith("__hw_")])
            .to_pylist()) for change in typed]
    assert got == [("c", [{"id": 1, "a": "before"}]), ("c", [{"id": 2, "a": "after", "b": 7}]),
                   ("u", [{"id": 1, "a": "changed", "b": None}])]

    typed = []
    records = _records(pg_db, tmp_path, _workload("public.event_alter"), metadata=True, typed=typed)
    assert typed == []
    changes = [r.value for r in records if r.topic.endswith("public.event_alter")]
    assert [v["after"]["id"] for v in changes] == [1, 2, 1] and all(v["transaction"] for v in changes)
