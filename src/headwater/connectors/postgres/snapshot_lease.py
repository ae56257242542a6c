"""A consistent snapshot that outlives the process that planned it: one-off parallel extracts.

A batch read (``spark.read.format("headwater")``) is planned in one short-lived process and read
by many tasks later, elsewhere. They all read inside one exported snapshot
(``SET TRANSACTION SNAPSHOT``), which PostgreSQL keeps only while the exporting transaction is
open. So planning starts a small **holder** process (``python -m
headwater.connectors.postgres.snapshot_lease``) in a session of its own: it opens a REPEATABLE
READ transaction, exports its snapshot, reports it, and keeps the transaction open until

- every chunk reported done (tasks ``pg_notify`` the lease's channel with their chunk number), or
- no task has been connected for ``idle_seconds`` (tasks connect with the lease's
  ``application_name``; a job that was cancelled or failed for good stops coming), or
- the watched process (the Spark driver JVM) is gone.

An open transaction holds back vacuum's horizon while it lasts, hence these limits. The
connection parameters (password included) reach the holder on its stdin, never its command line.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import IO, Any

# a task connection counts as "working on the extract" while its application_name is this + id
TASK_APP_PREFIX = "headwater-extract-"
HOLDER_APP = "headwater-snapshot-holder"
CHANNEL_PREFIX = "headwater_extract_"
_START_TIMEOUT_S = 60.0


class SnapshotLeaseError(RuntimeError):
    pass


def export_snapshot(cur: Any) -> tuple[str, int, int]:
    """Inside an open REPEATABLE READ transaction: (exported snapshot name, txid for
    ``source.txId``, WAL insert LSN for ``source.lsn``) — what the snapshot's records say."""
    cur.execute("SELECT pg_export_snapshot(), txid_snapshot_xmax(txid_current_snapshot()), "
                "pg_current_wal_insert_lsn() - '0/0'::pg_lsn")
    name, txid, lsn = cur.fetchone()
    return name, int(txid), int(lsn)


@dataclass(frozen=True)
class SnapshotLease:
    """What the tasks need: the exported snapshot and the lease's identity."""

    snapshot_name: str
    lsn: int
    txid: int
    lease_id: str

    @property
    def task_application_name(self) -> str:
        return TASK_APP_PREFIX + self.lease_id

    @property
    def channel(self) -> str:
        return CHANNEL_PREFIX + self.lease_id


class SnapshotHolder:
    """Planner side: starts the holder, then tells it how many chunks to wait for."""

    def __init__(self, connect_args: dict[str, Any], *, idle_seconds: float, watch_pid: int | None = None) -> None:
        self.lease_id = uuid.uuid4().hex[:16]
        request = {"connect": {**connect_args, "application_name": HOLDER_APP}, "lease_id": self.lease_id,
                   "idle_seconds": idle_seconds, "watch_pid": watch_pid or driver_pid()}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True, text=True)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        line = _read_line(self._proc.stdout, _START_TIMEOUT_S)
        if not line:
            self._proc.kill()
            err = (self._proc.stderr.read() if self._proc.stderr else "").strip()
            raise SnapshotLeaseError("could not export a snapshot for the batch read: "
                                     + (err.splitlines()[-1] if err else "the snapshot holder exited"))
        answer = json.loads(line)
        self.lease = SnapshotLease(answer["snapshot"], int(answer["lsn"]), int(answer["txid"]), self.lease_id)

    def expect(self, chunks: int) -> None:
        """Hand over: the holder now waits for `chunks` chunks (0: releases at once)."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(f"{chunks}\n")
            self._proc.stdin.close()
        except BrokenPipeError:
            raise SnapshotLeaseError("the snapshot holder exited before the read started") from None
        # its stdout/stderr stay unread from here: the holder writes nothing more
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()

    def release(self) -> None:
        """Planning failed: end the holder now."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)


def driver_pid() -> int:
    """The nearest ancestor that is a JVM (the Spark driver), else the parent process."""
    pid = os.getppid()
    for _ in range(8):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "java":
                    return pid
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
    return os.getppid()


def _read_line(stream: IO[str], timeout: float) -> str:
    ready, _, _ = select.select([stream], [], [], timeout)
    return stream.readline() if ready else ""


def chunk_done(connect_args: dict[str, Any], lease: SnapshotLease, chunk: str) -> None:
    """Task side: tell the holder this chunk is read (outside the snapshot transaction: NOTIFY is
    not allowed in a read-only one)."""
    import psycopg2

    conn = psycopg2.connect(**{**connect_args, "application_name": lease.task_application_name})
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT pg_notify(%s, %s)", (lease.channel, chunk))
    finally:
        conn.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def hold(request: dict[str, Any], stdin: IO[str], stdout: IO[str]) -> None:
    """The holder process's work: returns when it may let go of the snapshot."""
    import psycopg2
    import psycopg2.extensions

    connect = request["connect"]
    lease_id = request["lease_id"]
    idle = float(request["idle_seconds"])
    watch = int(request["watch_pid"])
    conn = psycopg2.connect(**connect)
    with conn.cursor() as cur:
        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        name, txid, lsn = export_snapshot(cur)
    stdout.write(json.dumps({"snapshot": name, "txid": txid, "lsn": lsn}) + "\n")
    stdout.flush()
    line = stdin.readline()
    chunks = int(line) if line.strip().isdigit() else 0
    if chunks == 0:  # nothing to read, or the planner went away
        return
    listener = psycopg2.connect(**connect)
    listener.set_isolation_level(psycopg2.extensions.ISOLATION_LEVEL_AUTOCOMMIT)
    with listener.cursor() as cur:
        cur.execute(f'LISTEN "{CHANNEL_PREFIX}{lease_id}"')
    done: set[str] = set()  # chunk names; a retried task reports its chunk again
    last_seen = time.monotonic()
    next_check = 0.0
    while True:
        select.select([listener], [], [], 1.0)
        listener.poll()
        while listener.notifies:
            done.add(listener.notifies.pop(0).payload)
            last_seen = time.monotonic()
        if len(done) >= chunks or not _alive(watch):  # all read, or the driver is gone
            return
        now = time.monotonic()
        if now >= next_check:
            next_check = now + 1.0
            with listener.cursor() as cur:
                cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                            (TASK_APP_PREFIX + lease_id,))
                if cur.fetchone()[0]:
                    last_seen = now
        if now - last_seen > idle:  # the job was cancelled or failed for good
            return


def main() -> int:
    request = json.loads(sys.stdin.readline())
    try:
        hold(request, sys.stdin, sys.stdout)
    except Exception as exc:  # reported to the planner while it still listens; the password is not in it
        print(f"snapshot holder: {type(exc).__name__}: {exc}".strip(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
