"""The initial snapshot's plan, the same for every connector and both drivers: which tables, in
which order, with which SELECT, cut into which chunks, and which record carries which
`source.snapshot` marker.

The connector supplies the tables (with their keys) and a :class:`ChunkDialect`: the few queries
that count a table and find key bounds in its SQL. The standalone runner reads the chunks in
order on one connection; the Spark source hands them to executors, which read them in parallel
inside the same database snapshot.

A connector capturing several databases in one run (SQL Server's `database.names`) gives each
table a *partition* — Debezium snapshots each partition on its own, one after the other, each with
its own `first`/`last` markers. The plan keeps the partitions in the order the connector lists
them and orders tables within each one.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from headwater.engine.connector import ConnectorError
from headwater.relational.plugins import PluginError
from headwater.relational.snapshot_query import CustomSnapshotQuery
from headwater.relational.table import Table

log = logging.getLogger(__name__)

# keys sampled per chunk: chunks then come out within a few per cent of their size
SAMPLES_PER_CHUNK = 1024

Bound = tuple[str, ...]  # a key's column values as text


class SnapshotTable(Protocol):
    """A captured table as the plan needs it."""

    @property
    def collection(self) -> str: ...          # its data-collection name (`schema.table`, `db.schema.table`)

    @property
    def table(self) -> Table: ...

    @property
    def raw_columns(self) -> tuple[str, ...]: ...

    # Optional: `partition` (str) — the part of the run the table belongs to (SQL Server: its
    # database); `order_name` (str) — the name `table.include.list` order is matched against, when
    # it is not the data collection (SQL Server: `schema.table`, its collections being `db.schema.table`).


def partition_of(captured: Any) -> str:
    return str(getattr(captured, "partition", "") or "")


def order_name(captured: Any) -> str:
    return str(getattr(captured, "order_name", None) or captured.collection)


class ChunkDialect(Protocol):
    """The queries a connector runs, inside the snapshot, to plan a table's chunks."""

    def count(self, table: Any, select: str | None) -> int:
        """The table's rows (with a custom SELECT: an estimate is enough — it decides only which
        table's last record says `last` — and running the SELECT twice may cost much more)."""

    def sampled_bounds(self, table: Any, key: Sequence[str], rows: int, chunks: int,
                       percent: float) -> list[Bound]:
        """Up to `chunks - 1` bounds cutting a sample of `percent` % of the table's keys into
        equal shares, each a key below the table's largest one (never the last row: the chunk
        after it would be empty). Empty when the dialect cannot sample."""

    def exact_bounds(self, table: Any, key: Sequence[str], rows: int, size: int) -> list[Bound]:
        """Every `size`-th key in key order, never the last row."""

    def block_range(self, table: Any) -> tuple[int, int, int] | None:
        """For a table without a key: (rows, first block, last block) of its storage, or None
        when the database has no such addressing (the table is one chunk)."""


@dataclass(frozen=True)
class SnapshotChunk:
    """One chunk of one table: rows with `lower < key <= upper` (None: unbounded), or a block
    range `[blocks[0], blocks[1])` of a table without a key. The flags place its first and last
    records in the snapshot (the markers)."""

    table: Table
    raw_columns: tuple[str, ...]
    collection: str
    table_index: int
    chunk_index: int
    first_table: bool
    last_table: bool           # the last table with rows: its last record says "last"
    first_chunk: bool
    last_chunk: bool
    key_columns: tuple[str, ...]
    lower: Bound | None
    upper: Bound | None
    blocks: tuple[int, int] | None
    select: str | None         # the table's custom SELECT (a table read with one is one chunk)
    partition: str = ""        # the table's partition; first_table/last_table are the partition's
    # the table's rows as counted when planning (inside the snapshot; with a custom SELECT the
    # table's count, not the SELECT's); None: not counted. Notifications report it.
    table_rows: int | None = None


def snapshot_marker(first_in_table: bool, last_in_table: bool, first_table: bool, last_table: bool) -> str:
    """Debezium's `source.snapshot` value for a snapshot row: first / first_in_data_collection /
    true / last_in_data_collection / last. The snapshot's very last record says `last` even when
    empty tables follow it (the plan's `last_table` is the last table with rows)."""
    if last_in_table and last_table:
        return "last"
    if first_in_table and first_table:
        return "first"
    if last_in_table:
        return "last_in_data_collection"
    if first_in_table:
        return "first_in_data_collection"
    return "true"


def include_order(include_list: Sequence[str]) -> Any:
    """The sort key Debezium snapshots tables in: the order of `table.include.list` (the first
    pattern a table matches), alphabetically among the tables one pattern matches."""
    patterns = [re.compile(p, re.IGNORECASE) for p in include_list]

    def key(captured: SnapshotTable) -> tuple[int, tuple[str, ...]]:
        rank = next((i for i, p in enumerate(patterns) if p.fullmatch(order_name(captured))), len(patterns))
        return rank, captured.table.id.sort_key()
    return key


def select_overrides(config: Any) -> dict[str, str]:
    """`snapshot.select.statement.overrides`: data collection -> SELECT."""
    overrides = {}
    for name in config.get("snapshot.select.statement.overrides") or []:
        statement = config.raw.get(f"snapshot.select.statement.overrides.{name}")
        if statement:
            overrides[name] = statement
    return overrides


def snapshot_tables(config: Any, tables: Sequence[SnapshotTable], custom: CustomSnapshotQuery | None,
                    column_filter: Any) -> tuple[list[Any], dict[str, str]]:
    """(the tables whose rows are snapshotted, in order, and their custom SELECTs by data
    collection). Ordered by `table.include.list`; only those `snapshot.include.collection.list`
    names (when set). As Debezium decides per table: a `snapshot.select.statement.overrides`
    entry, else the custom snapshot query's SELECT (snapshot.query.mode=custom; None or blank:
    the table's rows are not snapshotted), else every column (no entry). Partitions keep the
    order of their first table in `tables`."""
    partitions: dict[str, int] = {}
    for captured in tables:
        partitions.setdefault(partition_of(captured), len(partitions))
    by_include = include_order(config.get("table.include.list") or [])
    ordered = sorted(tables, key=lambda t: (partitions[partition_of(t)], by_include(t)))
    include = [re.compile(p, re.IGNORECASE) for p in config.get("snapshot.include.collection.list") or []]
    if include:
        ordered = [t for t in ordered if any(p.fullmatch(t.collection) for p in include)]
    overrides = select_overrides(config)
    kept: list[Any] = []
    selects: dict[str, str] = {}
    for captured in ordered:
        statement = overrides.get(captured.collection)
        if statement is None and order_name(captured) != captured.collection:
            statement = overrides.get(order_name(captured))
        if statement is None and custom is not None:
            try:
                statement = custom.query(captured.table.id, list(captured.raw_columns), column_filter)
            except PluginError as exc:
                raise ConnectorError(str(exc)) from None
            if statement is None:
                log.warning("snapshot query %s gave no SELECT for table %s: its rows are not snapshotted (its "
                            "changes are streamed)", custom.spec, captured.collection)
                continue
            log.info("table %s is snapshotted with %s", captured.collection, statement)
        if statement is not None:
            selects[captured.collection] = statement
        kept.append(captured)
    return kept, selects


def table_chunks(dialect: ChunkDialect, captured: SnapshotTable, select: str | None,
                 size: int) -> tuple[int, list[tuple[Bound | None, Bound | None, tuple[int, int] | None]]]:
    """(row count, chunks) of a table: key ranges of about `size` keys, storage block ranges for a
    table without a key, one chunk for a small table or a custom SELECT. Bounds come from a
    sample of the keys when the table is large enough for one (planning then scans the table
    about like a count instead of numbering every row in key order), else from every key."""
    key = list(captured.table.primary_key)
    blocks = None if key or select else dialect.block_range(captured)
    rows = blocks[0] if blocks is not None else dialect.count(captured, select)
    if select or rows <= size:
        return rows, [(None, None, None)]
    if not key:
        if blocks is None:
            return rows, [(None, None, None)]
        _, first, last = blocks
        # block chunks run from the block of the first visible row to that of the last, so that
        # the first chunk holds the table's first row and the last chunk its last (the markers go
        # on them); chunks in between may be empty
        per = max(1, (last - first + 1) * size // max(rows, 1))
        edges = [*range(first, last + 1, per), last + 1]
        return rows, [(None, None, (lo, hi)) for lo, hi in itertools.pairwise(edges)]
    chunks = -(-rows // size)
    wanted = chunks * SAMPLES_PER_CHUNK
    bounds: list[Bound] | None = None
    if 4 * wanted < rows:
        sampled = dialect.sampled_bounds(captured, key, rows, chunks, 100.0 * wanted / rows)
        # too thin a sample to cut the table into at least half the chunks wanted: count instead
        bounds = sampled if len(sampled) >= (chunks - 1) // 2 and sampled else None
    if bounds is None:
        bounds = dialect.exact_bounds(captured, key, rows, size)
    edges: list[Bound | None] = [None, *bounds, None]
    return rows, [(lo, hi, None) for lo, hi in itertools.pairwise(edges)]


def plan_chunks(dialect: ChunkDialect, tables: Sequence[Any], selects: dict[str, str],
                size: int | None) -> list[SnapshotChunk]:
    """Every table's chunks, in snapshot order, with their markers' places. `size` None: one
    chunk per table, not counted: the reader, which reads them in order, marks the snapshot's
    last record itself (see :class:`LastRecordMarker`)."""
    plans = []
    for captured in tables:
        select = selects.get(captured.collection)
        if size is None:
            plans.append((captured, -1, [(None, None, None)]))
        else:
            plans.append((captured, *table_chunks(dialect, captured, select, size)))
    # markers are per partition: its first table, and its last table with rows
    first_of: dict[str, int] = {}
    last_of: dict[str, int] = {}
    with_rows: dict[str, int] = {}
    for index, (captured, rows, _) in enumerate(plans):
        part = partition_of(captured)
        first_of.setdefault(part, index)
        last_of[part] = index
        if rows != 0:
            with_rows[part] = index
    last_of.update(with_rows)
    out: list[SnapshotChunk] = []
    for index, (captured, rows, bounds) in enumerate(plans):
        part = partition_of(captured)
        for n, (lower, upper, blocks) in enumerate(bounds):
            out.append(SnapshotChunk(
                table=captured.table, raw_columns=captured.raw_columns, collection=captured.collection,
                table_index=index, chunk_index=n, first_table=index == first_of[part],
                last_table=index == last_of[part], first_chunk=n == 0, last_chunk=n == len(bounds) - 1,
                key_columns=tuple(captured.table.primary_key) if blocks is None else (),
                lower=lower, upper=upper, blocks=blocks, select=selects.get(captured.collection), partition=part,
                table_rows=rows if rows >= 0 else None))
    return out


class LastRecordMarker:
    """For a snapshot read in order: holds each record back until the next one arrives, so that
    the snapshot's very last record can be marked `last` even when empty tables follow it (as
    Debezium does; the plan's markers alone would say `last_in_data_collection` there)."""

    def __init__(self, emit: Any) -> None:
        self._emit = emit
        self._held: list[Any] = []

    def __call__(self, item: Any) -> None:
        if self._held:
            self._emit(self._held.pop())
        self._held.append(item)

    def finish(self) -> None:
        if not self._held:
            return
        record = self._held.pop()
        value = getattr(record, "value", None)
        source = value.get("source") if isinstance(value, dict) else None
        # a data record only (an envelope with `op`): a schema change record also says
        # snapshot=true, but is never the snapshot's `last`
        if isinstance(source, dict) and "op" in value and source.get("snapshot") not in (None, "false"):
            source["snapshot"] = "last"
        self._emit(record)
