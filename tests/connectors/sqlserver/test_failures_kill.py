"""Acceptance (issue 21, Failures): `headwater run` on SQL Server killed with SIGKILL while it
streams, several times, under a writer that keeps committing transactions of several statements
over two tables (in one database, and in a connector over two databases), and restarted with the
same configuration and offsets: every committed change arrives, per database in commit order, a
change arrives twice only as the replay of what came after the last stored offset (at least once),
and replaying the events gives the tables' final contents. A kill during the initial snapshot:
the restart resumes it (beyond Debezium) or, from an offset without the snapshot's progress,
takes it again (Debezium's rule), and nothing is lost. A kill during the
second database's snapshot, when the first one's had completed: only the second is taken again,
the first streams on from its snapshot's position (Debezium decides per database).

The helpers here (the `headwater run` runner, the writer, the delivery checks) also serve
test_failures_server.py."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from test_core_streaming import props, snapshot_stored

from headwater.connectors.sqlserver.source_info import partition_order
from headwater.engine.snapshot_resume import PROGRESS_KEY, progress_of
from helpers.capture import HeadwaterRun
from helpers.processes import descendants, running
from helpers.sqlserver import SqlServerEmulator, connect, wait_for

TABLES: dict[str, tuple[str, ...]] = {"items": ("id",), "pairs": ("a", "b")}
COLUMNS: dict[str, tuple[str, ...]] = {"items": ("id", "name", "version"), "pairs": ("a", "b", "note", "version")}
CREATE = """
CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY, name nvarchar(40) NULL, version int NOT NULL);
CREATE TABLE dbo.pairs (a int NOT NULL, b nvarchar(10) NOT NULL, note nvarchar(40) NULL, version int NOT NULL,
                        PRIMARY KEY (a, b));
"""
ENABLE_CDC = """
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', @role_name = NULL,
     @supports_net_changes = 0;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'pairs', @role_name = NULL,
     @supports_net_changes = 0;
"""

Key = tuple[Any, ...]
Row = dict[str, Any]


# -- databases ----------------------------------------------------------------------------------------


def create_tables(server: SqlServerEmulator, db: str, rows: int) -> dict[str, dict[Key, Row]]:
    """The two captured tables with `rows` rows each (version 0); the rows. All but the last of
    each table are there before CDC is enabled (as in a database that had data before; the capture
    job has nothing to do for them), the last is captured before this returns: every row lies at or
    before a snapshot's maximum LSN, and there is one."""
    server.execute(CREATE, database=db)
    contents: dict[str, dict[Key, Row]] = {"items": {}, "pairs": {}}
    for i in range(1, rows + 1):
        contents["items"][(i,)] = {"id": i, "name": f"seed {i}", "version": 0}
        contents["pairs"][(i, f"k{i % 3}")] = {"a": i, "b": f"k{i % 3}", "note": None, "version": 0}
    numbers = (f"(SELECT TOP ({rows - 1}) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) AS n FROM sys.all_columns a "
               "CROSS JOIN sys.all_columns b CROSS JOIN sys.all_columns c) AS numbers")
    server.execute(f"INSERT INTO dbo.items (id, name, version) SELECT n, CONCAT(N'seed ', n), 0 FROM {numbers}; "
                   f"INSERT INTO dbo.pairs (a, b, note, version) SELECT n, CONCAT(N'k', n % 3), NULL, 0 FROM {numbers}",
                   database=db)
    server.execute(ENABLE_CDC, database=db)
    server.execute(f"INSERT INTO dbo.items (id, name, version) VALUES ({rows}, N'seed {rows}', 0); "
                   f"INSERT INTO dbo.pairs (a, b, note, version) VALUES ({rows}, N'k{rows % 3}', NULL, 0)", database=db)
    wait_for(lambda: all(server.execute(f"SELECT COUNT(*) FROM cdc.dbo_{t}_CT", database=db)[0][0] == 1
                         for t in TABLES), "the capture of the tables' last rows")
    return contents


def table_contents(server: SqlServerEmulator, db: str) -> dict[str, dict[Key, Row]]:
    out: dict[str, dict[Key, Row]] = {}
    for table, key in TABLES.items():
        columns = COLUMNS[table]
        rows = server.execute(f"SELECT {', '.join(columns)} FROM dbo.{table}", database=db)
        out[table] = {tuple(r[: len(key)]): dict(zip(columns, r, strict=True)) for r in rows}
    return out


@contextlib.contextmanager
def extra_database(server: SqlServerEmulator) -> Iterator[str]:
    """A further CDC-enabled database (the `sqlserver_db` fixture gives one), dropped afterwards."""
    name = f"hwfail{os.getpid()}_{uuid.uuid4().hex[:8]}"
    server.execute(f"CREATE DATABASE {name}")
    server.execute("EXEC sys.sp_cdc_enable_db", database=name)
    try:
        yield name
    finally:
        with contextlib.suppress(Exception):
            server.execute(f"DROP DATABASE {name}")


# -- the writer ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """A committed change: `version` is the row's version after it (c, u) or the one it removed (d)."""

    db: str
    table: str
    key: Key
    op: str
    version: int


@dataclass
class Writer:
    """Random transactions of one to four statements (inserts, updates, deletes over both tables;
    one in twenty rolled back) on the databases, one connection each; `changes` holds what
    committed, in commit order (one writer: its order is the commit order)."""

    server: SqlServerEmulator
    contents: dict[str, dict[str, dict[Key, Row]]]   # db -> table -> key -> row, kept up to date
    seed: int
    pause: float = 0.01
    changes: list[Change] = field(default_factory=list)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.version = 0
        self.next_key = {(db, t): max((k[0] for k in rows), default=0) + 1
                         for db, tables in self.contents.items() for t, rows in tables.items()}
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    # as a thread, until stop()
    def start(self) -> Writer:
        self._thread = threading.Thread(target=self._run, name="sqlserver-writer", daemon=True)
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def halt(self) -> None:
        """Stop writing (at the end of a test that failed: no transaction after the database is dropped)."""
        self._halt.set()

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join(60)
            assert not self._thread.is_alive(), "the writer did not stop"
        if self.error is not None:
            raise AssertionError(f"the writer failed: {self.error!r}") from self.error

    def _run(self) -> None:
        try:
            with self._connections() as conns:
                while not self._halt.is_set():
                    self.transaction(conns)
                    self._halt.wait(self.pause)
        except BaseException as exc:  # handed to stop()
            self.error = exc

    # or in batches, from the test's thread
    def batch(self, transactions: int) -> None:
        with self._connections() as conns:
            for _ in range(transactions):
                self.transaction(conns)

    @contextlib.contextmanager
    def _connections(self) -> Iterator[dict[str, Any]]:
        conns = {db: connect(self.server.host, self.server.port, self.server.password, db, autocommit=False)
                 for db in self.contents}
        try:
            yield conns
        finally:
            for conn in conns.values():
                with contextlib.suppress(Exception):
                    conn.close()

    def transaction(self, conns: dict[str, Any]) -> None:
        rng = self.rng
        db = rng.choice(sorted(conns))
        cur = conns[db].cursor()
        tables = self.contents[db]
        work = {t: dict(rows) for t, rows in tables.items()}
        done: list[Change] = []
        for _ in range(rng.randint(1, 4)):
            table = rng.choice(list(TABLES))
            rows = work[table]
            self.version += 1
            version = self.version
            op = rng.choices(["c", "u", "d"], [3, 4, 2])[0] if rows else "c"
            if op == "c":
                n = self.next_key[(db, table)]
                self.next_key[(db, table)] = n + 1
                if table == "items":
                    key: Key = (n,)
                    row = {"id": n, "name": f"new {version}", "version": version}
                else:
                    key = (n, f"k{n % 3}")
                    row = {"a": n, "b": key[1], "note": rng.choice([None, f"note {version}"]), "version": version}
                cur.execute(f"INSERT INTO dbo.{table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                            *row.values())
                rows[key] = row
            else:
                key = rng.choice(sorted(rows))
                where = " AND ".join(f"{c} = ?" for c in TABLES[table])
                if op == "u":
                    column = "name" if table == "items" else "note"
                    row = {**rows[key], column: f"v{version}", "version": version}
                    cur.execute(f"UPDATE dbo.{table} SET {column} = ?, version = ? WHERE {where}",
                                row[column], version, *key)
                    rows[key] = row
                else:
                    version = rows.pop(key)["version"]
                    cur.execute(f"DELETE FROM dbo.{table} WHERE {where}", *key)
            done.append(Change(db, table, key, op, version))
        if rng.random() < 0.05:
            conns[db].rollback()  # none of it may reach the output
            return
        conns[db].commit()
        self.contents[db] = work
        self.changes += done

    def last_changes(self) -> dict[str, Change]:
        """Each database's last committed change."""
        return {c.db: c for c in self.changes}


# -- `headwater run` killed and restarted --------------------------------------------------------------


class Runner(HeadwaterRun):
    """`headwater run` on the properties, killed with SIGKILL and started again on the same output,
    offsets and schema history; each run's log is kept (run1.log, run2.log, ...)."""

    def __init__(self, props: Mapping[str, str], workdir: Path) -> None:
        super().__init__(props, workdir / "out.jsonl")
        self.offsets = workdir / "offsets.json"
        self.runs = 0
        self.boundaries: list[int] = []  # the output's size when each killed run was dead

    def start(self) -> Runner:
        self.runs += 1
        self.log = self.workdir / f"run{self.runs}.log"
        super().start()
        return self

    def logs(self) -> str:
        return "\n".join(f"--- run {i} (last 3000 characters) ---\n"
                         + (self.workdir / f"run{i}.log").read_text(errors="replace")[-3000:]
                         for i in range(1, self.runs + 1))

    def assert_alive(self) -> None:
        if not self.alive():
            raise AssertionError(f"headwater run exited ({self.proc and self.proc.returncode})\n{self.logs()}")

    def kill(self) -> None:
        assert self.proc is not None
        self.assert_alive()
        workers = descendants(self.proc.pid)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        # the encoding workers write to the sink themselves and die (PDEATHSIG) after the parent:
        # the run's output is complete once they are gone too
        wait_for(lambda: not any(running(pid) for pid in workers), "the killed run's encoding workers to exit")
        # a kill in the middle of a write leaves half a line, which the next run cuts
        data = self.out.read_bytes() if self.out.exists() else b""
        self.boundaries.append(data.rfind(b"\n") + 1)

    def output(self) -> bytes:
        return self.out.read_bytes() if self.out.exists() else b""

    def current_run_output(self) -> bytes:
        return self.output()[self.boundaries[-1] if self.boundaries else 0:]

    def stop(self, timeout: float = 60) -> None:
        try:
            super().stop(timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def cleanup(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def segments(self) -> list[list[dict[str, Any]]]:
        """The output split per run, each parsed line by line."""
        data = self.output()
        cuts = [0, *self.boundaries, *([len(data)] if self.runs > len(self.boundaries) else [])]
        out = []
        for i in range(len(cuts) - 1):
            chunk = data[cuts[i]:cuts[i + 1]]
            assert not chunk or chunk.endswith(b"\n"), f"run {i + 1} left a torn last line: {chunk[-200:]!r}"
            out.append([json.loads(line) for line in chunk.splitlines()])
        return out


def base_props(server: SqlServerEmulator, databases: list[str], workdir: Path, **extra: str) -> dict[str, str]:
    return props(server, ",".join(databases), workdir, **{"table.include.list": "dbo.items,dbo.pairs", **extra})


_VERSION = re.compile(rb'"version":(\d+)')


def max_version(data: bytes) -> int:
    return max((int(v) for v in _VERSION.findall(data)), default=-1)


# -- what was delivered ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """A data event as the checks compare it: everything but the timestamps."""

    db: str
    table: str
    key: Key
    op: str
    row: tuple[tuple[str, Any], ...]          # `after` (`before` for a delete)
    commit_lsn: str | None
    change_lsn: str | None
    serial: int | None

    @property
    def version(self) -> int:
        return dict(self.row)["version"]

    @property
    def position(self) -> tuple[str, str, int]:
        return (self.commit_lsn or "", self.change_lsn or "", self.serial or 0)

    def change(self) -> tuple[str, Key, str, int]:
        return (self.table, self.key, self.op, self.version)


def events(records: list[dict[str, Any]]) -> list[Event]:
    """The data events (no tombstones, schema changes or heartbeats) of the two tables."""
    out = []
    for r in records:
        value = r.get("value")
        if not isinstance(value, dict) or "op" not in value:
            continue
        source = value["source"]
        row = value["before"] if value["op"] == "d" else value["after"]
        table = source["table"]
        out.append(Event(source["db"], table, tuple(row[c] for c in TABLES[table]), value["op"],
                         tuple(sorted(row.items())), source["commit_lsn"], source["change_lsn"],
                         source["event_serial_no"]))
    return out


def without_replays(segments: list[list[Event]], *, replay_anywhere: bool = False) -> dict[str, list[Event]]:
    """Per database, the streamed events with the replays taken out, checking that an event comes
    again only in a replay: a run (a segment of the output) that starts at a stored offset sends
    again what came after it, in the same order, up to what was delivered last, then only new
    events, each later than everything before. `replay_anywhere`: a replay may also start inside
    a segment (the engine runs the connector again from the stored offset after a retried error)."""
    delivered: dict[str, list[Event]] = defaultdict(list)
    where: dict[str, dict[tuple[str, str, int], int]] = defaultdict(dict)  # position -> index in delivered
    for n, segment in enumerate(segments, 1):
        replaying: dict[str, int] = {}  # database -> index in delivered of the next replayed event
        new_seen: set[str] = set()
        for e in segment:
            if e.op == "r":
                continue
            sent = delivered[e.db]
            if sent and e.position <= sent[-1].position:
                i = replaying.get(e.db)
                if i is None or i == len(sent):
                    assert replay_anywhere or e.db not in new_seen, (
                        f"run {n} sent {e} again after new events of database {e.db} (not a replay from a stored "
                        "offset)")
                    i = where[e.db].get(e.position)
                    assert i is not None, f"run {n} sent {e}, which lies before events already delivered"
                assert sent[i] == e, f"run {n} replays {e} where {sent[i]} was delivered (not the same events)"
                replaying[e.db] = i + 1
                continue
            i = replaying.get(e.db)
            assert i is None or i == len(sent), (
                f"run {n} replayed database {e.db}'s events from a stored offset but skipped {len(sent) - i} of them "
                f"(from {sent[i]}) before going on with {e}")
            replaying.pop(e.db, None)
            new_seen.add(e.db)
            where[e.db][e.position] = len(sent)
            sent.append(e)
    return delivered


def snapshot_rows(segment: list[Event]) -> dict[str, dict[tuple[str, Key], Row]]:
    """The snapshot's rows per database, checking that each came once and before any stream event
    of its database."""
    out: dict[str, dict[tuple[str, Key], Row]] = defaultdict(dict)
    streaming: set[str] = set()
    for e in segment:
        if e.op != "r":
            streaming.add(e.db)
            continue
        assert e.db not in streaming, f"snapshot event {e} after streamed events of its database"
        assert (e.table, e.key) not in out[e.db], f"the snapshot read {e.table} {e.key} twice"
        out[e.db][(e.table, e.key)] = dict(e.row)
    return out


def replayed(snapshot: dict[tuple[str, Key], Row], stream: list[Event]) -> dict[str, dict[Key, Row]]:
    """The tables as a consumer applying the events in order ends up with them."""
    tables: dict[str, dict[Key, Row]] = {t: {} for t in TABLES}
    for (table, key), row in snapshot.items():
        tables[table][key] = row
    for e in stream:
        if e.op == "d":
            assert tables[e.table].pop(e.key, None) is not None, f"{e} deletes a row the consumer does not have"
        else:
            assert (e.key in tables[e.table]) == (e.op == "u"), f"{e}: an update of a missing row or an insert of a " \
                "present one"
            tables[e.table][e.key] = dict(e.row)
    return tables


def check_delivery(segments: list[list[dict[str, Any]]], writer: Writer, initial: dict[str, dict[str, dict[Key, Row]]],
                   server: SqlServerEmulator, context: str, *, replay_anywhere: bool = False) -> int:
    """Every committed change delivered, per database in commit order, duplicates only as replays;
    replaying the events gives the tables; the number of replayed events."""
    parsed = [events(s) for s in segments]
    snapshot = snapshot_rows(parsed[0])
    assert all(e.op != "r" for s in parsed[1:] for e in s), f"a restart took a snapshot again {context}"
    delivered = without_replays(parsed, replay_anywhere=replay_anywhere)
    total = sum(len([e for e in s if e.op != "r"]) for s in parsed)
    for db, tables in initial.items():
        assert snapshot[db] == {(t, k): row for t, rows in tables.items() for k, row in rows.items()}, (
            f"database {db}: the snapshot is not the tables' rows {context}")
        want = [(c.table, c.key, c.op, c.version) for c in writer.changes if c.db == db]
        got = [e.change() for e in delivered[db]]
        missing = [w for w in want if w not in set(got)]
        assert not missing, f"database {db}: {len(missing)} committed changes lost, e.g. {missing[:5]} {context}"
        if got != want:
            i = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
            raise AssertionError(f"database {db}: the delivered changes differ from the committed ones (in commit "
                                 f"order) at #{i}: delivered {got[i:i + 3]}, committed {want[i:i + 3]} ({len(got)} "
                                 f"delivered, {len(want)} committed) {context}")
        final = table_contents(server, db)
        assert replayed(snapshot[db], delivered[db]) == final, f"database {db}: replay != the tables {context}"
        assert final == writer.contents[db], f"database {db}: the tables are not what the writer committed {context}"
    return total - sum(len(d) for d in delivered.values())


def wait_delivered(runner: Runner, writer: Writer, timeout: float = 60) -> None:
    """Until each database's last committed change is in the output (the checks then say whether
    everything before it is too)."""
    last = {(c.db, c.table, c.key, c.op, c.version) for c in writer.last_changes().values()}

    def arrived() -> bool:
        runner.assert_alive()
        got = {(e.db, e.table, e.key, e.op, e.version) for e in events(
            [json.loads(line) for line in runner.output().splitlines() if line.strip()])}
        return last <= got

    wait_for(arrived, "the last committed changes to be delivered", timeout, poll=0.2)


# -- tests -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("databases", "settings"), [
    (1, {}),
    # windows of two transactions read three rows at a time: a kill lands inside a window more often
    (2, {"max.iteration.transactions": "2", "streaming.fetch.size": "3"}),
], ids=["one-database", "two-databases"])
def test_sigkill_while_streaming_loses_nothing(sqlserver: SqlServerEmulator, sqlserver_db: str, tmp_path: Path,
                                               databases: int, settings: dict[str, str]) -> None:
    seed = int(os.environ.get("HW_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    context = f"(seed {seed}; HW_CRASH_SEED={seed} reproduces the writer and the kill times)"
    kills = 3
    with contextlib.ExitStack() as stack:
        names = [sqlserver_db, *(stack.enter_context(extra_database(sqlserver)) for _ in range(databases - 1))]
        initial = {db: create_tables(sqlserver, db, rows=30) for db in names}
        writer = Writer(sqlserver, {db: {t: dict(r) for t, r in tables.items()} for db, tables in initial.items()},
                        seed)
        runner = Runner(base_props(sqlserver, names, tmp_path, **settings), tmp_path)
        stack.callback(runner.cleanup)
        stack.callback(writer.halt)
        runner.start()
        wait_for(lambda: (runner.assert_alive(), snapshot_stored(runner.offsets))[1], "the snapshot", 60)
        writer.start()
        delivered_before = 0  # the highest version in the output when the last run was killed
        for k in range(kills):
            # a moment while the run streams: after it delivered something new
            wait_for(lambda d=delivered_before: (runner.assert_alive(), max_version(runner.current_run_output()))[1]
                     > d, f"run {k + 1} to stream new changes", 60)
            time.sleep(rng.uniform(0, 0.4))
            assert writer.alive(), f"the writer stopped: {writer.error!r}"
            runner.kill()
            delivered_before = max_version(runner.output())
            runner.start()
        wait_for(lambda: (runner.assert_alive(), max_version(runner.current_run_output()))[1] > delivered_before,
                 "the last run to stream new changes", 60)
        writer.stop()
        wait_delivered(runner, writer)
        runner.stop()
        segments = runner.segments()
        assert len(segments) == kills + 1
        replays = check_delivery(segments, writer, initial, sqlserver, context)
        committed = len(writer.changes)
        print(f"{databases} database(s): {committed} committed changes, {replays} replayed after {kills} SIGKILLs "
              f"{context}")


def _forget_snapshot_progress(offsets: Path) -> None:
    """Make the stored offsets those of a version before the resumable snapshot: no progress."""
    data = json.loads(offsets.read_text())
    for stored in data["offsets"].values():
        assert stored.pop(PROGRESS_KEY, None) is not None, f"the stored offset carries no snapshot progress: {stored}"
        for entry in stored.get("databases", {}).values():
            entry.pop(PROGRESS_KEY, None)
    offsets.write_text(json.dumps(data))


@pytest.mark.parametrize("stored_progress", [True, False], ids=["resumes", "without-progress-takes-it-again"])
def test_sigkill_during_the_initial_snapshot(sqlserver: SqlServerEmulator, sqlserver_db: str, tmp_path: Path,
                                             stored_progress: bool) -> None:
    """Killed during the initial snapshot. With the progress the offsets carry (the default), the
    restart resumes the snapshot (beyond Debezium, docs/compat.md): tables read completely are
    not read again, the rest is read at a new point, and streaming starts at the interrupted
    snapshot's position, so the changes made while down are streamed after the reads. Without it
    (an offset an earlier version wrote), the restart takes the whole snapshot again at a new
    point and streams from there: Debezium's rule."""
    rows = 5000
    create_tables(sqlserver, sqlserver_db, rows=rows)
    # the emulator reads 10 000 rows in a moment; encoded on the engine's thread (no encoding
    # workers) into a short queue, the snapshot lasts long enough (a second or two) to be killed.
    # Each table is one chunk (snapshot.chunk.rows is larger): the snapshot resumes at the table.
    runner = Runner(base_props(sqlserver, [sqlserver_db], tmp_path, **{
        "encoding.workers": "0", "max.batch.size": "64", "max.queue.size": "128"}), tmp_path)

    def snapshot_under_way() -> bool:
        runner.assert_alive()
        try:
            stored = json.loads(runner.offsets.read_text())["offsets"]
        except (OSError, ValueError, KeyError):
            return False
        return runner.output().count(b"\n") >= 500 and any(
            e.get("snapshot") and not e.get("snapshot_completed")
            for o in stored.values() for e in o["databases"].values())

    try:
        runner.start()
        wait_for(snapshot_under_way, "the snapshot to be under way, its offset stored", 60, poll=0.01)
        runner.kill()
        (stored,) = json.loads(runner.offsets.read_text())["offsets"].values()
        entry = stored["databases"][sqlserver_db]
        first = events(runner.segments()[0])
        assert entry.get("snapshot") and not entry.get("snapshot_completed"), (
            f"the kill was meant to hit an unfinished snapshot, but the stored offset is {stored} ({len(first)} rows "
            "written)")
        assert 0 < len(first) < 2 * rows and all(e.op == "r" for e in first)
        progress = progress_of(stored)
        assert progress is not None, f"the stored offset carries no snapshot progress: {stored}"
        done = {t.rsplit(".", 1)[1] for t in progress.done}
        if not stored_progress:
            _forget_snapshot_progress(runner.offsets)
        # while it is down: a new row, a changed row, and a row the first snapshot already sent deleted
        deleted = next(e for e in first if e.table == "items" and e.key != (1,))  # item 1 is updated later
        where = " AND ".join(f"{c} = ?" for c in TABLES[deleted.table])
        with contextlib.closing(sqlserver.connect(sqlserver_db)) as conn:
            cur = conn.cursor()
            cur.execute("INSERT INTO dbo.items (id, name, version) VALUES (?, N'while down', 1)", rows + 1)
            cur.execute("UPDATE dbo.pairs SET note = N'changed while down', version = 2 WHERE a = 7 AND b = N'k1'")
            cur.execute(f"DELETE FROM dbo.{deleted.table} WHERE {where}", *deleted.key)
        # captured before the new snapshot takes its maximum LSN: they are then in it, not streamed
        wait_for(lambda: sqlserver.execute("SELECT COUNT(*) FROM cdc.dbo_items_CT", database=sqlserver_db)[0][0]
                 + sqlserver.execute("SELECT COUNT(*) FROM cdc.dbo_pairs_CT", database=sqlserver_db)[0][0]
                 == 2 + 4, "the capture of the changes made while down")
        at_restart = table_contents(sqlserver, sqlserver_db)
        runner.start()
        wait_for(lambda: (runner.assert_alive(), snapshot_stored(runner.offsets))[1], "the new snapshot", 60)
        sqlserver.execute(f"INSERT INTO dbo.items (id, name, version) VALUES ({rows + 2}, N'streamed', 3)",
                          database=sqlserver_db)
        sqlserver.execute("UPDATE dbo.items SET name = N'changed', version = 4 WHERE id = 1", database=sqlserver_db)
        wait_for(lambda: (runner.assert_alive(), max_version(runner.current_run_output()))[1] >= 4,
                 "the changes after the restart", 60)
        runner.stop()
    finally:
        runner.cleanup()

    log = (tmp_path / "run2.log").read_text(errors="replace")
    second = events(runner.segments()[1])
    snapshot = snapshot_rows(second)[sqlserver_db]
    streamed = [(e.table, e.op, e.key, e.version) for e in second if e.op != "r"]
    after_restart = [("items", "c", (rows + 2,), 3), ("items", "u", (1,), 4)]
    if stored_progress:
        assert "resuming the interrupted snapshot" in log, runner.logs()
        assert {t for t, _ in snapshot} == set(TABLES) - done, f"tables read completely ({done}) were read again"
        assert snapshot == {(t, k): row for t, table in at_restart.items() if t not in done
                            for k, row in table.items()}, "the rest is not read as the tables were at the restart"
        # the stream starts at the interrupted snapshot's position: the changes made while down first
        assert streamed == [("items", "c", (rows + 1,), 1), ("pairs", "u", (7, "k1"), 2),
                            (deleted.table, "d", deleted.key, deleted.version), *after_restart]
        consumer: dict[str, dict[Key, Row]] = {t: {} for t in TABLES}
        for e in first + second:
            if e.op == "d":
                consumer[e.table].pop(e.key, None)
            else:
                consumer[e.table][e.key] = dict(e.row)
        assert consumer == table_contents(sqlserver, sqlserver_db), "replaying the events does not give the tables"
        # the resumed part says `first` only when it reads everything again (no table was complete)
        markers = [r["value"]["source"]["snapshot"] for r in runner.segments()[1]
                   if isinstance(r.get("value"), dict) and r["value"].get("op") == "r"]
        assert (markers[0] == "first") == progress.empty and markers.count("first") <= 1 and markers[-1] == "last"
    else:
        assert "carries no snapshot progress" in log and "resuming the interrupted snapshot" not in log, runner.logs()
        assert snapshot == {(t, k): row for t, table in at_restart.items() for k, row in table.items()}, (
            "the new snapshot is not the tables as they were at the restart")
        assert ("items", (rows + 1,)) in snapshot and snapshot[("pairs", (7, "k1"))]["version"] == 2
        assert (deleted.table, deleted.key) not in snapshot
        assert streamed == after_restart
        assert replayed(snapshot, [e for e in second if e.op != "r"]) == table_contents(sqlserver, sqlserver_db)
        markers = [r["value"]["source"]["snapshot"] for r in runner.segments()[1]
                   if isinstance(r.get("value"), dict) and r["value"].get("op") == "r"]
        assert markers[0] == "first" and markers[-1] == "last" and set(markers[1:-1]) <= {
            "true", "last_in_data_collection", "first_in_data_collection"}


def test_sigkill_during_the_second_databases_snapshot_streams_the_first_on(sqlserver: SqlServerEmulator,
                                                                           sqlserver_db: str, tmp_path: Path) -> None:
    """Debezium keeps one offset per database and decides per database (SqlServerChangeEventSource-
    Coordinator.executeChangeEventSources: doSnapshot per partition): a database whose snapshot
    completed streams on from its snapshot's LSN after a restart; only the unfinished one is
    snapshotted again. A change in the first database while the connector is down, a delete of a
    row its snapshot sent, must then arrive as a delete event; taken as a new snapshot instead,
    the delete is in no event, and a consumer keeps the row."""
    with extra_database(sqlserver) as extra:
        # the database Debezium (and Headwater) snapshots first: the partitions' hash order
        first_db, second = partition_order("server1", [sqlserver_db, extra])
        create_tables(sqlserver, first_db, rows=20)
        create_tables(sqlserver, second, rows=5000)
        runner = Runner(base_props(sqlserver, [first_db, second], tmp_path, **{
            "encoding.workers": "0", "max.batch.size": "64", "max.queue.size": "128"}), tmp_path)

        def second_under_way() -> bool:
            runner.assert_alive()
            try:
                (stored,) = json.loads(runner.offsets.read_text())["offsets"].values()
            except (OSError, ValueError, KeyError):
                return False
            entries = stored["databases"]
            return bool(entries.get(first_db, {}).get("snapshot_completed") and second in entries
                        and not entries[second].get("snapshot_completed"))

        try:
            runner.start()
            wait_for(second_under_way, "the second database's snapshot to be under way", 60, poll=0.01)
            runner.kill()
            sqlserver.execute("DELETE FROM dbo.items WHERE id = 5", database=first_db)
            wait_for(lambda: sqlserver.execute("SELECT COUNT(*) FROM cdc.dbo_items_CT", database=first_db)[0][0] == 2,
                     "the capture of the delete")
            runner.start()
            wait_for(lambda: (runner.assert_alive(), snapshot_stored(runner.offsets))[1], "the snapshot", 60)
            sqlserver.execute("INSERT INTO dbo.items (id, name, version) VALUES (100, N'after', 7)", database=first_db)
            wait_for(lambda: (runner.assert_alive(), max_version(runner.current_run_output()))[1] >= 7,
                     "the insert after the restart", 60)
            runner.stop()
        finally:
            runner.cleanup()
        consumer: dict[str, dict[Key, Row]] = {t: {} for t in TABLES}
        for e in events([r for s in runner.segments() for r in s]):
            if e.db != first_db:
                continue
            if e.op == "d":
                consumer[e.table].pop(e.key, None)
            else:
                consumer[e.table][e.key] = dict(e.row)
        assert consumer == table_contents(sqlserver, first_db), "the consumer still has the row deleted while down"
