"""CPU time per row of the Spark source's streaming tasks with typed rows (``streamDelivery=rows``).

The Spark pipeline benchmark (spark_pipeline.py) times whole micro-batches on a machine whose two
cores are shared by the walsender, the driver, the executors and the JVM; this one isolates the
executors' share of a streamed batch: what ``headwater.spark.source._record_batches`` spends on
the source's partitions (decode the pgoutput messages into typed Arrow rows, serialize them as
Arrow IPC, build the record batches Spark receives).

It loads bench table ``t`` (standalone_stream.py's) into a throwaway cluster, runs the ``small``
workload (pgbench transactions of 10 single-row UPDATEs), and reads its WAL with the source's own
stream reader in this process, as the Spark driver does (``initialOffset``,
``prepareForTriggerAvailableNow``, ``latestOffset``, ``partitions``; the options the pipeline runner
sets for Delta sinks: ``streamDelivery=rows``, ``valueFormat=payload``, ``headers=false``). The
partitions are pickled as Spark ships them; each is then unpickled and read in this process,
timed with process CPU time (best of ``--repeat``), and the output is checked: one typed row (or
event) per changed row, and a digest of the rows' content (all columns but the conversion time)
that stays the same across code changes.

    .venv/bin/python bench/spark_decode.py [--rows 200000] [--transactions 20000] [--repeat 3]
    .venv/bin/python bench/spark_decode.py --save /tmp/parts.pkl   # keep the partitions ...
    .venv/bin/python bench/spark_decode.py --load /tmp/parts.pkl   # ... and time them again (no cluster)
    .venv/bin/python bench/spark_decode.py --load /tmp/parts.pkl --profile /tmp/decode.prof  # cProfile
    py-spy record -o /tmp/decode.svg -- .venv/bin/python bench/spark_decode.py --load /tmp/parts.pkl

The fixed cost of a task (decoder, serializer and registry set-up) is timed too: an empty task, and
one that decodes a single transaction.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import hashlib
import pickle
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from headwater.engine.memory import tune_allocator
from headwater.engine.typed_rows import EVENT_MS, read_ipc
from headwater.spark.source import HeadwaterStreamReader, SourceSettings, WorkPartition, _record_batches
from standalone_stream import DB, PUB, SRC_SLOT, Bench

SLOT = "b_decode"
# the envelope's conversion time in a streamed event's value (differs from run to run)
_TS = re.compile(rb'"ts_(?:ms|us|ns)":\d+')


def _options(bench: Bench, slot: str) -> dict[str, str]:
    """The source options of bench/spark_pipeline.py, with what the pipeline runner adds for Delta sinks."""
    return {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": bench.pg.host, "database.port": str(bench.pg.port), "database.user": "postgres",
            "database.dbname": DB, "topic.prefix": "bench", "plugin.name": "pgoutput", "slot.name": slot,
            "publication.name": PUB, "publication.autocreate.mode": "filtered", "table.include.list": "public.t",
            "snapshot.mode": "no_data", "streamDelivery": "rows", "valueFormat": "payload", "headers": "false"}


def collect(args: argparse.Namespace) -> tuple[list[bytes], int]:
    """The pickled partitions of the small workload's WAL, as the driver plans them; and the rows changed."""
    bench = Bench(SimpleNamespace(rows=args.rows, keep=False, output_dir=None, headwater=None))
    try:
        bench.start()
        bench.load(args.rows)
        seg = bench.pgbench("small", args.rows, args.transactions)
        # a copy of the slot made before the workload: the feed streams from there
        bench.sql("SELECT pg_copy_logical_replication_slot(%s, %s, false, 'pgoutput')", (SRC_SLOT, SLOT))
        reader = HeadwaterStreamReader(SourceSettings.from_options(_options(bench, SLOT)))
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        t = time.monotonic()
        cpu = time.process_time()
        start = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        parts: list[bytes] = []
        batches = 0
        while True:
            end = reader.latestOffset(start, ReadAllAvailable())
            if end == start:
                break
            parts += [pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL) for p in reader.partitions(start, end)]
            batches += 1
            start = end
        reader.stop()
        print(f"driver: {batches} batch(es), {len(parts)} partition(s) in {time.monotonic() - t:.1f} s "
              f"({time.process_time() - cpu:.1f} s CPU of this process)", file=sys.stderr)
        return parts, seg.rows
    finally:
        bench.close()


def _digest(batches: list[Any], h: Any) -> tuple[int, int]:
    """(typed rows, events) of the record batches; their content into `h` (not the conversion times)."""
    typed = events = 0
    for batch in batches:
        for row in batch.to_pylist():
            if row["typed_rows"] is not None:
                for rows in read_ipc(row["typed_rows"]):
                    typed += rows.num_rows
                    rows = rows.drop_columns([EVENT_MS]) if EVENT_MS in rows.schema.names else rows
                    h.update(str(rows.schema).encode())
                    for column in rows.columns:
                        h.update(repr(column.to_pylist()).encode())
                row["typed_rows"] = None
            elif row["op"] in ("c", "u", "d"):
                events += 1
            row["value"] = _TS.sub(b"", (row["value"] or "").encode())
            h.update(repr(sorted(row.items())).encode())
    return typed, events


def run(parts: list[bytes], profile: cProfile.Profile | None = None) -> tuple[float, float, list[list[Any]]]:
    """(CPU seconds unpickling, CPU seconds reading) of every partition; the record batches of each."""
    unpickle = read = 0.0
    out = []
    for blob in parts:
        t = time.process_time()
        partition = pickle.loads(blob)
        unpickle += time.process_time() - t
        t = time.process_time()
        if profile is not None:
            profile.enable()
        out.append(list(_record_batches(partition)))
        if profile is not None:
            profile.disable()
        read += time.process_time() - t
    return unpickle, read, out


def task_fixed_cost(parts: list[bytes], messages: int = 0, repeat: int = 20) -> float:
    """CPU seconds of a fresh task (decoder, serializer and registry set-up) decoding the first
    `messages` messages of the first partition (0: an empty task), best of `repeat`."""
    partition: WorkPartition = pickle.loads(parts[0])
    items = []
    if messages:  # the first item with a table's changes (an item may hold a lone BEGIN)
        first = next(i for i in partition.items if i.chunk.relations and len(i.chunk.messages) >= messages)
        chunk = dataclasses.replace(first.chunk, messages=first.chunk.messages[:messages], relation_changes=[])
        items = [dataclasses.replace(first, chunk=chunk)]
    blob = pickle.dumps(WorkPartition(partition.decoder, partition.serializer, items, partition.typed_rows,
                                      partition.payload_values, partition.headers, partition.typed_changes))
    best = float("inf")
    for _ in range(repeat):
        fresh = pickle.loads(blob)
        t = time.process_time()
        list(_record_batches(fresh))
        best = min(best, time.process_time() - t)
    return best


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=200_000, help="table rows (default 200,000)")
    p.add_argument("--transactions", type=int, default=20_000,
                   help="pgbench transactions of 10 rows (default 20,000; the pipeline benchmark's small: 100,000)")
    p.add_argument("--repeat", type=int, default=3, help="timed rounds; the best is reported")
    p.add_argument("--save", metavar="FILE", help="write the pickled partitions and the rows changed to FILE")
    p.add_argument("--load", metavar="FILE", help="time the partitions of --save instead of making new ones")
    p.add_argument("--profile", metavar="OUT", help="cProfile one more round into OUT (pstats) and print its top")
    args = p.parse_args()
    tune_allocator()
    if args.load:
        parts, rows = pickle.loads(Path(args.load).read_bytes())
    else:
        parts, rows = collect(args)
        if args.save:
            Path(args.save).write_bytes(pickle.dumps((parts, rows), protocol=pickle.HIGHEST_PROTOCOL))
    best_read = best_unpickle = float("inf")
    first: list[list[Any]] | None = None
    for _ in range(args.repeat):
        unpickle, read, out = run(parts)
        best_read, best_unpickle = min(best_read, read), min(best_unpickle, unpickle)
        first = first if first is not None else out
    assert first is not None
    h = hashlib.sha256()
    typed, events = _digest([b for batches in first for b in batches], h)
    empty, small = task_fixed_cost(parts), task_fixed_cost(parts, 12)
    mib = sum(len(b) for b in parts) / 2**20
    print(f"{len(parts)} partition(s), {mib:.1f} MiB pickled; {typed:,} typed rows + {events:,} row events "
          f"= {typed + events:,} (changed rows {rows:,})")
    print(f"read (_record_batches): {best_read / rows * 1e6:5.2f} µs CPU per row ({rows / best_read:,.0f} rows/s "
          f"per core); unpickle: {best_unpickle / rows * 1e6:4.2f} µs per row; best of {args.repeat}")
    print(f"fixed cost per task: {empty * 1e3:.1f} ms CPU empty, {small * 1e3:.1f} ms with one transaction "
          "(its first 12 messages)")
    print(f"content digest: {h.hexdigest()[:16]}")
    if args.profile:
        import pstats

        profile = cProfile.Profile()
        run(parts, profile)
        profile.dump_stats(args.profile)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
    return 0 if typed + events == rows else 1


if __name__ == "__main__":
    sys.exit(main())
