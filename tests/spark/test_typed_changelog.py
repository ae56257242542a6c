"""The change log of typed rows written by the executors with pyarrow and committed by delta-rs
(headwater.spark.sinks.delta.typed_changelog) is the table Spark's append writes: the same schema,
the same rows (every column, every struct field), the same idempotent-write ids; a schema change
goes to Spark, which merges the new fields."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).resolve().parents[1] / "conformance" / "golden"


def _compact(obj: Any) -> str | None:
    return None if obj is None else json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _template() -> dict[str, Any]:
    lines = [json.loads(line) for line in (GOLDEN / "basic_crud.jsonl").read_text().splitlines()]
    return next(line for line in lines if line["topic"].endswith("customers"))


def _record(template: dict[str, Any], op: str, source: dict[str, Any], rows: dict[str, Any],
            extra: dict[str, Any] | None = None) -> tuple:
    """A record of typed rows of the customers table (its template's key and value, `source` in its
    source block; `extra`: fields the value's schema gains)."""
    import pyarrow as pa

    from headwater.engine import typed_rows

    key = copy.deepcopy(template["key"])
    key["payload"] = {"id": None}
    value = copy.deepcopy(template["value"])
    after = dict.fromkeys(value["payload"]["after"])
    if extra:
        for part in value["schema"]["fields"]:
            if part["field"] in ("before", "after"):
                part["fields"] = part["fields"] + [{"type": t, "optional": True, "field": n} for n, t in extra.items()]
        after.update(dict.fromkeys(extra))
    value["payload"].update(op=op, before=None, after=after, source={**value["payload"]["source"], **source})
    kinds = {"id": pa.int32(), "first_name": pa.string(), "last_name": pa.string(), "email": pa.string(),
             "score": pa.int32(), "note": pa.string(), typed_rows.POSITION: pa.string(), typed_rows.OP: pa.string(),
             typed_rows.TS_US: pa.int64()}
    batch = pa.RecordBatch.from_pydict({name: pa.array(values, kinds.get(name)) for name, values in rows.items()})
    first = batch.slice(0, 1).to_pylist()[0]
    return (template["topic"], _compact(key), _compact(value), [], op, first[typed_rows.POSITION],
            first[typed_rows.TS_US] // 1000, "db", "public", "customers", typed_rows.to_ipc(batch), batch.num_rows)


def _batches(template: dict[str, Any]) -> list[list[tuple]]:
    from headwater.connectors.postgres.source_info import LAST_COMMIT_LSN
    from headwater.engine.typed_rows import EVENT_MS, MARKER, OP, POSITION, TS_US, source_column

    change = {"snapshot": "false", "lsn": None, "txId": None, "sequence": "[null,null]"}
    names = {"first_name": ["a", "b", None], "last_name": [None, "y", "z"], "email": [None, None, "e"],
             "score": [1, None, -5]}
    snapshot = _record(template, "r", {"snapshot": "true", "lsn": 100, "txId": 7, "sequence": '[null,"100"]'},
                       {"id": [1, 2, 3], **names, POSITION: ["01", "02", "03"], OP: ["r"] * 3,
                        TS_US: [1_700_000_000_123_456, 1_700_000_000_123_999, -1_500],
                        MARKER: ["first", "true", "last_in_data_collection"]})
    created = _record(template, "c", change, {
        "id": [4, 5], "first_name": ["c", "d"], "last_name": [None, "q"], "email": ["c@x", None], "score": [3, 4],
        POSITION: ["04", "05"], OP: ["c", "c"], TS_US: [1_700_000_001_000_000] * 2,
        EVENT_MS: [1_700_000_002_000, None], source_column("lsn"): [200, 201], source_column("txId"): [8, 8],
        LAST_COMMIT_LSN: [150, None]})
    # rows without the per-row fields: their template's values
    templated = _record(template, "u", {"snapshot": "false", "lsn": 250, "txId": 11, "sequence": '["1","2"]'}, {
        "id": [1], "first_name": ["a1"], "last_name": [None], "email": [None], "score": [1], POSITION: ["06"],
        OP: ["u"], TS_US: [1_700_000_002_000_000]})
    deleted = _record(template, "d", change, {
        "id": [2], "first_name": ["b"], "last_name": ["y"], "email": [None], "score": [None], POSITION: ["07"],
        OP: ["d"], TS_US: [1_700_000_003_000_000], source_column("lsn"): [300], source_column("txId"): [9],
        LAST_COMMIT_LSN: [260]})
    updated = _record(template, "u", change, {
        "id": [1, 3], "first_name": ["a2", "c2"], "last_name": [None, None], "email": [None, None], "score": [1, 2],
        POSITION: ["08", "09"], OP: ["u", "u"], TS_US: [1_700_000_004_000_000] * 2,
        source_column("lsn"): [400, 401], source_column("txId"): [10, 10], LAST_COMMIT_LSN: [300, 300]})
    widened = _record(template, "u", change, {
        "id": [4], "first_name": ["c3"], "last_name": [None], "email": [None], "score": [3], "note": ["new"],
        POSITION: ["10"], OP: ["u"], TS_US: [1_700_000_005_000_000], source_column("lsn"): [500],
        source_column("txId"): [12], LAST_COMMIT_LSN: [401]}, extra={"note": "string"})
    return [[snapshot, created, templated], [deleted, updated], [widened]]


def _log_rows(spark: Any, path: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in spark.read.format("delta").load(path).orderBy("position").collect()]


def _engines(path: Path) -> list[str]:
    engines = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        info = next(json.loads(line)["commitInfo"] for line in commit.read_text().splitlines() if "commitInfo" in line)
        engines.append("spark" if "engineInfo" in info and "Spark" in info["engineInfo"] else "delta-rs")
    return engines


def test_typed_rows_change_log_by_files_is_sparks(spark, tmp_path):
    from headwater.spark.sinks.delta import DeltaSink
    from headwater.spark.source import SCHEMA

    template = _template()
    topic = template["topic"]
    options = {"small.batch.rows": "0", "txn.app.id": "app"}  # every batch through the executors
    ours = DeltaSink(spark, str(tmp_path / "files"), options=options)
    theirs = DeltaSink(spark, str(tmp_path / "spark"), options={**options, "files": "false"})
    batches = _batches(template)
    for batch_id, records in enumerate(batches):
        frame = spark.createDataFrame(records, SCHEMA)
        ours.write(frame, batch_id)
        theirs.write(frame, batch_id)
        ours.write(frame, batch_id)  # a replay: the change log already holds the batch
    path = Path(ours.changelog_path(topic))
    # batch 0 created the change log, batch 1 appended; batch 2's new column went to Spark (mergeSchema)
    assert _engines(path) == ["delta-rs", "delta-rs", "spark"]
    assert _engines(Path(theirs.changelog_path(topic))) == ["spark"] * 3
    got = spark.read.format("delta").load(str(path))
    want = spark.read.format("delta").load(theirs.changelog_path(topic))
    assert got.schema == want.schema
    rows, expected = _log_rows(spark, str(path)), _log_rows(spark, theirs.changelog_path(topic))
    assert len(rows) == sum(r[-1] for b in batches for r in b) == 10
    assert rows == expected
    by_position = {r["position"]: r for r in rows}
    assert by_position["06"]["source"]["lsn"] == 250 and by_position["06"]["tx_id"] == 11, "the template's fields"
    assert by_position["04"]["source"]["sequence"] == '["150","200"]'
    assert by_position["05"]["ts_ms"] == 1_700_000_001_000, "without the envelope's time: the commit's"
    assert by_position["07"]["before"]["first_name"] == "b" and by_position["07"]["after"] is None
    assert by_position["03"]["source_ts_ms"] == -2, "floor, as Spark divides"
    current = {r["id"]: r["first_name"] for r in spark.read.format("delta").load(ours.table_path(topic)).collect()}
    assert current == {1: "a2", 3: "c2", 4: "c3", 5: "d"}


def test_derived_field_expressions_evaluate_as_spark_does(spark):
    import pyarrow as pa
    from pyspark.sql import functions as F

    from headwater.connectors.postgres.source_info import SEQUENCE
    from headwater.spark.sinks.delta.typed_changelog import row_expression

    pairs = [(24023928, 24023928), (None, 123), (3, 30), (None, None), (2**63 - 1, 0)]
    (lsn, _), (last, _) = SEQUENCE.inputs
    frame = spark.createDataFrame(pairs, f"`{last}` BIGINT, `{lsn}` BIGINT")
    want = [r[0] for r in frame.select(F.expr(SEQUENCE.expression)).collect()]
    columns = {last: pa.array([a for a, _ in pairs], pa.int64()), lsn: pa.array([b for _, b in pairs], pa.int64())}
    assert row_expression(SEQUENCE.expression)(columns, len(pairs)).to_pylist() == want
    assert row_expression("concat('a''b', CAST(`x` AS STRING))")({"x": pa.array([1, None])}, 2).to_pylist() \
        == ["a'b1", None]
    for unsupported in ("upper(`x`)", "CAST(`x` AS DOUBLE)", "`x` + 1", "concat('a'"):
        with pytest.raises(ValueError):
            row_expression(unsupported)
