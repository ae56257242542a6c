"""SQL Server conformance: a recorded scenario run through Headwater against the emulator, compared with the
events Debezium emitted for it (the golden file).

A scenario is a folder of tests/emulators/sqlserver/scenarios (setup.sql, workload.sql, props.txt); its golden
file is tests/conformance/sqlserver/<name>/events.jsonl, written by record.py. The run repeats record.py's
protocol with Headwater in Debezium's place, reusing record.py's own pieces (batches and ``--@wait`` markers,
properties with placeholders, normalize_event):

  1. drop the databases the scenario creates (variants share their SQL, so their names collide), run
     setup.sql batch by batch, wait until the capture job has captured it;
  2. start the capture (``headwater run`` on a Debezium Server application.properties: the scenario's
     properties as ``debezium.source.*``, JSON converters with schemas, the jsonl sink) and wait until its
     snapshot is out;
  3. run workload.sql; at each ``--@wait`` and at the end, wait until the capture job has captured every
     committed change and the capture has emitted them, then until its output is quiet;
  4. stop it (SIGTERM, which must end it cleanly), normalize both sides, compare as serialized JSON.

The waits are conditions, not fixed sleeps. "Captured": two log scan sessions of the database's capture job
have ended since the last statement (the second one began after it, so it read every commit before it).
"Emitted": the capture's output holds, for every database, an event whose ``source.commit_lsn`` reaches the
newest ``__$start_lsn`` of the database's change tables — and at the end as many events as the golden file.
A capture that never gets there is waited for only until its output has been quiet for the scenario's
``record.quiet.seconds`` (the comparison then shows what is missing) — for :data:`PATIENCE` at least where the
count it must reach is known (the snapshot, the end, an incremental snapshot's completion).

The capture is pluggable (:data:`StartCapture`): ``headwater run`` (:func:`start_headwater_run`), Debezium's
own connector (:func:`start_debezium`: the harness must reproduce the golden files with it), the Spark source.

From tests/:  ``../.venv/bin/python -m helpers.sqlserver_conformance basic_crud [more names]`` prints EQUAL or
the differences per scenario (all scenarios without names; ``--dump`` writes both sides normalized into the
work directory, which is kept; ``--debezium`` captures with Debezium; ``--dry-run`` only the SQL and the waits;
``--emulator HOST:PORT --password PW`` uses a running emulator instead of starting one).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:  # run as a script or module from anywhere
    sys.path.insert(0, str(TESTS_DIR))

from emulators.sqlserver.record import (  # noqa: E402
    Scenario,
    database_names,
    normalize_event,
    read_properties,
    run_batches,
)
from helpers.capture import HeadwaterRun  # noqa: E402

SCENARIOS = TESTS_DIR / "emulators" / "sqlserver" / "scenarios"
GOLDEN = TESTS_DIR / "conformance" / "sqlserver"
DEFAULT_QUIET = 5.0  # record.py's default for record.quiet.seconds
CAPTURE_TIMEOUT = 60.0
SNAPSHOT_TIMEOUT = 120.0
# How long a capture short of what it must emit (the golden file's snapshot records, its events at the end, an
# incremental snapshot's completion) may be quiet before the run goes on: a run that gets there never waits
# for it, and a loaded machine's Spark batches or capture scans can pause for longer than `quiet.seconds`.
PATIENCE = 20.0
POLL = 0.05


class ConformanceError(RuntimeError):
    """The scenario could not be run to the end (not a difference in the events)."""


# ----------------------------------------------------------------------------------------------
# what the harness needs from its surroundings


class Server(Protocol):
    """The emulator: helpers.sqlserver.SqlServerEmulator (the ``sqlserver`` fixture) fits."""

    host: str
    port: int
    password: str

    def connect(self, database: str = "master", autocommit: bool = True) -> Any: ...


class Capture(Protocol):
    """Something writing Debezium's records for the connector properties it was started with."""

    def records(self) -> list[dict[str, Any]]: ...
    def alive(self) -> bool: ...
    def stop(self) -> None: ...     # raises when the capture did not end cleanly
    def log_tail(self) -> str: ...
    # Optional: `streaming() -> bool`, whether the capture has begun streaming (its snapshot, if any,
    # is done and its start position taken) — what a scenario without snapshot records waits for.


StartCapture = Callable[[dict[str, str], Path], Capture]
"""(connector properties, work directory) → a started capture."""


# ----------------------------------------------------------------------------------------------
# scenarios and golden files


def scenario_names() -> list[str]:
    """Every scenario that has a golden file."""
    return sorted(p.name for p in SCENARIOS.iterdir()
                  if p.is_dir() and (GOLDEN / p.name / "events.jsonl").is_file())


def load_golden(name: str) -> list[dict[str, Any]]:
    path = GOLDEN / name / "events.jsonl"
    with open(path, encoding="utf-8") as f:
        return [normalize_event(json.loads(line)) for line in f if line.strip()]


def payload_of(event: Mapping[str, Any]) -> Any:
    value = event.get("value")
    return value.get("payload") if isinstance(value, dict) and "schema" in value else value


def source_of(event: Mapping[str, Any]) -> dict[str, Any] | None:
    payload = payload_of(event)
    source = payload.get("source") if isinstance(payload, dict) else None
    return source if isinstance(source, dict) else None


def is_snapshot_event(event: Mapping[str, Any]) -> bool:
    """A record of the snapshot (``source.snapshot`` other than false: true, first, last, ...)."""
    source = source_of(event)
    return source is not None and source.get("snapshot") not in (None, "false", False)


def initial_snapshot_events(events: Sequence[Mapping[str, Any]]) -> int:
    """The initial snapshot's records: snapshot records before the first streamed one (incremental
    snapshot reads, `source.snapshot` incremental, and a blocking snapshot's records come while streaming)."""
    count = 0
    for e in events:
        source = source_of(e)
        if source is None:
            continue
        if not is_snapshot_event(e) or source.get("snapshot") == "incremental":
            break
        count += 1
    return count


INCREMENTAL_SNAPSHOT = "Incremental Snapshot"


def incremental_snapshot_running(records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the notifications (notification.enabled.channels=sink) say an incremental snapshot is still
    running: one STARTED whose COMPLETED has not come yet."""
    running = False
    for r in records:
        payload = payload_of(r)
        if isinstance(payload, dict) and payload.get("aggregate_type") == INCREMENTAL_SNAPSHOT:
            if payload.get("type") == "STARTED":
                running = True
            elif payload.get("type") == "COMPLETED":
                running = False
    return running


_CREATE_DATABASE = re.compile(r"\bCREATE\s+DATABASE\s+\[?(\w+)\]?", re.IGNORECASE)


def created_databases(scenario: Scenario, props: Mapping[str, str]) -> list[str]:
    """The databases the scenario makes (CREATE DATABASE in setup.sql) and captures (database.names)."""
    names = [m.group(1) for batch in scenario.setup if isinstance(batch, str)
             for m in _CREATE_DATABASE.finditer(batch)]
    return list(dict.fromkeys([*names, *database_names(props)]))


def quoted(name: str) -> str:
    return "[" + name.replace("]", "]]") + "]"


# ----------------------------------------------------------------------------------------------
# the emulator side: SQL, the capture job


def query(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()] if cur.description is not None else []


def drop_databases(conn: Any, names: Sequence[str]) -> None:
    """Drop each database that exists (with its CDC objects and capture job): a scenario starts clean."""
    for name in names:
        literal = name.replace("'", "''")
        query(conn, f"IF DB_ID(N'{literal}') IS NOT NULL DROP DATABASE {quoted(name)}")


def scan_marker(conn: Any, database: str) -> tuple[Any, ...] | None:
    """Where the database's capture job is: its newest log scan session and that session's empty-scan count.
    Every scan changes it (a scan with transactions adds a session; consecutive empty scans share one
    session, whose empty_scan_count grows)."""
    rows = query(conn, f"SELECT TOP 1 session_id, empty_scan_count FROM {quoted(database)}"
                       ".sys.dm_cdc_log_scan_sessions ORDER BY session_id DESC")
    return rows[0] if rows else None


def max_lsn(conn: Any, database: str) -> bytes | None:
    value = query(conn, f"SELECT {quoted(database)}.sys.fn_cdc_get_max_lsn()")[0][0]
    return bytes(value) if value is not None else None


def wait_captured(conn: Any, databases: Sequence[str], timeout: float = CAPTURE_TIMEOUT) -> None:
    """Until the capture job of every database has captured everything committed before this call: two scans
    have ended since (the second began after the first ended, so after this call), and the database has a
    maximum LSN. The capture job runs every ``--capture-interval`` (0.1 s in the fixture): this takes about
    two intervals, where record.py's wait_for_capture waits for 2 s without news."""
    deadline = time.monotonic() + timeout
    for db in databases:
        seen = [scan_marker(conn, db)]
        while len(seen) < 3 or max_lsn(conn, db) is None:
            if time.monotonic() > deadline:
                raise ConformanceError(f"the capture job of {db} did not scan twice within {timeout} s "
                                       f"(scan sessions {seen}); is the emulator's Agent running?")
            time.sleep(POLL)
            marker = scan_marker(conn, db)
            if marker != seen[-1]:
                seen.append(marker)


def captured_lsn(conn: Any, database: str) -> bytes | None:
    """The newest ``__$start_lsn`` in the database's change tables: what a connector that captures every
    table must have emitted once it has caught up."""
    instances = [r[0] for r in query(conn, f"SELECT capture_instance FROM {quoted(database)}.cdc.change_tables")]
    newest: bytes | None = None
    for ci in instances:
        value = query(conn, f"SELECT MAX(__$start_lsn) FROM {quoted(database)}.cdc.{quoted(ci + '_CT')}")[0][0]
        if value is not None and (newest is None or bytes(value) > newest):
            newest = bytes(value)
    return newest


def change_rows(conn: Any, database: str) -> Counter[int]:
    """The database's change rows by ``__$operation`` (1 delete, 2 insert, 3/4 update before/after)."""
    counts: Counter[int] = Counter()
    for (ci,) in query(conn, f"SELECT capture_instance FROM {quoted(database)}.cdc.change_tables"):
        for op, n in query(conn, f"SELECT __$operation, COUNT(*) FROM {quoted(database)}.cdc."
                                 f"{quoted(ci + '_CT')} GROUP BY __$operation"):
            counts[int(op)] += int(n)
    return counts


# ----------------------------------------------------------------------------------------------
# the capture side: what the output tells


def lsn_bytes(text: Any) -> bytes | None:
    """Debezium's LSN text ``0000002b:00000f28:0003`` → the 10 bytes it stands for."""
    if not isinstance(text, str):
        return None
    try:
        return bytes.fromhex(text.replace(":", ""))
    except ValueError:
        return None


def emitted_lsns(records: Sequence[Mapping[str, Any]]) -> dict[str, bytes]:
    """Per database (``source.db``), the newest ``source.commit_lsn`` among the records."""
    out: dict[str, bytes] = {}
    for r in records:
        source = source_of(r)
        lsn = lsn_bytes(source.get("commit_lsn")) if source else None
        if source and lsn is not None:
            db = str(source.get("db", "")).lower()
            if lsn > out.get(db, b""):
                out[db] = lsn
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a jsonl file that may be being written (a partial last line is left out)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    end = data.rfind(b"\n")
    return [json.loads(line) for line in data[:end + 1].splitlines() if line.strip()] if end >= 0 else []


@dataclass
class Progress:
    """Watches a capture's output: its count and since when it has not changed."""

    capture: Capture
    count: int = 0
    changed_at: float = field(default_factory=time.monotonic)

    def poll(self) -> list[dict[str, Any]]:
        records = self.capture.records()
        if len(records) != self.count:
            self.count, self.changed_at = len(records), time.monotonic()
        return records

    def quiet_for(self) -> float:
        return time.monotonic() - self.changed_at


def wait_snapshot(capture: Capture, expected: int, *, quiet: float, timeout: float = SNAPSHOT_TIMEOUT) -> None:
    """Until the capture has emitted its snapshot: as many snapshot records as Debezium's (the golden file
    says how many). A capture that emits fewer is waited for until its output has been quiet for ``quiet`` s
    (PATIENCE at least) after its first record; before it, until the timeout. Returns early when the
    capture ended (its stop() tells why)."""
    progress = Progress(capture)
    deadline = time.monotonic() + timeout
    streaming = getattr(capture, "streaming", None)
    while capture.alive():
        records = progress.poll()
        done = sum(1 for r in records if is_snapshot_event(r))
        if expected == 0 and streaming is not None:
            # no snapshot records (snapshot.mode=no_data): the workload must wait for the start
            # position, or its changes would lie before it
            if streaming():
                return
            if time.monotonic() > deadline:
                raise ConformanceError(f"the capture did not begin streaming within {timeout} s")
            time.sleep(POLL)
            continue
        # A capture that emits fewer: on when quiet, but only once it has emitted something. The workload must
        # not run while the snapshot is still to be read (its rows would show the workload's changes): a
        # loaded machine's Spark source took over 20 s for its first batch, and longer than `quiet` between two.
        if done >= expected or (records and progress.quiet_for() >= max(quiet, PATIENCE)):
            return
        if time.monotonic() > deadline:
            raise ConformanceError(f"the snapshot did not end within {timeout} s ({done} of {expected} "
                                   f"snapshot records)")
        time.sleep(POLL)


def wait_emitted(capture: Capture, targets: Mapping[str, bytes | None], *, expected: int | None,
                 settle: float, quiet: float, timeout: float = 300) -> bool:
    """Until the capture has emitted every captured change (its records reach each database's target LSN)
    and, when given, ``expected`` records, and then nothing more for ``settle`` s; or until its output has
    been quiet for ``quiet`` s without getting there — :data:`PATIENCE` s at least while it has fewer than
    ``expected`` records (a target LSN of a change that gives no event is never reached) (False). Returns
    early when the capture ended."""
    progress = Progress(capture)
    deadline = time.monotonic() + timeout
    while capture.alive():
        records = progress.poll()
        emitted = emitted_lsns(records)
        reached = all(lsn is None or emitted.get(db.lower(), b"") >= lsn for db, lsn in targets.items())
        short = expected is not None and len(records) < expected
        if reached and not short:
            if progress.quiet_for() >= settle:
                return True
        elif progress.quiet_for() >= (max(quiet, PATIENCE) if short else quiet):
            return False
        if time.monotonic() > deadline:
            raise ConformanceError(f"records kept coming for {timeout} s ({len(records)} so far)")
        time.sleep(POLL)
    return False


# ----------------------------------------------------------------------------------------------
# `headwater run`


class HeadwaterCli(HeadwaterRun):
    """``headwater run`` on application.properties: the connector properties as ``debezium.source.*``, JSON
    key and value converters with schemas (as the golden files were recorded: Kafka's JsonConverter with
    schemas.enable), the jsonl sink."""

    FORMAT = ("debezium.format.key=json", "debezium.format.value=json")

    def __init__(self, props: Mapping[str, str], workdir: Path) -> None:
        props = {**props, "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"}
        super().__init__(props, workdir / "out.jsonl")
        with open(self.properties, "a", encoding="utf-8") as f:
            f.write("\n".join(self.FORMAT) + "\n")

    def records(self) -> list[dict[str, Any]]:
        return read_jsonl(self.out)

    def streaming(self) -> bool:
        return "streaming databases" in self.log_tail(1_000_000)


def start_headwater_run(props: dict[str, str], workdir: Path) -> Capture:
    return HeadwaterCli(props, workdir).start()


class DebeziumCapture:
    """Debezium's own connector (record.py's DebeziumRunner, embedded engine, JSON converters with schemas) as
    a capture: the harness run through it must reproduce the golden files — a check of the harness itself."""

    def __init__(self, props: Mapping[str, str], workdir: Path) -> None:
        from emulators.sqlserver.jvm.classpath import DEBEZIUM_JARS, find_classpath
        from emulators.sqlserver.jvm.launch import DebeziumProcess

        self.out = workdir / "out.jsonl"
        classpath = find_classpath(DEBEZIUM_JARS, prefer="oracle")  # 3.6.3, as the golden files were recorded
        self.runner = DebeziumProcess(props, workdir, self.out, classpath=classpath)

    def start(self) -> DebeziumCapture:
        self.runner.start()
        return self

    def records(self) -> list[dict[str, Any]]:
        return read_jsonl(self.out)

    def alive(self) -> bool:
        proc = self.runner._proc
        return proc is not None and proc.poll() is None

    def stop(self) -> None:
        self.runner.stop()
        result = self.runner.wait()
        if result.exit_code != 0 or result.error:
            raise AssertionError(f"DebeziumRunner exited {result.exit_code}: {result.error}\n{result.stderr_tail}")

    def log_tail(self) -> str:
        return self.runner.log_tail()

    def streaming(self) -> bool:
        return any(s.get("status") == "streaming-connected" for s in self.runner.statuses if isinstance(s, dict))


def start_debezium(props: dict[str, str], workdir: Path) -> Capture:
    return DebeziumCapture(props, workdir).start()


# ----------------------------------------------------------------------------------------------
# one run


@dataclass
class Result:
    name: str
    got: list[dict[str, Any]]
    want: list[dict[str, Any]]
    workdir: Path
    notes: list[str] = field(default_factory=list)
    dry: bool = False
    rows_after_setup: dict[str, Counter[int]] = field(default_factory=dict)  # dry run: change rows by operation
    rows_after_workload: dict[str, Counter[int]] = field(default_factory=dict)

    @property
    def equal(self) -> bool:
        return serialized(self.got) == serialized(self.want)

    def report(self) -> str:
        verdict = "SETTLED" if self.dry else f"EQUAL ({len(self.want)} events)" if self.equal else "DIFFERENT"
        head = f"{self.name}: {verdict}"
        lines = [head, *self.notes]
        if not self.equal:
            lines += [describe_diff(self.got, self.want), f"workdir: {self.workdir}"]
        return "\n".join(lines)


def run_scenario(name: str, server: Server, workdir: Path, *, start: StartCapture | None = start_headwater_run,
                 log: Callable[[str], None] = lambda _: None) -> Result:
    """Run scenario ``name`` against ``server`` through ``start`` (None: a dry run — only the SQL and the
    capture-job waits); returns both sides normalized. Raises ConformanceError when the run fails (the
    capture's log tail included)."""
    scenario = Scenario.load(SCENARIOS / name)
    want = load_golden(name)
    workdir.mkdir(parents=True, exist_ok=True)
    props, options = read_properties(scenario.props_text, {
        "HOST": server.host, "PORT": str(server.port), "PASSWORD": server.password, "WORKDIR": str(workdir)})
    quiet = float(options.get("quiet.seconds", DEFAULT_QUIET))
    # a redelivery after the connector's next poll must be seen before the run ends
    settle = max(1.0, 2 * int(props.get("poll.interval.ms", "500")) / 1000)
    databases = database_names(props)
    notes: list[str] = []
    conn = server.connect("master")
    setup_conn = server.connect("master")  # the batches' connection (USE moves it); waits query from `conn`
    capture: Capture | None = None
    try:
        drop_databases(conn, created_databases(scenario, props))
        n = run_batches(setup_conn, scenario.setup, what="setup.sql")
        wait_captured(conn, databases)
        log(f"{name}: setup.sql ran ({n} batches), captured")
        if start is None:
            return dry_run(name, scenario, conn, setup_conn, databases, want, workdir)
        capture = start(props, workdir)
        wait_snapshot(capture, initial_snapshot_events(want), quiet=quiet)
        ensure_alive(name, capture)
        log(f"{name}: snapshot out ({len(capture.records())} records); workload.sql")

        def settled(expected: int | None = None) -> None:
            assert capture is not None
            wait_captured(conn, databases)
            targets = {db: captured_lsn(conn, db) for db in databases}
            if not wait_emitted(capture, targets, expected=expected, settle=settle if expected else 0.3,
                                quiet=quiet):
                ensure_alive(name, capture)
                notes.append(f"note: after {len(capture.records())} records the capture went quiet without "
                             f"reaching the captured LSNs" + (f" / {expected} records" if expected else ""))
            if props.get("signal.data.collection") and expected is None:
                # an incremental snapshot writes its window marks while it runs: the workload goes on
                # once it has completed (record.py waited for the quiet that follows)
                wait_incremental_done(capture, quiet=max(quiet, PATIENCE))

        n = run_batches(setup_conn, scenario.workload, on_wait=settled, what="workload.sql")
        settled(len(want))
        log(f"{name}: workload.sql ran ({n} batches); {len(capture.records())} records")
    finally:
        setup_conn.close()
        conn.close()
        try:
            if capture is not None:
                stop(name, capture, quietly=sys.exc_info()[0] is not None)
        finally:
            # each CDC database holds a replication slot of the emulator's backing PostgreSQL: a
            # session of many scenarios on one emulator would run out of them
            with contextlib.closing(server.connect("master")) as cleanup:
                drop_databases(cleanup, created_databases(scenario, props))
    got = [normalize_event(json.loads(json.dumps(r))) for r in capture.records()]
    return Result(name, got, want, workdir, notes)


def wait_incremental_done(capture: Capture, *, quiet: float, timeout: float = 300) -> None:
    """Until no incremental snapshot runs (its COMPLETED notification is out), or the output has been quiet
    for ``quiet`` s."""
    progress = Progress(capture)
    deadline = time.monotonic() + timeout
    while capture.alive() and time.monotonic() < deadline:
        if not incremental_snapshot_running(progress.poll()) or progress.quiet_for() >= quiet:
            return
        time.sleep(POLL)


def ensure_alive(name: str, capture: Capture) -> None:
    if not capture.alive():
        raise ConformanceError(f"{name}: the capture ended early:\n{capture.log_tail()}")


def stop(name: str, capture: Capture, quietly: bool) -> None:
    """Stop the capture; an unclean end is an error, unless another error is already on its way."""
    try:
        capture.stop()
    except AssertionError as exc:
        if not quietly:
            raise ConformanceError(f"{name}: {exc}") from None


def dry_run(name: str, scenario: Scenario, conn: Any, setup_conn: Any, databases: Sequence[str],
            want: list[dict[str, Any]], workdir: Path) -> Result:
    """The SQL and the capture waits without a connector: a check of the harness itself. Fails when a wait
    returned before the capture job had captured everything (more change rows appear after it)."""
    def counts() -> dict[str, Counter[int]]:
        return {db: change_rows(conn, db) for db in databases}

    def check_settled() -> None:
        wait_captured(conn, databases)
        before = counts()
        wait_captured(conn, databases)  # two more scans: nothing new may come
        after = counts()
        if before != after:
            raise ConformanceError(f"{name}: change rows still appeared after the capture wait: {before} → {after}")

    start_rows = counts()
    run_batches(setup_conn, scenario.workload, on_wait=check_settled, what="workload.sql")
    check_settled()
    end_rows = counts()
    notes = [f"dry run: {db}: change rows by __$operation {dict(start_rows[db])} after setup, {dict(end_rows[db])} "
             f"after the workload" for db in databases]
    streamed = [e for e in want if not is_snapshot_event(e) and source_of(e) is not None]
    notes.append(f"dry run: golden file: {len(want)} events, {len(streamed)} streamed with a source block")
    return Result(name, [], [], workdir, notes, dry=True, rows_after_setup=start_rows, rows_after_workload=end_rows)


# ----------------------------------------------------------------------------------------------
# comparison


def serialized(events: Sequence[Any]) -> list[str]:
    """The strict view: serialized JSON, so value types (true vs 1, 1 vs 1.0) and key order count."""
    return [json.dumps(e, ensure_ascii=False) for e in events]


def json_paths(got: Any, want: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as paths with both values."""
    if isinstance(got, dict) and isinstance(want, dict):
        out = []
        if set(got) == set(want) and list(got) != list(want):
            out.append(f"{path or '.'}: key order {list(got)}, golden {list(want)}")
        for k in dict.fromkeys([*want, *got]):
            if k not in got:
                out.append(f"{path}.{k}: missing (golden {json.dumps(want[k], ensure_ascii=False)[:200]})")
            elif k not in want:
                out.append(f"{path}.{k}: not in golden (ours {json.dumps(got[k], ensure_ascii=False)[:200]})")
            else:
                out += json_paths(got[k], want[k], f"{path}.{k}")
        return out
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return [p for i, (g, w) in enumerate(zip(got, want)) for p in json_paths(g, w, f"{path}[{i}]")]
    g, w = json.dumps(got, ensure_ascii=False), json.dumps(want, ensure_ascii=False)
    return [] if g == w else [f"{path or '.'}: ours {g[:300]}, golden {w[:300]}"]


def label(event: Mapping[str, Any] | None) -> str:
    if event is None:
        return "(none)"
    payload = payload_of(event)
    op = payload.get("op") if isinstance(payload, dict) else None
    kind = f"op={op}" if op else ("tombstone" if payload is None else "no op")
    key = event.get("key")
    key = key.get("payload") if isinstance(key, dict) and "schema" in key else key
    return f"{event.get('topic')} {kind} key={json.dumps(key, ensure_ascii=False)[:120]}"


def describe_diff(got: list[dict[str, Any]], want: list[dict[str, Any]], events: int = 4, paths: int = 12) -> str:
    """A readable difference: counts per topic when they differ, then the first differences in delivery order
    (aligned, so one missing event does not make every later one differ): events missing from ours, extra in
    ours, and for an event that differs its index (ours/golden), topic and the JSON paths that differ."""
    lines = [f"{len(got)} events, golden {len(want)}"]
    ours, theirs = Counter(e.get("topic") for e in got), Counter(e.get("topic") for e in want)
    if ours != theirs:
        lines.append("events per topic (ours/golden): " + ", ".join(
            f"{t} {ours[t]}/{theirs[t]}" for t in sorted(set(ours) | set(theirs), key=str)))
    items: list[str] = []
    matcher = difflib.SequenceMatcher(a=serialized(got), b=serialized(want), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for k in range(pairs):
            diff = json_paths(got[i1 + k], want[j1 + k])
            items.append("\n".join([f"#{i1 + k} (golden #{j1 + k}) {label(want[j1 + k])} differs:",
                                    *(f"    {p}" for p in diff[:paths]),
                                    *([f"    ... {len(diff) - paths} more"] if len(diff) > paths else [])]))
        items += [f"#{i} extra in ours: {label(got[i])}" for i in range(i1 + pairs, i2)]
        items += [f"golden #{j} missing from ours: {label(want[j])}" for j in range(j1 + pairs, j2)]
    lines += items[:events]
    if len(items) > events:
        lines.append(f"... {len(items) - events} more differences")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# from the command line


@contextlib.contextmanager
def emulator(address: str | None, password: str | None) -> Iterator[Server]:
    from helpers.sqlserver import PASSWORD, SqlServerEmulator

    if address:
        running = SqlServerEmulator(password=password or PASSWORD)
        running.host, port = address.rsplit(":", 1)
        running.port = int(port)
        yield running
        return
    with SqlServerEmulator(capture_interval=0.1) as started:
        yield started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run SQL Server conformance scenarios through headwater run "
                                     "and compare with Debezium's golden events.")
    parser.add_argument("names", nargs="*", help=f"scenarios (default: all: {', '.join(scenario_names())})")
    parser.add_argument("--emulator", help="HOST:PORT of a running emulator (default: start one)")
    parser.add_argument("--password", help="its sa password")
    parser.add_argument("--workdir", type=Path, help="parent of the per-scenario work directories")
    parser.add_argument("--dry-run", action="store_true", help="only the SQL and the capture waits")
    parser.add_argument("--debezium", action="store_true", help="capture with Debezium's own connector instead "
                        "of headwater run (a check of the harness: must be EQUAL)")
    parser.add_argument("--dump", action="store_true", help="write ours.jsonl and golden.jsonl (normalized) "
                        "into each work directory")
    args = parser.parse_args(argv)
    names = args.names or scenario_names()
    unknown = sorted(set(names) - set(scenario_names()))
    if unknown:
        parser.error(f"no such scenario (with a golden file): {', '.join(unknown)}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the emulator and captures on the way out
    root = args.workdir or Path(tempfile.mkdtemp(prefix="hw-sqlserver-conformance-"))
    equal = 0
    with emulator(args.emulator, args.password) as server:
        for name in names:
            started = time.monotonic()
            try:
                start = None if args.dry_run else start_debezium if args.debezium else start_headwater_run
                result = run_scenario(name, server, root / name, start=start,
                                      log=lambda m: print(m, file=sys.stderr, flush=True))
            except Exception as exc:  # one broken scenario does not stop the others
                print(f"{name}: FAILED: {exc}", flush=True)
                continue
            if args.dump:
                for file, events in (("ours.jsonl", result.got), ("golden.jsonl", result.want)):
                    (result.workdir / file).write_text("".join(s + "\n" for s in serialized(events)), encoding="utf-8")
            equal += result.equal
            print(f"{result.report()}\n({time.monotonic() - started:.1f} s)", flush=True)
    print(f"sqlserver conformance: {equal}/{len(names)} scenarios {'settled' if args.dry_run else 'equal'}")
    return 0 if equal == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
