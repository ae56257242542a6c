"""JSONL files from Spark: one file per topic per micro-batch, the embedded default destination.

`<path>/<topic>/<batch id, 12 digits>.jsonl` holds the batch's records of that topic in position
order, one per line, in the standalone runner's line format
(`{"topic","key","value","headers"}` with the converter's JSON embedded as is). Writing is
idempotent by batch id: a file is written under a temporary name and renamed into place, so a
replayed batch replaces its own files and a reader never sees half a file. The path must be
visible to every executor (local mode, or a shared filesystem).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

BATCH_FILE = "{batch_id:012d}.jsonl"


def jsonl_line(topic: str, key: str | None, value: str | None, headers: Any) -> bytes:
    """One record as the standalone jsonl sink writes it (byte for byte)."""
    parts = [b'{"topic":', orjson.dumps(topic), b',"key":', b"null" if key is None else key.encode(),
             b',"value":', b"null" if value is None else value.encode(), b',"headers":[']
    for i, header in enumerate(headers or ()):
        if i:
            parts.append(b",")
        parts += (b'{"key":', orjson.dumps(header["key"]), b',"value":', bytes(header["value"] or b"null"), b"}")
    parts.append(b"]}\n")
    return b"".join(parts)


def topic_directory(topic: str) -> str:
    """A topic as a directory name (topics may hold characters a file name must not)."""
    return topic.replace(os.sep, "_") if topic not in (".", "..") else f"_{topic}"


def _write_partition(rows: Any, root: str, batch_id: int) -> None:
    """Executor side: rows arrive sorted by (topic, position); one file per topic."""
    current: str | None = None
    handle: Any = None
    tmp = final = ""

    def close() -> None:
        if handle is not None:
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            os.replace(tmp, final)

    for row in rows:
        if row["topic"] != current:
            close()
            current = row["topic"]
            directory = Path(root) / topic_directory(current)
            directory.mkdir(parents=True, exist_ok=True)
            final = str(directory / BATCH_FILE.format(batch_id=batch_id))
            tmp = f"{final}.tmp-{os.getpid()}"
            handle = open(tmp, "wb")  # closed in close()
        handle.write(jsonl_line(row["topic"], row["key"], row["value"], row["headers"]))
    close()


class JsonlSink:
    """`foreachBatch` destination: ``JsonlSink(path).write(batch_df, batch_id)``."""

    def __init__(self, path: str | os.PathLike[str], *, partitions: int | None = None) -> None:
        self.path = str(Path(path).resolve())
        self.partitions = partitions

    def write(self, batch: Any, batch_id: int) -> None:
        Path(self.path).mkdir(parents=True, exist_ok=True)
        columns = batch.select("topic", "key", "value", "headers", "position")
        n = self.partitions or max(1, min(8, columns.rdd.getNumPartitions()))
        ordered = columns.repartition(n, "topic").sortWithinPartitions("topic", "position")
        root = self.path
        ordered.foreachPartition(lambda rows: _write_partition(rows, root, batch_id))

    def __repr__(self) -> str:
        return f"JsonlSink({self.path!r})"
