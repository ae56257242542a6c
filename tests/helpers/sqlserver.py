"""The SQL Server emulator (tests/emulators/sqlserver) for tests: as a process started through its
``serve.py`` (what a user of the emulator runs; can be killed and restarted on the same data), or
in this process on a PostgreSQL the test already has (cheaper; no restart)."""

from __future__ import annotations

import contextlib
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parents[1]
SERVE = TESTS_DIR / "emulators" / "sqlserver" / "serve.py"
PASSWORD = "Headwater-Test-1"


class SqlServerEmulator:
    """``serve.py`` in a subprocess. ``data_dir`` keeps the backing PostgreSQL across restarts."""

    def __init__(self, *, password: str = PASSWORD, data_dir: Path | None = None,
                 capture_interval: float = 0.2, startup_timeout: float = 120):
        self.password = password
        self.data_dir = data_dir
        self.capture_interval = capture_interval
        self.startup_timeout = startup_timeout
        self.host = "127.0.0.1"
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self._log = Path(tempfile.mkstemp(prefix="sqlserver-emulator-", suffix=".log")[1])

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> SqlServerEmulator:
        # port 0 the first time (a free one); a restart listens on the same port, as a restarted server does
        cmd = [sys.executable, str(SERVE), "--port", str(self.port), "--password", self.password,
               "--capture-interval", str(self.capture_interval), "--log-level", "INFO"]
        if self.data_dir is not None:
            cmd += ["--data-dir", str(self.data_dir)]
        with self._log.open("a") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], self.startup_timeout)
        line = self.proc.stdout.readline().strip() if ready else ""
        if not line:
            self.kill()
            raise RuntimeError(f"the SQL Server emulator did not start:\n{self.log()}")
        self.host, port = line.rsplit(":", 1)
        self.port = int(port)
        return self

    def log(self) -> str:
        return self._log.read_text(errors="replace")

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM and wait: the emulator stops its capture jobs and the backing PostgreSQL."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL, as a crash (a kept PostgreSQL is left running: ``start`` reaps and reuses it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def connect(self, database: str = "master", autocommit: bool = True) -> Any:
        """A connection through mssql-python (Microsoft's driver; ODBC 18 without TLS)."""
        return connect(self.host, self.port, self.password, database, autocommit)

    def execute(self, sql: str, database: str = "master", params: Sequence[Any] = ()) -> list[tuple]:
        """Run one batch; the rows of its last result set (or [])."""
        with contextlib.closing(self.connect(database)) as conn:
            cur = conn.cursor()
            cur.execute(sql, *params)
            rows: list[tuple] = []
            while True:
                if cur.description is not None:
                    rows = [tuple(r) for r in cur.fetchall()]
                if not cur.nextset():
                    return rows

    def __enter__(self) -> SqlServerEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if exc[0] is None:
            self._log.unlink(missing_ok=True)


def connect(host: str, port: int, password: str = PASSWORD, database: str = "master",
            autocommit: bool = True) -> Any:
    """mssql-python to the emulator (which offers no TLS: ``Encrypt=no``)."""
    import mssql_python

    conn = mssql_python.connect(f"Server={host},{port};UID=sa;PWD={{{password}}};Database={database};"
                                "Encrypt=no;TrustServerCertificate=yes")
    conn.autocommit = autocommit
    return conn


@contextlib.contextmanager
def emulator_in_process(pg: Any, *, password: str = PASSWORD, capture_interval: float = 0.2) -> Iterator[Any]:
    """The emulator's engine and TDS server on ``pg`` (a running ThrowawayPostgres), in this
    process; yields the EmulatorServer with ``.address`` set to ``(host, port)``."""
    if str(TESTS_DIR) not in sys.path:
        sys.path.insert(0, str(TESTS_DIR))
    from emulators.sqlserver.engine.server import EmulatorServer
    from emulators.sqlserver.tds.server import TdsServer

    engine = EmulatorServer(pg, password, capture_interval=capture_interval)
    server = TdsServer(engine, host="127.0.0.1", port=0)
    try:
        engine.address = server.start()
        yield engine
    finally:
        server.stop()
        engine.close()


def wait_for(condition: Any, what: str, timeout: float = 30, poll: float = 0.1) -> Any:
    """Poll ``condition()`` until it returns something truthy (which is returned)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)


__all__ = ["PASSWORD", "SqlServerEmulator", "connect", "emulator_in_process", "wait_for"]
