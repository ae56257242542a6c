"""Typed snapshot rows (source option snapshotDelivery=rows, the pipeline's default when every sink
is a Delta sink) give the same Delta tables as snapshot events: the same current state, column for
column and position for position, and the same change log apart from read times."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from headwater.embedded.postgres import drop_replication_slot
from headwater.spark.pipeline import Pipeline, load_pipeline
from helpers.capture import spark_properties

SETUP = r"""
CREATE TABLE typed_all (
    id int PRIMARY KEY, s smallint, b bigint, t text, vc varchar(20), c char(5), flag bool,
    amount numeric(12,2), d date, ts timestamp, tstz timestamptz, j jsonb, js json, u uuid);
INSERT INTO typed_all VALUES
  (1, 1, 9223372036854775807, 'plain', 'v', 'ab', true, 1234567890.12, '2024-02-29',
   '2024-01-01 12:00:00.123456', '2024-01-01 12:00:00.5+05:30', '{"a": [1, 2]}', '{"b" :  1}',
   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
  (2, -32768, -1, '', '', '', false, -0.01, '1970-01-01', '1969-12-31 23:59:59.999999',
   '1900-01-01 00:00:00+00', 'null', '[]', NULL),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (4, 0, 0, E'multi\nline, "quoted" \\ back\tslash ünï', 'x,y', 'q"', true, 0, '9999-12-31',
   '0001-01-01 00:00:00', '2262-04-11 23:47:16.854775+00', '{"k": "a\"b"}', '"s"', NULL),
  (5, 5, 5, 'NULL', ' ', ' a ', false, 9999999999.99, '2000-01-01', '2000-01-01 00:00:00',
   '2000-01-01 00:00:00-08', '{}', 'null', '00000000-0000-0000-0000-000000000000');
-- a column type without a typed form: the whole table goes as events
CREATE TABLE with_interval (id int PRIMARY KEY, span interval, f float8);
INSERT INTO with_interval SELECT g, make_interval(days => g), g / 3.0 FROM generate_series(1, 4) g;
-- numeric NaN has no decimal form: its chunk goes as events, the other chunks typed
CREATE TABLE with_nan (id int PRIMARY KEY, x numeric(10,3));
INSERT INTO with_nan SELECT g, CASE WHEN g = 5 THEN 'NaN'::numeric ELSE g / 7.0 END FROM generate_series(1, 7) g;
-- keyless: change log only
CREATE TABLE no_key (a int, b text);
INSERT INTO no_key SELECT g, 'r' || g FROM generate_series(1, 5) g;
"""
# read times, the batch numbering, and the WAL position and transaction id of the snapshot (the two
# runs take theirs one after the other; an autovacuum ANALYZE in between takes a transaction id)
TIMES = ("source_ts_ms", "commit_time", "ts_ms", "batch_id", "lsn", "tx_id")
SOURCE_TIMES = ("ts_ms", "ts_us", "ts_ns", "lsn", "sequence", "txId")


def _run(spark, pg_db, tmp_path: Path, name: str, delivery: str | None,
         extra_sinks: list[dict] | None = None) -> tuple[Path, Pipeline]:
    props = spark_properties(pg_db, tmp_path / name, f"hw_typed_{name}", **{"slot.drop.on.stop": "true"})
    props["snapshotChunkRows"] = "2"  # several chunks per table: first/last markers and positions per chunk
    if delivery is not None:
        props["snapshotDelivery"] = delivery
    doc = {"source": props, "sinks": [{"type": "delta", "path": "lake"}, *(extra_sinks or [])],
           "checkpoint": "checkpoint", "trigger": {"availableNow": True}, "name": f"typed-{name}"}
    path = tmp_path / name / "pipeline.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    pipeline = Pipeline(load_pipeline(path), spark=spark)
    pipeline.start().await_termination(300)
    return tmp_path / name / "lake", pipeline


def _rows(spark, path: Path, drop: tuple[str, ...] = ()) -> list[dict]:
    df = spark.read.format("delta").load(str(path))
    if "source" in df.columns:  # the read times inside the source block
        present = df.schema["source"].dataType.fieldNames()
        df = df.withColumn("source", df["source"].dropFields(*[f for f in SOURCE_TIMES if f in present]))
    rows = [r.asDict(recursive=True) for r in df.drop(*drop).collect()]
    return sorted(rows, key=repr)


def test_typed_snapshot_rows_equal_snapshot_events(spark, pg_db, tmp_path):
    pg_db.execute(SETUP)
    # the pipeline's default: rows; a second sink writes current-state tables only (its typed rows
    # are decoded to fewer columns), through Spark even for this small snapshot (the driver's path
    # for small batches is compared with Spark's in test_small_batch.py)
    typed_lake, typed = _run(spark, pg_db, tmp_path, "rows", None,
                             [{"type": "delta", "path": "current_only", "changelog": "false",
                               "small.batch.rows": "0"}])
    events_lake, events = _run(spark, pg_db, tmp_path, "events", "events")
    assert typed.source_options()["snapshotDelivery"] == "rows"
    typed_sink, events_sink = typed.sinks[0], events.sinks[0]
    assert typed_sink.timings.get("typed", 0) > 0, "no typed rows reached the sink"
    assert "typed" not in events_sink.timings
    # typed_all's snapshot, all typed rows into a new table: files written by the executors
    # (headwater.spark.sinks.delta.files), compared below with what Spark's writer made of the events
    assert typed_sink.timings.get("current.files", 0) > 0 and typed.sinks[1].timings.get("current.files", 0) > 0
    assert "current.files" not in events_sink.timings

    topics = sorted(p.name for p in events_lake.iterdir())
    assert topics == sorted(p.name for p in typed_lake.iterdir())
    assert "dbserver1.public.typed_all" in topics and "dbserver1.public.no_key__changelog" in topics
    for name in topics:
        changelog = name.endswith("__changelog")
        drop = TIMES if changelog else ("__headwater_ts_ms",)
        want, got = _rows(spark, events_lake / name, drop), _rows(spark, typed_lake / name, drop)
        assert got == want, f"{name}: typed rows differ from events\n{got}\n{want}"
        assert want, name
        if not changelog:
            only = _rows(spark, typed_lake.parent / "current_only" / name, drop)
            assert only == want, f"{name} (current-state tables only): typed rows differ from events"
    assert sorted(p.name for p in (typed_lake.parent / "current_only").iterdir()) == [
        t for t in topics if not t.endswith("__changelog")]
    current = spark.read.format("delta").load(str(typed_lake / "dbserver1.public.typed_all"))
    assert current.count() == 5
    assert current.schema["amount"].dataType.simpleString() == "decimal(12,2)"
    assert current.schema["tstz"].dataType.simpleString() == "timestamp"
    assert current.schema["ts"].dataType.simpleString() == "timestamp_ntz"
    markers = [r["snapshot"] for r in spark.read.format("delta")
               .load(str(typed_lake / "dbserver1.public.typed_all__changelog")).orderBy("position").collect()]
    assert markers[0] in ("first", "first_in_data_collection"), markers
    assert markers[-1] in ("last", "last_in_data_collection") and set(markers[1:-1]) == {"true"}, markers


def test_snapshot_rows_need_delta_sinks(spark, tmp_path):
    from headwater.config import ConfigError
    from headwater.spark.pipeline import parse_pipeline

    doc = {"source": {"database.hostname": "h", "topic.prefix": "p", "snapshotDelivery": "rows"},
           "sinks": [{"type": "jsonl", "path": "topics"}], "checkpoint": "c"}
    pipeline = Pipeline(parse_pipeline(doc, tmp_path), spark=spark)
    with pytest.raises(ConfigError, match="snapshotDelivery=rows needs every sink to be a delta sink"):
        pipeline.source_options()
    doc["source"].pop("snapshotDelivery")
    assert Pipeline(parse_pipeline(doc, tmp_path), spark=spark).source_options()["snapshotDelivery"] == "events"


def test_a_typed_snapshot_batch_replayed_after_a_crash_converges(spark, pg_db, tmp_path):
    """The driver dies after the sink wrote the typed snapshot but before Spark committed the
    batch; rows change meanwhile. The replay reads a new snapshot into tables that already hold
    the old one (merged by position, not appended), then streams the changes since the slot's
    position: the current state equals the table, and the change log has every row."""
    from pyspark.errors import StreamingQueryException

    from headwater.spark.sinks.delta import DeltaSink

    class DiesAfterWriting(DeltaSink):
        def write(self, batch, batch_id):
            super().write(batch, batch_id)
            raise RuntimeError("injected: the driver dies after the sink wrote the batch")

    pg_db.execute("CREATE TABLE acct (id int PRIMARY KEY, owner text, balance numeric(10,2))")
    pg_db.execute("INSERT INTO acct SELECT g, 'o' || g, g * 10 FROM generate_series(1, 9) g")
    props = spark_properties(pg_db, tmp_path, "hw_typed_replay", **{"slot.drop.on.stop": "false"})
    props["snapshotChunkRows"] = "4"
    doc = {"source": props, "sinks": [{"type": "delta", "path": "lake"}], "checkpoint": "checkpoint",
           "trigger": {"availableNow": True}}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    spec = load_pipeline(path)
    first = Pipeline(spec, spark=spark)
    first.sinks = [DiesAfterWriting(spark, str(tmp_path / "lake"))]
    with pytest.raises(StreamingQueryException, match="injected"):
        first.start().await_termination(300)
    lake = tmp_path / "lake"
    assert spark.read.format("delta").load(str(lake / "dbserver1.public.acct")).count() == 9  # written, uncommitted

    pg_db.execute("DELETE FROM acct WHERE id = 2")
    pg_db.execute("UPDATE acct SET balance = -1 WHERE id = 3")
    pg_db.execute("INSERT INTO acct VALUES (100, 'new', 1)")
    second = Pipeline(spec, spark=spark)
    second.start().await_termination(300)
    try:
        assert second.sinks[0].timings.get("typed", 0) > 0, "the replay did not take the typed path"
        current = spark.read.format("delta").load(str(lake / "dbserver1.public.acct"))
        got = sorted((r["id"], r["owner"], str(r["balance"])) for r in current.collect())
        want = sorted((i, o, str(b)) for i, o, b in pg_db.execute("SELECT id, owner, balance FROM acct"))
        assert got == want
        log = spark.read.format("delta").load(str(lake / "dbserver1.public.acct__changelog"))
        snapshot_ids = {r["after"]["id"] for r in log.filter("op = 'r'").collect()}
        assert snapshot_ids >= {i for i, *_ in want} - {100} and 2 in snapshot_ids
    finally:
        conn = pg_db.connect()  # the stopped query's walsender may still be exiting
        try:
            drop_replication_slot(conn, "hw_typed_replay")
        finally:
            conn.close()


def test_a_new_tables_typed_snapshot_is_summarised_in_one_pass(spark, pg_db, tmp_path, caplog):
    """Typed records carry their table's key and value schemas: the sink learns them before its
    pass over the batch, instead of sampling a record and passing over the batch again."""
    import logging

    pg_db.execute("CREATE TABLE only_typed(id int PRIMARY KEY, v text, n numeric(8,2)); "
                  "INSERT INTO only_typed SELECT g, 'v' || g, g / 4.0 FROM generate_series(1, 7) g")
    with caplog.at_level(logging.DEBUG, logger="headwater.spark.sinks.delta"):
        lake, pipeline = _run(spark, pg_db, tmp_path, "one_pass", None)
    passes = [r.getMessage() for r in caplog.records if "known after" in r.getMessage()]
    assert pipeline.sinks[0].timings.get("typed", 0) > 0, "no typed rows reached the sink"
    assert passes and all(m.endswith("after 1 pass(es) over the batch") for m in passes), passes
    rows = _rows(spark, lake / "dbserver1.public.only_typed", ("__headwater_ts_ms", "__headwater_position"))
    assert [(r["id"], r["v"], str(r["n"])) for r in sorted(rows, key=lambda r: r["id"])] == [
        (g, f"v{g}", f"{g / 4:.2f}") for g in range(1, 8)]
