"""``spark.read.format("headwater")``: one-off consistent extracts, read by parallel tasks inside
one exported snapshot that a holder process keeps open until every chunk is read."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from headwater.connectors.postgres.snapshot_lease import HOLDER_APP, SnapshotHolder, chunk_done
from helpers.capture import base_properties
from helpers.conformance import assert_events_equal, normalize
from helpers.spark_capture import conformance_line

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"


def _props(pg_db: Any, tmp_path: Path, **extra: str) -> dict[str, str]:
    props = base_properties(pg_db, tmp_path, "hw_never_created", **extra)
    for key in ("offset.storage.file.filename", "offset.flush.interval.ms", "slot.drop.on.stop"):
        props.pop(key)
    return props


def _holders(pg_db: Any) -> int:
    return pg_db.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND datname = %s",
                         (HOLDER_APP, pg_db.name))[0][0]


def _wait_released(pg_db: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while _holders(pg_db) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _holders(pg_db) == 0, "the snapshot holder still holds its transaction"


@pytest.mark.parametrize("name", ["basic_crud", "no_pk"])
def test_batch_read_gives_debeziums_snapshot_events(name, spark, pg_db, tmp_path):
    scenario = CONFORMANCE / "scenarios" / name
    pg_db.psql(scenario / "setup.sql")
    # chunks of 1 row: every row is its own task, and the markers still say first/true/last
    frame = spark.read.format("headwater").options(**_props(pg_db, tmp_path), snapshotChunkRows="1").load()
    rows = sorted(frame.collect(), key=lambda r: r.position)
    got = [normalize.normalize_event(conformance_line(r)) for r in rows]
    want = [w for w in normalize.load(str(CONFORMANCE / "golden" / f"{name}.jsonl"))
            if (w["value"] or {}).get("payload", {}).get("op") == "r"]
    assert want, "the golden file has snapshot events"
    assert_events_equal(got, want)
    assert {r.op for r in rows} == {"r"}
    # nothing of a stream was left behind: no slot, no publication
    assert pg_db.execute("SELECT count(*) FROM pg_replication_slots WHERE database = %s", (pg_db.name,))[0][0] == 0
    assert pg_db.execute("SELECT count(*) FROM pg_publication")[0][0] == 0
    _wait_released(pg_db)


def test_batch_read_is_one_consistent_snapshot_under_concurrent_writes(spark, pg_db, tmp_path):
    """Money moves between rows far apart (different chunks) and rows change keys while the chunks
    are read one after another; every chunk sees the same instant, so the total and the row count
    are exactly what they were at one point in time."""
    rows, total = 3000, 3000 * 100
    pg_db.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)")
    pg_db.execute("INSERT INTO accounts SELECT g, 100 FROM generate_series(1, %s) g", (rows,))
    stop = threading.Event()
    commits = [0]

    def write() -> None:
        rng = random.Random(7)
        conn = pg_db.connect()
        with conn.cursor() as cur:
            while not stop.is_set():
                low, high = rng.randint(1, 600), rng.randint(rows - 300, rows)
                amount = rng.randint(1, 50)
                conn.autocommit = False
                cur.execute("UPDATE accounts SET balance = balance - %s WHERE id = %s", (amount, low))
                moved = cur.rowcount
                cur.execute("UPDATE accounts SET balance = balance + %s WHERE id = %s", (amount, high))
                if moved + cur.rowcount != 2:  # a row that changed its key meanwhile: no transfer
                    conn.rollback()
                    continue
                if rng.random() < 0.1:  # a row moves from the first chunk to the last
                    cur.execute("UPDATE accounts SET id = id + 100000 WHERE id = %s", (rng.randint(1, 600),))
                conn.commit()
                commits[0] += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        while commits[0] < 20:
            time.sleep(0.05)
        before = commits[0]
        # 15 chunks read in sequence by one task: without the shared snapshot each would see a
        # different moment
        frame = (spark.read.format("headwater")
                 .options(**_props(pg_db, tmp_path), snapshotChunkRows="200", snapshotParallelism="1").load())
        from pyspark.sql import functions as F

        balance = F.get_json_object("value", "$.payload.after.balance").cast("bigint")
        ident = F.get_json_object("value", "$.payload.after.id").cast("int")
        got = frame.agg(F.count(F.lit(1)).alias("n"), F.sum(balance).alias("total"),
                        F.countDistinct(ident).alias("ids")).first()
        during = commits[0] - before
    finally:
        stop.set()
        writer.join(timeout=10)
    assert during > 0, "the writer made no change while the extract ran: the test proves nothing"
    assert (got["n"], got["ids"], got["total"]) == (rows, rows, total)
    _wait_released(pg_db)


def test_the_holder_lets_go_when_every_chunk_is_read_or_nobody_comes(pg_db):
    from headwater.config import from_properties
    from headwater.connectors.postgres.connection import connect_kwargs

    config = from_properties(_props(pg_db, Path("/nonexistent")))
    args = connect_kwargs(config.connector, application_name="test")

    def importable(name: str) -> bool:
        conn = pg_db.connect(autocommit=False)
        try:
            with conn.cursor() as cur:
                cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cur.execute("SET TRANSACTION SNAPSHOT %s", (name,))
            return True
        except psycopg2.Error:
            return False
        finally:
            conn.close()

    done = SnapshotHolder(args, idle_seconds=60)
    done.expect(2)
    assert importable(done.lease.snapshot_name)
    chunk_done(args, done.lease, "0:0")
    chunk_done(args, done.lease, "0:0")  # a retried task reports the same chunk again
    time.sleep(1.5)
    assert importable(done.lease.snapshot_name), "released before the second chunk was read"
    chunk_done(args, done.lease, "0:1")
    _wait_released(pg_db, timeout=10)
    assert not importable(done.lease.snapshot_name)

    idle = SnapshotHolder(args, idle_seconds=1)
    idle.expect(3)
    started = time.monotonic()
    _wait_released(pg_db, timeout=15)
    assert time.monotonic() - started < 10
    assert not importable(idle.lease.snapshot_name)


def test_batch_read_errors_say_what_is_wrong(spark, pg_db, tmp_path):
    with pytest.raises(Exception, match=r"snapshotIdleSeconds='0': expected a positive integer"):
        spark.read.format("headwater").options(**_props(pg_db, tmp_path), snapshotIdleSeconds="0").load().collect()
    bad = _props(pg_db, tmp_path)
    bad["database.port"] = "1"
    with pytest.raises(Exception, match=rf"cannot connect to PostgreSQL at {bad['database.hostname']}:1, "
                                        rf"database '{pg_db.name}'"):
        spark.read.format("headwater").options(**bad).load().collect()
    _wait_released(pg_db)  # no holder was left behind by the failed plans


def test_shared_locking_holds_off_exclusive_locks_while_planning(spark, pg_db, tmp_path):
    """snapshot.locking.mode=shared in Spark: the planning transaction takes ACCESS SHARE locks (as
    Debezium's snapshot does while it reads the schemas) and waits at most snapshot.lock.timeout.ms."""
    pg_db.execute("CREATE TABLE public.locked (id int PRIMARY KEY)")
    pg_db.execute("INSERT INTO public.locked SELECT generate_series(1, 3)")
    props = _props(pg_db, tmp_path, **{"snapshot.locking.mode": "shared", "snapshot.lock.timeout.ms": "300"})
    blocker = pg_db.connect(autocommit=False)
    try:
        with blocker.cursor() as cur:
            cur.execute("LOCK TABLE public.locked IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(Exception, match=r"snapshot: could not lock table public\.locked within "
                                            r"snapshot\.lock\.timeout\.ms=300 \(snapshot\.locking\.mode=shared\)"):
            spark.read.format("headwater").options(**props).load().collect()
    finally:
        blocker.rollback()
        blocker.close()
    _wait_released(pg_db)
    rows = spark.read.format("headwater").options(**props).load().collect()
    assert sorted(json.loads(r.key)["payload"]["id"] for r in rows) == [1, 2, 3]
    _wait_released(pg_db)


def test_batch_read_of_typed_rows_extracts_into_delta(spark, pg_db, tmp_path):
    """snapshotDelivery=rows, valueFormat=payload and headers=false work in a batch read as in the
    stream: chunks come as typed-row records, and the Delta sink stores the extract as the table."""
    from decimal import Decimal

    from headwater.spark.sinks.delta import DeltaSink

    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2))")
    pg_db.execute("INSERT INTO items SELECT g, 'item-' || g, g * 1.5 FROM generate_series(1, 500) g")
    frame = (spark.read.format("headwater")
             .options(**_props(pg_db, tmp_path), snapshotChunkRows="100", snapshotDelivery="rows",
                      valueFormat="payload", headers="false").load().persist())
    try:
        records = frame.collect()
        typed = [r for r in records if r.typed_rows is not None]
        assert len(typed) >= 5 and {r.op for r in typed} == {"r"}  # one record per chunk, not per row
        assert sum(r.typed_row_count for r in typed) == 500
        assert all(r.headers is None for r in records)
        sink = DeltaSink(spark, str(tmp_path / "lake"), options={"changelog": "false"})
        sink.write(frame, 0)
    finally:
        frame.unpersist()
    _wait_released(pg_db)
    lake = spark.read.format("delta").load(sink.table_path("dbserver1.public.items"))
    got = sorted((r.id, r.name, r.price) for r in lake.select("id", "name", "price").collect())
    assert got == [(i, f"item-{i}", Decimal(i) * Decimal("1.5")) for i in range(1, 501)]
