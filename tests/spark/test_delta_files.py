"""Snapshot rows and rewrites written as Parquet by the executors and committed with delta-rs
(headwater.spark.sinks.delta.files): the table Spark reads back holds the rows, the statistics
agree with the ones Spark's own writer computes for the same rows (where there are any), files
are skipped only when they cannot hold a match, a commit is never made twice, and a rewrite
replaces exactly the version it read."""

from __future__ import annotations

import datetime
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from headwater.engine import typed_rows as ts
from headwater.spark.sinks.delta import OP, POSITION, TS_MS
from headwater.spark.sinks.delta import files as delta_files

LONG = "x" * 31 + "é" + "tail beyond the 32 characters Delta keeps"


def _table_schema() -> Any:
    from pyspark.sql.types import (
        BooleanType,
        DateType,
        DecimalType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    return StructType([StructField(name, kind, True) for name, kind in [
        ("id", IntegerType()), ("name", StringType()), ("big", LongType()), ("d", DateType()),
        ("amount", DecimalType(12, 2)), ("tstz", TimestampType()), ("ts", TimestampNTZType()),
        ("flag", BooleanType()), ("added", StringType()),  # a column the rows lack: NULL
        (POSITION, StringType()), (OP, StringType()), (TS_MS, LongType())]])


def _blob(first: int, count: int, names: list[str | None]) -> bytes:
    """One record of typed snapshot rows: the row columns as headwater.engine.typed_rows lays them out."""
    ids = list(range(first, first + count))
    batch = pa.RecordBatch.from_pydict({
        "id": pa.array(ids, pa.int32()),
        "name": pa.array([names[i % len(names)] for i in range(count)], pa.string()),
        "big": pa.array([None if i % 3 == 0 else i * 10_000_000_000 - 7 for i in ids], pa.int64()),
        "d": pa.array([datetime.date(2000, 1, 1) + datetime.timedelta(days=i) for i in ids], pa.date32()),
        "amount": pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(12, 2)),
        "tstz": pa.array([1_700_000_000_000_000 + i for i in ids], pa.timestamp("us", "UTC")),
        "ts": pa.array([1_700_000_000_000_000 - i for i in ids], pa.timestamp("us")),
        "flag": pa.array([i % 2 == 0 for i in ids]),
        ts.POSITION: pa.array([f"pos{i:08d}" for i in ids]),
        ts.OP: pa.array(["r"] * count),
        ts.TS_US: pa.array([1_700_000_000_123_456 + i for i in ids], pa.int64()),
    })
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _records(blobs: list[bytes]) -> list[pa.RecordBatch]:
    return [pa.RecordBatch.from_pydict({"typed_rows": pa.array(blobs, pa.binary())})]


def _log_adds(path: Path) -> list[dict[str, Any]]:
    adds = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        adds += [json.loads(line)["add"] for line in commit.read_text().splitlines() if '"add"' in line]
    return adds


def test_files_hold_the_rows_with_sparks_statistics_and_commit_once(spark, tmp_path):
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    schema = _table_schema()
    ours = tmp_path / "ours"
    DeltaTable.createIfNotExists(spark).location(str(ours)).addColumns(schema).execute()
    configuration = delta_files.writable_configuration(str(ours))
    assert configuration is not None, "the protocol Spark gives a table with a timestamp_ntz column"
    indexed = delta_files.indexed_columns([(f.name, f.dataType) for f in schema.fields], configuration)
    assert indexed == [f.name for f in schema.fields]
    writer = delta_files.ParquetFileWriter(str(ours), schema, indexed, position=POSITION, op=OP, ts_ms=TS_MS)
    names = [["ab", None, "b", LONG], ["zz", "a"]]
    written = [row for task, (first, count) in enumerate([(1, 40), (41, 25)])
               for batch in writer(iter(_records([_blob(first, count, names[task]), _blob(first + count, 0, ["q"])])))
               for row in batch.to_pylist()]
    assert list(writer(iter(_records([])))) == [], "a task without rows writes no file"
    small = delta_files.ParquetFileWriter(str(tmp_path / "rolled"), schema, indexed, position=POSITION, op=OP,
                                          ts_ms=TS_MS, file_rows=30)
    (tmp_path / "rolled").mkdir()
    rolled = [row for batch in small(iter(_records([_blob(1, 20, ["a"]), _blob(21, 20, ["b"]), _blob(41, 5, ["c"])])))
              for row in batch.to_pylist()]
    assert [r["rows"] for r in rolled] == [40, 5], "a new file once a file has file_rows rows"
    assert sorted(p.name for p in (tmp_path / "rolled").iterdir()) == sorted(r["path"] for r in rolled)
    files = [delta_files.WrittenFile(**row) for row in written]
    assert [f.rows for f in files] == [40, 25]
    # dictionaries only for columns that repeat (op, the commit time, a few names); unique ones plain
    chunk = pq.ParquetFile(ours / files[0].path).metadata.row_group(0)
    dictionary = {chunk.column(i).path_in_schema for i in range(chunk.num_columns)
                  if "RLE_DICTIONARY" in chunk.column(i).encodings}
    assert {OP, TS_MS, "name"} <= dictionary and not {"id", POSITION, "d"} & dictionary, dictionary
    assert delta_files.commit(str(ours), files, "app:merge", 7)
    assert not delta_files.commit(str(ours), files, "app:merge", 7), "a replayed batch commits again"
    assert not delta_files.commit(str(ours), files, "app:merge", 6)
    assert len(list((ours / "_delta_log").glob("*.json"))) == 2

    got = spark.read.format("delta").load(str(ours))
    assert got.schema == schema
    assert got.count() == 65 and got.filter(F.col("added").isNotNull()).count() == 0
    row = got.filter("id = 41").first().asDict()
    assert (row["name"], row["big"], row["amount"], row[POSITION], row[OP], row[TS_MS]) == (
        "zz", 409_999_999_993, decimal.Decimal("0.41"), "pos00000041", "r", 1_700_000_000_123)
    assert row["d"] == datetime.date(2000, 2, 11) and row["ts"] == datetime.datetime(2023, 11, 14, 22, 13, 19, 999959)
    assert got.filter("id = 41").selectExpr("unix_micros(tstz)").first()[0] == 1_700_000_000_000_041

    # Spark's writer, the same rows in the same two files
    theirs = tmp_path / "theirs"
    for rows in ("id <= 40", "id > 40"):
        got.filter(rows).coalesce(1).write.format("delta").mode("append").save(str(theirs))
    spark_stats = sorted((json.loads(a["stats"]) for a in _log_adds(theirs)), key=lambda s: s["minValues"]["id"])
    our_stats = sorted((json.loads(a["stats"]) for a in _log_adds(ours)), key=lambda s: s["minValues"]["id"])
    assert [s["numRecords"] for s in our_stats] == [s["numRecords"] for s in spark_stats] == [40, 25]
    for mine, spark_file in zip(our_stats, spark_stats):
        assert mine["nullCount"] == spark_file["nullCount"]
        for kind in ("minValues", "maxValues"):
            assert mine[kind], kind
            for column, value in mine[kind].items():
                assert value == spark_file[kind][column], (kind, column, value, spark_file[kind][column])
        assert set(mine["minValues"]) == {"id", "name", "big", "d", POSITION, OP, TS_MS}
    # the long string: its prefix as the minimum, no maximum (Delta rounds the prefix up)
    assert our_stats[0]["minValues"]["name"] == "ab" and "name" not in our_stats[0]["maxValues"]
    assert spark_stats[0]["maxValues"]["name"].startswith("x" * 31)
    assert our_stats[1]["maxValues"]["name"] == "zz"

    # files are skipped only when they cannot match
    for condition, rows in [("id = 41", 1), ("id = 40", 1), ("name = 'ab'", 10), (f"name = '{LONG}'", 10),
                            ("name > 'zy'", 13), ("d = DATE'2000-01-02'", 1), ("big IS NULL", 21)]:
        assert got.filter(condition).count() == rows, condition
        assert spark.read.format("delta").load(str(theirs)).filter(condition).count() == rows, condition


def test_a_rewrite_replaces_exactly_the_version_it_read(spark, tmp_path):
    from deltalake import DeltaTable
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    schema = StructType([StructField("a", IntegerType()), StructField("b", StringType())])
    path = tmp_path / "t"
    for rows in ([(1, "x"), (2, "y")], [(3, "z")]):  # versions 0 and 1, a file each
        spark.createDataFrame(rows, schema).coalesce(1).write.format("delta").mode("append").save(str(path))
    writer = delta_files.TableFileWriter(str(path), schema, ["a", "b"])

    def files(a: list[int], b: list[str]) -> list[delta_files.WrittenFile]:
        batch = pa.RecordBatch.from_pydict({"a": pa.array(a, pa.int64()), "b": b})  # a cast to the table's int
        return [delta_files.WrittenFile(**row) for out in writer(iter([batch])) for row in out.to_pylist()]

    def rows() -> list[tuple[int, str]]:
        return sorted((r["a"], r["b"]) for r in spark.read.format("delta").load(str(path)).collect())
    before = {a["path"] for a in _log_adds(path)}
    assert delta_files.commit(str(path), files([7, 8], ["p", "q"]), "app:merge", 3, replacing=1)
    assert rows() == [(7, "p"), (8, "q")] and delta_files.stored_rows(str(path)) == 2
    last = [json.loads(line) for line in sorted((path / "_delta_log").glob("*.json"))[-1].read_text().splitlines()]
    assert {a["remove"]["path"] for a in last if "remove" in a} == before
    assert {"appId": "app:merge", "version": 3} in [a["txn"] for a in last if "txn" in a]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()[-1]
    assert (history["operation"], history["operationParameters"]["mode"]) == ("WRITE", "Overwrite")
    assert not delta_files.commit(str(path), files([9], ["r"]), "app:merge", 3, replacing=2), "a replayed batch"
    assert rows() == [(7, "p"), (8, "q")]

    # another commit after the version read: the rewrite fails rather than drop or keep rows it did not see
    spark.createDataFrame([(5, "w")], schema).write.format("delta").mode("append").save(str(path))
    with pytest.raises(RuntimeError, match=r"another writer committed version 3 while this batch rewrote version 2"):
        delta_files.commit(str(path), files([10], ["s"]), "app:merge", 4, replacing=2)
    assert rows() == [(5, "w"), (7, "p"), (8, "q")] and delta_files.stored_rows(str(path)) == 3
    assert delta_files.commit(str(path), files([10], ["s"]), "app:merge", 4, replacing=3)
    assert rows() == [(10, "s")]

    # rewrite after rewrite: checkpoints every 10 versions, as Spark's commits would write them,
    # and Spark reads the table from them
    for batch in range(5, 12):
        version = DeltaTable(str(path)).version()
        assert delta_files.commit(str(path), files([batch], [f"v{batch}"]), "app:merge", batch, replacing=version)
    assert DeltaTable(str(path)).version() == 11
    assert [p.name for p in (path / "_delta_log").glob("*.checkpoint.parquet")] == [
        "00000000000000000010.checkpoint.parquet"]
    assert rows() == [(11, "v11")]
    assert spark.read.format("delta").option("versionAsOf", 10).load(str(path)).first()["b"] == "v10"


def test_which_tables_and_columns_take_the_file_path(spark, tmp_path):
    from delta.tables import DeltaTable
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType, YearMonthIntervalType

    assert delta_files.local_directory("/data/lake/t") == "/data/lake/t"
    assert delta_files.local_directory("file:/data/lake/t") == "/data/lake/t"
    assert delta_files.local_directory("file:///data/lake/t") == "/data/lake/t"
    assert delta_files.local_directory("file://localhost/data/t") == "/data/t"
    for remote in ("s3a://bucket/lake/t", "abfss://c@a.dfs.core.windows.net/t", "hdfs://nn/t", "file://host/t",
                   "relative/t"):
        assert delta_files.local_directory(remote) is None, remote

    plain = StructType([StructField("a", IntegerType()), StructField("b", StringType())])
    DeltaTable.createIfNotExists(spark).location(str(tmp_path / "plain")).addColumns(plain).execute()
    assert delta_files.writable_configuration(str(tmp_path / "plain")) == {}
    (DeltaTable.createIfNotExists(spark).location(str(tmp_path / "mapped")).addColumns(plain)
     .property("delta.columnMapping.mode", "name").property("delta.minReaderVersion", "2")
     .property("delta.minWriterVersion", "5").execute())
    assert delta_files.writable_configuration(str(tmp_path / "mapped")) is None
    (DeltaTable.createIfNotExists(spark).location(str(tmp_path / "cdf")).addColumns(plain)
     .property("delta.enableChangeDataFeed", "true").execute())
    assert delta_files.writable_configuration(str(tmp_path / "cdf")) is None
    (DeltaTable.createIfNotExists(spark).location(str(tmp_path / "dv")).addColumns(plain)
     .property("delta.enableDeletionVectors", "true").execute())
    assert delta_files.writable_configuration(str(tmp_path / "dv")) is None
    spark.createDataFrame([(1, "a"), (2, "b")], plain).write.format("delta").mode("append").save(str(tmp_path / "dv"))
    assert delta_files.stored_rows(str(tmp_path / "dv")) is None, "a file's count may include deleted rows"
    assert delta_files.stored_rows(str(tmp_path / "plain")) == 0

    assert delta_files.arrow_writable(plain)
    assert not delta_files.arrow_writable(StructType([StructField("a", IntegerType(), False)])), "NOT NULL"
    assert not delta_files.arrow_writable(StructType([StructField("a", YearMonthIntervalType())]))

    pair = StructType([StructField("x", IntegerType()), StructField("y", IntegerType())])
    columns = [("a", IntegerType()), ("s", pair), ("b", StringType()), ("c", IntegerType())]
    assert delta_files.indexed_columns(columns, {}) == ["a", "b", "c"]
    assert delta_files.indexed_columns(columns, {"delta.dataSkippingNumIndexedCols": "3"}) == ["a"]
    assert delta_files.indexed_columns(columns, {"delta.dataSkippingNumIndexedCols": "4"}) == ["a", "b"]
    assert delta_files.indexed_columns(columns, {"delta.dataSkippingNumIndexedCols": "-1"}) == ["a", "b", "c"]
    assert delta_files.indexed_columns(columns, {"delta.dataSkippingStatsColumns": "c, `A`"}) == ["a", "c"]


def _version_zero(path: Path) -> dict[str, Any]:
    """A table's first commit without what differs between any two creations (ids, times,
    commit info)."""
    actions = [json.loads(line) for line in (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    meta = next(a["metaData"] for a in actions if "metaData" in a)
    return {"protocol": next(a["protocol"] for a in actions if "protocol" in a),
            "schema": json.loads(meta["schemaString"]), "configuration": meta["configuration"],
            "partitionColumns": meta["partitionColumns"], "format": meta["format"],
            "other": sorted(k for a in actions for k in a if k not in ("protocol", "metaData", "commitInfo"))}


def test_a_table_created_by_delta_rs_is_the_one_spark_creates(spark, tmp_path):
    from delta.tables import DeltaTable
    from pyspark.sql.types import (
        ArrayType,
        DecimalType,
        IntegerType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    from headwater.spark.sinks.delta import DeltaSink

    schema = StructType([StructField("id", IntegerType()), StructField("amount", DecimalType(12, 2)),
                         StructField("at", TimestampType()), StructField("tags", ArrayType(StringType())),
                         StructField("attrs", MapType(StringType(), StructType([StructField("v", IntegerType())]))),
                         StructField(POSITION, StringType())])
    properties = {"headwater.key": '["id"]', "headwater.topic": "db.public.t"}
    builder = DeltaTable.createIfNotExists(spark).location(str(tmp_path / "by_spark")).addColumns(schema)
    for key, value in properties.items():
        builder = builder.property(key, value)
    builder.execute()
    delta_files.create(str(tmp_path / "by_rs"), schema, properties)
    by_spark = _version_zero(tmp_path / "by_spark")
    assert by_spark["protocol"] == {"minReaderVersion": 1, "minWriterVersion": 2}
    assert _version_zero(tmp_path / "by_rs") == by_spark
    assert spark.read.format("delta").load(str(tmp_path / "by_rs")).schema == schema
    assert delta_files.writable_configuration(str(tmp_path / "by_rs")) == properties
    delta_files.create(str(tmp_path / "by_rs"), StructType([StructField("other", StringType())]), {})
    assert _version_zero(tmp_path / "by_rs") == by_spark, "an existing table is left as it is"
    assert not (tmp_path / "by_rs" / "_delta_log" / f"{1:020d}.json").exists()

    assert delta_files.plain_schema(schema)
    assert not delta_files.plain_schema(StructType([StructField("ts", TimestampNTZType())])), "a table feature"
    assert not delta_files.plain_schema(StructType([StructField("a", ArrayType(TimestampNTZType()))]))
    assert not delta_files.plain_schema(StructType([StructField("a", IntegerType(), True, {"comment": "x"})]))

    # the sink creates with delta-rs only the tables Spark would create in the same way
    sink = DeltaSink(spark, str(tmp_path / "sink"))
    create_by_files = sink.current_state.create_by_files
    assert create_by_files(spark, str(tmp_path / "sink" / "a"), schema, properties, mapped=False)
    assert _version_zero(tmp_path / "sink" / "a") == by_spark
    assert not create_by_files(spark, str(tmp_path / "sink" / "b"), schema, properties, mapped=True)
    assert not create_by_files(spark, "s3a://bucket/lake/c", schema, properties, mapped=False)
    ntz = StructType([StructField("ts", TimestampNTZType())])
    assert not create_by_files(spark, str(tmp_path / "sink" / "d"), ntz, properties, mapped=False)
    assert not DeltaSink(spark, str(tmp_path / "sink"), options={"files": "false"}).current_state.create_by_files(
        spark, str(tmp_path / "sink" / "e"), schema, properties, mapped=False)
    key = "spark.databricks.delta.properties.defaults.enableChangeDataFeed"
    spark.conf.set(key, "true")
    try:
        assert not create_by_files(spark, str(tmp_path / "sink" / "f"), schema, properties, mapped=False)
    finally:
        spark.conf.unset(key)
    assert not any((tmp_path / "sink" / name).exists() for name in "bdef")


def test_a_table_read_from_its_log_is_what_spark_describes(spark, tmp_path):
    from delta.tables import DeltaTable
    from pyspark.sql.types import ArrayType, DecimalType, IntegerType, StringType, StructField, StructType

    from headwater.spark.sinks.delta import KEY_PROPERTY, DeltaSink
    from headwater.spark.sinks.delta.current import NO_TABLE, CurrentState

    schema = StructType([StructField("id", IntegerType()), StructField("amount", DecimalType(12, 2)),
                         StructField("tags", ArrayType(StructType([StructField("v", StringType())])))])
    path = str(tmp_path / "t")
    (DeltaTable.createIfNotExists(spark).location(path).addColumns(schema).property(KEY_PROPERTY, '["id"]')
     .property("delta.checkpointInterval", "5").execute())
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (added string)")
    properties, described = CurrentState.described_by_log(path)
    detail = DeltaTable.forPath(spark, path).detail().select("properties").first()
    assert properties == dict(detail["properties"]) == {KEY_PROPERTY: '["id"]', "delta.checkpointInterval": "5"}
    spark_schema = spark.read.format("delta").load(path).schema
    assert [(f.name, f.dataType) for f in described.fields] == [(f.name, f.dataType) for f in spark_schema.fields]
    assert [f.name for f in described.fields] == ["id", "amount", "tags", "added"]

    assert CurrentState.described_by_log(str(tmp_path / "none")) is NO_TABLE
    (tmp_path / "leftover" / "_delta_log").mkdir(parents=True)  # a creation that never committed
    assert CurrentState.described_by_log(str(tmp_path / "leftover")) is NO_TABLE
    assert CurrentState.described_by_log("s3a://bucket/lake/t") is None, "Spark reads what is not local"
    mapped = str(tmp_path / "mapped")
    (DeltaTable.createIfNotExists(spark).location(mapped).addColumns(schema)
     .property("delta.columnMapping.mode", "name").property("delta.minReaderVersion", "2")
     .property("delta.minWriterVersion", "5").execute())
    assert CurrentState.described_by_log(mapped) is None, "column mapping: Spark gives the logical schema"
    tables = DeltaSink(spark, str(tmp_path)).current_state
    assert tables.table(spark, mapped).mapped and tables.table(spark, path).keys == ["id"]
    assert tables.table(spark, str(tmp_path / "none")) is None


@pytest.mark.parametrize("values, low, high", [
    (["b", "a", None], "a", "b"),
    (["é", "z"], "z", "é"),  # UTF-8 byte order, as Spark compares strings
    ([LONG, "y"], LONG[:32], "y"),  # a long minimum: its prefix is still a lower bound
    (["a", LONG], "a", None),  # a long maximum: none (Delta's would be its prefix rounded up)
])
def test_string_bounds(values, low, high):
    bounds = delta_files._Bounds(pa.string())
    bounds.add(pa.array(values, pa.string()))
    assert (bounds.low, bounds.high if bounds.exact_high else None) == (low, high)


def test_a_paired_writer_writes_what_each_writer_writes_alone(tmp_path):
    """Two writers fed by one pass over the records (a snapshot's change log and current state in
    one job) write the files each writes alone: same rows, same statistics, each file tagged with
    its writer, a new file every `file_rows` rows for each."""
    schema = _table_schema()
    stats = [f.name for f in schema.fields]
    blobs = [_blob(1, 5, ["a", None]), _blob(6, 4, [LONG]), _blob(10, 3, ["b"])]
    # a column ahead of the rows, as the change log's writer reads it: each writer takes its own
    records = [pa.RecordBatch.from_pydict({"value": pa.array(["v"] * 3), "typed_rows": pa.array(blobs, pa.binary())})]

    def writer(name: str, file_rows: int) -> delta_files.ParquetFileWriter:
        (tmp_path / name).mkdir(exist_ok=True)
        return delta_files.ParquetFileWriter(str(tmp_path / name), schema, stats, position=POSITION, op=OP,
                                             ts_ms=TS_MS, file_rows=file_rows)
    alone = {name: list(writer(name, rows)(iter([r.select(["typed_rows"]) for r in records])))
             for name, rows in (("alone_a", 4), ("alone_b", 100))}
    paired = delta_files.PairedFileWriter((writer("paired_a", 4), ["typed_rows"]),
                                          (writer("paired_b", 100), ["typed_rows"]))
    out = pa.Table.from_batches(list(paired(iter(records)))).to_pylist()
    assert [r["writer"] for r in out] == [0, 0, 0, 1]  # a file per 4 rows of the first (5, 4 and 3 rows)
    for index, name in enumerate(("a", "b")):
        mine = [r for r in out if r["writer"] == index]
        expected = pa.Table.from_batches(alone[f"alone_{name}"]).to_pylist()
        assert [(r["rows"], r["stats"]) for r in mine] == [(r["rows"], r["stats"]) for r in expected]
        read = [pq.read_table(tmp_path / f"paired_{name}" / r["path"]) for r in mine]
        wanted = [pq.read_table(tmp_path / f"alone_{name}" / r["path"]) for r in expected]
        assert [t.to_pylist() for t in read] == [t.to_pylist() for t in wanted]


@pytest.mark.parametrize("name", ["plain", "with space", "part"])
def test_a_versions_rows_read_from_its_files_are_sparks(spark, tmp_path, name):
    """A table's rows at its current version, read as the files its log lists (or through Spark's
    Delta source for paths Spark would take for patterns, and partitioned tables), equal what
    Spark's Delta source reads, a column added after the first files included."""
    from deltalake import write_deltalake

    directory = str(tmp_path / name)
    partitioned = ["k"] if name == "part" else None
    write_deltalake(directory, pa.table({"k": [1, 2], "v": ["a", "b"]}), partition_by=partitioned)
    write_deltalake(directory, pa.table({"k": [3], "v": ["c"], "w": [1.5]}), mode="append", schema_mode="merge",
                    partition_by=partitioned)
    version, rows = delta_files.version_rows(spark, directory)
    assert version == 1
    expected = spark.read.format("delta").load(directory)
    assert rows.schema == expected.schema
    assert sorted(map(tuple, rows.collect())) == sorted(map(tuple, expected.collect()))
    assert sorted((r["k"], r["v"], r["w"]) for r in rows.collect()) == [(1, "a", None), (2, "b", None), (3, "c", 1.5)]
