"""Streamed row changes gathered in bulk (PgTypedRowChanges.gather) come out exactly as when every
message is handled one by one (PgTypedRowChanges.take and the event builder): the same typed
rows, the same events, the same positions, in the same order — on the pgoutput messages of a
real server, with key changes, unchanged-TOAST values, REPLICA IDENTITY FULL, a table without a
typed layout, truncates, logical decoding messages, a table altered mid-stream, a resume inside a
transaction and full runs."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from headwater.connectors.postgres.events import BEGIN, Chunk
from headwater.connectors.postgres.typed_changes import PgTypedRowChanges
from headwater.connectors.postgres.work import PgWorkDecoder, StreamWork
from headwater.engine.feed import PositionedRecord
from headwater.engine.typed_rows import EVENT_MS, TypedRows
from helpers.capture import base_properties
from helpers.fast_path import TwoPaths, workload_messages

CLOCK_NS = 1_790_000_000_123_456_789

TABLES = """
CREATE TABLE t (id int PRIMARY KEY, name text, amount numeric(12,2), ts timestamptz, flag bool, doc jsonb,
  big text);
CREATE TABLE u (id int PRIMARY KEY, v text);
CREATE TABLE full_ident (id int PRIMARY KEY, v text);
ALTER TABLE full_ident REPLICA IDENTITY FULL;
CREATE TABLE other (id int PRIMARY KEY, iv interval);
CREATE PUBLICATION gather_pub FOR ALL TABLES;
"""

WORKLOAD = """
INSERT INTO t SELECT g, 'name-' || g, g / 100.0, timestamptz '2024-01-01 00:00:00+00' + g * interval '1.5 s',
  g % 2 = 0, jsonb_build_object('id', g), CASE WHEN g % 5 = 0 THEN repeat(md5(g::text), 400) END
FROM generate_series(1, 40) g;
INSERT INTO u SELECT g, 'v' || g FROM generate_series(1, 10) g;
BEGIN; UPDATE t SET amount = amount + 1 WHERE id <= 12; UPDATE u SET v = v || '!' WHERE id <= 4; COMMIT;
UPDATE t SET amount = amount + 1 WHERE id % 5 = 0;
UPDATE t SET id = id + 1000 WHERE id = 3;
DELETE FROM t WHERE id BETWEEN 30 AND 33;
INSERT INTO full_ident VALUES (1, 'a'), (2, 'b');
UPDATE full_ident SET v = 'c';
INSERT INTO other VALUES (1, '1 day'), (2, NULL);
BEGIN; INSERT INTO u VALUES (100, 'x'); SELECT pg_logical_emit_message(true, 'p', 'in a transaction');
  UPDATE t SET flag = NOT flag WHERE id <= 6; DELETE FROM u WHERE id = 100; COMMIT;
SELECT pg_logical_emit_message(false, 'p', 'outside');
TRUNCATE other;
ALTER TABLE u ADD COLUMN w int;
UPDATE u SET w = id WHERE id <= 5;
INSERT INTO u VALUES (200, 'y', 2), (201, NULL, NULL);
UPDATE t SET name = NULL, ts = NULL WHERE id BETWEEN 20 AND 25;
DELETE FROM u WHERE id > 7
"""


def _messages(pg_db) -> list[tuple[bytes, int]]:
    return workload_messages(pg_db, TABLES, WORKLOAD, "gather_pub", "gather")


def _one_by_one(self: PgTypedRowChanges, messages: Any, registry: Any, pos: Any, other: Any) -> None:
    for payload, lsn in messages:
        other(payload, lsn)


def _decode(settings: Any, chunks: list[Chunk], batch_rows: int) -> list[Any]:
    """Everything a task hands on for `chunks`, comparable: events as (position, topic, key, value),
    typed rows as (op, template key, template value, rows without their conversion time)."""
    decoder = PgWorkDecoder(settings, {})
    changes = PgTypedRowChanges(settings, batch_rows=batch_rows)
    out: list[Any] = []

    def add(items: list[Any]) -> None:
        for item in items:
            if isinstance(item, PositionedRecord):
                r = item.record
                out.append(("event", item.position, r.topic, r.key, r.value))
            else:
                assert isinstance(item, TypedRows)
                rows = item.rows.drop_columns([EVENT_MS])
                out.append(("rows", item.op, item.position, item.template.key, item.template.value,
                            rows.schema, rows.to_pydict()))

    for chunk in chunks:
        add(list(decoder.decode_changes(StreamWork(chunk), changes)))
        add(changes.ready())
    add(changes.finish())
    return out


@pytest.fixture
def clock(monkeypatch):
    """Events carry the time they are built (a non-transactional message's source block too)."""
    from headwater.connectors.postgres import events
    from headwater.engine import dispatcher

    monkeypatch.setitem(dispatcher.EventDispatcher.__init__.__kwdefaults__, "clock", lambda: CLOCK_NS)
    monkeypatch.setattr(events, "time", SimpleNamespace(time_ns=lambda: CLOCK_NS))


@pytest.mark.parametrize(("size", "batch_rows", "props"), [
    (100_000, 65_536, {}),
    (9, 4, {}),
    (13, 3, {"skipped.operations": "u"}),
    (50, 65_536, {"provide.transaction.metadata": "true"}),
], ids=["one-chunk", "small-chunks-full-runs", "skipped-updates", "transaction-metadata"])
def test_gathered_in_bulk_equals_one_by_one(pg_db, tmp_path, monkeypatch, clock, size, batch_rows, props):
    two = TwoPaths(base_properties(pg_db, tmp_path, "unused", **{"snapshot.mode": "no_data", **props}))
    messages = _messages(pg_db)
    conn = pg_db.connect()
    try:
        chunks = two.chunks(conn, messages, size)
    finally:
        conn.close()
    # a resume inside the second transaction: its first two data messages were delivered before
    begins = [p for p, _ in messages if p[0] == BEGIN]
    chunks[0] = dataclasses.replace(chunks[0], position=dataclasses.replace(
        chunks[0].position, skip_final_lsn=int.from_bytes(begins[1][1:9], "big"), skip_msgs=2))

    bulk = _decode(two.settings, chunks, batch_rows)
    with monkeypatch.context() as m:
        m.setattr(PgTypedRowChanges, "gather", _one_by_one)
        expected = _decode(two.settings, chunks, batch_rows)
    assert bulk == expected
    typed = sum(len(next(iter(item[6].values()))) for item in expected if item[0] == "rows")
    events = sum(1 for item in expected if item[0] == "event")
    if props.get("provide.transaction.metadata") == "true":
        assert typed == 0 and events > 100
    else:
        # inserts, plain updates and deletes of t and u are typed (not skipped updates); key
        # changes, unchanged-TOAST values, FULL updates, the table without a typed layout,
        # truncates, messages are events
        assert typed > 50 and events >= 4, (typed, events)
