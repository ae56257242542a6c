"""The pipeline runner: YAML → source → JSONL files per topic per micro-batch, and its errors."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from headwater.config import ConfigError
from headwater.embedded.postgres import drop_replication_slot
from headwater.spark.failures import failure_reason
from headwater.spark.pipeline import Pipeline, PipelineFailed, PipelineSpec, load_pipeline, parse_pipeline
from helpers.capture import drop_sentinels, spark_properties
from helpers.conformance import assert_events_equal, normalize
from helpers.spark_capture import RunningPipeline

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"


def _pipeline_file(tmp_path: Path, source: dict[str, str], **extra: object) -> Path:
    doc = {"source": source, "sinks": [{"type": "jsonl", "path": "topics"}], "checkpoint": "checkpoint",
           "trigger": {"availableNow": True}, **extra}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _read_topics(directory: Path) -> dict[str, list[dict]]:
    """Each topic's records: its batch files in batch order, lines in order."""
    out: dict[str, list[dict]] = {}
    for topic_dir in sorted(p for p in directory.iterdir() if p.is_dir()):
        lines = []
        for batch_file in sorted(topic_dir.glob("*.jsonl")):
            lines += [json.loads(line) for line in batch_file.read_text().splitlines()]
        out[topic_dir.name] = lines
    return out


def test_pipeline_writes_debezium_records_per_topic_and_batch(spark, pg_db, tmp_path, caplog):
    scenario = CONFORMANCE / "scenarios" / "basic_crud"
    pg_db.psql(scenario / "setup.sql")
    props = spark_properties(pg_db, tmp_path, "hwp_basic")
    spec = load_pipeline(_pipeline_file(tmp_path, props))
    caplog.set_level(logging.INFO, logger="headwater.spark.pipeline")
    Pipeline(spec, spark=spark).start().await_termination(300)   # the snapshot
    # each batch is logged: the sinks' times, then Spark's progress (from the listener bus, later)
    assert re.search(r"batch 0 written: jsonl \d+\.\d s", caplog.text), caplog.text
    deadline = time.monotonic() + 30
    while not re.search(r"headwater-pipeline batch 0: \d+ source rows in \d+\.\d s \(.*addBatch", caplog.text):
        assert time.monotonic() < deadline, f"no progress line for batch 0 in the log:\n{caplog.text}"
        time.sleep(0.1)
    pg_db.psql(scenario / "workload.sql")
    Pipeline(spec, spark=spark).start().await_termination(300)   # the changes since, from the checkpoint
    topics = _read_topics(tmp_path / "topics")
    assert not list((tmp_path / "topics").rglob("*.tmp-*")), "temporary files left behind"

    want = normalize.load(str(CONFORMANCE / "golden" / "basic_crud.jsonl"))
    for topic in {w["topic"] for w in want}:
        got = [normalize.normalize_event(r) for r in drop_sentinels(topics.get(topic, []))]
        expected = [w for w in want if w["topic"] == topic]
        assert_events_equal(got, expected)
    # a replayed batch id rewrites its own files: nothing doubles
    files = sorted((tmp_path / "topics").rglob("*.jsonl"))
    assert len({f.name for f in files}) >= 2


def test_jsonl_lines_are_the_standalone_format():
    from headwater.spark.sinks.jsonl import jsonl_line

    line = jsonl_line("t.ü", '{"a":1}', None, [{"key": "h", "value": b'"v"'}])
    assert line == '{"topic":"t.ü","key":{"a":1},"value":null,"headers":[{"key":"h","value":"v"}]}\n'.encode()


@pytest.mark.parametrize(("doc", "message"), [
    ({"sinks": [{"type": "jsonl", "path": "x"}], "checkpoint": "c"}, "source: the connector properties are missing"),
    ({"source": {"a": "b"}, "sinks": [{"type": "parquet"}], "checkpoint": "c"}, "sinks[0]: expected a mapping"),
    ({"source": {"a": "b"}, "sinks": [{"type": "delta"}], "checkpoint": "c"}, "sinks[0] (delta): path is required"),
    ({"source": {"a": "b"}, "sinks": [{"type": "jsonl", "path": "p"}]}, "checkpoint: a directory"),
    ({"source": {"a": "b"}, "sinks": [{"type": "jsonl", "path": "p"}], "checkpoint": "c",
      "trigger": {"continuous": "1s"}}, "trigger: expected one of"),
    ({"source": {"a": "b"}, "sinks": [], "checkpoint": "c", "extra": 1}, "unknown keys extra"),
])
def test_pipeline_file_errors_are_specific(doc, message, tmp_path):
    with pytest.raises(ConfigError) as info:
        parse_pipeline(doc, tmp_path)
    assert message in str(info.value)


def test_pipeline_checks_connector_properties_before_spark_starts(tmp_path):
    path = _pipeline_file(tmp_path, {"database.hostname": "h", "topic.prefix": "p", "databse.dbname": "x"})
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    assert "databse.dbname" in str(info.value) and "did you mean" in str(info.value).lower()


def test_a_delta_only_pipeline_streams_compact_records_and_others_refuse_them(spark, tmp_path):
    """Typed snapshot rows, payload values and no headers only when every sink is a Delta sink."""
    source = {"database.hostname": "h", "topic.prefix": "p"}

    def pipeline(sinks: list[dict], **options: str) -> Pipeline:
        return Pipeline(parse_pipeline({"source": {**source, **options}, "sinks": sinks, "checkpoint": "c"},
                                       tmp_path), spark=spark)

    lake = pipeline([{"type": "delta", "path": "lake"}]).source_options()
    assert (lake["snapshotDelivery"], lake["valueFormat"], lake["headers"]) == ("rows", "payload", "false")
    both = pipeline([{"type": "delta", "path": "lake"}, {"type": "jsonl", "path": "out"}]).source_options()
    assert (both["snapshotDelivery"], both["valueFormat"], both["headers"]) == ("events", "json", "true")
    assert pipeline([{"type": "delta", "path": "lake"}], headers="true").source_options()["headers"] == "true"
    # the snapshot: one task per core (local[2]) unless set
    assert lake["snapshotParallelism"] == both["snapshotParallelism"] == "2"
    assert pipeline([{"type": "delta", "path": "lake"}], snapshotparallelism="8").source_options() \
        .get("snapshotParallelism") is None
    with pytest.raises(ConfigError, match="source option headers=false needs every sink to be a delta sink"):
        pipeline([{"type": "jsonl", "path": "out"}], headers="false").source_options()


def _gone_pipeline(spark, pg_db, tmp_path: Path, **extra: str) -> tuple[Path, PipelineSpec]:
    """A table, a pipeline that snapshotted it (slot hwp_gone), and the slot dropped since."""
    pg_db.execute("CREATE TABLE gone (id int PRIMARY KEY, v text)")
    pg_db.execute("INSERT INTO gone VALUES (1, 'a'), (2, 'b')")
    props = spark_properties(pg_db, tmp_path, "hwp_gone", **extra)
    spec = load_pipeline(_pipeline_file(tmp_path, props))
    Pipeline(spec, spark=spark).start().await_termination(300)
    conn = pg_db.connect()  # the stopped query's walsender may still be exiting
    try:
        drop_replication_slot(conn, "hwp_gone")
    finally:
        conn.close()
    pg_db.execute("INSERT INTO gone VALUES (3, 'c')")
    pg_db.execute("UPDATE gone SET v = 'a2' WHERE id = 1")
    return tmp_path / "topics", spec


def _gone_events(topics: Path) -> list[tuple[str, int, str | None]]:
    records = _read_topics(topics)["dbserver1.public.gone"]
    return [(r["value"]["payload"]["op"], r["key"]["payload"]["id"], (r["value"]["payload"]["after"] or {}).get("v"))
            for r in records if r["value"] is not None]


def test_a_slot_dropped_while_the_pipeline_was_stopped_is_a_clear_error(spark, pg_db, tmp_path):
    """The checkpoint resumes at a position the database can no longer stream: the query fails
    saying what is lost and what to do, and nothing is written past what the first run wrote."""
    topics, spec = _gone_pipeline(spark, pg_db, tmp_path)
    before = _gone_events(topics)
    assert before == [("r", 1, "a"), ("r", 2, "b")]
    with pytest.raises(Exception, match=r"replication slot 'hwp_gone' in database '[^']+' does not exist, but "
                                        r"the checkpoint resumes at [0-9A-F]+/[0-9A-F]+: the changes committed since "
                                        r"then cannot be streamed .* snapshot\.mode=when_needed"):
        Pipeline(spec, spark=spark).start().await_termination(300)
    assert _gone_events(topics) == before


def test_a_slot_dropped_while_the_pipeline_was_stopped_is_resnapshotted_with_when_needed(spark, pg_db, tmp_path):
    """snapshot.mode=when_needed, as the standalone runner: a new slot, a snapshot of the present
    (the changes made while there was no slot are in it), then streaming from the new slot."""
    topics, spec = _gone_pipeline(spark, pg_db, tmp_path, **{"snapshot.mode": "when_needed"})
    Pipeline(spec, spark=spark).start().await_termination(300)
    assert pg_db.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'hwp_gone'")[0][0] == 1
    pg_db.execute("DELETE FROM gone WHERE id = 2")
    Pipeline(spec, spark=spark).start().await_termination(300)
    events = _gone_events(topics)
    assert events[:2] == [("r", 1, "a"), ("r", 2, "b")], events  # the first snapshot
    assert sorted(events[2:5]) == [("r", 1, "a2"), ("r", 2, "b"), ("r", 3, "c")], events  # the new one
    assert events[5:] == [("d", 2, None)], events  # streamed from the new slot


# -- restarts after a transient failure ------------------------------------------------------------


def _wait(condition: Any, what: str, running: RunningPipeline, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert running.thread.is_alive(), f"the pipeline ended while waiting for {what}: {running.error!r}"
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:.0f} s"
        time.sleep(0.1)


def _ids(topics: Path, table: str) -> set[int]:
    if not (topics / f"dbserver1.public.{table}").is_dir():
        return set()
    return {r["key"]["payload"]["id"] for r in _read_topics(topics)[f"dbserver1.public.{table}"]
            if r["value"] is not None}


def _terminate_walsender(pg_db: Any, slot: str) -> None:
    """The slot's walsender ends as a server shutdown or a network cut would end it."""
    deadline = time.monotonic() + 30
    while not pg_db.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                            "WHERE slot_name = %s AND active_pid IS NOT NULL", (slot,)):
        assert time.monotonic() < deadline, f"slot {slot} has no walsender to terminate"
        time.sleep(0.1)


def _lost_pipeline(pg_db: Any, tmp_path: Path, slot: str, **extra: str) -> PipelineSpec:
    pg_db.execute("CREATE TABLE lost (id int PRIMARY KEY, v text)")
    pg_db.execute("INSERT INTO lost SELECT g, 'snapshot' FROM generate_series(1, 3) g")
    props = spark_properties(pg_db, tmp_path, slot, **{"slot.drop.on.stop": "false",
                                                      "retriable.restart.connector.wait.ms": "200",
                                                      "errors.retry.delay.initial.ms": "200", **extra})
    return load_pipeline(_pipeline_file(tmp_path, props, trigger={"processingTime": "300 milliseconds"}))


def test_a_lost_database_connection_restarts_the_query_and_loses_nothing(spark, pg_db, tmp_path, caplog):
    """The walsender is terminated while the pipeline streams: the query fails with the lost
    connection, `run()` restarts it from the checkpoint (errors.max.retries, -1 by default), and
    every change — those before the loss and those made while it restarted — reaches the sink."""
    caplog.set_level(logging.INFO, logger="headwater.spark.pipeline")
    spec = _lost_pipeline(pg_db, tmp_path, "hwp_lost")
    topics = tmp_path / "topics"
    running = RunningPipeline(Pipeline(spec, spark=spark))
    try:
        _wait(lambda: _ids(topics, "lost") == {1, 2, 3}, "the snapshot", running)
        pg_db.execute("INSERT INTO lost VALUES (4, 'before the loss')")
        _wait(lambda: 4 in _ids(topics, "lost"), "streaming the first change", running)
        _terminate_walsender(pg_db, "hwp_lost")
        pg_db.execute("INSERT INTO lost VALUES (5, 'during the restart')")
        _wait(lambda: "restarting it from the checkpoint" in caplog.text, "the restart", running)
        pg_db.execute("INSERT INTO lost VALUES (6, 'after the restart')")
        _wait(lambda: _ids(topics, "lost") == {1, 2, 3, 4, 5, 6}, "every change after the restart", running)
    finally:
        running.stop()
    assert running.error is None, running.error
    assert re.search(r"the streaming query failed: replication stream from slot 'hwp_lost' failed: terminating "
                     r"connection due to administrator command; restarting it from the checkpoint in 0\.\d s "
                     r"\(restart 1\)", caplog.text), caplog.text


def test_with_no_retries_a_lost_connection_ends_the_pipeline_with_its_cause(spark, pg_db, tmp_path):
    """errors.max.retries=0: the lost connection ends `run()` with the cause, in one line."""
    spec = _lost_pipeline(pg_db, tmp_path, "hwp_lost0", **{"errors.max.retries": "0"})
    running = RunningPipeline(Pipeline(spec, spark=spark))
    try:
        _wait(lambda: _ids(tmp_path / "topics", "lost") == {1, 2, 3}, "the snapshot", running)
        _terminate_walsender(pg_db, "hwp_lost0")
        running.thread.join(120)
        assert not running.thread.is_alive(), "the pipeline went on after the lost connection"
    finally:
        running.stop()
    assert isinstance(running.error, PipelineFailed), repr(running.error)
    assert failure_reason(running.error) == (
        "replication stream from slot 'hwp_lost0' failed: terminating connection due to administrator command "
        "(gave up after 0 restarts: errors.max.retries=0)")
