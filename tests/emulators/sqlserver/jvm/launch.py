"""Running JdbcProbe.java and DebeziumRunner.java from Python.

Both are single-file Java programs started with the source launcher (``java -cp JARS File.java``),
which compiles them in memory: no build step, but the JDK's ``jdk.compiler`` module must be there.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .classpath import DEBEZIUM_JARS, JDBC_JARS, Classpath, find_classpath

HERE = Path(__file__).resolve().parent
JDBC_PROBE = HERE / "JdbcProbe.java"
DEBEZIUM_RUNNER = HERE / "DebeziumRunner.java"
JAVA_SOURCES = (JDBC_PROBE, DEBEZIUM_RUNNER)


class JvmError(RuntimeError):
    """Java is missing or a Java program failed; the message carries its stderr tail."""


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise JvmError("no java on PATH (and no JAVA_HOME): install a JDK 17")
    return found


def source_launcher_problem() -> str | None:
    """Why ``java File.java`` cannot work here (no java, or a JRE without jdk.compiler); None when it can."""
    try:
        java = java_executable()
    except JvmError as e:
        return str(e)
    out = subprocess.run([java, "--list-modules"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return f"`java --list-modules` failed: {out.stderr.strip()[-500:]}"
    if not any(line.startswith("jdk.compiler@") for line in out.stdout.splitlines()):
        return "this Java has no jdk.compiler module (a JRE, not a JDK): single-file source launch needs a JDK"
    return None


def javac_executable() -> str | None:
    java = Path(java_executable())
    javac = java.with_name("javac")
    return str(javac) if javac.exists() else shutil.which("javac")


def java_command(source: Path, classpath: Classpath, args: Iterable[str], jvm_options: Iterable[str] = ()) -> list[str]:
    return [java_executable(), *jvm_options, "-cp", classpath.argument, str(source), *args]


def compile_sources(classpath: Classpath, out_dir: Path, sources: Iterable[Path] = JAVA_SOURCES) -> None:
    """``javac`` the programs against ``classpath`` (a check that they match the jars' API); JvmError on failure."""
    javac = javac_executable()
    if javac is None:
        raise JvmError("no javac next to java or on PATH")
    # -path: jars of the oracle venv name missing jars in their manifests
    cmd = [javac, "-Xlint:all,-path", "-Werror", "-d", str(out_dir), "-cp", classpath.argument, *map(str, sources)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise JvmError(f"javac failed ({classpath.describe()}):\n{res.stdout}{res.stderr}")


# ----------------------------------------------------------------------------------------------
# JdbcProbe


def run_jdbc_probe(server: str, password: str, commands: Iterable[Mapping[str, Any]], *,
                   url_properties: str = "", classpath: Classpath | None = None,
                   timeout: float = 180) -> list[dict[str, Any]]:
    """Run ``commands`` (see JdbcProbe.java) against ``server`` (HOST:PORT) and return its output lines, parsed.

    A connection failure comes back as one line ``{"connect": url, "error": {...}}`` (exit 2) rather than
    an exception, so that tests can assert login errors; anything else that fails raises JvmError.
    """
    cp = classpath or find_classpath(JDBC_JARS)
    with tempfile.TemporaryDirectory(prefix="jdbcprobe-") as tmp:
        script = Path(tmp) / "script.jsonl"
        script.write_text("".join(json.dumps(c) + "\n" for c in commands), encoding="utf-8")
        args = [server, password, str(script)] + ([url_properties] if url_properties else [])
        res = subprocess.run(java_command(JDBC_PROBE, cp, args), capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    if res.returncode == 2 and lines and "connect" in lines[-1]:
        return lines
    if res.returncode != 0:
        raise JvmError(f"JdbcProbe exited {res.returncode}:\n{res.stderr[-4000:]}")
    return lines


def parse_probe_script(commands: Iterable[Mapping[str, Any]], classpath: Classpath | None = None) -> list[Any]:
    """JdbcProbe's own reading of a script (``--parse-only``): checks the JSON reader without a server."""
    cp = classpath or find_classpath(JDBC_JARS)
    with tempfile.TemporaryDirectory(prefix="jdbcprobe-") as tmp:
        script = Path(tmp) / "script.jsonl"
        script.write_text("".join(json.dumps(c) + "\n" for c in commands), encoding="utf-8")
        res = subprocess.run(java_command(JDBC_PROBE, cp, ["--parse-only", str(script)]),
                             capture_output=True, text=True, timeout=180)
    if res.returncode != 0:
        raise JvmError(f"JdbcProbe --parse-only exited {res.returncode}:\n{res.stderr[-4000:]}")
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


# ----------------------------------------------------------------------------------------------
# DebeziumRunner


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    """A java.util.Properties file (keys and values escaped as Properties.load reads them)."""

    def esc(text: str, key: bool) -> str:
        out = []
        for i, ch in enumerate(text):
            if ch == "\\":
                out.append("\\\\")
            elif ch in "=:#!" or (ch == " " and (key or i == 0)):
                out.append("\\" + ch)
            elif ch == "\n":
                out.append("\\n")
            elif ord(ch) > 0x7E or ord(ch) < 0x20:
                out.append(f"\\u{ord(ch):04x}")
            else:
                out.append(ch)
        return "".join(out)

    path.write_text("".join(f"{esc(k, True)}={esc(str(v), False)}\n" for k, v in props.items()), encoding="ascii")


@dataclass
class RunnerResult:
    exit_code: int
    statuses: list[dict[str, Any]]
    events: list[dict[str, Any]]
    stderr_tail: str

    @property
    def finished(self) -> dict[str, Any] | None:
        return next((s for s in reversed(self.statuses) if s.get("status") == "finished"), None)

    @property
    def error(self) -> str | None:
        f = self.finished
        return None if f is None else f.get("error")


@dataclass
class DebeziumProcess:
    """One DebeziumRunner JVM: start it, wait for its status lines, stop it, read its events.

    ``workdir`` holds runner.properties, the engine's stderr log (engine.log) and, unless the
    properties say otherwise, offsets.dat and schema-history.dat — so a second DebeziumProcess on the
    same workdir resumes where the first stopped.
    """

    props: Mapping[str, str]
    workdir: Path
    out: Path
    classpath: Classpath | None = None
    max_events: int = 0
    idle_timeout: float = 0
    startup_timeout: int = 300
    append: bool = False
    jvm_options: tuple[str, ...] = ()
    statuses: list[dict[str, Any]] = field(default_factory=list)
    _proc: subprocess.Popen[str] | None = None
    _status_queue: queue.Queue[dict[str, Any] | None] = field(default_factory=queue.Queue)
    _log: IO[str] | None = None

    @property
    def log_file(self) -> Path:
        return self.workdir / "engine.log"

    def effective_properties(self) -> dict[str, str]:
        props = dict(self.props)
        props.setdefault("offset.storage.file.filename", str(self.workdir / "offsets.dat"))
        if props.get("schema.history.internal", "").endswith("FileSchemaHistory"):
            props.setdefault("schema.history.internal.file.filename", str(self.workdir / "schema-history.dat"))
        return props

    def start(self) -> DebeziumProcess:
        cp = self.classpath or find_classpath(DEBEZIUM_JARS)
        self.classpath = cp
        self.workdir.mkdir(parents=True, exist_ok=True)
        props_file = self.workdir / "runner.properties"
        write_properties(props_file, self.effective_properties())
        args = [str(props_file), str(self.out), "--startup-timeout", str(self.startup_timeout)]
        if self.max_events:
            args += ["--max-events", str(self.max_events)]
        if self.idle_timeout:
            args += ["--idle-timeout", str(self.idle_timeout)]
        if self.append:
            args.append("--append")
        self._log = open(self.log_file, "a", encoding="utf-8")  # closed in wait()
        self._proc = subprocess.Popen(java_command(DEBEZIUM_RUNNER, cp, args, self.jvm_options),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True)
        threading.Thread(target=self._read_statuses, name="dbz-runner-status", daemon=True).start()
        return self

    def _read_statuses(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                status = json.loads(line)
            except json.JSONDecodeError:
                status = {"status": "unparsed", "line": line}
            # kept as they arrive (not only when a waiter takes them): a caller that polls, such as the
            # conformance harness asking whether the connector streams yet, sees them without waiting
            self.statuses.append(status)
            self._status_queue.put(status)
        self._status_queue.put(None)

    def wait_for(self, *wanted: str, timeout: float = 300) -> dict[str, Any]:
        """Block until a status in ``wanted`` arrives; JvmError (with the log tail) if the runner finishes first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise JvmError(f"no {'/'.join(wanted)} status within {timeout} s; log tail:\n{self.log_tail()}")
            try:
                status = self._status_queue.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if status is None:
                raise JvmError(f"DebeziumRunner ended before {'/'.join(wanted)}: {self.statuses[-1:]}\n"
                               f"log tail:\n{self.log_tail()}")
            if status.get("status") in wanted:
                return status
            if status.get("status") == "finished":
                raise JvmError(f"DebeziumRunner finished before {'/'.join(wanted)}: {status}\n"
                               f"log tail:\n{self.log_tail()}")

    def stop(self) -> None:
        """Ask the runner to stop (offsets are committed); does not wait."""
        if self._proc is not None and self._proc.poll() is None and self._proc.stdin is not None:
            try:
                self._proc.stdin.write("stop\n")
                self._proc.stdin.flush()
            except BrokenPipeError:
                pass

    def wait(self, timeout: float = 120) -> RunnerResult:
        """Wait for the runner to end by itself (max events, idle) or after stop(); kill it past ``timeout``."""
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        while True:
            try:
                status = self._status_queue.get(timeout=5)
            except queue.Empty:
                break
            if status is None:
                break
        if self._log is not None:
            self._log.close()
        return RunnerResult(code, list(self.statuses), read_events(self.out), self.log_tail())

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def event_count(self) -> int:
        try:
            with open(self.out, encoding="utf-8") as f:
                return sum(1 for line in f if line.strip())
        except FileNotFoundError:
            return 0


def read_events(path: Path) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def run_debezium(props: Mapping[str, str], workdir: Path, out: Path, *, max_events: int = 0,
                 idle_timeout: float = 5, startup_timeout: int = 300, classpath: Classpath | None = None,
                 timeout: float = 600) -> RunnerResult:
    """Start DebeziumRunner and wait until it ends by itself (``max_events`` or ``idle_timeout``)."""
    proc = DebeziumProcess(props, workdir, out, classpath=classpath, max_events=max_events,
                           idle_timeout=idle_timeout, startup_timeout=startup_timeout).start()
    return proc.wait(timeout=timeout)
