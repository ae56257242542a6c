"""`snapshot.mode`, slot and publication handling of the PostgreSQL connector, run in-process against
real PostgreSQL: which runs snapshot, which stream, what survives a restart, and the errors when the
database is not as the stored offset expects."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from headwater.engine.connector import ConnectorError
from helpers.capture import (
    RunningCapture,
    base_properties,
    drop_sentinels,
    emit_sentinel_and_wait,
    wait_slot_active,
)

TOPIC = "dbserver1.public.items"


def payload(part: Any) -> Any:
    if isinstance(part, dict) and "schema" in part and "payload" in part:
        return part["payload"]
    return part


def changes(records: list[dict[str, Any]], topic: str = TOPIC) -> list[tuple[str, int, str | None]]:
    """(op, id, val after the change) of every change event on `topic`, in order (no tombstones)."""
    out = []
    for r in drop_sentinels(records):
        value = payload(r.get("value"))
        if r["topic"] != topic or value is None:
            continue
        row = value["after"] if value["op"] != "d" else value["before"]
        out.append((value["op"], row["id"], row.get("val") if value["op"] != "d" else None))
    return out


def ops(records: list[dict[str, Any]], op: str) -> list[tuple[str, int, str | None]]:
    return [c for c in changes(records) if c[0] == op]


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def slot_exists(db: Any, slot: str) -> bool:
    return bool(db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (slot,)))


def new_slot() -> str:
    return f"hw_modes_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def items(pg_db):
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, val text)")
    pg_db.execute("INSERT INTO public.items SELECT g, 'v' || g FROM generate_series(1, 5) g")
    return pg_db


def run_until_stopped(db, props: dict[str, str], out: Path, sql: list[str]) -> list[dict[str, Any]]:
    """Start, wait for streaming, run `sql`, wait for a sentinel, stop; the records written."""
    capture = RunningCapture(props, out).start()
    try:
        wait_slot_active(db, props["slot.name"], capture)
        for statement in sql:
            db.execute(statement)
        emit_sentinel_and_wait(db, capture, quiet=0.3)
    finally:
        capture.stop()
    return capture.records()


def run_expecting_error(props: dict[str, str], out: Path) -> ConnectorError:
    capture = RunningCapture(props, out).start()
    capture.thread.join(60)
    if capture.thread.is_alive():
        capture.stop()
        pytest.fail("the engine kept running; expected a ConnectorError")
    with pytest.raises(ConnectorError) as info:
        capture.stop()
    message = str(info.value)
    assert "\n" not in message, f"ConnectorError is not one line: {message!r}"
    return info.value


def test_initial_only_snapshots_then_finishes(items, tmp_path: Path) -> None:
    slot = new_slot()
    props = base_properties(items, tmp_path, slot, **{"snapshot.mode": "initial_only"})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    capture.thread.join(60)
    assert not capture.thread.is_alive(), "snapshot.mode=initial_only must finish by itself after the snapshot"
    capture.stop()
    records = capture.records()
    assert changes(records) == [("r", i, f"v{i}") for i in range(1, 6)]
    markers = [payload(r["value"])["source"]["snapshot"] for r in records if r["topic"] == TOPIC]
    assert markers[0] == "first" and markers[-1] == "last"
    # nothing streams: no consumer holds the slot once the engine returned
    rows = items.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    assert not rows or rows[0][0] is False


@pytest.mark.parametrize("mode", ["no_data", "never"])
def test_no_data_streams_without_snapshot(items, tmp_path: Path, mode: str) -> None:
    props = base_properties(items, tmp_path, new_slot(), **{"snapshot.mode": mode})
    records = run_until_stopped(items, props, tmp_path / "out.jsonl", [
        "INSERT INTO public.items VALUES (6, 'v6')",
        "UPDATE public.items SET val = 'u1' WHERE id = 1",
        "DELETE FROM public.items WHERE id = 2",
    ])
    assert ops(records, "r") == []
    assert changes(records) == [("c", 6, "v6"), ("u", 1, "u1"), ("d", 2, None)]


def test_always_snapshots_on_every_start(items, tmp_path: Path) -> None:
    slot = new_slot()
    props = base_properties(items, tmp_path, slot, **{"snapshot.mode": "always", "slot.drop.on.stop": "false"})
    first = run_until_stopped(items, props, tmp_path / "run1.jsonl", ["INSERT INTO public.items VALUES (6, 'v6')"])
    assert ops(first, "r") == [("r", i, f"v{i}") for i in range(1, 6)]
    assert ops(first, "c") == [("c", 6, "v6")]

    items.execute("INSERT INTO public.items VALUES (7, 'v7')")  # while stopped: part of the next snapshot
    items.execute("DELETE FROM public.items WHERE id = 2")
    second = run_until_stopped(items, props, tmp_path / "run2.jsonl", ["INSERT INTO public.items VALUES (8, 'v8')"])
    assert ops(second, "r") == [("r", i, f"v{i}") for i in (1, 3, 4, 5, 6, 7)]
    # as Debezium: the slot is kept, so what happened since it was last confirmed comes again
    # after the snapshot — the delete of a row an earlier run delivered included
    assert [c for c in changes(second) if c[0] != "r"] == [("c", 7, "v7"), ("d", 2, None), ("c", 8, "v8")]
    snapshot_lsns = {r["value"]["payload"]["source"]["lsn"] for r in second
                     if r["topic"] == TOPIC and r["value"] and r["value"]["payload"]["op"] == "r"}
    first_lsns = [r["value"]["payload"]["source"]["lsn"] for r in first if r["topic"] == TOPIC and r["value"]]
    assert len(snapshot_lsns) == 1 and snapshot_lsns.pop() > max(first_lsns)  # read after the delete


def test_initial_restart_resumes_without_snapshot_loss_or_duplicates(items, tmp_path: Path) -> None:
    slot = new_slot()
    props = base_properties(items, tmp_path, slot, **{"slot.drop.on.stop": "false"})
    first = run_until_stopped(items, props, tmp_path / "run1.jsonl", [
        "INSERT INTO public.items VALUES (6, 'v6')",
        "UPDATE public.items SET val = 'a3' WHERE id = 3",
    ])
    assert ops(first, "r") == [("r", i, f"v{i}") for i in range(1, 6)]
    assert [c for c in changes(first) if c[0] != "r"] == [("c", 6, "v6"), ("u", 3, "a3")]
    assert slot_exists(items, slot)

    # changes while Headwater is stopped
    items.execute("INSERT INTO public.items VALUES (7, 'v7')")
    items.execute("UPDATE public.items SET val = 'b1' WHERE id = 1")
    items.execute("DELETE FROM public.items WHERE id = 2")
    items.execute("BEGIN; INSERT INTO public.items VALUES (8, 'v8'); INSERT INTO public.items VALUES (9, 'v9'); "
                  "COMMIT")

    second = run_until_stopped(items, props, tmp_path / "run2.jsonl", ["INSERT INTO public.items VALUES (10, 'v10')"])
    assert ops(second, "r") == [], "snapshot.mode=initial must not snapshot again once the snapshot completed"
    assert changes(second) == [("c", 7, "v7"), ("u", 1, "b1"), ("d", 2, None), ("c", 8, "v8"), ("c", 9, "v9"),
                               ("c", 10, "v10")]


def _stop_and_drop_slot(items, tmp_path: Path, slot: str) -> None:
    props = base_properties(items, tmp_path, slot, **{"slot.drop.on.stop": "false"})
    first = run_until_stopped(items, props, tmp_path / "run1.jsonl", ["INSERT INTO public.items VALUES (6, 'v6')"])
    assert len(ops(first, "r")) == 5 and ops(first, "c") == [("c", 6, "v6")]
    items.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    items.execute("INSERT INTO public.items VALUES (7, 'v7')")  # lost for the slot: needs a new snapshot


def test_when_needed_resnapshots_after_the_slot_vanished(items, tmp_path: Path) -> None:
    slot = new_slot()
    _stop_and_drop_slot(items, tmp_path, slot)
    props = base_properties(items, tmp_path, slot, **{"snapshot.mode": "when_needed", "slot.drop.on.stop": "false"})
    second = run_until_stopped(items, props, tmp_path / "run2.jsonl", ["INSERT INTO public.items VALUES (8, 'v8')"])
    assert ops(second, "r") == [("r", i, f"v{i}") for i in range(1, 8)]
    assert [c for c in changes(second) if c[0] != "r"] == [("c", 8, "v8")]


def test_initial_refuses_to_resume_after_the_slot_vanished(items, tmp_path: Path) -> None:
    slot = new_slot()
    _stop_and_drop_slot(items, tmp_path, slot)
    props = base_properties(items, tmp_path, slot, **{"snapshot.mode": "initial", "slot.drop.on.stop": "false"})
    error = run_expecting_error(props, tmp_path / "run2.jsonl")
    message = str(error)
    assert slot in message and "does not exist" in message
    assert "when_needed" in message
    assert changes(read_records(tmp_path / "run2.jsonl")) == []
    assert not slot_exists(items, slot), "a refused start must not create the slot (that would hide the loss)"


def test_slot_drop_on_stop_removes_the_slot(items, tmp_path: Path) -> None:
    slot = new_slot()
    props = base_properties(items, tmp_path, slot, **{"slot.drop.on.stop": "true"})
    records = run_until_stopped(items, props, tmp_path / "out.jsonl", [])
    assert len(ops(records, "r")) == 5
    assert not slot_exists(items, slot)

    kept = new_slot()
    props = base_properties(items, tmp_path / "kept", kept, **{"slot.drop.on.stop": "false"})
    run_until_stopped(items, props, tmp_path / "kept.jsonl", [])
    assert slot_exists(items, kept)


def test_filtered_publication_holds_exactly_the_included_tables(items, tmp_path: Path) -> None:
    items.execute("CREATE TABLE public.other (id int PRIMARY KEY)")
    items.execute("CREATE TABLE public.skipped (id int PRIMARY KEY)")
    props = base_properties(items, tmp_path, new_slot(), **{
        "publication.autocreate.mode": "filtered",
        "publication.name": "hw_filtered",
        "table.include.list": "public.items,public.other",
    })
    records = run_until_stopped(items, props, tmp_path / "out.jsonl", [
        "INSERT INTO public.skipped VALUES (1)",
        "INSERT INTO public.other VALUES (1)",
    ])
    rows = items.execute("SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = 'hw_filtered' "
                         "ORDER BY 1, 2")
    assert rows == [("public", "items"), ("public", "other")]
    all_tables = items.execute("SELECT puballtables FROM pg_publication WHERE pubname = 'hw_filtered'")
    assert all_tables == [(False,)]
    topics = {r["topic"] for r in drop_sentinels(records)}
    assert topics == {TOPIC, "dbserver1.public.other"}


def test_disabled_autocreate_without_publication_fails(items, tmp_path: Path) -> None:
    slot = new_slot()
    props = base_properties(items, tmp_path, slot, **{
        "publication.autocreate.mode": "disabled",
        "publication.name": "hw_missing",
    })
    error = run_expecting_error(props, tmp_path / "out.jsonl")
    message = str(error)
    assert "'hw_missing'" in message and "disabled" in message
    assert not items.execute("SELECT 1 FROM pg_publication WHERE pubname = 'hw_missing'")
    assert not slot_exists(items, slot)



def test_no_data_with_an_existing_slot_and_no_offsets_streams_from_the_slot(items, tmp_path: Path) -> None:
    """A slot made beforehand (e.g. by an operator) and no offsets: stream from where the slot
    stands, so changes made after the slot was created and before the start are delivered."""
    slot = new_slot()
    # pgoutput reads the publication through the catalog as of each change, so it must predate the slot
    items.execute("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    items.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    items.execute("INSERT INTO public.items VALUES (6, 'v6')")  # after the slot, before Headwater starts
    props = base_properties(items, tmp_path, slot, **{"snapshot.mode": "no_data"})
    records = run_until_stopped(items, props, tmp_path / "out.jsonl", ["INSERT INTO public.items VALUES (7, 'v7')"])
    assert changes(records) == [("c", 6, "v6"), ("c", 7, "v7")]
