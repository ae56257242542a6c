"""The workers' fast path (headwater.connectors.postgres.fast_events) renders exactly the bytes
and offsets of the general path: the same pgoutput messages of a real server go through both,
for every column type and the settings that change how a row is rendered."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.connectors.postgres.events import Chunk, ChunkBuilder
from headwater.serialization.json import EncodedLines
from headwater.serialization.parallel import encode_items
from helpers.capture import base_properties
from helpers.fast_path import TwoPaths, workload_messages

CLOCK_NS = 1_790_000_000_123_456_789

TYPES = """
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE TABLE every_type (
  id int PRIMARY KEY, i2 int2, i8 int8, t text, vc varchar(20), bp char(4), n numeric(12,2), nu numeric,
  f4 float4, f8 float8, b bool, d date, tm time, ttz timetz, ts timestamp, tstz timestamptz(3), iv interval,
  ba bytea, u uuid, j json, jb jsonb, ia int[], ta text[], e mood, ip inet, m money, pt point,
  dflt int DEFAULT 7, big text);
CREATE TABLE no_key (a int, b text);
CREATE TABLE two_key (a int, b text, c numeric(5,1), PRIMARY KEY (b, a));
CREATE TABLE full_ident (id int PRIMARY KEY, v text);
ALTER TABLE full_ident REPLICA IDENTITY FULL;
CREATE PUBLICATION fast_pub FOR ALL TABLES;
"""

ROWS = """
INSERT INTO every_type SELECT g, g % 3000, g * 100000000000, 'text "' || g || E'\\\\ é\\n', 'vc' || g, 'bp',
  g * 1.25 - 500, g / 7.0, g / 3.0, CASE g % 5 WHEN 0 THEN 'NaN' WHEN 1 THEN '-Infinity' ELSE g / 9.0 END,
  g % 2 = 0, date '2024-02-28' + g, time '12:34:56.789' + g * interval '1 ms', timetz '01:02:03+05:30',
  timestamp '1969-12-31 23:59:59.5' + g * interval '1 day',
  timestamptz '2024-01-01 00:00:00+00' + g * interval '1.001 s',
  g * interval '1 day 2 hours 3.5 seconds', decode(md5(g::text), 'hex'), md5(g::text)::uuid,
  json_build_object('g', g), jsonb_build_object('g', g, 's', 'x"y'), ARRAY[g, NULL, -g], ARRAY['a', NULL, 'b"c'],
  CASE WHEN g % 2 = 0 THEN 'happy' ELSE 'sad' END::mood, '10.0.0.1/24', g * 1.5, point(g, -g),
  CASE WHEN g % 3 = 0 THEN NULL ELSE g END, CASE WHEN g % 4 = 0 THEN repeat('x', 5000) ELSE NULL END
FROM generate_series(1, 60) g;
INSERT INTO every_type (id) VALUES (1000);
UPDATE every_type SET n = n + 1, big = coalesce(big, 'b') WHERE id % 3 = 0;
UPDATE every_type SET i2 = 1 WHERE id % 4 = 0;
UPDATE every_type SET id = id + 5000 WHERE id = 5;
DELETE FROM every_type WHERE id = 7;
INSERT INTO no_key VALUES (1, 'a'), (2, NULL);
INSERT INTO two_key VALUES (1, 'x', 1.5), (2, 'y', NULL);
UPDATE two_key SET c = 9.9;
INSERT INTO full_ident VALUES (1, 'a'), (2, 'b');
UPDATE full_ident SET v = 'c';
TRUNCATE no_key;
"""


def _messages(pg_db) -> list[tuple[bytes, int]]:
    return workload_messages(pg_db, TYPES, ROWS, "fast_pub", "fast")


def _both(pg_db, tmp_path, size: int = 16, **props: str) -> tuple[int, int]:
    """Build every chunk through the general and the fast path and compare; (rows rendered
    fast, rows in all)."""
    two = TwoPaths(base_properties(pg_db, tmp_path, "unused", **{"snapshot.mode": "no_data", **props}))
    conn = pg_db.connect()
    try:
        chunks = two.chunks(conn, _messages(pg_db), size)
    finally:
        conn.close()
    fast_rows = rows = 0
    for chunk in chunks:
        general_items = _clocked(two.general, chunk)
        fast_items = _clocked(two.fast, chunk)
        fast_rows += sum(i.count for i in fast_items if type(i) is EncodedLines)
        expected, got = encode_items(general_items, two.general_ser), encode_items(fast_items, two.fast_ser)
        assert got.segments == expected.segments
        assert got.offset == expected.offset
        rows += sum(n for _, n, _ in expected.segments)
    return fast_rows, rows


def _clocked(builder: ChunkBuilder, chunk: Chunk) -> list[Any]:
    """builder.build(chunk) with the dispatcher's clock fixed (events carry the time they are built)."""
    from headwater.engine import dispatcher

    init = dispatcher.EventDispatcher.__init__
    defaults = init.__kwdefaults__
    saved = dict(defaults)
    defaults["clock"] = lambda: CLOCK_NS
    try:
        return builder.build(chunk)
    finally:
        defaults.clear()
        defaults.update(saved)


def test_default_settings_render_fast_and_identically(pg_db, tmp_path):
    fast, rows = _both(pg_db, tmp_path, **{"skipped.operations": "none"})
    # inserts and updates without an old tuple take the fast path; deletes, key changes, REPLICA
    # IDENTITY FULL updates and truncates do not
    assert rows > 100
    assert 90 < fast <= rows - 8, (fast, rows)


@pytest.mark.parametrize("props", [
    {"decimal.handling.mode": "string", "time.precision.mode": "connect", "binary.handling.mode": "hex"},
    {"decimal.handling.mode": "double", "interval.handling.mode": "string", "time.precision.mode": "adaptive"},
    {"key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false",
     "value.converter.decimal.format": "numeric", "key.converter.decimal.format": "numeric"},
    {"value.converter.replace.null.with.default": "false", "tombstones.on.delete": "false"},
    {"column.mask.with.5.chars": "public.every_type.t", "column.truncate.to.3.chars": "public.every_type.vc",
     "column.propagate.source.type": ".*", "column.mask.hash.SHA-256.with.salt.s1": "public.two_key.b"},
    {"skipped.operations": "c", "unavailable.value.placeholder": "hex:0a0b", "topic.prefix": "p-x"},
    {"message.key.columns": "public.no_key:a", "column.exclude.list": "public.every_type.pt",
     "schema.name.adjustment.mode": "avro", "field.name.adjustment.mode": "avro"},
], ids=["modes", "double-adaptive", "schemaless-numeric", "no-null-default", "mappers", "skips", "keys-names"])
def test_settings_render_identically(pg_db, tmp_path, props):
    fast, rows = _both(pg_db, tmp_path, size=7, **props)
    assert rows > 40
    assert fast > 30


def test_one_chunk_for_everything(pg_db, tmp_path):
    fast, rows = _both(pg_db, tmp_path, size=100_000)
    assert 0 < fast < rows
