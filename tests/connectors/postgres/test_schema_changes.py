"""Table definitions changing while streaming, compared with the real Debezium 3.6.3.

- A change made while the connector is stopped: the oracle was run twice on one slot and offsets
  file (tests/conformance/extra/README.md, "Restart scenarios"); Headwater runs the same way and must give
  the same events in both runs.
- The worker-pool streaming mode (`encoding.workers`) on the recorded schema-change scenarios:
  Relation messages are handled on the reader thread and the new table definitions travel to
  the worker processes with the chunks (by version), so the events must still be Debezium's.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from helpers.capture import RunningCapture, base_properties, drop_sentinels, emit_sentinel_and_wait, wait_slot_active
from helpers.conformance import assert_events_equal, normalize, read_props, run_scenario

EXTRA = Path(__file__).resolve().parents[2] / "conformance" / "extra"
STOPPED = EXTRA / "restart" / "schema_while_stopped"


def _run(props: dict[str, str], out: Path, db, workload: Path) -> list[dict]:
    capture = RunningCapture(props, out).start()
    try:
        wait_slot_active(db, props["slot.name"], capture)
        db.psql(workload)
        emit_sentinel_and_wait(db, capture)
    finally:
        capture.stop()
    return [normalize.normalize_event(r) for r in drop_sentinels(capture.records())]


def test_changes_made_while_stopped_are_picked_up_on_restart(pg_db, tmp_path):
    """Rows written under three definitions while stopped: on restart each Relation message is
    described with the catalog as it is *now* (column `a` already NOT NULL for row 3, `b` gone
    from row 5 on, `n` numeric(9,3) from row 5 on), exactly as Debezium does."""
    pg_db.psql(STOPPED / "setup.sql")
    props = base_properties(pg_db, tmp_path, "hw_while_stopped", **read_props(STOPPED / "props.txt"))
    first = _run({**props, "slot.drop.on.stop": "false"}, tmp_path / "run1.jsonl", pg_db, STOPPED / "workload1.sql")
    want1 = normalize.load(str(STOPPED / "run1.jsonl"))
    assert_events_equal(first, want1)

    pg_db.psql(STOPPED / "stopped.sql")
    second = _run(props, tmp_path / "run2.jsonl", pg_db, STOPPED / "workload2.sql")
    want2 = normalize.load(str(STOPPED / "run2.jsonl"))
    assert_events_equal(second, want2)


@pytest.mark.parametrize("name", ["schema_add_drop_column", "schema_in_transaction", "schema_drop_table",
                                  "partitions_root"])
def test_worker_processes_follow_schema_changes(name, pg_db, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="headwater"):
        got, want = run_scenario(EXTRA / "scenarios" / name, EXTRA / "golden", pg_db, tmp_path,
                                 extra={"encoding.workers": "2"})
    assert any("worker processes" in r.getMessage() for r in caplog.records), "the run did not use workers"
    assert_events_equal(got, want)


def test_column_of_a_type_dropped_since_is_left_out(pg_db, tmp_path, caplog):
    """Not reproducible with Debezium: the Relation message names a column whose type was dropped
    (with the column) before the message is handled. Nothing can decode it, so the column is left
    out of that row's events with a warning, and capture goes on."""
    pg_db.execute("CREATE TYPE mood AS ENUM ('sad', 'happy')")
    pg_db.execute("CREATE TABLE public.m (id integer PRIMARY KEY, feeling mood, v text)")
    props = base_properties(pg_db, tmp_path, "hw_dropped_type")
    with caplog.at_level(logging.WARNING, logger="headwater"):
        capture = RunningCapture(props, tmp_path / "out.jsonl").start()
        try:
            wait_slot_active(pg_db, "hw_dropped_type", capture)
            pg_db.psql("BEGIN; INSERT INTO public.m VALUES (1, 'happy', 'one'); "
                       "ALTER TABLE public.m DROP COLUMN feeling; DROP TYPE mood; COMMIT; "
                       "INSERT INTO public.m VALUES (2, 'two');")
            emit_sentinel_and_wait(pg_db, capture)
        finally:
            capture.stop()
    rows = [r for r in drop_sentinels(capture.records()) if r["value"] is not None]
    assert [r["value"]["payload"]["after"] for r in rows] == [{"id": 1, "v": "one"}, {"id": 2, "v": "two"}]
    assert any("no longer exist" in r.getMessage() and "feeling" in r.getMessage() for r in caplog.records)


def test_a_relation_is_described_once_its_transaction_is_visible(pg_db):
    """The server may send a transaction as soon as its commit record is written, a moment before
    other sessions see it committed. A Relation message of that transaction is described with the
    catalog after the commit is visible, in one snapshot: here the transaction that re-creates the
    table is held open (its commit "received" early), and the description waits for it."""
    import threading
    import time

    from headwater.connectors.postgres.metadata import CatalogReader
    from headwater.connectors.postgres.pgoutput import RelationColumn
    from headwater.relational.table import TableId

    pg_db.execute("CREATE TABLE public.d4 (id integer PRIMARY KEY, v text NOT NULL DEFAULT 'x')")
    columns = [RelationColumn(1, "id", 23, -1), RelationColumn(0, "v", 25, -1)]  # int4, text
    writer = pg_db.connect(autocommit=False)
    reader = pg_db.connect()
    try:
        with writer.cursor() as cur:
            cur.execute("DROP TABLE public.d4")
            cur.execute("CREATE TABLE public.d4 (v text PRIMARY KEY, id bigint)")
            cur.execute("SELECT txid_current() % 4294967296")
            xid = cur.fetchone()[0]
        timer = threading.Timer(0.5, writer.commit)
        started = time.monotonic()
        timer.start()
        table = CatalogReader(reader).read_relation(TableId(None, "public", "d4"), columns, committed_xid=xid)
        waited = time.monotonic() - started
        timer.join()
    finally:
        writer.close()
        reader.close()
    assert waited >= 0.4
    assert table.primary_key == ("v",)  # the re-created table's key, looked up by name
    assert {c.name: c.optional for c in table.columns} == {"id": True, "v": False}
    assert reader.autocommit  # left as it was, outside any transaction
