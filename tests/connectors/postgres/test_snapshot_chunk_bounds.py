"""How a large table is cut into snapshot chunks: key ranges from a sample of the keys (no pass
numbering every row), every row in exactly one chunk, no chunk empty, sizes close to the option."""

from __future__ import annotations

import itertools
import uuid
from types import SimpleNamespace

import pyarrow as pa

from headwater.connectors.postgres.capture import PgChunkDialect
from headwater.engine.snapshot_plan import SAMPLES_PER_CHUNK
from headwater.relational.table import TableId
from helpers.capture import spark_properties
from helpers.feed import pg_feed

ROWS, CHUNK = 60_000, 5_000


def test_a_large_table_is_cut_by_sampled_keys_into_chunks_of_about_the_size(pg_db, tmp_path):
    # a two-column key, and a hole in it: the keys are not evenly spread
    pg_db.execute("CREATE TABLE wide (a int, b text, v int, PRIMARY KEY (a, b))")
    pg_db.execute("INSERT INTO wide SELECT g / 10, 'k' || (g % 10), g FROM generate_series(1, 80000) g")
    pg_db.execute("DELETE FROM wide WHERE a BETWEEN 2000 AND 3999")
    assert pg_db.execute("SELECT count(*) FROM wide")[0][0] == ROWS
    conn = pg_db.connect()
    try:  # the planner takes a sample here, not a count
        wide = SimpleNamespace(table=SimpleNamespace(id=TableId(None, "public", "wide")))
        chunks = ROWS // CHUNK
        bounds = PgChunkDialect(conn).sampled_bounds(wide, ["a", "b"], ROWS, chunks,
                                                     100.0 * chunks * SAMPLES_PER_CHUNK / ROWS)
        assert len(bounds) >= (chunks - 1) // 2
    finally:
        conn.close()

    props = spark_properties(pg_db, tmp_path, f"hw_cb_{uuid.uuid4().hex[:10]}", **{"slot.drop.on.stop": "true"})
    feed = pg_feed(props, snapshot_chunk_rows=CHUNK)
    try:
        start = feed.initial_offset()
        work = feed.plan(start, feed.latest(start, None))
        decoder = feed.decoder()
        chunks = [pa.Table.from_batches([typed.rows for typed in decoder.decode_typed_rows(w)]) for w in work]
    finally:
        feed.close()
    assert len(chunks) == ROWS // CHUNK
    sizes = [c.num_rows for c in chunks]
    assert all(0.8 * CHUNK <= n <= 1.2 * CHUNK for n in sizes), sizes
    per_chunk = [sorted(zip(c.column("a").to_pylist(), c.column("b").to_pylist())) for c in chunks]
    keys = [k for chunk in per_chunk for k in chunk]
    assert len(keys) == len(set(keys)) == ROWS  # every row once
    # chunk after chunk in key order: the first holds the smallest key, the last the largest
    assert all(before[-1] < after[0] for before, after in itertools.pairwise(per_chunk))
    assert keys[0] == (0, "k1") and keys[-1] == (8000, "k0")
