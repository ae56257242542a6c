"""`headwater pipeline` on SQL Server (the emulator) into Delta tables: two databases in one connector, a
snapshot read by parallel tasks while a workload writes, streaming, and SIGKILLs of the Spark driver.

Each test ends with every Delta current-state table equal to its source table, row for row, and every
committed change in the change logs (which are ordered by commit LSN, change LSN and event serial number)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.pipeline_driver import PipelineDriver
from helpers.sqlserver import SqlServerEmulator
from helpers.sqlserver_conformance import wait_captured
from helpers.sqlserver_workload import TABLES, Change, Key, Workload, create_databases, table_rows

pytestmark = pytest.mark.postgres  # the emulator is backed by PostgreSQL

SEED = int(os.environ.get("HEADWATER_DELIVERY_SEED", "0")) or random.randrange(1, 10**6)


@pytest.fixture(scope="module")
def sqlserver() -> Iterator[SqlServerEmulator]:
    with SqlServerEmulator(capture_interval=0.1) as emulator:
        yield emulator


def pipeline_doc(server: SqlServerEmulator, workdir: Path, databases: list[str], prefix: str,
                 trigger: dict[str, Any], jsonl: bool = False, **options: str) -> dict[str, Any]:
    source = {
        "connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
        "database.hostname": server.host, "database.port": str(server.port), "database.user": "sa",
        "database.password": server.password, "database.encrypt": "false",
        "database.names": ",".join(databases), "topic.prefix": prefix,
        "schema.history.internal.file.filename": str(workdir / "schema-history.dat"),
        "snapshot.mode": "initial", "snapshotChunkRows": "40", **options,
    }
    sinks = [{"type": "delta", "path": "lake"}, *([{"type": "jsonl", "path": "topics"}] if jsonl else [])]
    return {"source": source, "sinks": sinks, "trigger": trigger,
            "checkpoint": "checkpoint", "name": "sqlserver",
            "spark": {"master": "local[2]", "conf": {
                "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
                "spark.databricks.delta.snapshotPartitions": "2",
                # the tests run these JVMs on C1 alone (helpers/jvm.py), whose 48 MB code cache a run of
                # four tables' MERGEs filled ("Out of space in CodeCache for adapters")
                "spark.driver.extraJavaOptions": "-Xss16m -XX:NonNMethodCodeHeapSize=32m "
                                                 "-XX:ReservedCodeCacheSize=240m"}}}


def write_pipeline(workdir: Path, name: str, doc: dict[str, Any]) -> Path:
    path = workdir / name
    path.write_text(yaml.safe_dump(doc))
    return path


def stream_start(checkpoint: Path) -> dict[str, bytes]:
    """Per database, the LSN streaming started after: the end of batch 0 (the snapshot) in Spark's offset log."""
    offset = json.loads((checkpoint / "offsets" / "0").read_text().splitlines()[-1])
    return {db: bytes.fromhex(e["commit_lsn"].replace(":", "")) for db, e in offset["databases"].items()}


def committed_after(server: SqlServerEmulator, db: str, table: str, start: bytes) -> set[tuple[str, Key, int]]:
    """(op, key, version) of every change of the table's change table committed after `start`: what the
    change log must hold (the snapshot holds the result of what came before)."""
    key = ", ".join(f"[{k}]" for k in TABLES[table])
    rows = server.execute(f"SELECT [__$start_lsn], [__$operation], {key}, version FROM cdc.dbo_{table}_CT "
                          "WHERE [__$operation] <> 3", database=db)
    ops = {1: "d", 2: "c", 4: "u"}
    return {(ops[r[1]], tuple(r[2:-1]), r[-1]) for r in rows if bytes(r[0]) > start}


def check_lake(spark: Any, server: SqlServerEmulator, workdir: Path, prefix: str, databases: list[str],
               changes: list[Change]) -> list[str]:
    """Every current-state table equals its source table; every change committed after the snapshot's LSN is
    in the change log; its positions order it as (commit LSN, change LSN, event serial number) do."""
    from pyspark.sql import functions as F

    from headwater.spark.sinks.delta import DeltaSink

    sink = DeltaSink(spark, str(workdir / "lake"))
    starts = stream_start(workdir / "checkpoint")
    failures: list[str] = []
    for db in databases:
        for table, key in TABLES.items():
            topic = f"{prefix}.{db}.dbo.{table}"
            want = table_rows(server, db, table)
            df = spark.read.format("delta").load(sink.table_path(topic))
            if table == "items":
                got = {tuple(r) for r in df.select("id", "version", "name").collect()}
            else:
                got = {tuple(r) for r in df.select("a", "b", "version", F.col("qty").cast("string")).collect()}
            if got != want:
                failures.append(f"{topic}: current state differs: missing {sorted(want - got)[:5]}, "
                                f"extra {sorted(got - want)[:5]} ({len(want)} rows in the source)")
            log = spark.read.format("delta").load(sink.changelog_path(topic))
            assert {"commit_lsn", "change_lsn", "event_serial_no"} <= set(log.columns)
            entries = log.select("op", "commit_lsn", "change_lsn", "event_serial_no", "position",
                                 *[F.coalesce(F.col(f"after.{k}"), F.col(f"before.{k}")).alias(k) for k in key],
                                 F.expr("CASE WHEN op = 'd' THEN before.version ELSE after.version END")
                                 .alias("version")).collect()
            seen = {(r.op, tuple(r[k] for k in key), r.version) for r in entries}
            required = committed_after(server, db, table, starts[db])
            lost = sorted(required - seen)
            if lost:
                failures.append(f"{topic}: {len(lost)} of {len(required)} changes committed after the snapshot "
                                f"missing from the change log, e.g. {lost[:5]}")
            made = {(c.op, c.key, c.version) for c in changes if c.database == db and c.table == table}
            unknown = sorted(x for x in seen - made if x[0] != "r")
            if unknown:
                failures.append(f"{topic}: change log entries no transaction made: {unknown[:5]}")
            chunks = {r.position[32:44] for r in entries if r.op == "r"}
            if len(chunks) < 2:
                failures.append(f"{topic}: the snapshot was read in {len(chunks)} chunk(s), not in parallel")
            streamed = sorted((r for r in entries if r.op != "r"),
                              key=lambda r: (r.commit_lsn, r.change_lsn, r.event_serial_no))
            if [r.position for r in streamed] != sorted(r.position for r in streamed):
                failures.append(f"{topic}: change log positions disagree with (commit_lsn, change_lsn, "
                                "event_serial_no)")
    return failures


def test_snapshot_under_concurrent_writes_and_streaming_of_two_databases(spark, sqlserver, tmp_path) -> None:
    """The snapshot's chunks are read by parallel tasks, each on its own connection, while a workload writes to
    both databases; then the pipeline streams. The lake ends equal to the source."""
    from headwater.spark.pipeline import Pipeline, load_pipeline

    databases = [f"sp{uuid.uuid4().hex[:6]}a", f"sp{uuid.uuid4().hex[:6]}b"]
    prefix = "lake1"
    initial = create_databases(sqlserver, databases, rows=300)
    conn = sqlserver.connect("master")
    wait_captured(conn, databases)
    workload = Workload(sqlserver, databases, rows=300, seed=SEED).start()
    try:
        time.sleep(0.5)  # changes before the snapshot's maximum LSN, during its chunks, and after it
        spec = load_pipeline(write_pipeline(tmp_path, "pipeline.yaml", pipeline_doc(
            sqlserver, tmp_path, databases, prefix, {"availableNow": True}, jsonl=True)))
        Pipeline(spec, spark=spark).start().await_termination(300)   # the snapshot, and what came meanwhile
        time.sleep(1.0)
    finally:
        workload.stop()
    wait_captured(conn, databases)
    conn.close()
    Pipeline(spec, spark=spark).start().await_termination(300)       # the rest, from the checkpoint
    failures = check_lake(spark, sqlserver, tmp_path, prefix, databases, initial + workload.changes)
    assert not failures, f"seed {SEED}, {len(workload.changes)} changes:\n" + "\n".join(failures)
    assert len(workload.changes) > 50
    # the JSONL sink next to it got the same events (the change log's, without replays: one each)
    from headwater.spark.sinks.delta import DeltaSink

    sink = DeltaSink(spark, str(tmp_path / "lake"))
    for db in databases:
        for table in TABLES:
            topic = f"{prefix}.{db}.dbo.{table}"
            lines = [json.loads(line) for f in sorted((tmp_path / "topics" / topic).glob("*.jsonl"))
                     for line in f.read_text().splitlines()]
            events = [line for line in lines if line["value"] is not None]
            assert len(events) == spark.read.format("delta").load(sink.changelog_path(topic)).count() > 300


@pytest.mark.timeout(900)
def test_spark_driver_killed_while_streaming_loses_nothing(spark, sqlserver, tmp_path) -> None:
    """SIGKILL of the driver (`headwater pipeline` with its JVM) twice while it streams two databases, at a
    random moment of a batch; a last availableNow run catches up from the checkpoint. Nothing committed is
    missing from the lake."""
    rng = random.Random(SEED)
    databases = [f"sk{uuid.uuid4().hex[:6]}a", f"sk{uuid.uuid4().hex[:6]}b"]
    prefix = "lake2"
    initial = create_databases(sqlserver, databases, rows=100)
    conn = sqlserver.connect("master")
    wait_captured(conn, databases)
    streaming = write_pipeline(tmp_path, "stream.yaml", pipeline_doc(
        sqlserver, tmp_path, databases, prefix, {"processingTime": "500 milliseconds"}, maxRowsPerBatch="3",
        **{"max.iteration.transactions": "5"}))
    final = write_pipeline(tmp_path, "final.yaml", pipeline_doc(
        sqlserver, tmp_path, databases, prefix, {"availableNow": True}, **{"max.iteration.transactions": "5"}))
    driver = PipelineDriver(tmp_path, context=f"seed {SEED}")
    workload = Workload(sqlserver, databases, rows=100, seed=SEED, pause=0.02)
    try:
        driver.start(streaming)
        driver.wait_for(lambda: driver.last("commits") >= 0, "committing the snapshot")
        workload.start()
        for _ in range(2):
            seen = driver.last("commits")
            driver.wait_for(lambda seen=seen: driver.last("commits") > seen, "committing a streamed batch")
            planned = driver.last("offsets")
            driver.wait_for(lambda planned=planned: driver.last("offsets") > planned, "planning a batch")
            time.sleep(rng.uniform(0.0, 1.5))  # somewhere inside the batch: reading, or writing Delta
            driver.kill()
            driver.start(streaming)
        time.sleep(2.0)
        workload.stop()
        wait_captured(conn, databases)
        driver.kill()
        driver.start(final)
        assert driver.proc is not None
        rc = driver.proc.wait(600)
        assert rc == 0, f"the catch-up run exited with {rc}\n{driver.logs()}"
    finally:
        driver.cleanup()
        conn.close()
        with contextlib.suppress(AssertionError):
            workload.stop()
    failures = check_lake(spark, sqlserver, tmp_path, prefix, databases, initial + workload.changes)
    assert not failures, (f"seed {SEED} (HEADWATER_DELIVERY_SEED), {len(workload.changes)} changes, kills: "
                          f"{driver.kills}\n" + "\n".join(failures) + f"\n(logs in {tmp_path})")
    assert len(driver.kills) == 3 and len(workload.changes) > 30
