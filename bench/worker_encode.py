"""CPU time per row of one encoding worker (decode, build, serialize), fast path against general path.

The standalone benchmark (standalone_stream.py) times whole runs on a machine whose two cores are
shared with the walsender; this one isolates the worker's share, which is the part the fast path
(headwater.connectors.postgres.fast_events) changes. It decodes the bench table's changes (the
UPDATE of `big`) from a throwaway cluster with `pg_logical_slot_peek_binary_changes`, cuts them
into chunks as the streaming reader does, and builds and serializes every chunk in this process
with the general path and with the fast path in turn (process CPU time, best of --repeat),
checking that both produce the same bytes (apart from the envelope's ts_ms/ts_us/ts_ns) and
the same offsets.

    .venv/bin/python bench/worker_encode.py [--rows 60000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from headwater.connectors.postgres.events import Chunk, ChunkBuilder
from headwater.embedded.postgres import ThrowawayPostgres
from headwater.engine.memory import tune_allocator
from headwater.serialization.parallel import encode_items

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

# the fast path's test and this bench cut and build chunks alike; the table is standalone_stream.py's
from helpers.fast_path import TwoPaths, peeked
from standalone_stream import DB, TABLE, row_sql

CHUNK = 2048  # headwater.connectors.postgres.streaming.WORKER_CHUNK
_TS = re.compile(rb'"ts_ms":\d+,"ts_us":\d+,"ts_ns":\d+\}(\}?),"headers"')


def _messages(pg: ThrowawayPostgres, rows: int) -> list[tuple[bytes, int]]:
    conn = pg.connect(DB)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {TABLE}")
        cur.execute(f"INSERT INTO t SELECT {row_sql('g')} FROM generate_series(1, %s) g", (rows,))
        cur.execute("CREATE PUBLICATION b_pub FOR TABLE public.t")
        cur.execute("SELECT pg_create_logical_replication_slot('b_enc', 'pgoutput')")
        cur.execute("UPDATE t SET amount = amount + 1")
        cur.execute("SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes('b_enc', NULL, NULL, "
                    "'proto_version', '1', 'publication_names', 'b_pub')")
        out = peeked(cur.fetchall())
    conn.close()
    return out


def _run(builder: ChunkBuilder, serializer: Any, chunks: list[Chunk]) -> tuple[float, list[Any]]:
    t = time.process_time()
    batches = [encode_items(builder.build(chunk), serializer) for chunk in chunks]
    return time.process_time() - t, batches


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=60_000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    tune_allocator()
    # synchronous commits: the SQL decoding functions read only WAL that is flushed
    pg = ThrowawayPostgres(settings={"logical_decoding_work_mem": "64MB", "max_wal_size": "4GB",
                                     "synchronous_commit": "on"})
    pg.start()
    try:
        pg.create_database(DB)
        messages = _messages(pg, args.rows)
        with tempfile.TemporaryDirectory() as tmp:
            two = TwoPaths({"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                            "database.hostname": pg.host, "database.port": str(pg.port), "database.user": "postgres",
                            "database.dbname": DB, "topic.prefix": "bench", "plugin.name": "pgoutput",
                            "slot.name": "b_enc", "publication.name": "b_pub", "table.include.list": "public.t",
                            "offset.storage.file.filename": str(Path(tmp) / "offsets.json")})
        conn = pg.connect(DB)
        chunks = two.chunks(conn, messages, CHUNK)
        conn.close()
    finally:
        pg.stop()
    best = {"general": float("inf"), "fast": float("inf")}
    outputs: dict[str, list[Any]] = {}
    for _ in range(args.repeat + 1):  # the first round warms up (schemas, fragments) and is not counted
        for name, builder, serializer in two.paths():
            spent, batches = _run(builder, serializer, chunks)
            if name in outputs:
                best[name] = min(best[name], spent)
            outputs[name] = batches
    rows = sum(n for b in outputs["general"] for _, n, _ in b.segments)
    same = all([(t, n, _TS.sub(rb"\1", d)) for t, n, d in g.segments] ==
               [(t, n, _TS.sub(rb"\1", d)) for t, n, d in f.segments] and g.offset == f.offset
               for g, f in zip(outputs["general"], outputs["fast"], strict=True))
    for name in ("general", "fast"):
        print(f"{name:8} {rows:,} rows: {best[name] / rows * 1e6:5.2f} µs CPU per row "
              f"({rows / best[name]:,.0f} rows/s per core)")
    print(f"fast/general CPU per row: {best['fast'] / best['general']:.2f}; same bytes and offsets: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
