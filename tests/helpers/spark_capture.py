"""Running the ``headwater`` Spark source against a test database and collecting its records."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def conformance_line(row: Any) -> dict[str, Any]:
    """A source row as a conformance line: {"topic","key","value","headers"} with parsed JSON."""
    return {
        "topic": row.topic,
        "key": None if row.key is None else json.loads(row.key),
        "value": None if row.value is None else json.loads(row.value),
        "headers": [{"key": h.key, "value": json.loads(h.value)} for h in (row.headers or [])],
    }


def wait_first_batch(query: Any, timeout: float = 180) -> None:
    """Wait until the streaming query finished its first micro-batch: with a snapshot, that is the
    snapshot (batch 0 reads it, whatever size). The conformance protocol starts the workload only
    then, as the Debezium oracle does: the slot is active from its creation, before the executors
    read the snapshot, and a TRUNCATE is not MVCC-safe (a snapshot read after it commits sees the
    table empty)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"the streaming query failed: {query.exception()}")
        if query.lastProgress is not None:  # reported once a batch has run
            return
        time.sleep(0.2)
    raise AssertionError(f"the first batch did not finish within {timeout} s")


class SparkCapture:
    """A streaming query from the headwater source into a list (foreachBatch on the driver)."""

    def __init__(self, spark: Any, options: Mapping[str, str], checkpoint: Path,
                 trigger: dict[str, Any] | None = None) -> None:
        self.spark = spark
        self.options = dict(options)
        self.checkpoint = checkpoint
        self.trigger = trigger or {"processingTime": "300 milliseconds"}
        self.batches: list[tuple[int, list[Any]]] = []
        self._lock = threading.Lock()
        self.query: Any = None

    def _collect(self, df: Any, batch_id: int) -> None:
        rows = df.collect()
        with self._lock:
            self.batches.append((batch_id, rows))

    def start(self) -> SparkCapture:
        stream = self.spark.readStream.format("headwater").options(**self.options).load()
        self.query = (stream.writeStream.foreachBatch(self._collect)
                      .option("checkpointLocation", str(self.checkpoint)).trigger(**self.trigger).start())
        return self

    def rows(self) -> list[Any]:
        with self._lock:
            return [row for _, rows in sorted(self.batches, key=lambda b: b[0]) for row in rows]

    def records(self) -> list[dict[str, Any]]:
        return [conformance_line(r) for r in self.rows()]

    def check(self) -> None:
        if self.query is not None and self.query.exception() is not None:
            raise AssertionError(f"the streaming query failed: {self.query.exception()}")

    def wait_for(self, predicate: Any, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check()
            if predicate(self.rows()):
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout} s; {len(self.rows())} rows so far")

    def emit_sentinel_and_wait(self, db: Any, timeout: float = 120) -> None:
        prefix = f"__hw_sentinel_{uuid.uuid4().hex}"
        db.execute("SELECT pg_logical_emit_message(false, %s, 'end')", (prefix,))
        self.wait_for(lambda rows: any(r.value is not None and prefix in r.value for r in rows), timeout)

    def stop(self) -> None:
        if self.query is not None:
            self.query.stop()


class RunningPipeline:
    """`Pipeline.run()` on a thread, as `headwater pipeline` runs it, keeping what it raised."""

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="pipeline-run", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.pipeline.run()
        except BaseException as exc:  # handed to the test
            self.error = exc

    def stop(self, timeout: float = 120) -> None:
        self.pipeline.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the pipeline did not stop"


def run_scenario_through_spark(spark: Any, scenario: Path, golden: Path, pg_db: Any,
                               tmp_path: Path) -> tuple[list[dict], list[dict]]:
    """The conformance protocol through the Spark source (records built in the executors, or on
    the driver when signals are configured): setup, the first batch (the snapshot), workload
    (which may wait with pg_sleep while a signalled snapshot runs), sentinel; then both sides
    normalized. The records must come in position order. HW_CONFORMANCE_DUMP=<dir> also writes
    both sides there (`<name>.spark.got.json`, `<name>.want.json`) for diffing."""
    import os

    from helpers.capture import drop_sentinels, spark_properties
    from helpers.conformance import golden_file, normalize, read_props

    name = scenario.name
    pg_db.psql(scenario / "setup.sql")
    props = spark_properties(pg_db, tmp_path, f"hws_{name}"[:60], **read_props(scenario / "props.txt"))
    # Spark lower-cases option names: a name with a case-sensitive part (a hash salt) goes into the
    # `properties` option, as docs/spark.md tells users
    kept = {k: props.pop(k) for k in [k for k in props if k != k.lower()]}
    if kept:
        props["properties"] = json.dumps(kept)
    capture = SparkCapture(spark, props, tmp_path / "checkpoint").start()
    try:
        wait_first_batch(capture.query)
        pg_db.psql(scenario / "workload.sql")
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
    positions = [r.position for r in capture.rows()]
    assert positions == sorted(positions), "records are not in position order"
    got = [normalize.normalize_event(r) for r in drop_sentinels(capture.records())]
    want = normalize.load(str(golden_file(golden, name)))  # `.jsonl.gz` for a large recording
    if os.environ.get("HW_CONFORMANCE_DUMP"):
        dump = Path(os.environ["HW_CONFORMANCE_DUMP"])
        dump.mkdir(parents=True, exist_ok=True)
        (dump / f"{name}.spark.got.json").write_text(json.dumps(got, indent=1))
        (dump / f"{name}.want.json").write_text(json.dumps(want, indent=1))
    return got, want
