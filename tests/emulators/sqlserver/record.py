"""Record golden change events: a T-SQL scenario, run on the emulator, captured by Debezium's own connector.

    .venv/bin/python tests/emulators/sqlserver/record.py --scenario tests/emulators/sqlserver/scenarios/basic_crud \\
        --out tests/conformance/sqlserver/basic_crud/ [--emulator HOST:PORT --password PW] [--jars oracle|maven]

One run:
  1. start the emulator (serve.py, a fresh backing PostgreSQL) unless --emulator names a running one;
  2. run setup.sql through python-tds, batch by batch (``GO`` lines), in autocommit mode;
  3. wait until the capture job has caught up (as Debezium's tests do: ``sys.fn_cdc_get_max_lsn()``
     is not NULL; and the last transaction LSN in ``cdc.lsn_time_mapping`` has stopped moving);
  4. start DebeziumRunner.java (the connector in Debezium's embedded engine) with props.txt and wait
     until it streams (i.e. the snapshot is done);
  5. run workload.sql (``--@wait`` lines: wait for capture and for the connector to be quiet);
  6. wait for capture, then until no record came for ``record.quiet.seconds`` (props.txt, default 5);
     stop the connector;
  7. write ``events.jsonl`` (run-dependent fields masked, see :func:`normalize_event`) and
     ``PROVENANCE.md`` (versions, command, effective properties).

Jars: ``--jars oracle`` (default) uses the oracle virtualenv's Debezium 3.6.3 when it exists — the
version the PostgreSQL golden files were recorded with — else Maven's 3.6.1 (jvm/classpath.py).
Each step is a function of its own so that it can be tested without the others.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parents[2]
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from conformance.normalize import normalize_event as _normalize_common  # noqa: E402
from emulators.sqlserver.jvm.classpath import DEBEZIUM_JARS, Classpath, find_classpath  # noqa: E402
from emulators.sqlserver.jvm.launch import DebeziumProcess, RunnerResult  # noqa: E402

HERE = Path(__file__).resolve().parent
SERVE = HERE / "serve.py"
REPO_ROOT = TESTS_DIR.parent
DEFAULT_PASSWORD = "Headwater-Emulator-1"
DEFAULT_QUIET = 5.0
OPTION_PREFIX = "record."
REVIEW_FILE = "REVIEW.md"  # optional, in a scenario folder: copied into PROVENANCE.md


class RecordError(RuntimeError):
    """A step of the recording failed; the message says which and why."""


# ----------------------------------------------------------------------------------------------
# scenario files


class Wait:
    """A ``--@wait`` line of a workload: wait for capture and a quiet connector before going on."""

    def __repr__(self) -> str:
        return "WAIT"


WAIT = Wait()
_GO = re.compile(r"^\s*GO(?:\s+(\d+))?\s*(?:--.*)?$", re.IGNORECASE)
_WAIT = re.compile(r"^\s*--@wait\s*$")


def split_batches(text: str) -> list[str | Wait]:
    """T-SQL text → batches, split at lines holding only ``GO`` (``GO n`` repeats the batch n times, as sqlcmd
    does); a ``--@wait`` line ends the current batch and becomes :data:`WAIT`. Blank batches are dropped."""
    items: list[str | Wait] = []
    current: list[str] = []

    def flush(times: int = 1) -> None:
        batch = "\n".join(current).strip()
        current.clear()
        if batch and not all(line.strip().startswith("--") or not line.strip() for line in batch.splitlines()):
            items.extend([batch] * times)

    for line in text.splitlines():
        go = _GO.match(line)
        if go:
            flush(int(go.group(1) or 1))
        elif _WAIT.match(line):
            flush()
            items.append(WAIT)
        else:
            current.append(line)
    flush()
    return items


_PLACEHOLDER = re.compile(r"\$\{([A-Z_]+)\}")


def read_properties(text: str, substitutions: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """props.txt → (connector properties, record.py options). ``${NAME}`` placeholders are replaced from
    ``substitutions`` (an unknown one is an error); ``#``/``!`` lines are comments; ``record.*`` keys are
    options for this tool, returned without the prefix."""
    props: dict[str, str] = {}
    options: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        if "=" not in line:
            raise RecordError(f"props line {lineno}: expected key=value, got {raw!r}")
        key, value = (part.strip() for part in line.split("=", 1))

        def substitute(m: re.Match[str], lineno: int = lineno) -> str:
            if m.group(1) not in substitutions:
                raise RecordError(f"props line {lineno}: unknown placeholder ${{{m.group(1)}}}")
            return substitutions[m.group(1)]

        value = _PLACEHOLDER.sub(substitute, value)
        if key.startswith(OPTION_PREFIX):
            options[key[len(OPTION_PREFIX):]] = value
        else:
            props[key] = value
    return props, options


def database_names(props: Mapping[str, str]) -> list[str]:
    names = [n.strip() for n in props.get("database.names", "").split(",") if n.strip()]
    if not names:
        raise RecordError("props.txt has no database.names")
    return names


@dataclass(frozen=True)
class Scenario:
    directory: Path
    setup: list[str | Wait]
    workload: list[str | Wait]
    props_text: str

    @property
    def name(self) -> str:
        return self.directory.name

    @classmethod
    def load(cls, directory: Path) -> Scenario:
        def read(name: str, required: bool) -> str:
            path = directory / name
            if not path.exists():
                if required:
                    raise RecordError(f"scenario {directory} has no {name}")
                return ""
            return path.read_text(encoding="utf-8")

        return cls(directory, split_batches(read("setup.sql", True)), split_batches(read("workload.sql", False)),
                   read("props.txt", True))


# ----------------------------------------------------------------------------------------------
# the emulator and T-SQL


@dataclass
class Emulator:
    address: str  # HOST:PORT
    process: subprocess.Popen[str] | None = None

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_emulator(password: str, log_file: Path, timeout: float = 180,
                   command: list[str] | None = None, trace_statements: bool = False) -> Emulator:
    """Start serve.py on a free port; its first stdout line is HOST:PORT. stderr goes to ``log_file`` (with
    ``trace_statements``, every request the clients send, too)."""
    cmd = command or [sys.executable, str(SERVE), "--port", "0", "--password", password,
                      *(["--trace-statements"] if trace_statements else [])]
    log = open(log_file, "a", encoding="utf-8")  # the child keeps writing to it after we return
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline() if proc.stdout else ""),
                              daemon=True)
    reader.start()
    reader.join(timeout)
    address = first[0].strip() if first else ""
    if not re.fullmatch(r"[\w.\-\[\]:]+:\d+", address):
        proc.kill()
        proc.wait()
        tail = log_file.read_text(encoding="utf-8", errors="replace")[-3000:] if log_file.exists() else ""
        raise RecordError(f"the emulator did not print HOST:PORT within {timeout} s (got {address!r}); "
                          f"log {log_file}:\n{tail}")
    return Emulator(address, proc)


def connect_tsql(emulator: Emulator, password: str, database: str = "master") -> Any:
    import pytds  # python-tds: the project's T-SQL client for setup work

    return pytds.connect(dsn=emulator.host, port=emulator.port, user="sa", password=password, database=database,
                         autocommit=True, login_timeout=30)


def run_batches(conn: Any, batches: Iterable[str | Wait], on_wait: Callable[[], None] | None = None,
                what: str = "SQL") -> int:
    """Execute each batch on ``conn`` (results drained); WAIT items call ``on_wait``. Returns the batch count."""
    count = 0
    for item in batches:
        if isinstance(item, Wait):
            if on_wait is not None:
                on_wait()
            continue
        count += 1
        try:
            # a cursor per batch: python-tds closes a connection's previous cursor when another one is
            # opened (no MARS), and ``on_wait`` queries the same connection
            cur = conn.cursor()
            cur.execute(item)
            while cur.nextset():
                pass
        except Exception as e:
            raise RecordError(f"{what} batch {count} failed: {e}\n--- batch ---\n{item}") from e
    return count


def capture_position(conn: Any, database: str) -> tuple[bytes | None, bytes | None]:
    """(sys.fn_cdc_get_max_lsn(), the last real transaction's start_lsn) of ``database``."""
    cur = conn.cursor()
    quoted = "[" + database.replace("]", "]]") + "]"
    cur.execute(f"SELECT {quoted}.sys.fn_cdc_get_max_lsn()")
    max_lsn = cur.fetchone()[0]
    cur.execute(f"SELECT MAX(start_lsn) FROM {quoted}.cdc.lsn_time_mapping WHERE tran_id <> 0x00")
    last_tx = cur.fetchone()[0]
    return max_lsn, last_tx


def wait_for_capture(read_position: Callable[[], list[tuple[bytes | None, bytes | None]]], *,
                     settle: float = 2.0, timeout: float = 120, poll: float = 0.25) -> None:
    """Wait until every database has a max LSN and its last transaction LSN stayed the same for ``settle`` s."""
    deadline = time.monotonic() + timeout
    last: list[Any] | None = None
    stable_since = time.monotonic()
    while True:
        positions = read_position()
        ready = all(max_lsn is not None for max_lsn, _ in positions)
        marks = [tx for _, tx in positions]
        now = time.monotonic()
        if marks != last:
            last, stable_since = marks, now
        elif ready and now - stable_since >= settle:
            return
        if now > deadline:
            raise RecordError(f"the capture job did not catch up within {timeout} s (positions {positions})")
        time.sleep(poll)


def wait_quiet(count: Callable[[], int], quiet: float, timeout: float = 300, poll: float = 0.2) -> int:
    """Wait until ``count()`` has not changed for ``quiet`` seconds; returns the final count."""
    deadline = time.monotonic() + timeout
    last = count()
    since = time.monotonic()
    while True:
        time.sleep(poll)
        now_count = count()
        now = time.monotonic()
        if now_count != last:
            last, since = now_count, now
        elif now - since >= quiet:
            return last
        if now > deadline:
            raise RecordError(f"events kept coming for {timeout} s ({last} so far)")


# ----------------------------------------------------------------------------------------------
# output


NOTIFICATION_SCHEMA = "io.debezium.connector.common.Notification"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _mask_notification(event: dict[str, Any]) -> None:
    """A notification record (notification.enabled.channels=sink): its ``timestamp`` is the clock's, its ``id`` a
    random UUID unless the notification answers a signal (then it is the signal's id, kept), and the key order of
    its ``additional_data`` map varies (sorted here)."""
    value = event.get("value")
    if not (isinstance(value, dict) and (value.get("schema") or {}).get("name") == NOTIFICATION_SCHEMA):
        return
    payload = value.get("payload")
    key = event.get("key")
    key_payload = key.get("payload") if isinstance(key, dict) and "schema" in key else key
    for part in (payload, key_payload):
        if isinstance(part, dict) and isinstance(part.get("id"), str) and _UUID.fullmatch(part["id"]):
            part["id"] = "<uuid>"
    if isinstance(payload, dict) and payload.get("timestamp") is not None:
        payload["timestamp"] = "<ts>"
    if isinstance(payload, dict) and isinstance(payload.get("additional_data"), dict):
        # a Connect map built from a java.util.HashMap: its key order changes from run to run
        payload["additional_data"] = dict(sorted(payload["additional_data"].items()))


_WINDOW_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-(open|close)")


def _mask_window_tombstone(event: dict[str, Any]) -> None:
    """The tombstone after an insert_delete watermark's DELETE: its key is the window row's random id (the shared
    masking only recognises watermark rows by their value)."""
    if event.get("value") is not None:
        return
    key = event.get("key")
    key_payload = key.get("payload") if isinstance(key, dict) and "schema" in key else key
    if isinstance(key_payload, dict) and isinstance(key_payload.get("id"), str):
        match = _WINDOW_ID.fullmatch(key_payload["id"])
        if match:
            key_payload["id"] = "<window>-" + match.group(1)


def normalize_event(event: dict[str, Any]) -> dict[str, Any]:
    """The shared conformance masking (conformance/normalize.py: timestamps, versions, transaction ids, the
    runId header, incremental-snapshot watermark rows) with the database name kept (each scenario names its
    own), plus SQL Server's own run-dependent source fields: ``commit_lsn`` and ``change_lsn`` (LSNs of the
    backing store's log), the clock and random ids of notification records, and the random ids of the tombstones
    after insert_delete watermark rows."""
    event = _normalize_common(event, keep_db=True)
    _mask_notification(event)
    _mask_window_tombstone(event)
    value = event.get("value")
    payload = value.get("payload") if isinstance(value, dict) and "schema" in value else value
    if isinstance(payload, dict) and isinstance(payload.get("source"), dict):
        source = payload["source"]
        for field in ("commit_lsn", "change_lsn"):
            if source.get(field) is not None:
                source[field] = "<lsn>"
    return event


def write_events(path: Path, events: Iterable[dict[str, Any]]) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for event in events:
            f.write(json.dumps(normalize_event(event), ensure_ascii=False, separators=(",", ":")) + "\n")
            n += 1
    return n


def masked(props: Mapping[str, str]) -> dict[str, str]:
    return {k: ("***" if "password" in k else v) for k, v in props.items()}


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "tests/emulators"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{rev or 'unknown'}{' (emulator files modified)' if dirty else ''}"


def provenance(*, scenario: Scenario, classpath: Classpath, command: list[str], props: Mapping[str, str],
               events: list[dict[str, Any]], emulator: str, started: dt.datetime) -> str:
    topics = Counter(e.get("topic") for e in events)
    where = scenario.directory
    if where.is_relative_to(REPO_ROOT):
        where = where.relative_to(REPO_ROOT)
    lines = [
        f"# Provenance: {scenario.name}",
        "",
        f"Recorded {started.strftime('%Y-%m-%d %H:%M UTC')} by `tests/emulators/sqlserver/record.py` from the "
        f"scenario `{where}`: setup.sql, then Debezium's own SQL Server connector (embedded engine, JSON "
        "converters with schemas) through its snapshot, then workload.sql while it streamed.",
        "",
        f"- Debezium SQL Server connector: {classpath.debezium_version} ({classpath.origin} jars)",
        f"- Microsoft JDBC driver: mssql-jdbc {classpath.mssql_jdbc_version}",
        f"- Server: the SQL Server emulator (tests/emulators/sqlserver) at revision {git_revision()} ({emulator})",
        f"- Command: `{shlex.join(command)}`",
        f"- Events: {len(events)} ({', '.join(f'{t}: {n}' for t, n in sorted(topics.items()))})",
        "",
        "`events.jsonl` holds one record per line in delivery order, `{\"topic\",\"key\",\"value\",\"headers\"}`, "
        "with run-dependent fields masked (record.py's normalize_event: timestamps, source.version, "
        "commit_lsn/change_lsn, transaction ids, the runId header, incremental-snapshot watermark ids and data, "
        "notification timestamps and random ids; notification additional_data sorted by key).",
        "",
        "Effective connector properties:",
        "",
        "```",
        *(f"{k}={v}" for k, v in sorted(masked(props).items())),
        "```",
        "",
    ]
    review = scenario.directory / REVIEW_FILE
    if review.is_file():  # how the events were checked against SQL Server's and Debezium's behaviour
        lines += [f"## Review (from the scenario's {REVIEW_FILE})", "", review.read_text(encoding="utf-8").strip(), ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# one recording


@dataclass
class Recording:
    result: RunnerResult
    props: dict[str, str]
    classpath: Classpath


def record(scenario: Scenario, out_dir: Path, *, emulator: Emulator, password: str, workdir: Path,
           prefer: str = "oracle", startup_timeout: int = 300, command: list[str] | None = None,
           log: Callable[[str], None] = print) -> Recording:
    """Run ``scenario`` against ``emulator`` and write events.jsonl and PROVENANCE.md into ``out_dir``."""
    started = dt.datetime.now(dt.UTC)
    props, options = read_properties(scenario.props_text, {"HOST": emulator.host, "PORT": str(emulator.port),
                                                          "PASSWORD": password, "WORKDIR": str(workdir)})
    quiet = float(options.get("quiet.seconds", DEFAULT_QUIET))
    databases = database_names(props)
    classpath = find_classpath(DEBEZIUM_JARS, prefer=prefer)
    log(f"record: {scenario.name}: {classpath.describe()}; emulator {emulator.address}; workdir {workdir}")

    conn = connect_tsql(emulator, password)
    try:
        def positions() -> list[tuple[bytes | None, bytes | None]]:
            return [capture_position(conn, db) for db in databases]

        n = run_batches(conn, scenario.setup, what="setup.sql")
        log(f"record: setup.sql: {n} batches; waiting for the capture job")
        wait_for_capture(positions)
        raw = workdir / "raw-events.jsonl"
        runner = DebeziumProcess(props, workdir, raw, classpath=classpath, startup_timeout=startup_timeout).start()
        try:
            runner.wait_for("streaming-connected", timeout=startup_timeout)
            log(f"record: snapshot done ({runner.event_count()} records); running workload.sql")

            def settle() -> None:
                wait_for_capture(positions)
                wait_quiet(runner.event_count, quiet)

            n = run_batches(conn, scenario.workload, on_wait=settle, what="workload.sql")
            log(f"record: workload.sql: {n} batches; waiting for the last records")
            settle()
        finally:
            runner.stop()
        result = runner.wait()
    finally:
        conn.close()
    if result.exit_code != 0:
        raise RecordError(f"DebeziumRunner exited {result.exit_code}: {result.error}\n{result.stderr_tail}")
    out_dir.mkdir(parents=True, exist_ok=True)
    count = write_events(out_dir / "events.jsonl", result.events)
    origin = "started by record.py" if emulator.process else "an emulator already running"
    text = provenance(scenario=scenario, classpath=classpath, command=command or sys.argv, props=props,
                      events=result.events, emulator=origin, started=started)
    (out_dir / "PROVENANCE.md").write_text(text, encoding="utf-8")
    log(f"record: wrote {count} events to {out_dir / 'events.jsonl'}")
    return Recording(result, props, classpath)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", type=Path, required=True, help="folder with setup.sql, workload.sql, props.txt")
    parser.add_argument("--out", type=Path, required=True, help="folder for events.jsonl and PROVENANCE.md")
    parser.add_argument("--emulator", help="HOST:PORT of a running emulator (default: start one)")
    parser.add_argument("--password", default=DEFAULT_PASSWORD, help="the sa password (of --emulator, or to start)")
    parser.add_argument("--jars", choices=("oracle", "maven"), default="oracle",
                        help="preferred jar set (falls back to the other): oracle = Debezium 3.6.3, maven = 3.6.1")
    parser.add_argument("--workdir", type=Path, help="offsets, schema history, logs (default: a new temp dir)")
    parser.add_argument("--startup-timeout", type=int, default=300)
    parser.add_argument("--trace-statements", action="store_true",
                        help="the emulator started here logs every request (SQL, RPC parameters) to emulator.log")
    args = parser.parse_args(argv)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"record-{args.scenario.name}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    scenario = Scenario.load(args.scenario.resolve())
    emulator = (Emulator(args.emulator) if args.emulator
                else start_emulator(args.password, workdir / "emulator.log", trace_statements=args.trace_statements))
    try:
        record(scenario, args.out, emulator=emulator, password=args.password, workdir=workdir, prefer=args.jars,
               startup_timeout=args.startup_timeout, command=[Path(sys.argv[0]).name, *sys.argv[1:]])
    except RecordError as e:
        print(f"record: FAILED: {e}\n(workdir {workdir})", file=sys.stderr)
        return 1
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
