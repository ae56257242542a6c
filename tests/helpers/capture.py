"""Run Headwater in-process against a test database, the way the conformance protocol does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from headwater import config as cfg
from headwater.standalone import build_engine


def base_properties(db: Any, workdir: Path, slot: str, **extra: str) -> dict[str, str]:
    props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "topic.prefix": "dbserver1",
        "snapshot.mode": "initial",
        "slot.name": slot,
        "slot.drop.on.stop": "true",
        "database.hostname": db.server.host,
        "database.port": str(db.server.port),
        "database.user": db.server.user,
        "database.dbname": db.name,
        "offset.storage.file.filename": str(workdir / "offsets.json"),
        "offset.flush.interval.ms": "200",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
    }
    props.update(extra)
    return props


def spark_properties(db: Any, workdir: Path, slot: str, **extra: str) -> dict[str, str]:
    """`base_properties` for the Spark source and its feed, whose checkpoint is the offset store:
    without the offset file settings."""
    props = base_properties(db, workdir, slot, **extra)
    for key in ("offset.storage.file.filename", "offset.flush.interval.ms"):
        props.pop(key)
    return props


class Capture(Protocol):
    """Headwater writing the jsonl sink `out`, in this process or as `headwater run`."""

    out: Path
    offsets_file: Path | None

    def alive(self) -> bool: ...
    def stop(self, timeout: float = 60) -> None: ...
    def records(self) -> list[dict[str, Any]]: ...


def read_records(out: Path) -> list[dict[str, Any]]:
    """The complete lines of a jsonl sink file: a run writing it in another process may be in the
    middle of its last line (read while it waits for something)."""
    if not out.exists():
        return []
    data = out.read_bytes()
    data = data[:data.rfind(b"\n") + 1]
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


class RunningCapture:
    """An engine running on a thread, writing the jsonl sink."""

    def __init__(self, props: Mapping[str, str], out: Path) -> None:
        self.out = out
        self.offsets_file = Path(props["offset.storage.file.filename"]) if "offset.storage.file.filename" in props \
            else None
        self.config = cfg.from_properties(dict(props), sink_type="jsonl", sink={"path": str(out)})
        self.engine = build_engine(self.config)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.engine.run(self.stop_event)
        except BaseException as exc:
            self.error = exc

    def start(self) -> RunningCapture:
        self.thread.start()
        return self

    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self, timeout: float = 60) -> None:
        self.stop_event.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "engine did not stop"
        if self.error is not None:
            raise self.error

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.out)


class HeadwaterRun:
    """`headwater run` as a subprocess, on a Debezium Server `application.properties` written from
    connector properties: the way a user runs it. Converter properties (`key.converter.X`) are
    written as Debezium Server's `debezium.format.key.X`; backslashes are escaped, as Java's
    Properties.store writes them."""

    def __init__(self, props: Mapping[str, str], out: Path) -> None:
        self.out = out
        self.offsets_file = Path(props["offset.storage.file.filename"]) if "offset.storage.file.filename" in props \
            else None
        self.workdir = out.parent
        self.log = self.workdir / "headwater.log"
        lines = []
        for key, value in props.items():
            value = value.replace("\\", "\\\\")  # a .properties file reads `\.` as `.`: written as `\\.`
            part, _, rest = key.partition(".converter.")
            if rest and part in ("key", "value", "header"):
                lines.append(f"debezium.format.{part}.{rest}={value}")
            else:
                lines.append(f"debezium.source.{key}={value}")
        lines += ["debezium.sink.type=jsonl", f"debezium.sink.jsonl.path={out}"]
        self.properties = self.workdir / "application.properties"
        self.properties.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> HeadwaterRun:
        headwater = Path(sys.executable).parent / "headwater"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([str(headwater), "run", str(self.properties)], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM, as a user stops it; it must end cleanly (exit 0)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                raise AssertionError(f"headwater run did not stop on SIGTERM: {self.log_tail()}") from None
        if self.proc.returncode != 0:
            raise AssertionError(f"headwater run exited with {self.proc.returncode}: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.out)


def wait_for_run(condition: Callable[[], object], what: str, run: HeadwaterRun, timeout: float = 60) -> None:
    """Wait until `condition()` holds while `headwater run` keeps running (its log tail in the failure)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if not run.alive():
            raise AssertionError(f"headwater run ended while waiting for {what}: {run.log_tail()}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {run.log_tail()}")


def payload(part: Any) -> Any:
    """A key or value without its schema envelope, whether the converter wrote schemas or not."""
    return part.get("payload") if isinstance(part, dict) and "schema" in part else part


def notifications(records: list[dict[str, Any]], topic: str) -> list[dict[str, Any]]:
    """The notification sink's records on `topic`, as payloads."""
    return [payload(r["value"]) for r in records if r["topic"] == topic]


def insert_lsn(db: Any) -> int:
    """The server's WAL insert position, as a number of bytes."""
    return int(db.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint")[0][0])


def wait_slot_active(db: Any, slot: str, capture: Capture | None = None, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if capture is not None and not capture.alive():
            capture.stop()
            raise AssertionError("engine exited before streaming")
        rows = db.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        if rows and rows[0][0]:
            return
        time.sleep(0.1)
    raise AssertionError(f"slot {slot} not active after {timeout}s")


def wait_snapshot_done(db: Any, capture: Capture, timeout: float = 5) -> None:
    """Until the engine's initial snapshot has read its tables. The slot is active from its
    creation, before the snapshot has read anything, and TRUNCATE is not MVCC-safe: a workload
    that truncates a table before the snapshot reads it makes the table look empty to the
    snapshot (a conformance run once lost its snapshot events that way). Done when the snapshot's
    last record is out, or when its offset is stored and its reading connection is gone (a
    snapshot of empty tables has no records). An ordering aid, not a check: after `timeout` the
    caller goes on, and its own assertions decide."""
    deadline = time.monotonic() + timeout
    seen_reading = False
    while time.monotonic() < deadline:
        if not capture.alive():
            return  # the caller's next step reports the engine's error
        if capture.out.exists() and b'"snapshot":"last"' in capture.out.read_bytes():
            return
        reading = db.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'headwater-snapshot' "
                             "AND datname = current_database()")[0][0]
        if not reading and (seen_reading or (capture.offsets_file is not None and capture.offsets_file.exists())):
            return
        seen_reading = seen_reading or bool(reading)
        time.sleep(0.05)


def emit_sentinel_and_wait(db: Any, capture: Capture, timeout: float = 60, quiet: float = 1.0) -> str:
    prefix = f"__hw_sentinel_{uuid.uuid4().hex}"
    db.execute("SELECT pg_logical_emit_message(false, %s, 'end')", (prefix,))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if capture.out.exists() and prefix.encode() in capture.out.read_bytes():
            break
        if not capture.alive():
            capture.stop()
            raise AssertionError("the capture ended before the sentinel arrived")
        time.sleep(0.1)
    else:
        raise AssertionError("sentinel never arrived")
    time.sleep(quiet)
    return prefix


def drop_sentinels(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in records:
        key = r.get("key")
        payload = key.get("payload") if isinstance(key, dict) and "schema" in key else key
        if r["topic"].endswith(".message") and isinstance(payload, dict) and \
                str(payload.get("prefix", "")).startswith("__hw_sentinel_"):
            continue
        out.append(r)
    return out
