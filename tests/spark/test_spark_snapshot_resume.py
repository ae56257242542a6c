"""The resumable initial snapshot on Spark (engine/feed.py, the snapshot part): with
maxRowsPerBatch the snapshot is several batches of whole chunks; the driver (`headwater pipeline`,
its JVM and Python workers) is SIGKILLed while a later snapshot batch runs, rows are updated,
deleted and inserted while it is down, and a run from the same checkpoint resumes the snapshot at
the batch that did not commit (at a new consistent point), then streams from the original slot
position. The rows of the batch committed before the kill are not read again, none is missing,
and the Delta current-state table equals the PostgreSQL table.

One driver start per run (a JVM each), Delta only, a few hundred rows: the test's cost is the two
JVM starts and a handful of Delta commits. The random-kill test of the whole pipeline is
test_delivery_guarantees.py.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.pipeline_driver import PipelineDriver as Driver

ROWS = 600
CHUNK_ROWS = 100       # snapshotChunkRows
BATCH_ROWS = 200       # maxRowsPerBatch: two chunks a batch, three snapshot batches


def _pipeline(workdir: Path, name: str, pg_db: Any, prefix: str, slot: str, trigger: dict[str, Any]) -> Path:
    source = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
              "database.hostname": pg_db.server.host, "database.port": str(pg_db.server.port),
              "database.user": pg_db.server.user, "database.dbname": pg_db.name,
              "topic.prefix": prefix, "slot.name": slot, "snapshot.mode": "initial",
              "maxRowsPerBatch": str(BATCH_ROWS), "snapshotChunkRows": str(CHUNK_ROWS)}
    doc = {"source": source, "sinks": [{"type": "delta", "path": "lake"}], "trigger": trigger,
           "checkpoint": "checkpoint", "name": "resume",
           "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
                                                    "spark.databricks.delta.snapshotPartitions": "1"}}}
    path = workdir / name
    path.write_text(yaml.safe_dump(doc))
    return path


def _logged_end(driver: Driver, batch: int) -> dict[str, Any]:
    """The end offset Spark's offset log holds for `batch` (its last line)."""
    return json.loads((driver.checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])


@pytest.mark.timeout(600)
def test_driver_killed_during_a_multi_batch_snapshot_resumes_at_the_uncommitted_batch(spark, pg_db,
                                                                                     tmp_path: Path) -> None:
    from headwater.engine.snapshot_resume import SnapshotProgress
    from headwater.spark.sinks.delta import DeltaSink

    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)")
    pg_db.execute(f"INSERT INTO items SELECT i, i FROM generate_series(1, {ROWS}) i")
    prefix, slot = f"sr{uuid.uuid4().hex[:8]}", f"hw_sr_{uuid.uuid4().hex[:8]}"
    streaming = _pipeline(tmp_path, "stream.yaml", pg_db, prefix, slot, {"processingTime": "200 milliseconds"})
    final = _pipeline(tmp_path, "final.yaml", pg_db, prefix, slot, {"availableNow": True})
    driver = Driver(tmp_path)
    try:
        # 1. batch 0 (the first chunks) commits; the kill comes as soon as batch 1 is logged
        # (its Delta commits take far longer than the poll)
        driver.start(streaming)
        driver.wait_for(lambda: driver.last("offsets") >= 1, "planning the second snapshot batch", poll=0.01)
        driver.kill()
        committed, logged = driver.last("commits"), driver.last("offsets")
        assert 0 <= committed < logged, f"no snapshot batch cut by the kill ({committed} committed, {logged} logged)"
        end = _logged_end(driver, committed)
        assert end.get("phase") == "snapshot", f"the committed batch is not a snapshot batch: {end}"
        progress = SnapshotProgress.from_text(end["snapshot_progress"])
        assert progress.table == "public.items" and progress.after is not None, progress
        read_before = int(progress.after[0])  # batches 0..committed read ids 1..read_before
        assert 0 < read_before < ROWS

        # 2. while the driver is down: rows read before the kill, rows of the cut batch, rows not read yet
        pg_db.execute("UPDATE items SET v = -v WHERE id IN (3, %s, %s)", (read_before + 5, ROWS - 7))
        pg_db.execute("DELETE FROM items WHERE id IN (4, %s, %s)", (read_before + 6, ROWS - 8))
        pg_db.execute(f"INSERT INTO items VALUES ({ROWS + 1}, 1), ({ROWS + 2}, 2)")

        # 3. the same checkpoint, to the end of what there is
        driver.start(final)
        assert driver.proc is not None
        try:
            rc = driver.proc.wait(400)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the run after the kill did not finish\n{driver.logs()}") from None
        assert rc == 0, f"the run after the kill exited with {rc}\n{driver.logs()}"
    finally:
        driver.cleanup()
    # the source's warnings (its INFO lines stay in Spark's Python workers): no fallback to a new snapshot
    log = (tmp_path / f"run{driver.runs}.log").read_text(errors="replace")
    assert "cannot be resumed" not in log and "taking a new snapshot" not in log, driver.logs()

    sink = DeltaSink(spark, str(tmp_path / "lake"))
    topic = f"{prefix}.public.items"
    want = {tuple(r) for r in pg_db.execute("SELECT id, v FROM items")}
    got = {(r.id, r.v) for r in spark.read.format("delta").load(sink.table_path(topic)).select("id", "v").collect()}
    assert got == want, f"Delta has {sorted(got ^ want)[:10]} differently from PostgreSQL"

    changes = spark.read.format("delta").load(sink.changelog_path(topic)).select("op", "key.id").collect()
    reads = Counter(r.id for r in changes if r.op == "r")
    again = sorted(i for i, n in reads.items() if n > 1 and i <= read_before)
    assert not again, f"rows of the batch committed before the kill were read again: {again[:10]}"
    # everything there was: read once before the kill, or read after it (as it is then), or its
    # deletion streamed (rows deleted while down before they were read)
    deleted = {4, read_before + 6, ROWS - 8}
    missing = sorted(set(range(1, ROWS + 1)) - set(reads) - {i for i in deleted if i > read_before})
    assert not missing, f"rows never read: {missing[:10]}"
    streamed = Counter(r.op for r in changes if r.op != "r")
    assert streamed == Counter({"u": 3, "d": 3, "c": 2}), streamed
