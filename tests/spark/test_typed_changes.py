"""Typed row changes (source option streamDelivery=rows, the pipeline's default when every sink is a
Delta sink) give the same Delta tables as change events: the same current state, column for
column and position for position, and the same change log apart from processing times. The
workload has every case the typed path leaves to events (key changes, unchanged-TOAST values,
REPLICA IDENTITY FULL updates, values pyarrow refuses, tables without a typed form, truncates)
mixed with typed changes of the same tables and keys in the same batch."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F

from headwater.embedded.postgres import drop_replication_slot
from headwater.spark.pipeline import Pipeline, load_pipeline
from helpers.capture import spark_properties

SETUP = r"""
CREATE TABLE typed_all (
    id int PRIMARY KEY, s smallint, b bigint, t text, c char(5), flag bool, amount numeric(12,2), d date,
    ts timestamp, tstz timestamptz, j jsonb, u uuid);
INSERT INTO typed_all SELECT g, g, g * 1000, 't' || g, 'c', g % 2 = 0, g / 3.0, '2024-01-01'::date + g,
  '2024-01-01 12:00:00'::timestamp + g * interval '1 second', '2024-01-01 12:00:00+02'::timestamptz,
  '{"g": 1}', NULL FROM generate_series(1, 5) g;
CREATE TABLE toasty (id int PRIMARY KEY, big text, n int);
ALTER TABLE toasty ALTER COLUMN big SET STORAGE EXTERNAL;
INSERT INTO toasty SELECT g, repeat(md5(g::text), 400), g FROM generate_series(1, 3) g;
CREATE TABLE full_ident (id int PRIMARY KEY, v text);
ALTER TABLE full_ident REPLICA IDENTITY FULL;
INSERT INTO full_ident SELECT g, 'v' || g FROM generate_series(1, 3) g;
CREATE TABLE with_nan (id int PRIMARY KEY, x numeric(10,3));
INSERT INTO with_nan SELECT g, g / 7.0 FROM generate_series(1, 3) g;
CREATE TABLE with_interval (id int PRIMARY KEY, span interval);
INSERT INTO with_interval SELECT g, make_interval(days => g) FROM generate_series(1, 2) g;
CREATE TABLE no_key (a int, b text);
ALTER TABLE no_key REPLICA IDENTITY FULL;
INSERT INTO no_key SELECT g, 'r' || g FROM generate_series(1, 3) g;
"""

WORKLOAD = [
    "INSERT INTO typed_all VALUES (6, -1, -2, E'multi\\nline, \"q\"', 'x', true, -0.01, '1970-01-01', "
    "'1969-12-31 23:59:59.999999', '1900-01-01 00:00:00+00', '[1, {\"a\": null}]', "
    "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'), (7, NULL, NULL, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "UPDATE typed_all SET t = 'changed', amount = amount + 1, flag = NOT flag WHERE id IN (1, 2)",
    "UPDATE typed_all SET id = 60 WHERE id = 6",  # a key change: a delete and a create, as events
    "DELETE FROM typed_all WHERE id = 3",
    "INSERT INTO typed_all (id, t) VALUES (3, 'back')",  # the same key again, in the same batch
    "BEGIN; INSERT INTO typed_all (id) VALUES (8); UPDATE typed_all SET t = 'eight' WHERE id = 8; "
    "DELETE FROM typed_all WHERE id = 8; INSERT INTO typed_all (id, s) VALUES (9, 9); COMMIT",
    "INSERT INTO typed_all (id, ts) VALUES (10, 'infinity')",  # no typed form: its run goes as events
    "UPDATE typed_all SET ts = '2030-01-01' WHERE id = 10",
    "UPDATE toasty SET n = n + 1",  # big is unchanged TOAST: events keep the stored value
    "UPDATE toasty SET big = 'small now' WHERE id = 2",
    "UPDATE full_ident SET v = 'changed' WHERE id = 1",  # has a before: an event
    "DELETE FROM full_ident WHERE id = 2",
    "INSERT INTO with_nan VALUES (10, 'NaN'), (11, 1.5)",
    "UPDATE with_nan SET x = 2 WHERE id = 1",
    "UPDATE with_interval SET span = '1 hour' WHERE id = 1",
    "INSERT INTO no_key VALUES (4, 'r4')",
    "UPDATE no_key SET b = 'changed' WHERE a = 1",
    "DELETE FROM no_key WHERE a = 2",
    "INSERT INTO typed_all (id, t) VALUES (11, 'before truncate')",
    "TRUNCATE with_nan",
    "INSERT INTO with_nan VALUES (20, 20)",
    "UPDATE typed_all SET u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', j = '{}' WHERE id = 4",
]
# processing times, and batch numbers (the two pipelines may cut their batches differently)
PROCESSING = ("ts_ms", "batch_id")
# a snapshot's read times, WAL position and transaction id (each pipeline takes its own snapshot)
SNAPSHOT = ("source_ts_ms", "commit_time", "ts_ms", "batch_id", "lsn", "tx_id")
SNAPSHOT_SOURCE = ("ts_ms", "ts_us", "ts_ns", "lsn", "sequence", "txId")


def _pipeline(spark, pg_db, tmp_path: Path, name: str, delivery: str | None) -> Pipeline:
    props = spark_properties(pg_db, tmp_path / name, f"hw_tc_{name}",
                             **{"slot.drop.on.stop": "false", "skipped.operations": "none"})  # truncates too
    if delivery is not None:
        props["snapshotDelivery"] = props["streamDelivery"] = delivery
    props["streamTaskMessages"] = "8"  # several tasks: typed runs and events of one key in different tasks
    doc = {"source": props, "sinks": [{"type": "delta", "path": "lake"}], "checkpoint": "checkpoint",
           "trigger": {"availableNow": True}, "name": f"typed-changes-{name}"}
    path = tmp_path / name / "pipeline.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return Pipeline(load_pipeline(path), spark=spark)


def _run(pipeline: Pipeline) -> Pipeline:
    pipeline.start().await_termination(300)
    return pipeline


def _rows(spark, path: Path) -> dict[str, list[str]]:
    """The table's rows as JSON text (the 'infinity' timestamp is out of Python's range), read
    once: streamed rows ("stream") without processing times, snapshot rows ("snapshot") without
    the read times and the snapshot's own LSN and transaction id."""
    df = spark.read.format("delta").load(str(path))
    changelog = "op" in df.columns
    op = F.col("op") if changelog else F.col("__headwater_op")

    def text(drop: tuple[str, ...], source_drop: tuple[str, ...]) -> object:
        def column(name: str) -> object:
            if name == "source" and source_drop:
                present = df.schema["source"].dataType.fieldNames()
                return df["source"].dropFields(*[f for f in source_drop if f in present]).alias(name)
            return df[name]

        return F.to_json(F.struct(*[column(c) for c in df.columns if c not in drop]))

    stream_drop = PROCESSING if changelog else ()
    snapshot_drop = SNAPSHOT if changelog else ("__headwater_ts_ms",)
    rows = df.select(op.alias("__op"), text(stream_drop, ()).alias("stream"),
                     text(snapshot_drop, SNAPSHOT_SOURCE).alias("snapshot")).collect()
    return {"stream": sorted(r["stream"] for r in rows if r["__op"] != "r"),
            "snapshot": sorted(r["snapshot"] for r in rows if r["__op"] == "r")}


@pytest.mark.timeout(900)
def test_typed_row_changes_equal_change_events(spark, pg_db, tmp_path):
    pg_db.execute(SETUP)
    runs = {"rows": None, "events": "events"}
    try:
        for name, delivery in runs.items():  # the snapshots, and each pipeline's slot
            _run(_pipeline(spark, pg_db, tmp_path, name, delivery))
        for statement in WORKLOAD:
            pg_db.execute(statement)
        typed = _run(_pipeline(spark, pg_db, tmp_path, "rows", None))
        events = _run(_pipeline(spark, pg_db, tmp_path, "events", "events"))
        assert typed.source_options()["streamDelivery"] == "rows"
        assert events.source_options()["streamDelivery"] == "events"
        assert typed.sinks[0].timings.get("typed", 0) > 0, "no typed row changes reached the sink"
        assert "typed" not in events.sinks[0].timings

        typed_lake, events_lake = tmp_path / "rows" / "lake", tmp_path / "events" / "lake"
        topics = sorted(p.name for p in events_lake.iterdir())
        assert topics == sorted(p.name for p in typed_lake.iterdir())
        assert "dbserver1.public.no_key__changelog" in topics and "dbserver1.public.no_key" not in topics
        for name in topics:
            want, got = _rows(spark, events_lake / name), _rows(spark, typed_lake / name)
            for kind in ("stream", "snapshot"):
                assert got[kind] == want[kind], f"{name} ({kind}): typed rows differ from events\n{got}\n{want}"
            assert want["stream"], f"{name}: no streamed rows to compare"

        current = spark.read.format("delta").load(str(typed_lake / "dbserver1.public.typed_all"))
        got = {r["id"]: r for r in current.drop("ts").collect()}
        assert sorted(got) == [1, 2, 3, 4, 5, 7, 9, 10, 11, 60]
        assert got[3]["t"] == "back" and got[1]["t"] == "changed"
        toasty = {r["id"]: r["big"] for r in
                  spark.read.format("delta").load(str(typed_lake / "dbserver1.public.toasty")).collect()}
        assert toasty[1].startswith("c4ca4238") and len(toasty[1]) == 12800 and toasty[2] == "small now"
        with_nan = spark.read.format("delta").load(str(typed_lake / "dbserver1.public.with_nan"))
        assert [r["id"] for r in with_nan.collect()] == [20]
        changes = spark.read.format("delta").load(str(typed_lake / "dbserver1.public.typed_all__changelog"))
        sequences = [r["source"]["sequence"] for r in changes.filter("op = 'u'").collect()]
        assert sequences and all(s.startswith('["') and s.endswith('"]') for s in sequences), sequences
    finally:
        conn = pg_db.connect()  # a stopped query's walsender may still be exiting
        try:
            for name in runs:
                drop_replication_slot(conn, f"hw_tc_{name}")
        finally:
            conn.close()
