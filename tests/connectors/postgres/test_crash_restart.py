"""Acceptance: `headwater run` killed with SIGKILL at random moments and restarted with the same
configuration and offsets loses nothing, and re-emits only what came after the last stored offset
(at most once per crash), while a stream of small transactions keeps committing."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg2

from helpers.processes import descendants, running

HEADWATER = Path(sys.prefix) / "bin" / "headwater"
if not HEADWATER.exists():  # pragma: no cover - the tests are run from the project's virtualenv
    HEADWATER = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "headwater"

TOPIC = "dbserver1.public.items"


# -- running the console script ------------------------------------------------------------------


class Runner:
    """`headwater run CONFIG` as a subprocess, restartable; every run's stderr goes to its own log."""

    def __init__(self, db: Any, workdir: Path, slot: str, **source: str) -> None:
        self.db = db
        self.workdir = workdir
        self.slot = slot
        self.out = workdir / "out.jsonl"
        self.offsets = workdir / "offsets.json"
        props = {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": db.server.host,
            "database.port": str(db.server.port),
            "database.user": db.server.user,
            "database.dbname": db.name,
            "topic.prefix": "dbserver1",
            "table.include.list": "public.items",
            "slot.name": slot,
            "slot.drop.on.stop": "false",
            "slot.retry.delay.ms": "200",
            "slot.max.retries": "100",
            "snapshot.mode": "initial",
            "offset.storage.file.filename": str(self.offsets),
            "offset.flush.interval.ms": "100",
        }
        props.update(source)
        lines = [f"debezium.source.{k}={v}" for k, v in props.items()]
        lines += [
            "debezium.sink.type=jsonl",
            f"debezium.sink.jsonl.path={self.out}",
            "debezium.format.key.schemas.enable=false",
            "debezium.format.value.schemas.enable=false",
        ]
        self.config = workdir / "application.properties"
        self.config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.boundaries: list[int] = []  # output size when each killed run was dead

    def start(self) -> None:
        self.runs += 1
        with open(self.workdir / f"run{self.runs}.log", "wb") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen([str(HEADWATER), "run", str(self.config)], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=log)

    def logs(self) -> str:
        parts = []
        for i in range(1, self.runs + 1):
            text = (self.workdir / f"run{i}.log").read_text(errors="replace")
            parts.append(f"--- run {i} stderr (last 3000 chars) ---\n{text[-3000:]}")
        return "\n".join(parts)

    def assert_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"headwater exited with {self.proc.returncode}\n{self.logs()}")

    def active_pid(self) -> int | None:
        rows = self.db.execute("SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s AND active",
                               (self.slot,))
        return rows[0][0] if rows else None

    def wait_streaming(self, not_pid: int | None = None, timeout: float = 90) -> int:
        """Wait until a walsender other than `not_pid` (the killed run's) holds the slot."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.assert_alive()
            pid = self.active_pid()
            if pid is not None and pid != not_pid:
                return pid
            time.sleep(0.05)
        raise AssertionError(f"slot {self.slot} not streaming after {timeout}s\n{self.logs()}")

    def kill(self) -> None:
        assert self.proc is not None
        self.assert_alive()
        workers = descendants(self.proc.pid)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        # the encoding workers append to the sink file themselves and die by PDEATHSIG only after
        # the parent: the run's output is complete once they are gone too
        deadline = time.monotonic() + 30
        while any(running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.02)
        # A kill can land in the middle of a write and leave half a line; the sink cuts it when it
        # starts again, so the next run's output begins after the last complete line. (If it did
        # not, the next segment would start with a fragment and fail to parse below.)
        data = self.out.read_bytes() if self.out.exists() else b""
        self.boundaries.append(data.rfind(b"\n") + 1)

    def kill_inside_transaction(self, statement: str, written: int, timeout: float = 120) -> dict[str, Any]:
        """Run `statement` (one large transaction) and SIGKILL the run once it has stored an offset
        inside it and written `written` bytes; the stored offset (it is inside the transaction)."""
        self.db.execute(statement)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            offsets = self.offsets.read_text() if self.offsets.exists() else ""
            if '"tx_final_lsn"' in offsets and self.out.exists() and self.out.stat().st_size > written:
                break
            time.sleep(0.02)
        self.kill()
        (offset,) = json.loads(self.offsets.read_text())["offsets"].values()
        assert offset.get("tx_final_lsn") is not None and offset["tx_msgs"] > 0, offset
        return offset

    def restart_to_sentinel(self, timeout: float = 90) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Start again, stop cleanly once everything so far came through; the output of each run."""
        self.start()
        self.wait_for_sentinel(timeout)
        assert self.terminate() == 0
        first, second = self.segments()
        return first, second

    def terminate(self, timeout: float = 60) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"headwater did not stop within {timeout}s of SIGTERM\n{self.logs()}") from None

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def wait_for_sentinel(self, timeout: float = 90) -> None:
        prefix = f"__hw_sentinel_{uuid.uuid4().hex}"
        self.db.execute("SELECT pg_logical_emit_message(false, %s, 'end')", (prefix,))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.assert_alive()
            if self.out.exists() and prefix.encode() in self.out.read_bytes():
                return
            time.sleep(0.1)
        raise AssertionError(f"sentinel never arrived\n{self.logs()}")

    def segments(self) -> list[list[dict[str, Any]]]:
        """The output split per run (at the sizes recorded after each SIGKILL), parsed line by line.
        Until the next run starts, a killed run may have left half a line after its boundary (a
        SIGKILL in the middle of a write): that next run cuts it, and it is no run's output."""
        data = self.out.read_bytes()
        restarted = self.runs > len(self.boundaries)
        cuts = [0, *self.boundaries, *([len(data)] if restarted else [])]
        out = []
        for i in range(len(cuts) - 1):
            chunk = data[cuts[i]:cuts[i + 1]]
            assert not chunk or chunk.endswith(b"\n"), (
                f"run {i + 1} left a torn last line in {self.out} (the next run appends to it): "
                f"{chunk[-200:]!r}")
            records = []
            for n, line in enumerate(chunk.splitlines(), 1):
                try:
                    records.append(json.loads(line))
                except ValueError as exc:
                    raise AssertionError(f"run {i + 1}, line {n} of its output is not JSON ({exc}): "
                                         f"{line[:300]!r}") from None
            out.append(records)
        return out


def item_events(records: list[dict[str, Any]]) -> list[tuple[str, int, str, int | None]]:
    """(op, id, val, lsn) of each change event on the items table, in output order."""
    out = []
    for r in records:
        value = r.get("value")
        if r["topic"] != TOPIC or value is None:
            continue
        row = value["after"] if value["op"] != "d" else value["before"]
        out.append((value["op"], row["id"], row["val"], value["source"]["lsn"]))
    return out


# -- the workload -----------------------------------------------------------------------------------


class Workload(threading.Thread):
    """`total` small transactions: each inserts 1-3 rows with increasing ids, about a third also update
    an earlier row to a value never used before. Records what committed."""

    def __init__(self, db: Any, total: int, first_id: int, rng: random.Random, pause: float) -> None:
        super().__init__(name="workload", daemon=True)
        self.db = db
        self.total = total
        self.next_id = first_id
        self.rng = rng
        self.pause = pause
        self.done = 0
        self.inserted: dict[int, str] = {}
        self.updates: list[tuple[int, str]] = []
        self.error: BaseException | None = None
        self.existing = list(range(1, first_id))

    def run(self) -> None:
        try:
            conn = psycopg2.connect(self.db.dsn)
            try:
                with conn.cursor() as cur:
                    # the throwaway cluster defaults to synchronous_commit=off, which hands WAL to the
                    # walsender in wal_writer_delay bursts; commit like a production server instead
                    cur.execute("SET synchronous_commit = on")
                    conn.commit()
                    for t in range(self.total):
                        rows = []
                        for _ in range(self.rng.randint(1, 3)):
                            rows.append((self.next_id, f"i{self.next_id}"))
                            self.next_id += 1
                        cur.executemany("INSERT INTO public.items (id, val) VALUES (%s, %s)", rows)
                        update = None
                        if self.existing and self.rng.random() < 0.35:
                            target = self.rng.choice(self.existing)
                            update = (target, f"u{t}_{target}")
                            cur.execute("UPDATE public.items SET val = %s WHERE id = %s", (update[1], target))
                        conn.commit()
                        self.inserted.update(rows)
                        self.existing.extend(r[0] for r in rows)
                        if update:
                            self.updates.append(update)
                        self.done = t + 1
                        time.sleep(self.pause)
            finally:
                conn.close()
        except BaseException as exc:
            self.error = exc


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


# -- tests ----------------------------------------------------------------------------------------------


def test_sigkill_twice_during_streaming_loses_nothing(pg_db, tmp_path: Path) -> None:
    seed = int(os.environ.get("HW_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, val text NOT NULL)")
    pg_db.execute("INSERT INTO public.items SELECT g, 'i' || g FROM generate_series(1, 50) g")
    runner = Runner(pg_db, tmp_path, f"hw_crash_{uuid.uuid4().hex[:12]}")
    total, kills = 3000, 2
    workload = Workload(pg_db, total, first_id=51, rng=rng, pause=0.004)
    try:
        runner.start()
        pid = runner.wait_streaming()
        workload.start()
        threshold = 0
        for k in range(kills):
            # a random moment: after >= 300 transactions (and >= 300 more since the last restart)
            threshold = max(threshold + 300, rng.randint(300 + k * 900, 900 + k * 900))
            wait_until(lambda t=threshold: workload.done >= t or not workload.is_alive(), 120,
                       f"{threshold} transactions")
            time.sleep(rng.uniform(0, 0.3))
            at = workload.done
            assert workload.is_alive() and at < total, (
                f"the workload finished before kill {k + 1} (seed {seed}); the kill would not hit a live stream")
            runner.kill()
            runner.start()
            pid = runner.wait_streaming(not_pid=pid)
            threshold = workload.done
        workload.join(180)
        assert not workload.is_alive(), "workload did not finish"
        assert workload.error is None, f"workload failed: {workload.error!r}"
        runner.wait_for_sentinel()
        rc = runner.terminate()
        assert rc == 0, f"exit code {rc} after SIGTERM\n{runner.logs()}"
    finally:
        runner.cleanup()

    context = f"(seed {seed}; HW_CRASH_SEED={seed} reproduces the schedule)"
    segments = [item_events(s) for s in runner.segments()]
    assert len(segments) == kills + 1
    everything = [e for s in segments for e in s]

    # (i) nothing lost: every committed insert and every update's resulting value was emitted
    seen = {(op, key, val) for op, key, val, _ in everything}
    missing_inserts = [k for k, v in workload.inserted.items() if ("c", k, v) not in seen]
    missing_updates = [u for u in workload.updates if ("u", *u) not in seen]
    assert not missing_inserts, f"{len(missing_inserts)} inserts lost, e.g. ids {missing_inserts[:10]} {context}"
    assert not missing_updates, f"{len(missing_updates)} updates lost, e.g. {missing_updates[:10]} {context}"
    assert {(k, v) for op, k, v, _ in everything if op == "r"} == {(i, f"i{i}") for i in range(1, 51)}

    # (ii) duplicates only from replay: no run emits an event twice, so no event appears more than
    # once per crash; each restarted run begins with the tail of what was already delivered, in order
    for n, seg in enumerate(segments, 1):
        repeated = [e for e, c in Counter(seg).items() if c > 1]
        assert not repeated, f"run {n} emitted {len(repeated)} events twice, e.g. {repeated[:5]} {context}"
    counts = Counter(everything)
    assert max(counts.values()) <= 1 + kills, f"{counts.most_common(3)} {context}"
    delivered: list[Any] = list(segments[0])
    replayed_total = 0
    for n, seg in enumerate(segments[1:], 2):
        already = set(delivered)
        replayed = 0
        while replayed < len(seg) and seg[replayed] in already:
            replayed += 1
        late = [e for e in seg[replayed:] if e in already]
        assert not late, (f"run {n} re-emitted {len(late)} already delivered events after new ones (not a "
                          f"replay from the stored offset), e.g. {late[:3]} {context}")
        tail = delivered[len(delivered) - replayed:] if replayed else []
        assert seg[:replayed] == tail, (f"run {n} replayed {replayed} events that are not the tail of what was "
                                        f"delivered before {context}")
        delivered.extend(seg[replayed:])
        replayed_total += replayed

    # the last event per key is the table's row
    final: dict[int, str] = {}
    for _, key, val, _ in everything:
        final[key] = val
    rows = dict(pg_db.execute("SELECT id, val FROM public.items"))
    assert len(rows) == 50 + len(workload.inserted)
    wrong = {k: (final.get(k), v) for k, v in rows.items() if final.get(k) != v}
    assert not wrong, f"{len(wrong)} keys end with a stale value (output, table), e.g. {list(wrong.items())[:5]}"
    assert set(final) == set(rows)
    print(f"crash test {context}: {len(everything)} events, {replayed_total} replayed after {kills} SIGKILLs")


def test_sigkill_during_initial_snapshot_of_a_whole_table_redoes_it(pg_db, tmp_path: Path) -> None:
    # snapshot.chunk.rows=0: the table is read whole, so the interrupted snapshot has no completed
    # chunk to resume after and the table is read again (resuming at the next chunk:
    # test_pg_snapshot_resume.py)
    rows = 200_000
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, val text NOT NULL)")
    pg_db.execute(f"INSERT INTO public.items SELECT g, 'i' || g FROM generate_series(1, {rows}) g")
    runner = Runner(pg_db, tmp_path, f"hw_snapkill_{uuid.uuid4().hex[:12]}",
                    **{"max.batch.size": "128", "max.queue.size": "512", "snapshot.chunk.rows": "0"})

    def lines_written() -> int:
        if not runner.out.exists():
            return 0
        with runner.out.open("rb") as f:
            return f.read().count(b"\n")

    def snapshot_offset_stored() -> bool:
        try:
            offsets = json.loads(runner.offsets.read_text(encoding="utf-8"))["offsets"]
        except (OSError, ValueError, KeyError):
            return False
        return any(o.get("snapshot") for o in offsets.values())

    try:
        runner.start()
        wait_until(lambda: (runner.assert_alive() or True) and lines_written() >= 5_000 and snapshot_offset_stored(),
                   120, "the snapshot to be under way")
        runner.kill()
        stored = next(iter(json.loads(runner.offsets.read_text(encoding="utf-8"))["offsets"].values()))
        first = item_events(runner.segments()[0])
        assert stored.get("snapshot") is True and not stored.get("snapshot_completed"), (
            f"the kill was meant to hit an unfinished snapshot, but the stored offset is {stored} "
            f"({len(first)} rows written)")
        assert 0 < len(first) < rows and all(op == "r" for op, *_ in first)

        pg_db.execute(f"INSERT INTO public.items VALUES ({rows + 1}, 'between')")  # while down
        # a row the partial snapshot already delivered, deleted while down: only the stream can
        # tell the sinks (a new slot would start after this delete and leave the row a ghost)
        pg_db.execute("DELETE FROM public.items WHERE id = 2")
        runner.start()
        runner.wait_streaming(timeout=240)
        pg_db.execute(f"INSERT INTO public.items VALUES ({rows + 2}, 'streamed')")
        pg_db.execute("UPDATE public.items SET val = 'changed' WHERE id = 1")
        runner.wait_for_sentinel()
        rc = runner.terminate()
        assert rc == 0, f"exit code {rc} after SIGTERM\n{runner.logs()}"
    finally:
        runner.cleanup()

    second = item_events(runner.segments()[1])
    snapshot = [e for e in second if e[0] == "r"]
    assert ("r", 2, "i2") in {e[:3] for e in first}, "the kill came before row 2 was delivered"
    assert len(snapshot) == rows, f"the redone snapshot has {len(snapshot)} rows, expected {rows}"
    assert sorted(k for _, k, _, _ in snapshot) == [1, *range(3, rows + 2)]
    assert ("r", rows + 1, "between") in {e[:3] for e in snapshot}, "a row inserted while down is not in the snapshot"
    # the slot was kept: the changes since its position come again after the snapshot (at least
    # once), the delete of an already delivered row included
    streamed = [e[:2] if e[0] == "d" else e[:3] for e in second if e[0] != "r"]
    assert streamed == [("c", rows + 1, "between"), ("d", 2), ("c", rows + 2, "streamed"), ("u", 1, "changed")]
    assert second.index(snapshot[-1]) < len(second) - len(streamed), "streaming events came before the snapshot"
    markers = [r["value"]["source"]["snapshot"] for r in runner.segments()[1] if r["topic"] == TOPIC
               and r["value"] is not None and r["value"]["op"] == "r"]
    assert markers[0] == "first" and markers[-1] == "last"
