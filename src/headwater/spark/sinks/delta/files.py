"""Snapshots into new current-state tables, and rewrites of them, without Spark's writer: the
executors write the rows as Parquet files with pyarrow (a snapshot's typed rows, which they
decode first, or the rows of a rewrite's join), the driver commits the files to the Delta log in
one transaction with delta-rs (``deltalake``): an append, or an overwrite of the version read.

Why: a snapshot into a table this sink has just created merges with nothing, it only appends.
Spark's Delta writer takes the rows back from Python into the JVM, writes them and computes
statistics on every column: much of a snapshot's time, where pyarrow writes the same files in
the time the rows take to reach the JVM (bench/README.md).

What the commit holds is what Spark's append would have committed: one ``add`` per file with its
statistics, and the idempotent-write id (``txn``: app id and batch id) the sink gives its writes.
Statistics: ``numRecords``; ``nullCount`` for the indexed columns Delta would collect
(``delta.dataSkippingStatsColumns``, else the first ``delta.dataSkippingNumIndexedCols`` leaf
columns, 32 by default); ``minValues``/``maxValues`` only where they are exact and Delta's
encoding is plain — integers, dates, and strings (a string longer than Delta's 32-character
prefix gets its prefix as minimum and no maximum). A column without a bound is never used to
skip a file, so a missing bound costs only skipping, a wrong one would lose rows.

Used only when it is safe (:func:`writable_configuration`): the table is on a filesystem the executors and
the driver reach by path (a local path or ``file:`` URI; on a cluster, a shared mount), it has no
column mapping (the files would need its physical column names), and its protocol is one Spark
gives the tables this sink creates (reader 1 and writer 2, or with a ``timestamp_ntz`` column
reader 3 and writer 7 with the features that brings). Anything else goes through Spark.
A task Spark retries leaves its first file behind, unreferenced (as Spark's writer does);
``VACUUM`` removes such files.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any

# what Delta collects statistics for by default, and how long its string bounds are
DEFAULT_INDEXED_COLUMNS = 32
STRING_PREFIX = 32
# a task starts a new file after this many rows (bench/README.md gives the size of such a file of
# the benchmark's rows): a snapshot's tasks each take many chunks (one task per core), which in one
# file would be huge
FILE_ROWS = 4 << 20
# a file path Spark's reader takes as it is (no glob pattern, no URI scheme or escapes)
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9_./=+-]+")
# what the writer yields per file: its name in the table directory, bytes, rows, Delta statistics
FILE_COLUMNS = "path string, size bigint, rows bigint, stats string"


def local_directory(path: str) -> str | None:
    """The filesystem path of a table location the executors can write with plain file I/O
    (an absolute path or a ``file:`` URI), else None (``s3a://``, ``abfss://``, ``hdfs://``…)."""
    if path.startswith("file:"):
        rest = path[len("file:"):]
        if rest.startswith("//"):  # file:///abs (empty authority) or file://localhost/abs
            authority, _, tail = rest[2:].partition("/")
            if authority not in ("", "localhost"):
                return None
            rest = "/" + tail
        return rest if rest.startswith("/") else None
    if "://" in path or not os.path.isabs(path):
        return None
    return path


# the table features of the protocols Spark gives the tables this sink creates: none (reader 1,
# writer 2), or with a timestamp_ntz column (timestamp without time zone) these (reader 3, writer 7)
READER_FEATURES = frozenset({"timestampNtz"})
WRITER_FEATURES = frozenset({"timestampNtz", "invariants", "appendOnly"})


def writable_configuration(directory: str) -> dict[str, str | None] | None:
    """The configuration of the table at `directory` if delta-rs may commit to it as Spark would
    (one of the protocols Spark gives the tables this sink creates, no column mapping), else None."""
    from deltalake import DeltaTable

    table = DeltaTable(directory)
    protocol = table.protocol()
    configuration = dict(table.metadata().configuration)
    readers, writers = set(protocol.reader_features or ()), set(protocol.writer_features or ())
    plain = ((protocol.min_reader_version, protocol.min_writer_version) in ((1, 2), (1, 1))
             and not readers and not writers)
    featured = ((protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
                and readers <= READER_FEATURES and writers <= WRITER_FEATURES)
    unmapped = configuration.get("delta.columnMapping.mode", "none") == "none"
    return configuration if (plain or featured) and unmapped else None


def describe(directory: str) -> tuple[dict[str, str | None], str] | None:
    """(configuration, schema as JSON — Spark's StructType JSON) of the table at `directory`, read
    from its log, without the Spark jobs of ``detail()`` and a schema read that a pipeline paid
    when it first met a table (bench/README.md); None when there is no table. Raises ``deltalake`` errors for a table it
    cannot read (the caller asks Spark then)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(directory)
    except TableNotFoundError:
        return None
    return dict(table.metadata().configuration), table.schema().to_json()


def stored_rows(directory: str) -> int | None:
    """The rows of the table at `directory` as its log's statistics count them (no data read),
    or None when they cannot: a file without ``numRecords``, or deletion vectors (a file's count
    would include its deleted rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    table = DeltaTable(directory)
    protocol = table.protocol()
    if "deletionVectors" in set(protocol.reader_features or ()) | set(protocol.writer_features or ()):
        return None
    counts = pa.table(table.get_add_actions(flatten=True)).column("num_records")
    if counts.null_count:
        return None
    return int(pc.sum(counts).as_py() or 0)


def version_rows(session: Any, directory: str) -> tuple[int, Any]:
    """(version, rows) of the table at `directory` (a table :func:`writable_configuration`
    accepts): its current version and a DataFrame of that version's rows, read as the Parquet
    files its log lists for it, in the table's schema. Reading the table through Spark's Delta
    source first rebuilds the log's state in Spark jobs of their own, a fixed cost of every
    rewrite (bench/README.md); delta-rs reads the same log on the driver. The tables such a commit
    writes hold no deletion vectors (their protocol has none) and no partition values outside the
    files (unpartitioned); a partitioned table, or file paths Spark would take for patterns or
    URIs (anything but letters, digits and ``_./=+-``), are read through Spark's Delta source."""
    import json

    from deltalake import DeltaTable
    from pyspark.sql.types import StructType

    table = DeltaTable(directory)
    version = table.version()
    schema = StructType.fromJson(json.loads(table.schema().to_json()))
    files = table.file_uris()
    if table.metadata().partition_columns or not all(_PLAIN_PATH.fullmatch(f) for f in files):
        return version, session.read.format("delta").option("versionAsOf", version).load(directory)
    if not files:
        return version, session.createDataFrame([], schema)
    # a file older than a column the table gained reads NULL for it, as Delta's reader gives it
    return version, session.read.schema(schema).parquet(*files)


def arrow_writable(table_schema: Any) -> bool:
    """Whether rows of `table_schema` (a Spark StructType) can go through Arrow into files that
    need no checks on write: every column nullable (a NOT NULL column is an invariant Spark
    checks when it writes) and of a type Spark hands to Python as Arrow."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if not all(f.nullable for f in table_schema.fields):
        return False
    try:
        to_arrow_schema(table_schema, timezone="UTC")
    except Exception:  # PySpark raises its own error classes for types Arrow cannot carry
        return False
    return True


# Spark types that need no table feature: a table of only these gets protocol (1, 2) from Spark's
# creation as from delta-rs's (timestamp_ntz brings a feature, and so do variant and others)
_PLAIN_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType",
                "StringType", "BinaryType", "BooleanType", "DateType", "TimestampType")


def plain_schema(data_type: Any) -> bool:
    """Whether a Spark type (a table's StructType) holds only types of Delta's plain protocol
    (reader 1, writer 2), nested in structs, arrays and maps, without field metadata."""
    name = type(data_type).__name__
    if name == "StructType":
        return all(not f.metadata and plain_schema(f.dataType) for f in data_type.fields)
    if name == "ArrayType":
        return plain_schema(data_type.elementType)
    if name == "MapType":
        return plain_schema(data_type.keyType) and plain_schema(data_type.valueType)
    return name in _PLAIN_TYPES


def create(directory: str, table_schema: Any, configuration: dict[str, str]) -> None:
    """Create a table of `table_schema` (a Spark StructType of :func:`plain_schema`) with
    `configuration`, unless one exists there: version 0 as Spark's creation writes it (the same
    schema, configuration and protocol (1, 2)), without Spark's creation, a fixed cost of the
    snapshot batch it ran in (bench/README.md). The caller makes sure the session adds nothing of its own to
    new tables (``spark.databricks.delta.properties.defaults.*``)."""
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import PostCommitHookProperties

    DeltaTable.create(directory, Schema.from_json(table_schema.json()), mode="ignore", configuration=configuration,
                      raise_if_key_not_exists=False,  # properties outside delta.* (the sink's own) are kept
                      post_commithook_properties=PostCommitHookProperties(create_checkpoint=False,
                                                                          cleanup_expired_logs=False))


def create_with_files(directory: str, table_schema: Any, files: list[WrittenFile], app_id: str, version: int) -> None:
    """Create a table of `table_schema` (a Spark StructType of :func:`plain_schema`) holding
    `files`, in one commit carrying the idempotent-write id (`app_id`, `version`): version 0 as
    Spark's first append into a new path writes it (no configuration, protocol (1, 2)). Fails if a
    table exists there."""
    from deltalake import Schema
    from deltalake.transaction import (
        AddAction,
        CommitProperties,
        PostCommitHookProperties,
        Transaction,
        create_table_with_add_actions,
    )

    now = int(time.time() * 1000)
    create_table_with_add_actions(
        directory, Schema.from_json(table_schema.json()), [AddAction(f.path, f.size, {}, now, True, f.stats)
                                                           for f in files],
        mode="error", configuration={},
        commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)]),
        post_commithook_properties=PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False))


def nullable_type(data_type: Any) -> Any:
    """A Spark type with every field, element and value nullable and no field metadata: Delta
    stores the columns Spark writes as nullable, so only names and types have to agree."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(data_type, StructType):
        return StructType([StructField(f.name, nullable_type(f.dataType), True) for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(nullable_type(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(nullable_type(data_type.keyType), nullable_type(data_type.valueType), True)
    return data_type


# session settings that change what Spark puts into a new table (properties, protocol)
SESSION_TABLE_DEFAULTS = ("spark.databricks.delta.properties.defaults.", "spark.databricks.delta.protocol.")


def session_adds_to_new_tables(session: Any) -> bool:
    """Whether the session's settings add properties or protocol features to the tables Spark
    creates (then delta-rs would not create the same table)."""
    return any(key.startswith(SESSION_TABLE_DEFAULTS) for key in session.conf.getAll)


def indexed_columns(columns: list[tuple[str, Any]], configuration: dict[str, str | None]) -> list[str]:
    """The top-level columns Delta collects statistics for: the ones named in
    ``delta.dataSkippingStatsColumns``, else those whose leaves are among the first
    ``delta.dataSkippingNumIndexedCols`` leaf columns (-1: all). `columns` are (name, Spark type)."""
    from pyspark.sql.types import StructType

    named = configuration.get("delta.dataSkippingStatsColumns")
    if named:
        wanted = {n.strip().strip("`").lower() for n in named.split(",")}
        return [name for name, _ in columns if name.lower() in wanted]
    limit = int(configuration.get("delta.dataSkippingNumIndexedCols") or DEFAULT_INDEXED_COLUMNS)

    def leaves(kind: Any) -> int:
        return sum(leaves(f.dataType) for f in kind.fields) if isinstance(kind, StructType) else 1
    chosen, seen = [], 0
    for name, kind in columns:
        if limit >= 0 and seen >= limit:
            break
        count = leaves(kind)
        if not isinstance(kind, StructType) and (limit < 0 or seen + count <= limit):
            chosen.append(name)
        seen += count
    return chosen


class _Bounds:
    """One column's statistics over the batches of a file."""

    def __init__(self, kind: Any) -> None:
        import pyarrow as pa

        self.nulls = 0
        self.low: Any = None
        self.high: Any = None
        self.exact_high = True
        self.ranged = (pa.types.is_integer(kind) or pa.types.is_date32(kind) or pa.types.is_string(kind)
                       or pa.types.is_large_string(kind))
        self.text = pa.types.is_string(kind) or pa.types.is_large_string(kind)

    def add(self, values: Any) -> None:
        import pyarrow.compute as pc

        self.nulls += values.null_count
        if not self.ranged or values.null_count == len(values):
            return
        bounds = pc.min_max(values)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if self.text and max(len(low), len(high)) > STRING_PREFIX:
            # longer values: Delta keeps a prefix; the prefix of the minimum is still a lower bound,
            # a maximum would need Delta's own rounding up, so there is none
            self.exact_high = self.exact_high and len(high) <= STRING_PREFIX
            low = low[:STRING_PREFIX]
        self.low = low if self.low is None or low < self.low else self.low
        self.high = high if self.high is None or high > self.high else self.high

    @staticmethod
    def json_value(value: Any) -> Any:
        return value.isoformat() if isinstance(value, date) else value  # Delta's stats: dates as text


def _repetitive(batch: Any) -> list[str]:
    """The columns worth dictionary-encoding: at most half their values distinct in `batch` (the
    file's first). Dictionary-encoding a column of unique values (keys, positions, documents)
    only to fall back to plain encoding cost more than the rest of the write, and the files were
    no smaller (bench/README.md)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chosen = []
    for name, column in zip(batch.schema.names, batch.columns):
        try:
            distinct = pc.count_distinct(column, mode="all").as_py()
        except pa.ArrowNotImplementedError:  # a type without the kernel: Parquet's default, a dictionary
            distinct = 0
        if distinct <= batch.num_rows / 2:
            chosen.append(name)
    return chosen


class _File:
    """One Parquet file being written, and its statistics."""

    def __init__(self, directory: str, partition: int, schema: Any, stats_columns: list[str], first: Any) -> None:
        import pyarrow.parquet as pq

        self.name = f"part-{partition:05d}-{uuid.uuid4()}-c000.snappy.parquet"
        self.target = os.path.join(directory, self.name)
        self.writer: Any = pq.ParquetWriter(self.target, schema, compression="snappy",
                                            use_dictionary=_repetitive(first))
        self.rows = 0
        self.bounds = {c: _Bounds(schema.field(c).type) for c in stats_columns}

    def write(self, batch: Any) -> None:
        self.writer.write_batch(batch)
        self.rows += batch.num_rows
        for column, bound in self.bounds.items():
            bound.add(batch.column(column))

    def close(self) -> Any:
        """Finish the file; its row of :data:`FILE_COLUMNS`."""
        import pyarrow as pa

        self.writer.close()
        self.writer = None
        stats: dict[str, Any] = {"numRecords": self.rows, "minValues": {}, "maxValues": {},
                                 "nullCount": {c: b.nulls for c, b in self.bounds.items()}}
        for column, bound in self.bounds.items():
            if bound.low is not None:
                stats["minValues"][column] = bound.json_value(bound.low)
                if bound.exact_high:
                    stats["maxValues"][column] = bound.json_value(bound.high)
        # the inferred types are FILE_COLUMNS' (str → string, int → int64)
        return pa.RecordBatch.from_pydict(
            {"path": [self.name], "size": [os.path.getsize(self.target)], "rows": [self.rows],
             "stats": [json.dumps(stats, separators=(",", ":"), ensure_ascii=False)]})


class _FileWriter:
    """``mapInArrow`` function: batches of the table's columns (:meth:`_table_batches`) → Parquet
    files in `directory`, a new one every `file_rows` rows; yields one row per file written
    (:data:`FILE_COLUMNS`)."""

    def __init__(self, directory: str, table_schema: Any, stats_columns: list[str],
                 file_rows: int = FILE_ROWS) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.directory = directory
        self.file_rows = file_rows
        self.schema = to_arrow_schema(table_schema, timezone="UTC")  # Spark exchanges instants in UTC
        self.stats_columns = [c for c in stats_columns if c in self.schema.names]

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        output = _Output(self, _task_partition())
        try:
            for rows_batch in self._table_batches(batches):
                yield from output.add(rows_batch)
            yield from output.finish()
        finally:
            output.abandon()

    def _table_batches(self, batches: Iterator[Any]) -> Iterator[Any]:
        raise NotImplementedError


def _task_partition() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class _Output:
    """The files one task writes for one writer: the open one, and a new one every `file_rows` rows."""

    def __init__(self, writer: _FileWriter, partition: int) -> None:
        self.writer = writer
        self.partition = partition
        self.file: _File | None = None

    def add(self, rows_batch: Any) -> list[Any]:
        """Write a batch of the table's columns; the rows of the files it finished."""
        if rows_batch.num_rows == 0:
            return []
        w = self.writer
        if self.file is None:
            self.file = _File(w.directory, self.partition, w.schema, w.stats_columns, rows_batch)
        self.file.write(rows_batch)
        if self.file.rows < w.file_rows:
            return []
        done, self.file = self.file, None
        return [done.close()]

    def finish(self) -> list[Any]:
        done, self.file = self.file, None
        return [done.close()] if done is not None else []

    def abandon(self) -> None:
        if self.file is not None:  # a failed task: its file stays unreferenced
            self.file.writer.close()
            self.file = None


# what the paired writer yields per file: FILE_COLUMNS and which of its writers wrote the file
PAIRED_FILE_COLUMNS = f"{FILE_COLUMNS}, writer int"


class PairedFileWriter:
    """``mapInArrow`` function: one pass over the records feeding two writers, each given its
    columns of them (e.g. a snapshot's change log and its current-state table, both written from
    the same typed rows); yields :data:`PAIRED_FILE_COLUMNS`. Two writers in one job read the
    batch's records once, where a job each read them twice and paid a job's fixed costs twice
    (bench/README.md)."""

    def __init__(self, *writers: tuple[_FileWriter, list[str]]) -> None:
        self.writers = writers

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        def tagged(done: Any, index: int) -> Any:
            return pa.RecordBatch.from_arrays([*done.columns, pa.array([index] * done.num_rows, pa.int32())],
                                              names=[*done.schema.names, "writer"])
        partition = _task_partition()
        outputs = [_Output(writer, partition) for writer, _ in self.writers]
        try:
            for batch in batches:
                for index, ((writer, columns), output) in enumerate(zip(self.writers, outputs)):
                    for rows_batch in writer._table_batches(iter([batch.select(columns)])):
                        for done in output.add(rows_batch):
                            yield tagged(done, index)
            for index, output in enumerate(outputs):
                for done in output.finish():
                    yield tagged(done, index)
        finally:
            for output in outputs:
                output.abandon()


class TableFileWriter(_FileWriter):
    """Rows Spark already holds in the table's columns and types (a rewrite's result) → files."""

    def _table_batches(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        target = self.schema
        for batch in batches:
            # same columns and types; the table's schema (its nullability) for the file
            arrays = [column.cast(f.type) if column.type != f.type else column
                      for column, f in zip(batch.columns, target)]
            yield pa.RecordBatch.from_arrays(arrays, schema=target)


class ParquetFileWriter(_FileWriter):
    """Records of typed snapshot rows (the Arrow IPC streams of ``typed_rows``) → files of the
    table's columns."""

    def __init__(self, directory: str, table_schema: Any, stats_columns: list[str], *, position: str, op: str,
                 ts_ms: str, file_rows: int = FILE_ROWS) -> None:
        super().__init__(directory, table_schema, stats_columns, file_rows)
        self.position, self.op, self.ts_ms = position, op, ts_ms  # the table's columns for these

    def _table_batches(self, batches: Iterator[Any]) -> Iterator[Any]:
        """The records' typed rows as batches of the table's columns: the row's columns by name
        (one the rows lack, a column added since, is NULL), position, op and commit time from the
        row columns (:mod:`headwater.engine.typed_rows`)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from headwater.engine import typed_rows

        for part in typed_rows.from_ipc(batches):
            names = set(part.schema.names)
            arrays = []
            for f in self.schema:
                if f.name == self.position:
                    array = part.column(typed_rows.POSITION)
                elif f.name == self.op:
                    array = part.column(typed_rows.OP)
                elif f.name == self.ts_ms:  # floor(ts_us / 1000) as Spark's append computes it
                    micros = pc.cast(part.column(typed_rows.TS_US), pa.float64())
                    array = pc.cast(pc.floor(pc.divide(micros, 1000.0)), pa.int64())
                elif f.name in names:
                    array = part.column(f.name)
                else:
                    array = pa.nulls(part.num_rows, f.type)
                arrays.append(array.cast(f.type) if array.type != f.type else array)
            yield pa.RecordBatch.from_arrays(arrays, schema=self.schema)


@dataclass
class WrittenFile:
    path: str  # relative to the table
    size: int
    rows: int
    stats: str


def commit(directory: str, files: list[WrittenFile], app_id: str, version: int,
           replacing: int | None = None) -> bool:
    """Add `files` to the table in one commit carrying the idempotent-write id (`app_id`,
    `version`), unless a commit with that id (or a later one) is already there. With `replacing`
    (a table version), the commit is an overwrite of that version: it removes every file the
    version held and must be the version right after it. delta-rs would otherwise retry on top of
    a commit made in between (its conflict check lets an overwrite follow an append), keeping that
    commit's rows beside a rewrite that did not see them; without retries it fails instead.
    True if committed."""
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import AddAction, CommitProperties, PostCommitHookProperties, Transaction

    table = DeltaTable(directory) if replacing is None else DeltaTable(directory, version=replacing)
    done = table.transaction_version(app_id)
    if done is not None and done >= version:
        return False
    now = int(time.time() * 1000)
    actions = [AddAction(f.path, f.size, {}, now, True, f.stats) for f in files]
    # checkpoints at Spark's interval (below), not at delta-rs's own
    try:
        table.create_write_transaction(
            actions, "append" if replacing is None else "overwrite", table.schema(),
            commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)],
                                               max_commit_retries=None if replacing is None else 0),
            post_commithook_properties=PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False))
    except CommitFailedError as exc:
        if replacing is None:
            raise
        raise RuntimeError(
            f"delta table {directory}: another writer committed version {replacing + 1} while this batch rewrote "
            f"version {replacing}; nothing was committed, and the batch applies to the newer version when "
            "the query runs it again. Only the sink should write its current-state tables") from exc
    _checkpoint_if_due(table)
    return True


# Spark writes a checkpoint every delta.checkpointInterval commits (10 by default) when it is the
# one committing; a table rewritten batch after batch by these commits would otherwise grow a log
# of JSON files only, which every reader replays from the last checkpoint
DEFAULT_CHECKPOINT_INTERVAL = 10


def _checkpoint_if_due(table: Any) -> None:
    """`table`: the DeltaTable that just committed (it stays at the version it was loaded at)."""
    table.update_incremental()  # the commits since, only
    raw = table.metadata().configuration.get("delta.checkpointInterval")
    interval = int(raw) if raw and raw.strip().isdigit() and int(raw) > 0 else DEFAULT_CHECKPOINT_INTERVAL
    if table.version() % interval == 0:
        table.create_checkpoint()


__all__ = ["FILE_COLUMNS", "PAIRED_FILE_COLUMNS", "PairedFileWriter", "ParquetFileWriter", "TableFileWriter",
           "WrittenFile", "arrow_writable", "commit", "create", "create_with_files", "describe", "indexed_columns",
           "local_directory", "nullable_type", "plain_schema", "session_adds_to_new_tables", "stored_rows",
           "version_rows", "writable_configuration"]
