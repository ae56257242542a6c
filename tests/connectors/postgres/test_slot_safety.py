"""Replication slot safety with `headwater run` subprocesses against real PostgreSQL: a slot that
vanished, was recreated or was dropped while streaming is reported (or handled by
snapshot.mode=when_needed), never silently skipped; slot.drop.on.stop; status updates
(status.update.interval.ms); source.xmin (xmin.fetch.interval.ms)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg2

HEADWATER = Path(sys.prefix) / "bin" / "headwater"
if not HEADWATER.exists():  # pragma: no cover - the tests are run from the project's virtualenv
    HEADWATER = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "headwater"

TOPIC = "dbserver1.public.items"


def fmt_lsn(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


class Runner:
    """`headwater run` for one database, slot and offsets file; each run's stderr in its own log."""

    def __init__(self, db: Any, workdir: Path, slot: str) -> None:
        self.db = db
        self.workdir = workdir
        self.slot = slot
        self.out = workdir / "out.jsonl"
        self.offsets = workdir / "offsets.json"
        self.runs = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, **source: str) -> None:
        props = {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "database.hostname": self.db.server.host,
            "database.port": str(self.db.server.port),
            "database.user": self.db.server.user,
            "database.dbname": self.db.name,
            "topic.prefix": "dbserver1",
            "table.include.list": "public.items",
            "slot.name": self.slot,
            "slot.drop.on.stop": "false",
            "slot.retry.delay.ms": "200",
            "retriable.restart.connector.wait.ms": "200",
            "snapshot.mode": "initial",
            "offset.storage.file.filename": str(self.offsets),
            "offset.flush.interval.ms": "100",
            **source,
        }
        lines = [f"debezium.source.{k}={v}" for k, v in props.items()]
        lines += ["debezium.sink.type=jsonl", f"debezium.sink.jsonl.path={self.out}",
                  "debezium.format.key.schemas.enable=false", "debezium.format.value.schemas.enable=false"]
        self.runs += 1
        config = self.workdir / f"run{self.runs}.properties"
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with open(self.log_path(), "wb") as log:
            self.proc = subprocess.Popen([str(HEADWATER), "run", str(config)], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=log)

    def log_path(self, run: int | None = None) -> Path:
        return self.workdir / f"run{run or self.runs}.log"

    def log(self) -> str:
        return self.log_path().read_text(errors="replace")

    def alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"headwater exited with {self.proc.returncode}\n{self.log()[-3000:]}")

    def wait_streaming(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.alive()
            if self.db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND active", (self.slot,)):
                return
            time.sleep(0.05)
        raise AssertionError(f"slot {self.slot} not streaming\n{self.log()[-3000:]}")

    def wait_for(self, predicate: Any, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.alive()
            if predicate():
                return
            time.sleep(0.05)
        raise AssertionError(f"{what} not seen within {timeout}s\n{self.log()[-3000:]}")

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)

    def wait_exit(self, timeout: float = 60) -> tuple[int, str]:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"headwater still running after {timeout}s\n{self.log()[-3000:]}") from None
        return code, self.log()

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def records(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text(encoding="utf-8").splitlines() if line.strip()]

    def changes(self) -> list[tuple[str, int]]:
        out = []
        for r in self.records():
            v = r.get("value")
            if r["topic"] == TOPIC and v is not None:
                row = v["after"] if v["op"] != "d" else v["before"]
                out.append((v["op"], row["id"]))
        return out

    def stored_lsn(self) -> int:
        data = json.loads(self.offsets.read_text())
        found = []

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                if isinstance(node.get("lsn_commit"), int):
                    found.append(node["lsn_commit"])
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(data)
        assert found, f"no lsn_commit in {data}"
        return found[-1]


def slot_row(db: Any, slot: str) -> tuple[Any, ...] | None:
    rows = db.execute("SELECT confirmed_flush_lsn::text, catalog_xmin::text, active FROM pg_replication_slots "
                      "WHERE slot_name = %s", (slot,))
    return rows[0] if rows else None


def lsn_value(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def drop_slot(db: Any, slot: str, timeout: float = 30) -> None:
    """Terminate the slot's walsender (if any) and drop the slot, retrying while it exits."""
    deadline = time.monotonic() + timeout
    while True:
        db.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                   "WHERE slot_name = %s AND active_pid IS NOT NULL", (slot,))
        try:
            db.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
            return
        except psycopg2.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def first_run(db: Any, tmp_path: Path, **source: str) -> Runner:
    """Snapshot 3 rows, stream one insert, stop gracefully (offsets stored, slot kept)."""
    db.execute("CREATE TABLE public.items (id int PRIMARY KEY, val text)")
    db.execute("INSERT INTO public.items SELECT g, 'v' || g FROM generate_series(1, 3) g")
    runner = Runner(db, tmp_path, f"hw_safety_{uuid.uuid4().hex[:10]}")
    runner.start(**source)
    try:
        runner.wait_streaming()
        db.execute("INSERT INTO public.items VALUES (4, 'v4')")
        runner.wait_for(lambda: ("c", 4) in runner.changes(), "insert 4")
        assert runner.stop() == 0, runner.log()[-3000:]
    finally:
        runner.cleanup()
    assert runner.changes() == [("r", 1), ("r", 2), ("r", 3), ("c", 4)]
    return runner


def expect_refusal(runner: Runner, **source: str) -> str:
    runner.start(**source)
    try:
        code, log = runner.wait_exit()
    finally:
        runner.cleanup()
    assert code != 0, log[-3000:]
    return log


def test_slot_dropped_while_stopped_is_refused_then_resnapshotted_with_when_needed(pg_db, tmp_path: Path) -> None:
    runner = first_run(pg_db, tmp_path)
    stored = runner.stored_lsn()
    drop_slot(pg_db, runner.slot)
    pg_db.execute("INSERT INTO public.items VALUES (5, 'v5')")  # the slot is gone: only a snapshot sees it

    for mode in ("initial", "no_data"):
        log = expect_refusal(runner, **{"snapshot.mode": mode})
        assert runner.slot in log and pg_db.name in log and fmt_lsn(stored) in log, log[-3000:]
        assert "does not exist" in log and "may be lost" in log and "snapshot.mode=when_needed" in log
        assert slot_row(pg_db, runner.slot) is None, "a refused start must not create the slot (that hides the loss)"
    assert runner.changes() == [("r", 1), ("r", 2), ("r", 3), ("c", 4)]

    runner.start(**{"snapshot.mode": "when_needed"})
    try:
        runner.wait_streaming()
        runner.wait_for(lambda: len(runner.changes()) >= 9, "the new snapshot")
        assert runner.stop() == 0
    finally:
        runner.cleanup()
    assert runner.changes()[4:] == [("r", 1), ("r", 2), ("r", 3), ("r", 4), ("r", 5)]
    assert "taking a new snapshot" in runner.log()


def test_recreated_slot_ahead_of_the_stored_offset_is_detected(pg_db, tmp_path: Path) -> None:
    runner = first_run(pg_db, tmp_path)
    stored = runner.stored_lsn()
    drop_slot(pg_db, runner.slot)
    pg_db.execute("INSERT INTO public.items VALUES (5, 'v5')")  # committed between the offset and the new slot
    pg_db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (runner.slot,))
    confirmed = lsn_value(slot_row(pg_db, runner.slot)[0])
    assert confirmed > stored

    for mode in ("initial", "no_data"):
        log = expect_refusal(runner, **{"snapshot.mode": mode})
        assert runner.slot in log and pg_db.name in log, log[-3000:]
        assert f"starts at {fmt_lsn(confirmed)}" in log and f"resumes at {fmt_lsn(stored)}" in log, log[-3000:]
        assert "may be lost" in log and "snapshot.mode=when_needed" in log
    assert runner.changes() == [("r", 1), ("r", 2), ("r", 3), ("c", 4)], "row 5 must not be skipped silently"

    runner.start(**{"snapshot.mode": "when_needed"})
    try:
        runner.wait_streaming()
        runner.wait_for(lambda: len(runner.changes()) >= 9, "the new snapshot")
        pg_db.execute("INSERT INTO public.items VALUES (6, 'v6')")
        runner.wait_for(lambda: ("c", 6) in runner.changes(), "insert 6")
        assert runner.stop() == 0
    finally:
        runner.cleanup()
    assert runner.changes()[4:] == [("r", 1), ("r", 2), ("r", 3), ("r", 4), ("r", 5), ("c", 6)]


def test_slot_dropped_while_streaming_is_a_clear_error(pg_db, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, val text)")
    runner = Runner(pg_db, tmp_path, f"hw_safety_{uuid.uuid4().hex[:10]}")
    runner.start()
    try:
        runner.wait_streaming()
        pg_db.execute("INSERT INTO public.items VALUES (1, 'v1')")
        runner.wait_for(lambda: ("c", 1) in runner.changes(), "insert 1")
        runner.wait_for(lambda: runner.offsets.exists() and runner.stored_lsn() > 0, "a stored offset")
        drop_slot(pg_db, runner.slot)
        pg_db.execute("INSERT INTO public.items VALUES (2, 'v2')")
        code, log = runner.wait_exit()
    finally:
        runner.cleanup()
    assert code != 0
    assert runner.slot in log and ("was dropped while streaming" in log or "does not exist" in log), log[-3000:]
    assert "snapshot.mode=when_needed" in log
    assert runner.changes() == [("c", 1)]
    assert slot_row(pg_db, runner.slot) is None, "the failed run must not recreate the slot"


def test_slot_drop_on_stop(pg_db, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, val text)")
    for drop, kept in (("true", False), ("false", True)):
        runner = Runner(pg_db, tmp_path / drop, f"hw_safety_{uuid.uuid4().hex[:10]}")
        runner.workdir.mkdir()
        runner.start(**{"slot.drop.on.stop": drop})
        try:
            runner.wait_streaming()
            assert runner.stop() == 0, runner.log()[-3000:]
        finally:
            runner.cleanup()
        assert (slot_row(pg_db, runner.slot) is not None) is kept
        if kept:
            drop_slot(pg_db, runner.slot)


def test_confirmed_flush_lsn_advances_within_the_status_update_interval(pg_db, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, val text)")
    runner = Runner(pg_db, tmp_path, f"hw_safety_{uuid.uuid4().hex[:10]}")
    runner.start(**{"status.update.interval.ms": "1000", "xmin.fetch.interval.ms": "0"})
    try:
        runner.wait_streaming()
        for i in (1, 2, 3):
            pg_db.execute("INSERT INTO public.items VALUES (%s, 'v')", (i,))
            runner.wait_for(lambda i=i: ("c", i) in runner.changes(), f"insert {i}")
            delivered = time.monotonic()
            event_lsn = [r["value"]["source"]["lsn"] for r in runner.records() if r["topic"] == TOPIC][-1]
            runner.wait_for(lambda lsn=event_lsn: lsn_value(slot_row(pg_db, runner.slot)[0]) > lsn,
                            "confirmed_flush_lsn past the delivered change", timeout=10)
            # offset flush (100 ms) + one status update interval (1 s), with slack for a busy machine
            assert time.monotonic() - delivered < 1.0 + 0.1 + 1.5
        sources = [r["value"]["source"] for r in runner.records() if r["topic"] == TOPIC]
        assert [s["xmin"] for s in sources] == [None, None, None]  # xmin.fetch.interval.ms=0
        assert runner.stop() == 0
    finally:
        runner.cleanup()


def test_source_xmin_is_the_slot_catalog_xmin_when_fetched(pg_db, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY, val text)")
    pg_db.execute("INSERT INTO public.items VALUES (1, 'v1')")
    runner = Runner(pg_db, tmp_path, f"hw_safety_{uuid.uuid4().hex[:10]}")
    runner.start(**{"xmin.fetch.interval.ms": "100"})
    try:
        runner.wait_streaming()
        xmin = int(slot_row(pg_db, runner.slot)[1])
        pg_db.execute("INSERT INTO public.items VALUES (2, 'v2')")
        runner.wait_for(lambda: ("c", 2) in runner.changes(), "insert 2")
        assert runner.stop() == 0
    finally:
        runner.cleanup()
    sources = {r["value"]["op"]: r["value"]["source"] for r in runner.records() if r["topic"] == TOPIC}
    assert sources["r"]["xmin"] is None  # snapshot events never carry it (as in Debezium)
    assert sources["c"]["xmin"] == xmin
