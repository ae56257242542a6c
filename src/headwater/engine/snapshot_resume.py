"""The initial snapshot's progress, kept in offsets, so that a snapshot interrupted by a crash
resumes at its next chunk instead of starting over (beyond Debezium, which takes the whole
snapshot again; see docs/compat.md, "Resumable initial snapshot").

The plan reads tables in order and each table's chunks in key order, so progress is a cursor:
the tables read completely (`done`), and for the table being read, the upper key of its last
completed chunk (`after`). A snapshot record's offset carries the progress made before it was
handed on (under :data:`PROGRESS_KEY`, JSON text: offsets stay flat and primitive, as Spark's
offset log needs them).

Resuming reads at a *new* consistent point: what was read at the first one stays delivered, and
the rest is read as it is now. Streaming then starts at the snapshot's original position, so
every change since the first point comes after the resumed reads; replayed in order the events
end in the tables' state. Rows of a table without a key have no order that survives a new point
(PostgreSQL's block addresses move with updates): such a table, if interrupted, is read again
whole.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from headwater.engine.snapshot_plan import Bound, SnapshotChunk

log = logging.getLogger(__name__)

PROGRESS_KEY = "snapshot_progress"
# the Spark source's snapshot batches: where streaming starts once the snapshot is complete
STREAM_FROM_KEY = "snapshot_stream_from"


@dataclass(frozen=True)
class SnapshotProgress:
    """Tables read completely, and the table being read with the upper key of its last
    completed chunk (None: no chunk of it completed)."""

    done: tuple[str, ...] = ()
    table: str | None = None
    key_columns: tuple[str, ...] = ()
    after: Bound | None = None

    @property
    def empty(self) -> bool:
        return not self.done and self.table is None

    def to_text(self) -> str:
        return json.dumps({"done": list(self.done), "table": self.table, "key": list(self.key_columns),
                           "after": list(self.after) if self.after is not None else None},
                          separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_text(cls, text: Any) -> SnapshotProgress:
        """ValueError when `text` is not a progress this module wrote."""
        data = json.loads(text) if isinstance(text, str) else None
        if not isinstance(data, dict):
            raise ValueError(f"not a snapshot progress: {text!r}")
        done, table, key, after = data.get("done"), data.get("table"), data.get("key") or [], data.get("after")
        if not isinstance(done, list) or not all(isinstance(d, str) for d in done):
            raise ValueError(f"snapshot progress without a list of done tables: {text!r}")
        if table is not None and not isinstance(table, str):
            raise ValueError(f"snapshot progress with a bad table: {text!r}")
        if not isinstance(key, list) or (after is not None and (not isinstance(after, list) or len(after) != len(key))):
            raise ValueError(f"snapshot progress with a bad key: {text!r}")
        if table is not None and after is None:
            table, key = None, []
        return cls(tuple(done), table, tuple(str(k) for k in key),
                   tuple(str(a) for a in after) if after is not None else None)

    def after_chunk(self, chunk: SnapshotChunk) -> SnapshotProgress:
        """The progress once `chunk` (the next in plan order) has been read completely."""
        if chunk.last_chunk:
            return SnapshotProgress((*self.done, chunk.collection))
        if resumable_inside(chunk) and chunk.upper is not None:
            return SnapshotProgress(self.done, chunk.collection, chunk.key_columns, chunk.upper)
        return self  # a block range of a table without a key: that table is read again whole if interrupted


def resumable_inside(chunk: SnapshotChunk) -> bool:
    """Whether a table can be resumed between its chunks: key ranges, not a custom SELECT."""
    return chunk.blocks is None and bool(chunk.key_columns) and chunk.select is None


def progress_of(offset: Any) -> SnapshotProgress | None:
    """The progress an offset carries; None when it has none or it cannot be read (logged)."""
    if not isinstance(offset, dict) or offset.get(PROGRESS_KEY) is None:
        return None
    try:
        return SnapshotProgress.from_text(offset[PROGRESS_KEY])
    except ValueError as exc:
        log.warning("the stored snapshot progress cannot be read (%s): the snapshot is taken again from the start", exc)
        return None


def without_progress(offset: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in offset.items() if k not in (PROGRESS_KEY, STREAM_FROM_KEY)}


def with_progress(offset: dict[str, Any], progress: SnapshotProgress) -> dict[str, Any]:
    return {**offset, PROGRESS_KEY: progress.to_text()}


class ProgressStamp:
    """Puts the snapshot's progress into the offsets of the records handed on. The progress is
    that at hand-over time: the reader holds each record back until the next one arrives (see
    LastRecordMarker), so a chunk's last record goes out once the chunk is complete and says so."""

    def __init__(self, progress: SnapshotProgress) -> None:
        self.progress = progress
        self._text = progress.to_text()
        self._last: tuple[int, dict[str, Any], dict[str, Any]] | None = None  # (id, offset, stamped)

    def advance(self, chunk: SnapshotChunk) -> None:
        progress = self.progress.after_chunk(chunk)
        if progress != self.progress:
            self.progress = progress
            self._text = progress.to_text()
            self._last = None

    def __call__(self, item: Any) -> None:
        offset = getattr(item, "offset", None)
        if not isinstance(offset, dict):
            return
        last = self._last
        if last is not None and last[0] == id(offset) and last[1] is offset:
            item.offset = last[2]
            return
        stamped = {**offset, PROGRESS_KEY: self._text}
        self._last = (id(offset), offset, stamped)
        item.offset = stamped


def remaining(chunks: Sequence[SnapshotChunk], progress: SnapshotProgress | None) -> list[SnapshotChunk]:
    """The chunks of a plan (made at a new point) still to read after `progress`: tables read
    completely are skipped; the table being read is read from after its last completed chunk's
    key, as one chunk (its bounds at the first point are not known here); a table without a key
    (or read with a custom SELECT, or whose key changed) again whole. In a partition where
    anything was read, no record is the snapshot's `first` again."""
    if progress is None or progress.empty:
        return list(chunks)  # nothing completed: everything is read again, from its `first` record
    done = set(progress.done)
    started = {c.partition for c in chunks if c.collection in done or c.collection == progress.table}
    out: list[SnapshotChunk] = []
    rest_of: str | None = None
    for chunk in chunks:
        if chunk.collection in done:
            continue
        if chunk.collection == progress.table and progress.after is not None and resumable_inside(chunk) \
                and chunk.key_columns == progress.key_columns:
            if rest_of == chunk.collection:
                continue  # folded into the table's rest
            rest_of = chunk.collection
            chunk = dataclasses.replace(chunk, lower=progress.after, upper=None, first_chunk=False, last_chunk=True)
        elif chunk.collection == progress.table and chunk.first_chunk:
            log.info("table %s is read again whole (%s)", chunk.collection,
                     "its key changed" if resumable_inside(chunk) else "its rows have no key order to resume in")
        if chunk.partition in started and chunk.first_table:
            chunk = dataclasses.replace(chunk, first_table=False)
        out.append(chunk)
    return out


def between(chunks: Sequence[SnapshotChunk], start: SnapshotProgress | None,
            end: SnapshotProgress | None) -> list[SnapshotChunk]:
    """The chunks of a plan (made at any point) covering what lies after `start` and up to
    `end` (None: the end of the snapshot) — a batch of the Spark source's snapshot read again by
    a process that did not plan it. The ranges come from the two progresses alone, so they
    join up with the batches before and after whatever the plan's own bounds."""
    rest = remaining(chunks, start)
    if end is None:
        return rest
    done = set(end.done)
    out: list[SnapshotChunk] = []
    cut_of: str | None = None
    for chunk in rest:
        if chunk.collection in done:
            out.append(chunk)
        elif chunk.collection == end.table and end.after is not None and cut_of != chunk.collection:
            cut_of = chunk.collection  # from where the table's rest starts (after `start`'s key, if its)
            out.append(dataclasses.replace(chunk, upper=end.after, blocks=None, key_columns=end.key_columns,
                                           last_chunk=False))
    return out
