"""The Delta Lake sink: current-state tables kept by MERGE, change logs, replays, TOAST, schema evolution.

Batches are built from Debezium's own events (the conformance golden files) with a position per
line; the expected current state comes from replaying the same events in a small Python model.
The last test runs PostgreSQL → the headwater source → the sink and compares the tables row for row.
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from helpers.capture import spark_properties
from helpers.spark_capture import SparkCapture, wait_first_batch
from helpers.spark_jobs import jobs_of_finished_executions

GOLDEN = Path(__file__).resolve().parents[1] / "conformance" / "golden"
PLACEHOLDER = "__debezium_unavailable_value"
META = ("__headwater_position", "__headwater_op", "__headwater_ts_ms")
SPARK_PATH = {"small.batch.rows": "0"}  # every batch through Spark's writer, not the driver's


@pytest.fixture(autouse=True)
def _small_delta_log_jobs(spark: Any) -> Any:
    """Delta reads a table's log with 50 tasks by default: seconds per commit in local mode."""
    key = "spark.databricks.delta.snapshotPartitions"
    spark.conf.set(key, "2")
    yield
    spark.conf.unset(key)


def golden(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (GOLDEN / f"{name}.jsonl").read_text().splitlines()]


class Feed:
    """Conformance lines → source rows (headwater.spark.source.SCHEMA), positions in feed order."""

    def __init__(self) -> None:
        self.next = 0
        self.fed: list[tuple[str, dict[str, Any]]] = []  # (position, line), every line fed so far

    def rows(self, lines: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        out = []
        for line in lines:
            self.next += 1
            position = f"{self.next:040x}"
            value = line["value"]
            payload = value["payload"] if value else None
            source = (payload or {}).get("source") or {}
            self.fed.append((position, line))
            out.append((line["topic"], _compact(line["key"]), _compact(value), [],
                        payload.get("op") if payload else None, position, source.get("ts_ms"), source.get("db"),
                        source.get("schema"), source.get("table"), None, None))
        return out

    def frame(self, spark: Any, lines: list[dict[str, Any]]) -> Any:
        from headwater.spark.source import SCHEMA

        return spark.createDataFrame(self.rows(lines), SCHEMA)


def _compact(obj: Any) -> str | None:
    return None if obj is None else json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _json_placeholder(value: Any) -> bool:
    b64 = base64.b64encode(PLACEHOLDER.encode()).decode()
    return value in (PLACEHOLDER, b64) or value == [PLACEHOLDER]


def model(fed: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[tuple, dict[str, Any]]]:
    """The current state the events describe: per topic, key → row (JSON-level values)."""
    state: dict[str, dict[tuple, dict[str, Any]]] = {}
    for _, line in sorted(fed, key=lambda item: item[0]):
        value = line["value"]
        op = value["payload"].get("op") if value else None
        if op not in ("c", "u", "d", "r", "t"):
            continue
        rows = state.setdefault(line["topic"], {})
        if op == "t":
            rows.clear()
            continue
        if line["key"] is None:
            continue
        key = tuple(line["key"]["payload"].values())
        if op == "d":
            rows.pop(key, None)
            continue
        after = dict(value["payload"]["after"])
        old = rows.get(key, {})
        for name, v in after.items():
            if _json_placeholder(v):
                after[name] = old.get(name)
        rows[key] = after
    return state


def delta_rows(spark: Any, path: str, keys: list[str], with_meta: bool = False) -> dict[tuple, dict[str, Any]]:
    out = {}
    for row in spark.read.format("delta").load(path).collect():
        d = row.asDict(recursive=True)
        if not with_meta:
            for m in META:
                d.pop(m)
        out[tuple(d[k] for k in keys)] = d
    return out


def as_stored(row: dict[str, Any], bytes_columns: tuple[str, ...] = ()) -> dict[str, Any]:
    return {k: (base64.b64decode(v) if k in bytes_columns and v is not None else v) for k, v in row.items()}


def operations(spark: Any, path: str) -> list[str]:
    """The table's commits, oldest first: their operation, with the mode of WRITEs."""
    from delta.tables import DeltaTable

    rows = DeltaTable.forPath(spark, path).history().orderBy("version").collect()
    return [r["operation"] + (f" {r['operationParameters'].get('mode')}" if r["operation"] == "WRITE" else "")
            for r in rows]


def history_version(spark: Any, path: str) -> int:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, path).history(1).first()["version"]


def _noise() -> list[dict[str, Any]]:
    """Records the sink must skip: a heartbeat, a logical message, a tombstone."""
    heartbeat = {"schema": {"type": "struct", "fields": [{"type": "int64", "optional": False, "field": "ts_ms"}],
                            "optional": False, "name": "io.debezium.connector.common.Heartbeat"},
                 "payload": {"ts_ms": 1}}
    message = copy.deepcopy(heartbeat)
    message["payload"] = {"op": "m", "ts_ms": 1}
    return [{"topic": "__debezium-heartbeat.dbserver1", "key": None, "value": heartbeat, "headers": []},
            {"topic": "dbserver1.message", "key": None, "value": message, "headers": []},
            {"topic": "dbserver1.public.customers", "key": {"schema": None, "payload": {"id": 1}}, "value": None,
             "headers": []}]


@pytest.mark.timeout(1200)  # a few seconds per Delta commit, dozens of commits
def test_golden_events_current_state_change_log_and_replays(spark, tmp_path):
    from headwater.spark.sinks.delta import DeltaSink

    crud, pk, trunc, nopk = golden("basic_crud"), golden("pk_change"), golden("truncate"), golden("no_pk")
    # fewer tables, fewer Delta commits: the dropped ones repeat what the others cover
    pk = [line for line in pk if not line["topic"].endswith("pk_full")]
    trunc = [line for line in trunc if line["topic"].endswith(("tr_a", "tr_b"))]
    nopk = [line for line in nopk if not line["topic"].endswith("nopk_default")]
    feed = Feed()
    first = crud[:6] + pk[:8] + trunc[:5] + nopk[:8] + _noise()
    rest = crud[6:] + pk[8:] + trunc[5:] + nopk[8:]
    batch0, batch1 = feed.frame(spark, first), feed.frame(spark, rest)
    # the batches rewrite the current-state tables (rewrite.fraction 0: any batch with updates or
    # deletes); the replays below MERGE (inf), so both ways of applying a batch see the replays
    # Spark's path (small batches go through the driver: tests/spark/test_small_batch.py compares the two)
    sink = DeltaSink(spark, str(tmp_path / "lake"), options={"rewrite.fraction": "0", **SPARK_PATH})
    sink.write(batch0, 0)
    sink.write(batch1, 1)

    expected = model(feed.fed)
    keyed = {"dbserver1.public.customers": ["id"], "dbserver1.public.pk_single": ["id"],
             "dbserver1.public.pk_composite": ["a", "b"],
             "dbserver1.public.tr_a": ["id"], "dbserver1.public.tr_b": ["id"], "dbserver1.public.nopk_uniq": ["a"]}
    before_replay = {}
    for topic, keys in keyed.items():
        got = delta_rows(spark, sink.table_path(topic), keys, with_meta=True)
        before_replay[topic] = got
        assert {k: {c: v for c, v in r.items() if c not in META} for k, r in got.items()} == expected[topic], topic
    # spot checks that do not depend on the model: PK changes, truncate then insert
    assert set(before_replay["dbserver1.public.pk_single"]) == {(10,), (20,)}
    assert set(before_replay["dbserver1.public.pk_composite"]) == {(1, "z"), (3, "y")}
    assert set(before_replay["dbserver1.public.tr_b"]) == {(4,)}
    assert before_replay["dbserver1.public.tr_a"] == {}
    assert before_replay["dbserver1.public.customers"][(6,)]["__headwater_op"] == "c"
    assert "WRITE Overwrite" in operations(spark, sink.table_path("dbserver1.public.customers"))
    assert "current.files" in sink.timings, "local tables are rewritten by the executors' files"
    merging = {"rewrite.fraction": "inf", **SPARK_PATH}

    # keyless tables: change log only; every data event in the change logs, nothing else
    root = tmp_path / "lake"
    assert not (root / "dbserver1.public.nopk_full").exists()
    assert not (root / "__debezium-heartbeat.dbserver1").exists() and not (root / "dbserver1.message").exists()
    events: dict[str, list[str]] = {}
    for _, line in feed.fed:
        if line["value"] is not None and line["value"]["payload"].get("op") in ("c", "u", "d", "r", "t"):
            events.setdefault(line["topic"], []).append(line["value"]["payload"]["op"])
    logs = {}
    for topic, ops in events.items():
        log = spark.read.format("delta").load(sink.changelog_path(topic)).orderBy("position").collect()
        logs[topic] = log
        assert [r["op"] for r in log] == ops, topic
    customers_log = logs["dbserver1.public.customers"]
    update = next(r for r in customers_log if r["op"] == "u")
    assert update["after"]["last_name"] == "Bailey" and update["before"] is None
    assert update["key"]["id"] == 2 and update["tx_id"] is not None and update["lsn"] is not None
    assert update["commit_time"] == datetime.datetime.fromtimestamp(update["source_ts_ms"] / 1000,
                                                                    datetime.UTC).replace(tzinfo=None)
    assert customers_log[0]["snapshot"] in ("true", "first") and customers_log[0]["source"]["table"] == "customers"
    assert {r["batch_id"] for r in customers_log} == {0, 1}

    # a batch Spark replays after a crash (same batch id): the change logs skip it (idempotent
    # writes), the current-state tables apply it as a no-op (every event's position is stored)
    log_versions = {t: history_version(spark, sink.changelog_path(t)) for t in events}
    DeltaSink(spark, str(root), options=merging).write(batch1, 1)
    assert {t: history_version(spark, sink.changelog_path(t)) for t in events} == log_versions
    for topic, keys in keyed.items():
        assert delta_rows(spark, sink.table_path(topic), keys, with_meta=True) == before_replay[topic], topic
    # the last batch applied again under a new id (a checkpoint reset): positions keep every table
    # as it is; the change log then holds those events twice (at least once)
    DeltaSink(spark, str(root), options=merging).write(batch1, 2)
    for topic, keys in keyed.items():
        assert delta_rows(spark, sink.table_path(topic), keys, with_meta=True) == before_replay[topic], topic
    count = spark.read.format("delta").load(sink.changelog_path("dbserver1.public.customers")).count()
    assert count == len(events["dbserver1.public.customers"]) + len(
        [line for line in rest if line["topic"].endswith("customers") and line["value"] is not None])
    # an older batch again: no stored row goes back to an older version; the one known limit is
    # that rows deleted (or truncated) by a later batch come back as they were (deletes are
    # physical, see the sink's docs)
    DeltaSink(spark, str(root), options=merging).write(batch0, 3)
    assert operations(spark, sink.table_path("dbserver1.public.customers"))[-1] == "MERGE"
    after_batch0 = model(feed.fed[:len(first)])
    for topic, keys in keyed.items():
        after = delta_rows(spark, sink.table_path(topic), keys, with_meta=True)
        kept = {k: v for k, v in after.items() if k in before_replay[topic]}
        assert kept == before_replay[topic], topic
        back = {k: {c: v for c, v in r.items() if c not in META} for k, r in after.items()
                if k not in before_replay[topic]}
        assert back == {k: v for k, v in after_batch0.get(topic, {}).items() if k in back}, topic

def _with_column(line: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    """A customers event from a later table version: a new optional string column."""
    line = copy.deepcopy(line)
    for part in line["value"]["schema"]["fields"]:
        if part["field"] in ("before", "after"):
            part["fields"].append({"type": "string", "optional": True, "field": name})
    line["value"]["payload"]["after"][name] = value
    return line


@pytest.mark.timeout(900)
@pytest.mark.parametrize("rewrite_fraction", ["0", "inf"])  # every batch rewrites / every batch MERGEs
def test_types_toast_placeholders_and_new_columns(spark, tmp_path, rewrite_fraction):
    from headwater.spark.sinks.delta import DeltaSink

    toast = [line for line in golden("toast") if line["topic"].endswith("toast_default")]
    types, crud = golden("types"), golden("basic_crud")
    feed = Feed()
    sink = DeltaSink(spark, str(tmp_path / "lake"), options={"rewrite.fraction": rewrite_fraction, **SPARK_PATH})
    table = sink.table_path("dbserver1.public.toast_default")
    bytes_columns = ("big_bytea",)

    # batch 0: the rows; batch 1: an update leaving the TOASTed columns unchanged (placeholders)
    sink.write(feed.frame(spark, toast[:1] + types + crud[:3]), 0)
    original = toast[0]["value"]["payload"]["after"]
    assert toast[1]["value"]["payload"]["after"]["big_text"] == PLACEHOLDER
    renamed = _with_column(crud[3], "nickname", "Bob")  # u of id 2 with a new column
    batch1 = feed.frame(spark, [*toast[1:2], renamed])
    sink.write(batch1, 1)
    # the first pass finds which updates may hold a placeholder: only those topics search per column
    found = sink.schemas.summaries(batch1, batch1.limit(0))
    assert (found["dbserver1.public.toast_default"].placeholders, found["dbserver1.public.customers"].placeholders,
            found["dbserver1.public.customers"].updates) == (1, 0, 1)
    row = delta_rows(spark, table, ["id"])[(1,)]
    assert row == as_stored({**original, "small": 1}, bytes_columns)
    # batch 2: a real change of the TOASTed value, a new row, and in the same batch a placeholder
    # update of that new row (the batch's own newer value is kept), then the deletes
    sink.write(feed.frame(spark, toast[2:]), 2)
    expected = model(feed.fed)
    got = delta_rows(spark, table, ["id"])
    assert got == {k: as_stored(v, bytes_columns) for k, v in expected["dbserver1.public.toast_default"].items()}
    assert set(got) == {(2,)} and got[(2,)]["big_text"] != PLACEHOLDER and got[(2,)]["small"] == 2
    applied = operations(spark, table)[2:]  # after the creation and the first append
    assert applied and set(applied) == ({"WRITE Overwrite"} if rewrite_fraction == "0" else {"MERGE"}), applied

    customers = delta_rows(spark, sink.table_path("dbserver1.public.customers"), ["id"])
    assert customers[(2,)]["nickname"] == "Bob" and customers[(2,)]["last_name"] == "Bailey"
    assert customers[(1,)]["nickname"] is None and customers[(3,)]["nickname"] is None

    types_table = delta_rows(spark, sink.table_path("dbserver1.public.all_types"), ["id"])
    assert set(types_table) == {(1,), (3,), (4,)}
    r1, r3, r4 = types_table[(1,)], types_table[(3,)], types_table[(4,)]
    assert r1["c_integer"] == 123457 and r1["c_bigint"] == 9007199254740993 and r1["c_smallint"] == -12
    assert r1["c_numeric_10_2"] == Decimal("12345678.91") and r3["c_numeric_10_2"] == Decimal("-0.01")
    assert r1["c_numeric"] == "3.14159265358979323846264338327950288"
    assert r1["c_bytea"] == bytes.fromhex("deadbeef00") and r3["c_bytea"] == b""
    assert r1["c_date"] == datetime.date(2024, 2, 29) and r3["c_date"] == datetime.date(1970, 1, 1)
    assert r1["c_timestamp"] == datetime.datetime(2024, 2, 29, 13, 45, 30, 123456)
    assert r1["c_timestamptz"] == datetime.datetime(2024, 2, 29, 11, 45, 30, 123456)  # UTC session
    assert r1["c_time"] == 49530123456 and r1["c_timetz"] == "08:15:30.5Z"
    assert r1["c_int_array"] == [5] and r1["c_text_array"] == ["a", "b c", None, 'd"e']
    assert r1["c_money"] == Decimal("1234.56") and r1["c_bit3"] == b"\x05"
    assert r1["c_point"] == {"x": 1.5, "y": -2.25, "wkb": base64.b64decode("AQEAAAAAAAAAAAD4PwAAAAAAAALA"),
                             "srid": None}
    assert all(v is None for k, v in r4.items() if k != "id")
    # every decimal of the golden file, decoded independently
    for line in (line for line in types if line["value"] is not None):
        after = line["value"]["payload"]["after"]
        key = (line["key"]["payload"]["id"],)
        if after is None or key not in types_table or line["value"]["payload"]["op"] == "u":
            continue
        if after["c_numeric"] is not None and key != (1,):
            unscaled = int.from_bytes(base64.b64decode(after["c_numeric"]["value"]), "big", signed=True)
            assert Decimal(types_table[key]["c_numeric"]) == Decimal(f"{unscaled}E-{after['c_numeric']['scale']}")
    assert r3["c_numeric"] == "-123456789012345678901234567890.123456789"  # 39 digits: beyond decimal(38)


def _typed_record(template: dict[str, Any], op: str, source: dict[str, Any], rows: dict[str, Any]) -> tuple:
    """A record of typed rows (headwater.engine.typed_rows) of the customers table: the key and
    value of its template (a NULL row, with `source` as its source block) and the rows."""
    import pyarrow as pa

    from headwater.engine import typed_rows

    key = copy.deepcopy(template["key"])
    key["payload"] = {"id": None}
    value = copy.deepcopy(template["value"])
    value["payload"].update(op=op, before=None, after=dict.fromkeys(value["payload"]["after"]),
                            source={**value["payload"]["source"], **source})
    columns = {"id": pa.int32(), "first_name": pa.string(), "last_name": pa.string(), "email": pa.string(),
               "score": pa.int32(), typed_rows.POSITION: pa.string(), typed_rows.OP: pa.string(),
               typed_rows.TS_US: pa.int64()}
    batch = pa.RecordBatch.from_pydict({name: pa.array(values, columns.get(name)) for name, values in rows.items()})
    first = batch.slice(0, 1).to_pylist()[0]
    return (template["topic"], _compact(key), _compact(value), [], op, first[typed_rows.POSITION],
            first[typed_rows.TS_US] // 1000, "db", "public", "customers", typed_rows.to_ipc(batch), batch.num_rows)


def test_typed_rows_take_the_source_fields_of_their_rows_and_templates(spark, tmp_path):
    """Snapshot rows and streamed row changes of one table in one batch: each row's `source` is its
    own template's, with the fields the rows carry (PostgreSQL: the snapshot marker of snapshot
    rows; LSN, transaction id and sequence of changes) taken from the rows; the change log's
    connector columns (tx_id, lsn) follow."""
    from headwater.connectors.postgres.source_info import LAST_COMMIT_LSN
    from headwater.engine.typed_rows import EVENT_MS, MARKER, OP, POSITION, TS_US, source_column
    from headwater.spark.sinks.delta import DeltaSink
    from headwater.spark.source import SCHEMA

    template = next(line for line in golden("basic_crud") if line["topic"].endswith("customers"))
    names = {"first_name": ["a", "b"], "last_name": [None, "y"], "email": [None, None], "score": [1, None]}
    snapshot = _typed_record(template, "r", {"snapshot": "true", "lsn": 100, "txId": 7, "sequence": '[null,"100"]'},
                             {"id": [1, 2], **names, POSITION: ["01", "02"], OP: ["r", "r"],
                              TS_US: [1_700_000_000_123_456] * 2, MARKER: ["first", "last_in_data_collection"]})
    change = {"snapshot": "false", "lsn": None, "txId": None, "sequence": "[null,null]"}
    created = _typed_record(template, "c", change, {
        "id": [3], "first_name": ["c"], "last_name": [None], "email": ["c@x"], "score": [3], POSITION: ["03"],
        OP: ["c"], TS_US: [1_700_000_001_000_000], EVENT_MS: [1_700_000_002_000], source_column("lsn"): [200],
        source_column("txId"): [8], LAST_COMMIT_LSN: [150]})
    updated = _typed_record(template, "u", change, {
        "id": [1], "first_name": ["a2"], "last_name": [None], "email": [None], "score": [1], POSITION: ["04"],
        OP: ["u"], TS_US: [1_700_000_003_000_000], EVENT_MS: [1_700_000_004_000], source_column("lsn"): [300],
        source_column("txId"): [9], LAST_COMMIT_LSN: [200]})
    sink = DeltaSink(spark, str(tmp_path / "lake"))
    sink.write(spark.createDataFrame([snapshot, created, updated], SCHEMA), 0)
    assert sink.timings.get("typed", 0) > 0
    log = spark.read.format("delta").load(sink.changelog_path(template["topic"])).orderBy("position").collect()
    assert log[0].asDict().keys() >= {"tx_id", "lsn"}
    got = [(r["op"], r["snapshot"], r["tx_id"], r["lsn"], r["source"]["snapshot"], r["source"]["txId"],
            r["source"]["lsn"], r["source"]["sequence"], r["source"]["ts_ms"], r["source"]["ts_us"], r["ts_ms"])
           for r in log]
    assert got == [
        ("r", "first", 7, 100, "first", 7, 100, '[null,"100"]', 1_700_000_000_123, 1_700_000_000_123_456,
         1_700_000_000_123),
        ("r", "last_in_data_collection", 7, 100, "last_in_data_collection", 7, 100, '[null,"100"]',
         1_700_000_000_123, 1_700_000_000_123_456, 1_700_000_000_123),
        ("c", "false", 8, 200, "false", 8, 200, '["150","200"]', 1_700_000_001_000, 1_700_000_001_000_000,
         1_700_000_002_000),
        ("u", "false", 9, 300, "false", 9, 300, '["200","300"]', 1_700_000_003_000, 1_700_000_003_000_000,
         1_700_000_004_000)]
    constants = template["value"]["payload"]["source"]
    assert {(r["source"]["connector"], r["source"]["name"], r["source"]["db"], r["source"]["table"]) for r in log} \
        == {(constants["connector"], constants["name"], constants["db"], constants["table"])}
    assert log[3]["after"]["first_name"] == "a2" and log[0]["before"] is None
    current = delta_rows(spark, sink.table_path(template["topic"]), ["id"], with_meta=True)
    assert {k: (r["first_name"], r["__headwater_op"], r["__headwater_position"]) for k, r in current.items()} == {
        (1,): ("a2", "u", "04"), (2,): ("b", "r", "02"), (3,): ("c", "c", "03")}


def test_the_sequence_postgresql_typed_rows_derive_is_the_text_its_events_carry(spark):
    """The sink derives `source.sequence` of streamed typed rows from their LSNs, as the
    connector's description says; it must write what the event's source block would."""
    from pyspark.sql import functions as F

    from headwater.connectors.postgres.source_info import SEQUENCE, sequence

    pairs = [(24023928, 24023928), (None, 123), (3, 30), (None, None)]
    (lsn, _), (last, _) = SEQUENCE.inputs
    frame = spark.createDataFrame(pairs, f"`{last}` BIGINT, `{lsn}` BIGINT")
    got = [r[0] for r in frame.select(F.expr(SEQUENCE.expression)).collect()]
    assert got == [sequence(a, b) for a, b in pairs]
    assert got[:2] == ['["24023928","24023928"]', '[null,"123"]']


def test_delta_sink_rejects_values_without_schemas_and_bad_options(spark, tmp_path):
    from headwater.config import ConfigError
    from headwater.spark.sinks.delta import DeltaSink
    from headwater.spark.source import SCHEMA

    line = golden("basic_crud")[0]
    payload = line["value"]["payload"]  # value.converter.schemas.enable=false: the bare envelope
    frame = spark.createDataFrame([(line["topic"], _compact(line["key"]), _compact(payload), [], "r", "01",
                                    payload["source"]["ts_ms"], "db", "public", "customers", None, None)], SCHEMA)
    with pytest.raises(ConfigError, match=r"schemas\.enable"):
        DeltaSink(spark, str(tmp_path / "lake")).write(frame, 0)
    with pytest.raises(ConfigError, match="unknown option"):
        DeltaSink(spark, str(tmp_path / "lake"), options={"bogus": "1"})
    with pytest.raises(ConfigError, match=r"decimal\.format"):
        DeltaSink(spark, str(tmp_path / "lake"), options={"decimal.format": "float"})
    with pytest.raises(ConfigError, match=r"rewrite\.fraction='half'"):
        DeltaSink(spark, str(tmp_path / "lake"), options={"rewrite.fraction": "half"})


def test_a_creation_killed_before_its_first_commit_is_redone(spark, tmp_path):
    """A driver killed while creating a table leaves a _delta_log with only temporary files; the
    next run creates the table anyway. A log with a commit is never cleared."""
    from headwater.spark.sinks.delta import DeltaSink

    lines = [line for line in golden("basic_crud")[:6] if line["topic"].endswith("customers")]
    sink = DeltaSink(spark, str(tmp_path / "lake"))
    leftover = Path(sink.table_path(lines[0]["topic"])) / "_delta_log"
    leftover.mkdir(parents=True)
    (leftover / ".00000000000000000000.json.0b1d-4c.tmp").write_text("{}")
    (leftover / "_staged_commits").mkdir()
    feed = Feed()
    sink.write(feed.frame(spark, lines), 0)
    expected = model(feed.fed)[lines[0]["topic"]]
    got = delta_rows(spark, sink.table_path(lines[0]["topic"]), ["id"])
    assert got == expected and got  # the rows of the first batch, not an empty table
    # a real table: a new sink (no cache) finds it and merges; nothing is cleared
    more = [line for line in golden("basic_crud")[6:] if line["topic"].endswith("customers")]
    DeltaSink(spark, str(tmp_path / "lake")).write(feed.frame(spark, more), 1)
    assert delta_rows(spark, sink.table_path(lines[0]["topic"]), ["id"]) == model(feed.fed)[lines[0]["topic"]]


def _nullable_key(line: dict[str, Any], key: Any) -> dict[str, Any]:
    """A customers event keyed by an optional field (message.key.columns on a nullable column)."""
    line = copy.deepcopy(line)
    line["key"]["schema"]["fields"][0]["optional"] = True
    line["key"]["payload"]["id"] = key
    for part in line["value"]["schema"]["fields"]:
        if part["field"] in ("before", "after"):
            part["fields"][0]["optional"] = True
    for side in ("before", "after"):
        if line["value"]["payload"][side] is not None:
            line["value"]["payload"][side]["id"] = key
    return line


# the rewrite's join / Spark's MERGE / the driver's merge (small batches)
@pytest.mark.parametrize("rewrite_fraction", ["0", "inf", "small"])
def test_keys_that_may_be_null_match_null_safely(spark, tmp_path, rewrite_fraction):
    """A primary key is matched with `=` (Spark then keeps the batch's key partitioning); a key
    whose schema allows NULL keeps `<=>`, so the row keyed NULL is updated, not inserted again."""
    from headwater.spark.sinks.delta import DeltaSink

    crud = [line for line in golden("basic_crud") if line["topic"].endswith("customers")]
    create, update = crud[0], next(line for line in crud if line["value"]["payload"]["op"] == "u")
    feed = Feed()
    sink = DeltaSink(spark, str(tmp_path / "lake"))
    first = feed.frame(spark, [create])
    summary = sink.schemas.summaries(first, first.limit(0))[create["topic"]]
    assert sink.schemas.topic(summary, None).key_not_null  # the golden key: a primary key

    options = {} if rewrite_fraction == "small" else {"rewrite.fraction": rewrite_fraction, **SPARK_PATH}
    other = DeltaSink(spark, str(tmp_path / "nullable"), options=options)
    batch = feed.frame(spark, [_nullable_key(create, None), _nullable_key(create, 7)])
    other.write(batch, 0)
    other.write(feed.frame(spark, [_nullable_key(update, None)]), 1)
    rows = spark.read.format("delta").load(other.table_path(create["topic"])).collect()
    after = update["value"]["payload"]["after"]
    assert sorted((r["id"] is None, r["first_name"]) for r in rows) == [
        (False, create["value"]["payload"]["after"]["first_name"]), (True, after["first_name"])]
    summary = other.schemas.summaries(batch, batch.limit(0))[create["topic"]]
    assert not other.schemas.topic(summary, None).key_not_null
    assert any(step.startswith("small.") for step in other.timings) == (rewrite_fraction == "small")


def test_tables_with_a_change_data_feed_always_merge(spark, tmp_path):
    """A rewrite would show every row as changed to the change data feed's readers."""
    from headwater.spark.sinks.delta import DeltaSink

    crud = [line for line in golden("basic_crud") if line["topic"].endswith("customers")]
    feed = Feed()
    key = "spark.databricks.delta.properties.defaults.enableChangeDataFeed"
    spark.conf.set(key, "true")
    try:
        sink = DeltaSink(spark, str(tmp_path / "lake"), options={"rewrite.fraction": "0"})
        sink.write(feed.frame(spark, crud[:4]), 0)
        sink.write(feed.frame(spark, crud[4:]), 1)
    finally:
        spark.conf.unset(key)
    table = sink.table_path(crud[0]["topic"])
    assert delta_rows(spark, table, ["id"]) == model(feed.fed)[crud[0]["topic"]]
    assert operations(spark, table)[-1] == "MERGE" and "WRITE Overwrite" not in operations(spark, table)
    changes = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 2).load(table)
    assert {r["_change_type"] for r in changes.collect()} <= {"update_preimage", "update_postimage", "insert",
                                                               "delete"}
    # the same batches into a table without it rewrite (the check above can fail); with files off,
    # through Spark's own overwrite
    other = DeltaSink(spark, str(tmp_path / "plain"), options={"rewrite.fraction": "0", "files": "false"})
    other.write(feed.frame(spark, crud[:4]), 0)
    other.write(feed.frame(spark, crud[4:]), 1)
    plain = other.table_path(crud[0]["topic"])
    assert "WRITE Overwrite" in operations(spark, plain) and "current.files" not in other.timings
    assert delta_rows(spark, plain, ["id"]) == model(feed.fed)[crud[0]["topic"]]


SETUP = """
CREATE TABLE items (id integer PRIMARY KEY, name text, qty integer, price numeric(10,2), tags text[],
                    updated timestamp, note text);
CREATE TABLE pairs (a integer, b text, v text, PRIMARY KEY (a, b));
INSERT INTO items SELECT i, 'item ' || i, i % 7, i * 1.25, ARRAY['t' || i],
                         '2024-01-01'::timestamp + i * interval '1 h', NULL FROM generate_series(1, 60) AS i;
INSERT INTO pairs SELECT i, 'x', 'v' || i FROM generate_series(1, 10) AS i;
"""


def _workload(rng: random.Random, ids: set[int], round_no: int) -> str:
    """A random-ish mix of inserts, updates, deletes and primary-key changes."""
    sql = ["BEGIN;"]
    for _ in range(40):
        choice = rng.random()
        if choice < 0.3 or not ids:
            new = max(ids, default=0) + 1
            ids.add(new)
            sql.append(f"INSERT INTO items VALUES ({new}, 'new {new}', {rng.randint(0, 9)}, {rng.randint(0, 9999)}.5, "
                       f"ARRAY['a','b'], now()::timestamp, 'r{round_no}');")
        elif choice < 0.65:
            i = rng.choice(sorted(ids))
            sql.append(f"UPDATE items SET qty = qty + 1, name = name || '+', note = 'u{round_no}' WHERE id = {i};")
        elif choice < 0.85:
            i = rng.choice(sorted(ids))
            ids.discard(i)
            sql.append(f"DELETE FROM items WHERE id = {i};")
        else:
            i = rng.choice(sorted(ids))
            new = max(ids) + 1000
            ids.discard(i)
            ids.add(new)
            sql.append(f"UPDATE items SET id = {new}, tags = NULL WHERE id = {i};")
        if rng.random() < 0.2:
            sql.append("COMMIT; BEGIN;")
    sql.append("COMMIT;")
    return "\n".join(sql)


class DeltaCapture(SparkCapture):
    """The source into the Delta sink (and the records into a list, to see the sentinel)."""

    def __init__(self, spark: Any, options: dict[str, str], checkpoint: Path, lake: Path) -> None:
        super().__init__(spark, options, checkpoint, trigger={"processingTime": "1 second"})
        from headwater.spark.sinks.delta import DeltaSink

        self.sink = DeltaSink(spark, str(lake))

    def _collect(self, df: Any, batch_id: int) -> None:
        df = df.persist()
        try:
            self.sink.write(df, batch_id)
            super()._collect(df.select("value"), batch_id)
        finally:
            df.unpersist()


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("value_format", ["json", "payload"])
def test_postgres_through_spark_into_delta_equals_the_tables(spark, pg_db, tmp_path, value_format):
    """Whole events, or (valueFormat=payload, what a Delta-only pipeline uses) values without their
    schemas plus schema records: the same tables either way."""
    pg_db.psql(SETUP)
    slot = f"hw_delta_e2e_{value_format}"
    # truncates are skipped by default (Debezium's skipped.operations=t)
    props = spark_properties(pg_db, tmp_path, slot, **{"slot.drop.on.stop": "false", "skipped.operations": "none"})
    props["valueFormat"] = value_format
    rng = random.Random(20261122)
    ids = set(range(1, 61))
    lake, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"

    capture = DeltaCapture(spark, props, checkpoint, lake).start()
    try:
        wait_first_batch(capture.query)
        pg_db.psql(_workload(rng, ids, 1))
        capture.emit_sentinel_and_wait(pg_db, timeout=300)
    finally:
        capture.stop()
    # a restart from the checkpoint with a new sink (nothing cached), then a truncate and more work
    capture = DeltaCapture(spark, props, checkpoint, lake).start()
    try:
        pg_db.psql(_workload(rng, ids, 2))
        pg_db.psql("TRUNCATE pairs; INSERT INTO pairs VALUES (1, 'y', 'after truncate'), (2, 'z', NULL);"
                   "UPDATE pairs SET b = 'w' WHERE a = 2;")
        pg_db.psql(_workload(rng, ids, 3))
        pg_db.psql("ALTER TABLE items ADD COLUMN extra int; UPDATE items SET extra = id WHERE id % 3 = 0;")
        pg_db.psql(_workload(rng, ids, 4))
        capture.emit_sentinel_and_wait(pg_db, timeout=300)
    finally:
        capture.stop()
    # the sink wrote its tables from several threads: none of their jobs is left in the scheduler
    # under an execution that has ended (this grew the driver's heap by every batch until it died)
    assert jobs_of_finished_executions(spark) == {}
    values = [r.value for r in capture.rows() if r.value is not None]
    enveloped = [v for v in values if v.startswith('{"schema":')]
    if value_format == "json":
        assert len(enveloped) == len(values)
    else:  # a few schema records (per task and schema: two versions of items after the ALTER)
        assert enveloped and all(v.endswith(',"payload":null}') for v in enveloped)
        assert len(enveloped) < len(values) / 5

    sink = capture.sink
    items = delta_rows(spark, sink.table_path("dbserver1.public.items"), ["id"])
    want = {(r[0],): dict(zip(("id", "name", "qty", "price", "tags", "updated", "note", "extra"), r))
            for r in pg_db.execute("SELECT id, name, qty, price, tags, updated, note, extra FROM items")}
    assert items == want
    pairs = delta_rows(spark, sink.table_path("dbserver1.public.pairs"), ["a", "b"])
    assert pairs == {(1, "y"): {"a": 1, "b": "y", "v": "after truncate"}, (2, "w"): {"a": 2, "b": "w", "v": None}}
    log = spark.read.format("delta").load(sink.changelog_path("dbserver1.public.pairs"))
    assert log.filter("op = 't'").count() == 1 and log.filter("op = 'r'").count() == 10


@pytest.mark.parametrize(("precision", "scale"), [(1, 0), (12, 2), (18, 0), (18, 18), (18, 5), (20, 3)])
def test_connect_decimals_decode_exactly(spark, precision, scale):
    """Both decimal routes (≤ 18 digits: 64-bit arithmetic; wider: 128-bit text) against Python's
    own reading of the two's-complement bytes, at every byte-length boundary and both signs."""
    import random

    from pyspark.sql import functions as F

    from headwater.spark.sinks import connect_types as ct

    limit = 10 ** precision - 1
    edges = {0, 1, -1, limit, -limit}
    for bits in range(7, 8 * 9, 8):  # the largest/smallest values of each byte length
        edges |= {v for v in (2 ** bits - 1, 2 ** bits, -(2 ** bits), -(2 ** bits) - 1) if abs(v) <= limit}
    rng = random.Random(precision * 100 + scale)
    edges |= {rng.randint(-limit, limit) for _ in range(200)}
    values = sorted(edges)

    def b64(v: int) -> str:
        length = max(1, (v.bit_length() + 8) // 8)  # Java's BigInteger.toByteArray length
        return base64.b64encode(v.to_bytes(length, "big", signed=True)).decode()

    schema = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
              "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)}}
    frame = spark.createDataFrame([(i, b64(v)) for i, v in enumerate(values)] + [(len(values), None)],
                                  "i int, x string")
    got = {r["i"]: r["d"] for r in frame.select("i", F.expr(ct.convert_sql("x", schema)).alias("d")).collect()}
    expected = {i: Decimal(v).scaleb(-scale) for i, v in enumerate(values)}
    expected[len(values)] = None
    if precision > 18:  # the wide route to the same type
        assert "conv(substr" in ct.convert_sql("x", schema)
    assert got == expected
