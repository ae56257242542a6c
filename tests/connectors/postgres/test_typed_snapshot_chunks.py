"""Snapshot chunks read as typed Arrow columns (the executor side of snapshotDelivery=rows): which
chunks take the typed path, what they hold, and the fallbacks to events (no exact typed form, a
value pyarrow does not accept, more text than the memory bound)."""

from __future__ import annotations

import decimal
import uuid
from pathlib import Path

import pytest

from headwater.connectors.postgres import typed_snapshot
from headwater.engine.feed import CaptureFeed
from headwater.engine.typed_rows import MARKER, OP, POSITION, RESERVED_PREFIX, TS_US, TypedRows
from helpers.capture import spark_properties
from helpers.feed import pg_feed


def _chunks(pg_db, tmp_path: Path, rows: int = 10) -> tuple[CaptureFeed, list]:
    props = spark_properties(pg_db, tmp_path, f"hw_tc_{uuid.uuid4().hex[:10]}", **{"slot.drop.on.stop": "true"})
    feed = pg_feed(props, snapshot_chunk_rows=rows)
    start = feed.initial_offset()
    return feed, feed.plan(start, feed.latest(start, None))


def _by_table(work: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for w in work:
        out.setdefault(w.chunk.table.id.table, []).append(w)
    return out


def _typed(decoder, work) -> TypedRows | None:
    """The chunk's typed rows, one batch (the chunks here are smaller than a batch), or None."""
    out = decoder.decode_typed_rows(work)
    if out is None:
        return None
    [rows] = out
    return rows


def test_typed_chunks_hold_the_rows_and_fall_back_per_chunk(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE plain (id int PRIMARY KEY, amount numeric(8,3), at timestamptz, note text)")
    pg_db.execute("INSERT INTO plain SELECT g, g / 8.0, timestamptz '2024-01-01 00:00+02' + g * interval '1 s', "
                  "CASE WHEN g % 5 = 0 THEN NULL WHEN g % 7 = 0 THEN '' ELSE 'n' || g END "
                  "FROM generate_series(1, 25) g")
    pg_db.execute("UPDATE plain SET amount = 'NaN' WHERE id = 15")  # the second chunk (11..20) only
    pg_db.execute("CREATE TABLE spans (id int PRIMARY KEY, d interval)")
    pg_db.execute("INSERT INTO spans VALUES (1, '1 day')")
    feed, work = _chunks(pg_db, tmp_path)
    try:
        decoder = feed.decoder()
        tables = _by_table(work)
        assert [_typed(decoder, w) for w in tables["spans"]] == [None]  # interval: no typed form
        typed = [_typed(decoder, w) for w in tables["plain"]]
        assert [t is not None for t in typed] == [True, False, True]
        first = typed[0]
        assert first.rows.schema.names == ["id", "amount", "at", "note", POSITION, OP, TS_US, MARKER]
        assert not [n for n in first.rows.schema.names[:4] if n.startswith(RESERVED_PREFIX)]
        assert first.op == "r" and first.rows.column(OP).to_pylist() == ["r"] * 10
        assert first.rows.column(POSITION).to_pylist() == [f"{first.position[:32]}{n:08X}" for n in range(10)]
        assert first.rows.column(MARKER).to_pylist() == ["first"] + ["true"] * 9  # the first table: its first row
        assert first.rows.column("id").to_pylist() == list(range(1, 11))
        assert first.rows.column("amount").to_pylist()[:2] == [decimal.Decimal("0.125"), decimal.Decimal("0.250")]
        assert first.rows.column("at").to_pylist()[0].isoformat() == "2023-12-31T22:00:01+00:00"
        assert first.rows.column("note").to_pylist()[4:7] == [None, "n6", ""]  # NULL and '' stay apart
        # the template record: the table's topic, schemas and source block, values NULL
        assert first.template.topic == "dbserver1.public.plain"
        assert first.template.value["source"]["table"] == "plain"
        assert first.template.value["after"]["note"] is None  # (a NOT NULL column: its fallback)
        # the chunk that fell back is read as events, ordered between its typed neighbours
        events = list(decoder.decode(tables["plain"][1]))
        assert sorted(e.record.value["after"]["id"] for e in events) == list(range(11, 21))
        prefixes = {e.position[:32] for e in events}
        assert len(prefixes) == 1 and typed[0].position[:32] < prefixes.pop() < typed[2].position[:32]
    finally:
        feed.close()


def test_a_chunk_past_the_memory_bound_is_read_as_events(pg_db, tmp_path, monkeypatch):
    pg_db.execute("CREATE TABLE wide (id int PRIMARY KEY, body text)")
    pg_db.execute("INSERT INTO wide SELECT g, repeat('x', 1000) FROM generate_series(1, 20) g")
    monkeypatch.setattr(typed_snapshot, "MAX_CHUNK_BYTES", 8_000)  # ~8 rows of text
    feed, work = _chunks(pg_db, tmp_path, rows=5)
    try:
        decoder = feed.decoder()
        assert all(decoder.decode_typed_rows(w) is not None for w in work)  # 5 rows: ~5 kB each chunk
        feed.close()
        feed, work = _chunks(pg_db, tmp_path, rows=20)
        decoder = feed.decoder()
        assert [decoder.decode_typed_rows(w) for w in work] == [None]
        assert len(list(decoder.decode(work[0]))) == 20  # the same snapshot, as events
    finally:
        feed.close()


def test_copy_text_stops_at_its_bound(pg_db):
    conn = pg_db.connect(autocommit=False)
    try:
        with pytest.raises(typed_snapshot.ChunkTooLarge):
            typed_snapshot.copy_text(conn, "SELECT repeat('y', 100) FROM generate_series(1, 100)", limit=1000)
    finally:
        conn.close()


# values PostgreSQL's text format escapes (backslash, tab, newline, carriage return, other control
# characters), ones that look like escapes or NULL, and empty strings (an empty line when alone)
TRICKY = ["a\tb", "line\nnext", "cr\rlf\r\n", "back\\slash", "\\N", "\\", "N", "", " ", "\b\f\v\x01",
          "ünï\\tcode", '{"k": "a\\"b"}', "end\\"]


def test_text_values_come_back_exactly(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE texts (id int PRIMARY KEY, t text, j jsonb)")
    pg_db.execute("CREATE TABLE lone (t text PRIMARY KEY)")  # its rows are single values: '' is an empty line
    for i, value in enumerate(TRICKY):
        pg_db.execute("INSERT INTO texts VALUES (%s, %s, %s)", (i, value, '{"v": "x\\\\y\\ttab"}' if i % 2 else None))
    pg_db.execute("INSERT INTO texts VALUES (100, NULL, NULL)")
    pg_db.execute("INSERT INTO lone VALUES (''), ('x'), ('\\N')")
    feed, work = _chunks(pg_db, tmp_path, rows=100)
    try:
        decoder = feed.decoder()
        tables = _by_table(work)
        [texts] = [_typed(decoder, w) for w in tables["texts"]]
        assert texts is not None
        got = dict(zip(texts.rows.column("id").to_pylist(), texts.rows.column("t").to_pylist()))
        assert got == {**dict(enumerate(TRICKY)), 100: None}
        expected_json = pg_db.execute("SELECT id, j::text FROM texts ORDER BY id")
        assert dict(zip(texts.rows.column("id").to_pylist(), texts.rows.column("j").to_pylist())) == dict(expected_json)
        [lone] = [_typed(decoder, w) for w in tables["lone"]]
        assert lone is not None and sorted(lone.rows.column("t").to_pylist()) == ["", "\\N", "x"]
    finally:
        feed.close()
