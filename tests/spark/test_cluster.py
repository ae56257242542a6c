"""`headwater pipeline` on a multi-process Spark cluster (`local-cluster`: a master, a worker and
an executor JVM with its own Python workers), so that nothing relies on the driver and the
executors sharing a process: the raw replication messages and snapshot chunks reach the
executors inside the partitions, and the executors build the events."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.capture import spark_properties
from helpers.processes import wait_while_running

HEADWATER = Path(sys.executable).with_name("headwater")


def _cluster_pipeline(pg_db, tmp_path: Path, slot: str, table: str, sink: dict,
                      trigger: dict | None = None) -> list[str]:
    """The `headwater pipeline` command for one table on `local-cluster` (an availableNow run
    unless `trigger` says otherwise)."""
    props = spark_properties(pg_db, tmp_path, slot, **{"table.include.list": table})
    props["snapshotChunkRows"] = "1000"  # three snapshot chunks of 2,500 rows, read by the executors
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump({
        "source": props, "sinks": [sink], "checkpoint": "checkpoint", "trigger": trigger or {"availableNow": True},
        # one executor JVM with two cores: a process of its own is what the test needs; a second
        # executor JVM would double the cold start (class loading, JIT) on a 2-core machine
        "spark": {"master": "local-cluster[1,2,1024]", "conf": {"spark.executor.memory": "768m"}},
    }))
    return [str(HEADWATER), "pipeline", str(pipeline)]


@pytest.mark.timeout(1200)
def test_pipeline_on_a_local_cluster(pg_db, tmp_path):
    """The event path: the executors read the snapshot chunks and build the events, the JSONL sink
    writes them. (Streamed changes through executor JVMs: the Delta test below.)"""
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)")
    pg_db.execute("INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 2500) g")
    command = _cluster_pipeline(pg_db, tmp_path, "hw_cluster", "public.items", {"type": "jsonl", "path": "topics"})

    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]

    lines = []
    for f in sorted((tmp_path / "topics" / "dbserver1.public.items").glob("*.jsonl")):
        lines += [json.loads(x) for x in f.read_text().splitlines()]
    values = [r["value"]["payload"] for r in lines if r["value"] is not None]
    assert [v["op"] for v in values] == ["r"] * 2500
    assert sorted(v["after"]["id"] for v in values) == list(range(1, 2501))
    assert [v["after"]["name"] for v in values[:3]] == [f"item {v['after']['id']}" for v in values[:3]]
    assert [v["source"]["snapshot"] for v in values][-1] == "last"


@pytest.mark.timeout(1200)
def test_delta_pipeline_with_typed_snapshot_rows_on_a_local_cluster(pg_db, spark, tmp_path):
    """A Delta-only pipeline reads its snapshot as typed rows (COPY → Arrow IPC in the executors,
    decoded by the sink's executor tasks), then streams changes (decoded by the executors into
    typed rows and events); the lake must equal the table. One running pipeline, stopped with
    SIGTERM: each cluster start costs a minute or more of a loaded CI machine."""
    pg_db.execute("CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric(12,2), "
                  "opened timestamptz, active bool)")
    pg_db.execute("INSERT INTO accounts SELECT g, 'owner ' || g, g * 1.25, "
                  "timestamptz '2024-01-01 00:00:00+00' + g * interval '1 minute', g % 2 = 0 "
                  "FROM generate_series(1, 2500) g")
    command = _cluster_pipeline(pg_db, tmp_path, "hw_cluster_delta", "public.accounts",
                                {"type": "delta", "path": "lake"}, trigger={"processingTime": "1 second"})
    table = tmp_path / "lake" / "dbserver1.public.accounts"
    changelog = tmp_path / "lake" / "dbserver1.public.accounts__changelog"

    def lake() -> list[tuple]:
        if not (table / "_delta_log").is_dir():
            return []
        return sorted(tuple(r) for r in spark.read.format("delta").load(str(table)).selectExpr(
            "id", "owner", "balance", "unix_micros(opened)", "active").collect())

    log = tmp_path / "pipeline.log"
    log_file = log.open("w")
    proc = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        wait_while_running(lambda: len(lake()) == 2500, "the snapshot in the lake", proc, log, 600, poll=2)
        # the snapshot went the typed way: its change-log append carries the typed path's write id
        commits = "".join(p.read_text() for p in sorted((changelog / "_delta_log").glob("*.json")))
        assert ":changelog:rows" in commits
        # one transaction, so one micro-batch (each costs half a minute of cold executor JVM)
        pg_db.execute("UPDATE accounts SET balance = balance + 1, active = NOT active WHERE id <= 10; "
                      "DELETE FROM accounts WHERE id > 2490; "
                      "UPDATE accounts SET id = id + 10000 WHERE id = 20")
        source = sorted(pg_db.execute("SELECT id, owner, balance, (extract(epoch FROM opened) * 1000000)::bigint, "
                                      "active FROM accounts"))
        wait_while_running(lambda: lake() == source, "the streamed changes in the lake", proc, log, 300, poll=2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=180) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log_file.close()
        print(log.read_text()[-3000:])

    assert len(lake()) == 2490
    ops = {r["op"]: r["n"] for r in spark.read.format("delta").load(str(changelog))
           .groupBy("op").count().withColumnRenamed("count", "n").collect()}
    assert ops == {"r": 2500, "u": 10, "d": 11, "c": 1}
