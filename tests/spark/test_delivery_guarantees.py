"""Delivery guarantees of `headwater pipeline` (Delta + Kafka sinks) when the Spark driver dies.

A random workload (inserts, updates, primary-key changes, deletes, truncates, multi-table and
rolled-back transactions) runs against four tables (int key, composite key, text key, REPLICA
IDENTITY FULL) while the driver — the `headwater pipeline` process with its JVM and Python
workers, one process group — is killed with SIGKILL at random moments (once inside the initial
snapshot, twice while streaming, at random points of a batch: once while the source reads or
between its Delta commits, once as soon as the batch's records reach Kafka) and restarted
from its checkpoint. After the last kill the workload stops, and a last run with `availableNow`
replays what was cut off and catches up. Then:

1. every Delta current-state table equals its PostgreSQL table, row for row;
2. every Delta change log holds every committed change at least once (and nothing else: no
   rolled-back change, no change that never happened);
3. every Kafka topic holds every committed change at least once, in order per key: each key's
   records are the committed sequence, where a replayed batch may repeat a stretch already
   written (at most once per kill), but nothing is skipped or overtakes an older change.

The workload starts while the snapshot is read. The snapshot cannot be read again as it was (its
exported snapshot dies with the driver), so the restarted driver reads the present and streams
every change since the slot's position, those before the new snapshot included: a key changed
before the snapshot batch committed may have its snapshot record show any version the key had by
then, or none; its changes must all be there, as for every other key.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.pipeline_driver import PipelineDriver
from helpers.workload import SPECS, TABLES, Change, Key, Workload

SEED = int(os.environ.get("HEADWATER_DELIVERY_SEED", "0")) or random.randrange(1, 10**6)
# with the kill inside the snapshot, three kills: each restart costs a JVM start and a replayed
# batch (about a minute on a loaded 2-core machine), the suite's longest stretch
STREAM_KILLS = 2
INITIAL_ROWS = {"items": 300, "pairs": 200, "codes": 200, "full_rows": 200}
# past this many changes the workload only trickles: the backlog the last run catches up on
# stays small (each batch costs ~20 s of Delta commits on a loaded 2-core machine)
MAX_CHANGES = 750
RESTART_LOGGED = "restarting it from the checkpoint"  # Pipeline.run(), after a transient failure


# -- the driver as a subprocess --------------------------------------------------------------------


class Driver(PipelineDriver):
    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, context=f"seed {SEED}")

    def snapshot_complete(self) -> bool:
        """Whether a committed batch ended the snapshot: its offset (Spark's offset log: its last
        line) is where streaming starts."""
        last = self.last("commits")
        if last < 0:
            return False
        offset = json.loads((self.checkpoint / "offsets" / str(last)).read_text().splitlines()[-1])
        return offset.get("phase") == "stream"

    def delta_commits(self) -> int:
        """Commits in the Delta logs of the lake so far (every table the sink wrote)."""
        return sum(1 for _ in (self.workdir / "lake").glob("*/_delta_log/*.json"))

    def wait_for(self, condition: Any, what: str, timeout: float = 600, poll: float = 0.05) -> None:
        super().wait_for(condition, what, timeout, poll)

    def kill(self) -> str:
        self.assert_alive()
        return super().kill()

    def query_restarts(self) -> int:
        """The queries the runs restarted themselves after a transient failure (each replays its batch)."""
        return sum((self.workdir / f"run{i}.log").read_text(errors="replace").count(RESTART_LOGGED)
                   for i in range(1, self.runs + 1))


def kill_during_batch(driver: Driver, rng: random.Random, phase: str, kafka_bytes: Callable[[], int]) -> str:
    """SIGKILL part-way through the batch that runs next (the sinks write Delta first, then Kafka):
    "delta" — after 0 to 8 of its Delta commits (0: while the source reads; a batch makes up to two
    commits per table, the change log and the MERGE) and a random delay of up to a second;
    "kafka" — as soon as its first records reach the broker (the write takes well under a second),
    so that the replay writes some records again."""
    if phase == "kafka":
        base = kafka_bytes()
        driver.wait_for(lambda: kafka_bytes() > base, "records reaching Kafka", poll=0.01)
        return f"{driver.kill()}, as records reached Kafka"
    base, writes = driver.delta_commits(), rng.randint(0, 8)
    driver.wait_for(lambda: driver.delta_commits() >= base + writes, f"{writes} more Delta commit(s)")
    delay = rng.uniform(0.0, 1.0)
    time.sleep(delay)
    return f"{driver.kill()}, {writes} Delta commit(s) + {delay:.1f} s after the last commit"


def last_offset_lsn(driver: Driver) -> int:
    """The commit LSN the last committed batch ends at (Spark's offset log: its last line)."""
    last = driver.last("commits")
    offset = json.loads((driver.checkpoint / "offsets" / str(last)).read_text().splitlines()[-1])
    return int(max(offset.get("lsn_commit") or 0, offset.get("tx_final_lsn") or 0))


def pipeline_file(workdir: Path, name: str, pg_db: Any, kafka: Any, prefix: str, slot: str,
                  trigger: dict[str, Any]) -> Path:
    source = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": pg_db.server.host, "database.port": str(pg_db.server.port),
        "database.user": pg_db.server.user, "database.dbname": pg_db.name,
        "topic.prefix": prefix, "slot.name": slot, "snapshot.mode": "initial",
        "skipped.operations": "none",  # truncates too
        "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true",
        "maxRowsPerBatch": "500", "snapshotChunkRows": "300",
    }
    doc = {"source": source,
           "sinks": [{"type": "delta", "path": "lake"},
                     {"type": "kafka", "bootstrap.servers": kafka.bootstrap_servers, "partitions": "2"}],
           "trigger": trigger, "checkpoint": "checkpoint", "name": "delivery",
           "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "2",
                                                    "spark.ui.enabled": "false",
                                                    # small tables: no 50-task Delta log replays
                                                    "spark.databricks.delta.snapshotPartitions": "2"}}}
    path = workdir / name
    path.write_text(yaml.safe_dump(doc))
    return path


# -- what should be there --------------------------------------------------------------------------

Event = tuple[str, Any, Any]  # (op, version, txid); tombstones ("tomb", None, None)


def expected_events(changes: list[Change]) -> dict[tuple[str, Key], list[Event]]:
    """(table, key) → the events of that key in commit order, as a Debezium topic holds them."""
    out: dict[tuple[str, Key], list[Event]] = defaultdict(list)
    for c in changes:
        if c.op == "t":
            continue
        out[(c.table, c.key)].append((c.op, c.version, c.txid))
        if c.op == "d":
            out[(c.table, c.key)].append(("tomb", None, None))
    return dict(out)


def unsettled(snapshot: list[Change], window: list[Change]) -> dict[tuple[str, Key], set[Any]]:
    """The keys a snapshot read again after a kill may show otherwise than the first one: (table,
    key) → the versions it may show (as of the first snapshot, or written by a change of `window`,
    the changes committed before the snapshot batch was). A key may also be missing from it."""
    first = {(c.table, c.key): c.version for c in snapshot}
    truncated = {c.table for c in window if c.op == "t"}
    out: dict[tuple[str, Key], set[Any]] = defaultdict(set)
    for (table, key), version in first.items():
        if table in truncated:
            out[(table, key)].add(version)
    for c in window:
        if c.key is None:
            continue
        versions = out[(c.table, c.key)]
        if (c.table, c.key) in first:
            versions.add(first[(c.table, c.key)])
        if c.op in ("c", "u"):
            versions.add(c.version)
    return dict(out)


def check_key_order(expected: list[Event], got: list[Event]) -> tuple[int | None, str]:
    """(fewest restarts, "") when `got` is `expected` delivered at least once in order: a run of
    consecutive expected events, where a replay may go back to any event already delivered and
    continue from there (a *restart*), but never skip ahead. Otherwise (None, why)."""
    inf = math.inf
    # state (cur, hi): index of the last expected event this record stands for, and how many
    # expected events (a prefix) have been delivered; value: fewest restarts to get there
    states: dict[tuple[int, int], float] = {(-1, 0): 0}
    for n, event in enumerate(got):
        new: dict[tuple[int, int], float] = {}
        for (cur, hi), restarts in states.items():
            moves = [((cur + 1, max(hi, cur + 2)), restarts)] if cur + 1 < len(expected) else []
            moves += [((j, hi), restarts + 1) for j in range(hi) if j != cur + 1]
            for (j, reached), cost in moves:
                if expected[j] == event and cost < new.get((j, reached), inf):
                    new[(j, reached)] = cost
        if not new:
            delivered = max(hi for _, hi in states)
            why = ("a change that never happened" if event not in expected else
                   f"out of order: {event} arrived after only the first {delivered} change(s) were delivered")
            return None, f"record {n}: {why}"
        states = new
    complete = [r for (_, hi), r in states.items() if hi == len(expected)]
    if not complete:
        delivered = max(hi for _, hi in states)
        return None, (f"only the first {delivered} of {len(expected)} changes arrived; missing from "
                      f"{expected[delivered]} on")
    return int(min(complete)), ""


def test_check_key_order_accepts_replays_and_catches_loss_and_reordering() -> None:
    e = [("c", 1, 10), ("u", 2, 11), ("d", None, 12), ("tomb", None, None), ("c", 3, 13)]
    assert check_key_order(e, e) == (0, "")
    assert check_key_order(e, e[:3] + e[1:]) == (1, "")       # a replay from the update on
    assert check_key_order(e, e[:2] + e[:2] + e[2:]) == (1, "")
    assert check_key_order(e, e[:4] + e[2:4] + e[2:]) == (2, "")
    assert check_key_order(e, e[:4] + e[4:])[0] == 0
    assert check_key_order(e, [e[0], e[2], e[1], *e[3:]])[0] is None  # reordered
    assert check_key_order(e, [e[0], e[2], e[3], e[4]])[0] is None    # the update lost
    assert check_key_order(e, e[:4])[0] is None                       # the last change lost
    assert check_key_order(e, [*e, ("u", 9, 99)])[0] is None          # something that never happened
    assert check_key_order(e, e[:2] + e[1:2] + e[3:])[0] is None      # replay, then a skip


def test_unsettled_keys_are_the_ones_changed_before_the_snapshot_committed() -> None:
    snapshot = [Change("items", "r", (1,), 1, None), Change("items", "r", (2,), 2, None),
                Change("items", "r", (3,), 3, None), Change("codes", "r", ("a",), 4, None)]
    window = [Change("items", "u", (1,), 5, 10), Change("items", "d", (2,), None, 11),
              Change("items", "c", (7,), 6, 11), Change("codes", "t", None, None, 12)]
    assert unsettled(snapshot, window) == {("items", (1,)): {1, 5}, ("items", (2,)): {2}, ("items", (7,)): {6},
                                           ("codes", ("a",)): {4}}
    assert unsettled(snapshot, []) == {}


# -- what is there ---------------------------------------------------------------------------------


def _key_tuple(table: str, payload: dict[str, Any] | None) -> Key | None:
    if payload is None:
        return None
    return tuple(payload[c] for c in SPECS[table].key_columns)


def kafka_events(spark: Any, kafka: Any, prefix: str) -> tuple[dict[tuple[str, Key], list[Event]],
                                                               dict[str, list[int]], list[str]]:
    """Per (table, key): the events in the topic in offset order; per table: the truncates' txids;
    problems (a key in more than one partition)."""
    from pyspark.sql import functions as F

    topics = {f"{prefix}.public.{t.name}": t.name for t in TABLES}
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
          .option("subscribe", ",".join(topics)).option("startingOffsets", "earliest")
          .option("endingOffsets", "latest").load())
    value = F.col("value").cast("string")
    rows = (df.select("topic", "partition", "offset", F.col("key").cast("string").alias("key"),
                      F.get_json_object(value, "$.payload.op").alias("op"),
                      F.get_json_object(value, "$.payload.after.version").cast("int").alias("version"),
                      F.get_json_object(value, "$.payload.source.txId").cast("long").alias("txid"),
                      value.isNull().alias("tombstone"))
            .orderBy("topic", "partition", "offset").collect())
    events: dict[tuple[str, Key], list[Event]] = defaultdict(list)
    partitions: dict[tuple[str, Key], set[int]] = defaultdict(set)
    truncates: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        table = topics[r.topic]
        if r.op == "t":
            truncates[table].append(r.txid)
            continue
        key = _key_tuple(table, json.loads(r.key)["payload"])
        partitions[(table, key)].add(r.partition)
        if r.tombstone:
            events[(table, key)].append(("tomb", None, None))
        elif r.op == "r":
            events[(table, key)].append(("r", r.version, None))
        elif r.op == "d":
            events[(table, key)].append(("d", None, r.txid))
        else:
            events[(table, key)].append((r.op, r.version, r.txid))
    problems = [f"{k} is in partitions {sorted(p)}" for k, p in partitions.items() if len(p) > 1]
    return dict(events), dict(truncates), problems


def changelog_events(spark: Any, sink: Any, prefix: str) -> Counter[tuple[str, str, Key | None, Any, Any]]:
    out: Counter[tuple[str, str, Key | None, Any, Any]] = Counter()
    for spec in TABLES:
        df = spark.read.format("delta").load(sink.changelog_path(f"{prefix}.public.{spec.name}"))
        for r in df.select("op", "key", "after.version", "tx_id").collect():
            key = None if r.key is None else tuple(r.key[c] for c in spec.key_columns)
            if r.op == "t":
                out[(spec.name, "t", None, None, r.tx_id)] += 1
            elif r.op == "r":
                out[(spec.name, "r", key, r.version, None)] += 1
            elif r.op == "d":
                out[(spec.name, "d", key, None, r.tx_id)] += 1
            else:
                out[(spec.name, r.op, key, r.version, r.tx_id)] += 1
    return out


def table_rows(pg_db: Any, table: str) -> tuple[list[str], set[tuple[Any, ...]]]:
    conn = pg_db.connect()
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        rows = {tuple(row) for row in cur.fetchall()}
    conn.close()
    return names, rows


def describe_rows(table: str, names: list[str], key_columns: tuple[str, ...], want: set[tuple[Any, ...]],
                  got: set[tuple[Any, ...]], limit: int = 8) -> str:
    index = [names.index(c) for c in key_columns]

    def by_key(rows: set[tuple[Any, ...]]) -> dict[Key, tuple[Any, ...]]:
        return {tuple(r[i] for i in index): r for r in rows}

    def short(row: tuple[Any, ...] | None) -> str:
        if row is None:
            return "absent"
        return repr(tuple(v[:40] + "…" if isinstance(v, str) and len(v) > 40 else v for v in row))

    w, g = by_key(want), by_key(got)
    diffs = [k for k in sorted(set(w) | set(g), key=repr) if w.get(k) != g.get(k)]
    lines = [f"{table} ({', '.join(names)}): {len(diffs)} key(s) differ; PostgreSQL has {len(want)} rows, "
             f"Delta {len(got)}"]
    lines += [f"  key {k}: PostgreSQL {short(w.get(k))}, Delta {short(g.get(k))}" for k in diffs[:limit]]
    return "\n".join(lines)


# -- the test --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_driver_killed_at_random_loses_nothing(spark, kafka, pg_db, tmp_path: Path) -> None:
    from headwater.spark.sinks.delta import DeltaSink

    rng = random.Random(SEED)
    started = time.monotonic()
    timeline: list[str] = []

    def note(what: str) -> None:
        timeline.append(f"{time.monotonic() - started:6.1f}s {what}")

    workload = Workload(pg_db.dsn, rng, max_changes=MAX_CHANGES)
    snapshot = workload.create(INITIAL_ROWS)
    prefix = f"dg{uuid.uuid4().hex[:8]}"
    slot = f"hw_dg_{uuid.uuid4().hex[:8]}"
    streaming = pipeline_file(tmp_path, "stream.yaml", pg_db, kafka, prefix, slot,
                              {"processingTime": "500 milliseconds"})
    final = pipeline_file(tmp_path, "final.yaml", pg_db, kafka, prefix, slot, {"availableNow": True})
    driver = Driver(tmp_path)

    def kafka_bytes() -> int:
        """What the broker holds of the pipeline's topics (its log segments), in bytes."""
        assert kafka.root_dir is not None
        return sum(f.stat().st_size for f in (kafka.root_dir / "data").glob(f"{prefix}.*-*/*.log"))

    try:
        # 1. a kill inside the initial snapshot (batch 0 planned, not committed), before any change
        driver.start(streaming)
        driver.wait_for(lambda: driver.last("offsets") >= 0, "planning the snapshot batch")
        workload.start()  # the slot exists: every change from now on is streamed
        # the snapshot's batches (a chunk each: maxRowsPerBatch 500, snapshotChunkRows 300) make
        # 12 Delta commits (per table: the change log, creating the current-state table, appending
        # to it): the kill, after at most 8, comes before the snapshot's end
        note(f"kill 1: {kill_during_batch(driver, rng, 'delta', kafka_bytes)}")
        driver.start(streaming)
        # the snapshot is several batches (maxRowsPerBatch); the run resumes it at a new point, so
        # its rows are read up to its last batch: keys changed until then may show any version
        driver.wait_for(driver.snapshot_complete, "committing the snapshot's last batch")
        settled = len(workload.changes)  # the snapshot was read before these had all committed
        note(f"run {driver.runs}: snapshot committed ({settled} changes committed so far)")

        # 2. kills at random moments while streaming
        phases = ["kafka", *(["delta"] * (STREAM_KILLS - 1))]
        rng.shuffle(phases)
        for n, phase in enumerate(phases):
            seen = driver.last("commits")
            driver.wait_for(lambda seen=seen: driver.last("commits") > seen, "committing a streamed batch")
            if workload.error is not None:
                workload.finish()
            state = kill_during_batch(driver, rng, phase, kafka_bytes)
            note(f"kill {n + 2}: {state} ({len(workload.changes)} changes committed so far)")
            if n + 1 < STREAM_KILLS:
                driver.start(streaming)
        workload.finish()
        note(f"workload done: {workload.committed} transactions committed, {workload.rolled_back} rolled back, "
             f"{len(workload.changes)} changes, {workload.truncates} truncates")

        # 3. catch up: availableNow from the same checkpoint (replaying the batch the last kill
        # interrupted, if any), to a clean exit
        target = pg_db.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")[0][0]
        driver.start(final)
        assert driver.proc is not None
        try:
            rc = driver.proc.wait(900)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the catch-up run did not finish (seed {SEED})\n{driver.logs()}") from None
        assert rc == 0, f"the catch-up run exited with {rc} (seed {SEED})\n{driver.logs()}"
        reached = last_offset_lsn(driver)
        note(f"run {driver.runs}: exited, {driver.last('commits') + 1} batches in all, the last one ending at LSN "
             f"{reached} (WAL insert LSN before the run: {target})")
    except AssertionError as exc:  # what the broker saw, too: a run can fail in its Kafka write
        raise AssertionError(f"{exc}\n--- timeline ---\n" + "\n".join(timeline)
                             + f"\n--- the Kafka broker ---\n{kafka.broker_log(80)}") from None
    finally:
        driver.cleanup()
        if workload.is_alive():
            workload.finish()
    context = f"seed {SEED} (HEADWATER_DELIVERY_SEED={SEED} repeats the workload)\n" + "\n".join(timeline)
    print(context)

    changes = snapshot + workload.changes
    loose = unsettled(snapshot, workload.changes[:settled])
    sink = DeltaSink(spark, str(tmp_path / "lake"))
    failures: list[str] = []

    # (1) current state = source, row for row
    for spec in TABLES:
        names, want = table_rows(pg_db, spec.name)
        df = spark.read.format("delta").load(sink.table_path(f"{prefix}.public.{spec.name}"))
        got = {tuple(r) for r in df.select(*names).collect()}
        if got != want:
            failures.append("current state: " + describe_rows(spec.name, names, spec.key_columns, want, got))

    # (2) the change log: every committed change at least once, nothing else
    def identity(c: Change) -> tuple[str, str, Key | None, Any, Any]:
        return (c.table, c.op, c.key, c.version, c.txid)

    want_log = Counter(identity(c) for c in changes if c.op != "r" or (c.table, c.key) not in loose)
    may = {(table, "r", key, v, None) for (table, key), versions in loose.items() for v in versions}
    got_log = changelog_events(spark, sink, prefix)
    missing = sorted((want_log - got_log).elements(), key=repr)
    unknown = sorted(set(got_log) - set(want_log) - may, key=repr)
    if missing:
        failures.append(f"change log: {len(missing)} committed change(s) missing, e.g. {missing[:8]}")
    if unknown:
        failures.append(f"change log: {len(unknown)} change(s) that were never committed, e.g. {unknown[:8]}")
    duplicates = sum(n - want_log[k] for k, n in got_log.items() if n > want_log[k] > 0)

    # (3) Kafka: every change at least once, in order per key
    want_kafka = expected_events(changes)
    got_kafka, truncates, problems = kafka_events(spark, kafka, prefix)
    failures += [f"kafka: {p}" for p in problems]
    restarts: Counter[int] = Counter()
    query_restarts = driver.query_restarts()
    for table_key in sorted(set(want_kafka) | set(got_kafka), key=repr):
        want_seq, got_seq = want_kafka.get(table_key, []), got_kafka.get(table_key, [])
        reads = 0
        if table_key in loose:  # the snapshot records first (any version the key had), then every change
            want_seq = [e for e in want_seq if e[0] != "r"]
            while reads < len(got_seq) and got_seq[reads][0] == "r":
                reads += 1
            wrong = [e for e in got_seq[:reads] if e[1] not in loose[table_key]]
            if wrong:
                failures.append(f"kafka: {table_key[0]} key {table_key[1]}: snapshot records {wrong} show a "
                                f"version it never had before the snapshot batch committed")
            got_seq = got_seq[reads:]
        count, why = check_key_order(want_seq, got_seq)
        if count is not None:
            count += max(0, reads - 1)
        if count is None:
            failures.append(f"kafka: {table_key[0]} key {table_key[1]}: {why}\n  committed: {want_seq}\n"
                            f"  in topic:  {got_seq}")
        elif count > len(driver.kills) + query_restarts:
            failures.append(f"kafka: {table_key[0]} key {table_key[1]}: {count} replays for {len(driver.kills)} "
                            f"kills and {query_restarts} query restarts (a batch is replayed at most once per "
                            f"kill or restart)\n  committed: {want_seq}\n  in topic:  {got_seq}")
        else:
            restarts[count] += 1
    for spec in TABLES:
        want_t = Counter(c.txid for c in changes if c.table == spec.name and c.op == "t")
        missing_t = want_t - Counter(truncates.get(spec.name, []))
        if missing_t:
            failures.append(f"kafka: {spec.name}: truncate(s) of transaction(s) {sorted(missing_t)} missing")

    summary = (f"{len(changes)} changes ({len(snapshot)} snapshot rows, {len(loose)} keys changed before the "
               f"snapshot committed), {len(driver.kills)} kills, {query_restarts} query restarts, "
               f"{driver.runs} runs, {time.monotonic() - started:.0f} s; change log duplicates: {duplicates}; "
               f"kafka keys by replays: {dict(sorted(restarts.items()))}")
    print(summary)
    shown = "\n".join(failures[:12])
    assert not failures, (f"{len(failures)} problem(s); {summary}\n{context}\n{shown}\n"
                          f"(driver logs in {tmp_path})")
    assert len(driver.kills) >= 3
    assert len(workload.changes) > 300, summary
