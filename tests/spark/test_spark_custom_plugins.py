"""Custom converters (`converters`) and custom snapshot queries (`snapshot.query.mode=custom`)
through the Spark source: the converters are created in the executors from the configuration and
apply to snapshot chunks and streamed changes alike; a table with a converted column is delivered
as events even where the pipeline would deliver typed rows (Delta sinks), so the lake holds the
converted values; the snapshot query is applied on the driver when the chunks are planned (a
table read with a custom SELECT is one chunk).

The plug-ins live in tests/helpers/custom_plugins.py; Spark's Python workers find them through
PYTHONPATH (the data source's planning runs in a Python worker of its own, which gets neither
--py-files nor addArtifacts: see docs/converters.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from headwater.embedded.postgres import drop_replication_slot
from headwater.spark.pipeline import Pipeline, load_pipeline
from helpers.capture import drop_sentinels, spark_properties
from helpers.spark_capture import SparkCapture, conformance_line, wait_first_batch

SETUP = """
CREATE EXTENSION isn;
CREATE TABLE conv (id int PRIMARY KEY, i isbn, flag bool NOT NULL DEFAULT true, note text);
INSERT INTO conv VALUES (1, '978-0-393-04002-9', false, NULL), (2, NULL, true, 'x'), (3, '0-393-04002-X', true, 'y');
CREATE TABLE plain (id int PRIMARY KEY, t text);
INSERT INTO plain VALUES (1, 'a'), (2, 'b');
"""
# every column with a typed form: the typed paths would take the table if not for the converters
NOTES = """
CREATE TABLE notes (id int PRIMARY KEY, n int, note text);
INSERT INTO notes VALUES (1, 10, 'n1'), (2, 20, NULL);
"""

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def shipped(spark: Any) -> Any:
    """The test plug-ins, importable as `helpers.custom_plugins` in Spark's Python workers too."""
    import headwater.spark

    env = spark.sparkContext.environment
    if str(TESTS) not in env.get("PYTHONPATH", "").split(os.pathsep):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH")) if p)
        headwater.spark.register(spark)  # the data source's workers take the environment it is registered with
    return spark


CONVERTERS = {
    "converters": "isbn,bools,tag",
    "isbn.type": "helpers.custom_plugins:IsbnConverter", "isbn.schema.name": "io.debezium.postgresql.type.Isbn",
    "bools.type": "helpers.custom_plugins:BooleanAsInt",
    "tag.type": "helpers.custom_plugins:Tagged", "tag.columns": "public.conv.id,public.conv.note", "tag.prefix": "#",
    "tag.schema.name": "io.example.Tag", "tag.param.origin": "test", "tag.null.text": "(null)",
}


def _source_props(pg_db: Any, tmp_path: Path, slot: str, **extra: str) -> dict[str, str]:
    props = spark_properties(pg_db, tmp_path, slot, **extra)
    return props


def _payloads(records: list[dict[str, Any]], topic: str) -> list[tuple[Any, Any, Any]]:
    return [(r["value"]["payload"]["op"], r["key"]["payload"], r["value"]["payload"]["after"])
            for r in records if r["topic"] == topic]


def test_converters_apply_in_the_executors_to_snapshot_and_stream(shipped, pg_db, tmp_path):
    spark = shipped
    pg_db.execute(SETUP)
    props = _source_props(pg_db, tmp_path, "hw_spark_conv", **CONVERTERS, snapshotChunkRows="1")
    capture = SparkCapture(spark, props, tmp_path / "checkpoint").start()
    try:
        wait_first_batch(capture.query)
        pg_db.execute("INSERT INTO conv VALUES (4, '978-0-393-04002-9', false, 'z')")
        pg_db.execute("UPDATE conv SET note = NULL, flag = true WHERE id = 4")
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
    records = drop_sentinels(capture.records())
    assert _payloads(records, "dbserver1.public.conv") == [
        ("r", {"id": "#1"}, {"id": "#1", "i": "0-393-04002-X", "flag": 0, "note": "(null)"}),
        ("r", {"id": "#2"}, {"id": "#2", "i": None, "flag": 1, "note": "#x"}),
        ("r", {"id": "#3"}, {"id": "#3", "i": "0-393-04002-X", "flag": 1, "note": "#y"}),
        ("c", {"id": "#4"}, {"id": "#4", "i": "0-393-04002-X", "flag": 0, "note": "#z"}),
        ("u", {"id": "#4"}, {"id": "#4", "i": "0-393-04002-X", "flag": 1, "note": "(null)"}),
    ]
    conv = next(r for r in records if r["topic"] == "dbserver1.public.conv" and r["value"]["payload"]["op"] == "u")
    assert conv["key"]["schema"]["fields"] == [
        {"type": "string", "optional": False, "name": "io.example.Tag", "parameters": {"origin": "test"},
         "field": "id"}]
    after = next(f for f in conv["value"]["schema"]["fields"] if f["field"] == "after")
    assert after["fields"][1:] == [
        {"type": "string", "optional": True, "name": "io.debezium.postgresql.type.Isbn", "field": "i"},
        {"type": "int16", "optional": False, "name": "io.example.BooleanAsInt", "default": 1, "field": "flag"},
        {"type": "string", "optional": True, "name": "io.example.Tag", "parameters": {"origin": "test"},
         "field": "note"}]
    # a table no converter takes keeps Headwater's own schema
    assert _payloads(records, "dbserver1.public.plain") == [
        ("r", {"id": 1}, {"id": 1, "t": "a"}), ("r", {"id": 2}, {"id": 2, "t": "b"})]


def _pipeline(spark: Any, pg_db: Any, tmp_path: Path, props: dict[str, str]) -> Pipeline:
    doc = {"source": props, "sinks": [{"type": "delta", "path": "lake"}], "checkpoint": "checkpoint",
           "trigger": {"availableNow": True}, "name": "custom-converters"}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    pipeline = Pipeline(load_pipeline(path), spark=spark)
    pipeline.start().await_termination(300)
    return pipeline


def test_delta_pipeline_delivers_converted_tables_as_events(shipped, pg_db, tmp_path):
    """The pipeline's default with Delta sinks is typed rows (snapshot and stream); a table with a
    converted column has no typed layout and goes as events, the others stay typed."""
    spark = shipped
    pg_db.execute(SETUP + NOTES)
    props = _source_props(pg_db, tmp_path, "hw_spark_conv_delta", **CONVERTERS, **{"slot.drop.on.stop": "false"})
    # a plain string schema for a text column, values changed: the typed paths would copy the text
    props.update({"converters": props["converters"] + ",plaintag", "plaintag.type": "helpers.custom_plugins:Tagged",
                  "plaintag.columns": "public.notes.note", "plaintag.prefix": "~"})
    try:
        first = _pipeline(spark, pg_db, tmp_path, props)
        assert first.source_options()["snapshotDelivery"] == "rows"
        assert first.sinks[0].timings.get("typed", 0) > 0, "the unconverted table was not delivered typed"
        pg_db.execute("INSERT INTO conv VALUES (4, NULL, false, 'z')")
        pg_db.execute("INSERT INTO plain VALUES (3, 'c')")
        pg_db.execute("INSERT INTO notes VALUES (3, 30, 'n3')")
        pg_db.execute("UPDATE notes SET n = 21, note = 'n2' WHERE id = 2")
        second = _pipeline(spark, pg_db, tmp_path, props)
        assert second.source_options()["streamDelivery"] == "rows"
        lake = tmp_path / "lake"
        conv = {r["id"]: (r["i"], r["flag"], r["note"])
                for r in spark.read.format("delta").load(str(lake / "dbserver1.public.conv")).collect()}
        assert conv == {"#1": ("0-393-04002-X", 0, "(null)"), "#2": (None, 1, "#x"),
                        "#3": ("0-393-04002-X", 1, "#y"), "#4": (None, 0, "#z")}
        plain = {r["id"]: r["t"]
                 for r in spark.read.format("delta").load(str(lake / "dbserver1.public.plain")).collect()}
        assert plain == {1: "a", 2: "b", 3: "c"}
        notes = {r["id"]: (r["n"], r["note"])
                 for r in spark.read.format("delta").load(str(lake / "dbserver1.public.notes")).collect()}
        assert notes == {1: (10, "~n1"), 2: (21, "~n2"), 3: (30, "~n3")}
    finally:
        conn = pg_db.connect()
        try:
            drop_replication_slot(conn, "hw_spark_conv_delta")
        finally:
            conn.close()


def test_custom_snapshot_query_in_the_planned_chunks(shipped, pg_db, tmp_path):
    spark = shipped
    pg_db.execute("CREATE TABLE evens (id int PRIMARY KEY, a text, b int)")
    pg_db.execute("INSERT INTO evens SELECT g, 'a' || g, g * 10 FROM generate_series(1, 6) g")
    pg_db.execute("CREATE TABLE skipped (id int PRIMARY KEY)")
    pg_db.execute("INSERT INTO skipped VALUES (2), (4)")
    props = _source_props(pg_db, tmp_path, "hw_never_created", **{
        "snapshot.query.mode": "custom", "snapshot.query.mode.custom.name": "helpers.custom_plugins:EvenRowsOnly",
        "snapshot.query.mode.custom.skip.table": "skipped"})
    props.pop("slot.drop.on.stop")
    frame = spark.read.format("headwater").options(**props, snapshotChunkRows="1").load()
    rows = sorted(frame.collect(), key=lambda r: r.position)
    got = [conformance_line(r) for r in rows]
    assert [(r["topic"], r["value"]["payload"]["after"], r["value"]["payload"]["source"]["snapshot"]) for r in got] == [
        ("dbserver1.public.evens", {"id": 2, "a": "a2", "b": 20}, "first"),
        ("dbserver1.public.evens", {"id": 4, "a": "a4", "b": 40}, "true"),
        ("dbserver1.public.evens", {"id": 6, "a": "a6", "b": 60}, "last"),
    ]
    assert json.loads(rows[0].value)["payload"]["op"] == "r"
