"""Throwaway PostgreSQL 15 clusters with logical decoding, for the tests and for ``headwater demo``.

A cluster lives in its own directory (``<base>/headwater-pg-XXXX/{data,server.log}``), listens on
127.0.0.1 only, on a free port, and is removed by :meth:`ThrowawayPostgres.stop` (unless ``keep``).
Clusters still running when the interpreter exits are stopped by an ``atexit`` handler; clusters
whose owning process died without cleaning up (SIGKILL) are reaped by the next :meth:`start` that
uses the same base directory.

Running as root: ``initdb`` and ``pg_ctl`` refuse root, so they run as the ``postgres`` user through
``runuser -u postgres --``; the cluster directory is then owned by ``postgres`` and every parent of it
must be traversable by that user (``/tmp`` is; pytest's ``tmp_path`` is not).

What only the tests do to a cluster (psql scripts, reload, restart, slot waits) is in
``tests/helpers/postgres.py``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras
from psycopg2 import sql

PG_MAJOR = 15
DEFAULT_BIN_DIR = Path(f"/usr/lib/postgresql/{PG_MAJOR}/bin")
_DIR_PREFIX = "headwater-pg-"
_OWNER_FILE = "owner.pid"
_REQUIRED_BINARIES = ("initdb", "pg_ctl", "postgres", "psql")
_START_ATTEMPTS = 5
_REPLICATION_CONNECTIONS = (
    psycopg2.extras.LogicalReplicationConnection,
    psycopg2.extras.PhysicalReplicationConnection,
)
_BIND_ERRORS = ("could not bind", "Address already in use", "could not create any TCP/IP sockets")


class ThrowawayPostgresError(RuntimeError):
    """A throwaway cluster could not be created, started, stopped or queried."""


class PostgresNotFoundError(ThrowawayPostgresError):
    """The PostgreSQL server binaries are not installed."""


# --------------------------------------------------------------------------------------------------
# Binaries and privileges


def _has_binaries(bin_dir: Path) -> bool:
    return all(os.access(bin_dir / name, os.X_OK) for name in _REQUIRED_BINARIES)


@functools.cache
def _server_major(bin_dir: Path) -> int | None:
    out = subprocess.run([str(bin_dir / "postgres"), "-V"], capture_output=True, text=True).stdout
    m = re.search(r"\)\s+(\d+)", out)
    return int(m.group(1)) if m else None


def find_pg_bin() -> Path:
    """The PostgreSQL 15 bin dir: $HEADWATER_PG_BIN, /usr/lib/postgresql/15/bin or `pg_config --bindir`."""
    env = os.environ.get("HEADWATER_PG_BIN")
    if env:
        if _has_binaries(Path(env)):
            return Path(env)
        raise PostgresNotFoundError(
            f"HEADWATER_PG_BIN={env} does not contain {', '.join(_REQUIRED_BINARIES)}. Point it at a "
            f"PostgreSQL {PG_MAJOR} bin directory, or unset it and run scripts/setup.sh."
        )
    if _has_binaries(DEFAULT_BIN_DIR):
        return DEFAULT_BIN_DIR
    looked = [str(DEFAULT_BIN_DIR)]
    if pg_config := shutil.which("pg_config"):
        res = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        candidate = Path(res.stdout.strip())
        if res.returncode == 0 and res.stdout.strip():
            looked.append(f"{candidate} (pg_config --bindir)")
            if _has_binaries(candidate) and _server_major(candidate) == PG_MAJOR:
                return candidate
    raise PostgresNotFoundError(
        f"PostgreSQL {PG_MAJOR} server binaries not found (looked in: {', '.join(looked)}). "
        f"Run scripts/setup.sh (it installs postgresql-{PG_MAJOR}), or set HEADWATER_PG_BIN."
    )


@functools.cache
def _knows_setting(bin_dir: Path, name: str) -> bool:
    # --describe-config is allowed as root and needs no data directory.
    res = subprocess.run([str(bin_dir / "postgres"), "--describe-config"], capture_output=True, text=True)
    return any(line.split("\t", 1)[0] == name for line in res.stdout.splitlines())


def _is_root() -> bool:
    return os.geteuid() == 0


def _postgres_account() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise ThrowawayPostgresError(
            "running as root, but there is no 'postgres' user to run the server as. "
            "Run scripts/setup.sh (installing postgresql-15 creates it)."
        ) from None


def _as_postgres() -> list[str]:
    """Command prefix that runs a server program as the postgres user when we are root."""
    if not _is_root():
        return []
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    if not os.access(runuser, os.X_OK):
        raise ThrowawayPostgresError("running as root needs `runuser` (util-linux) to start PostgreSQL")
    _postgres_account()
    return [runuser, "-u", "postgres", "--"]


def _chown_to_postgres(path: Path) -> None:
    if _is_root():
        acct = _postgres_account()
        os.chown(path, acct.pw_uid, acct.pw_gid)


def _first_untraversable(path: Path) -> Path | None:
    """The first directory on the way to ``path`` that the postgres user cannot enter (root only)."""
    acct = _postgres_account()
    for p in reversed([path, *path.parents]):
        st = p.stat()
        if st.st_mode & 0o001:
            continue
        if st.st_uid == acct.pw_uid and st.st_mode & 0o100:
            continue
        if st.st_gid == acct.pw_gid and st.st_mode & 0o010:
            continue
        return p
    return None


# --------------------------------------------------------------------------------------------------
# Processes, ports, leaks


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (bind to port 0 and let the kernel choose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")  # a zombie is dead; only its parent can reap it
    except (FileNotFoundError, IndexError):
        return False
    except OSError:
        return True


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(entry.name))
    return kids


def _kill_postmaster(data_dir: Path, grace: float = 5.0) -> None:
    """Last resort: SIGQUIT (immediate shutdown), then SIGKILL the postmaster and its children."""
    pid = _postmaster_pid(data_dir)
    if pid is None or not _pid_alive(pid):
        return
    kids = _children(pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGQUIT)
    deadline = time.monotonic() + grace
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    for victim in [pid, *kids]:
        with contextlib.suppress(ProcessLookupError):
            if _pid_alive(victim):
                os.kill(victim, signal.SIGKILL)


def _reap_orphans(parent: Path) -> None:
    """Remove clusters under ``parent`` whose owning process is gone (a test run killed by SIGKILL)."""
    with contextlib.suppress(OSError):
        for d in parent.glob(_DIR_PREFIX + "*"):
            try:
                owner = int((d / _OWNER_FILE).read_text())
            except (OSError, ValueError):
                continue  # kept on purpose, or still being created
            if owner != os.getpid() and not _pid_alive(owner):
                _kill_postmaster(d / "data")
                shutil.rmtree(d, ignore_errors=True)


_live: set[ThrowawayPostgres] = set()
_live_lock = threading.Lock()


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        clusters = [c for c in _live if c._owner_pid == os.getpid()]  # not the parent's after a fork
    for cluster in clusters:
        with contextlib.suppress(Exception):
            cluster.stop()


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for PostgreSQL's programs: ours without PG* variables (PGHOST, PGSSLMODE, …
    would redirect the tools), C messages."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(LC_ALL="C.UTF-8", **extra)
    return env


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        value = "on" if value else "off"
    text = str(value)
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text  # already quoted
    return "'" + text.replace("'", "''") + "'"


def _dsn_value(value: Any) -> str:
    text = str(value)
    if text and not re.search(r"[\s'\\]", text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# --------------------------------------------------------------------------------------------------


class ThrowawayPostgres:
    """A private PostgreSQL 15 cluster: ``initdb`` + start on :meth:`start`, stop + delete on :meth:`stop`.

    ``settings`` override the defaults written to ``postgresql.conf`` (values are quoted for you, e.g.
    ``{"wal_level": "replica"}``). With ``password``, the ``postgres`` user gets that password and TCP
    connections need it (scram-sha-256); otherwise TCP connections are trusted. ``keep`` keeps the
    directory after :meth:`stop` (a later :meth:`start` restarts the same cluster).

    ``ssl`` turns SSL on: a mapping with ``cert`` and ``key`` (the server's certificate and key)
    and optionally ``ca`` (root certificate(s) for verifying client certificates), copied into the
    cluster so the server can read them. ``hba`` lines are put in ``pg_hba.conf`` before the
    default ones (e.g. ``"hostssl all certuser 127.0.0.1/32 cert"``).
    """

    host = "127.0.0.1"
    user = "postgres"

    def __init__(
        self,
        base_dir: str | Path | None = None,
        port: int | None = None,
        *,
        settings: Mapping[str, Any] | None = None,
        keep: bool = False,
        password: str | None = None,
        ssl: Mapping[str, str | Path] | None = None,
        hba: Sequence[str] = (),
    ):
        self.bin_dir = find_pg_bin()
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self._fixed_port = port is not None
        self.port: int = port if port is not None else free_port(self.host)
        self.settings = dict(settings or {})
        self.keep = keep
        self.password = password
        self.ssl = dict(ssl) if ssl else None
        self.hba = tuple(hba)
        self.root_dir: Path | None = None
        self._running = False
        self._owner_pid = os.getpid()
        self._lock = threading.RLock()

    @classmethod
    def reopen(cls, root_dir: str | Path, port: int | None = None) -> ThrowawayPostgres:
        """A handle on a cluster an earlier process created with ``keep=True`` (its ``root_dir``),
        to :meth:`start` again on ``port`` (a free one if None); the cluster is kept on :meth:`stop`.
        A server still running there (its owner was killed) is stopped first."""
        pg = cls(port=port, keep=True)
        root = Path(root_dir).resolve()
        if not (root / "data" / "PG_VERSION").is_file():
            raise ThrowawayPostgresError(f"{root} holds no cluster made by ThrowawayPostgres (no data/PG_VERSION)")
        pg.root_dir = root
        pg._stop_server()
        pg._write_settings()
        return pg

    # -- paths ----------------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        if self.root_dir is None:
            raise ThrowawayPostgresError("the cluster has not been started")
        return self.root_dir / "data"

    @property
    def log_file(self) -> Path:
        if self.root_dir is None:
            raise ThrowawayPostgresError("the cluster has not been started")
        return self.root_dir / "server.log"

    @property
    def running(self) -> bool:
        return self._running

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return f"<ThrowawayPostgres {self.host}:{self.port} {state} {self.root_dir}>"

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> ThrowawayPostgres:
        """Create the cluster (first time) and start it; a no-op when it is already running."""
        with self._lock:
            if self._running:
                return self
            created = self.root_dir is None
            if created:
                self._create()
            try:
                self._start_server()
            except BaseException:
                if created:  # never delete a kept cluster because it failed to start again
                    self._teardown()
                raise
            self._running = True
            with _live_lock:
                _live.add(self)
            return self

    def stop(self) -> None:
        """``pg_ctl -m fast stop`` (escalating to signals), then delete the directory unless ``keep``."""
        with self._lock:
            if self.root_dir is None:
                return
            try:
                self._stop_server()
            finally:
                self._running = False
                with _live_lock:
                    _live.discard(self)
                if not self.keep:
                    self._teardown()

    def __enter__(self) -> ThrowawayPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- connecting ---------------------------------------------------------------------------
    def dsn(self, dbname: str = "postgres", **params: Any) -> str:
        """A libpq keyword DSN; ``params`` add or override keywords (e.g. ``password="wrong"``)."""
        parts: dict[str, Any] = {"host": self.host, "port": self.port, "user": self.user, "dbname": dbname}
        if self.password is not None:
            parts["password"] = self.password
        parts.update(params)
        return " ".join(f"{key}={_dsn_value(value)}" for key, value in parts.items())

    def connect(self, dbname: str = "postgres", autocommit: bool = True, **kwargs: Any):
        """A psycopg2 connection; ``kwargs`` go to ``psycopg2.connect`` (e.g. ``connection_factory``)."""
        conn = psycopg2.connect(self.dsn(dbname), **kwargs)
        if not isinstance(conn, _REPLICATION_CONNECTIONS):  # those are always autocommit, read-only
            conn.autocommit = autocommit
        return conn

    def create_database(self, name: str) -> None:
        self._admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def server_log(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the server log (for error messages)."""
        try:
            text = self.log_file.read_text(errors="replace")
        except (OSError, ThrowawayPostgresError):
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # -- internals ----------------------------------------------------------------------------
    def _admin(self, statement: sql.Composable | str) -> Any:
        """Run one statement on a fresh autocommit connection; return the first column of the first row."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
                return cur.fetchone()[0] if cur.description else None
        finally:
            conn.close()

    def _run(self, cmd: list[str], what: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                _as_postgres() + cmd,
                capture_output=True,
                text=True,
                env=clean_env(),
                cwd=self.root_dir,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            raise ThrowawayPostgresError(f"{what} timed out after {timeout:.0f} s\n{self.server_log()}") from e

    def _pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        res = self._run([str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), *args], f"pg_ctl {args[0]}")
        if check and res.returncode != 0:
            raise ThrowawayPostgresError(
                f"pg_ctl {args[0]} failed (exit {res.returncode}): {(res.stderr or res.stdout).strip()}\n"
                f"--- server log ---\n{self.server_log()}"
            )
        return res

    def _create(self) -> None:
        parent = self.base_dir if self.base_dir is not None else Path(tempfile.gettempdir())
        parent.mkdir(parents=True, exist_ok=True)
        _reap_orphans(parent)
        self.root_dir = Path(tempfile.mkdtemp(prefix=_DIR_PREFIX, dir=parent)).resolve()
        try:
            os.chmod(self.root_dir, 0o755)
            if not self.keep:
                (self.root_dir / _OWNER_FILE).write_text(str(os.getpid()))
            if _is_root():
                blocked = _first_untraversable(self.root_dir)
                if blocked is not None:
                    raise ThrowawayPostgresError(
                        f"the postgres user cannot enter {blocked} "
                        f"(mode {blocked.stat().st_mode & 0o777:o}), "
                        f"so it cannot use a cluster under {parent}. Use a base_dir whose parents are all "
                        "world-traversable (e.g. under /tmp), or leave base_dir unset."
                    )
                _chown_to_postgres(self.root_dir)
            self.data_dir.mkdir(mode=0o700)
            _chown_to_postgres(self.data_dir)
            self._initdb()
            self._write_config()
        except BaseException:
            self._teardown()
            raise

    def _initdb(self) -> None:
        cmd = [
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            self.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
            "--no-instructions",
        ]
        pwfile = self.root_dir / "pwfile"
        if self.password is not None:
            pwfile.write_text(self.password + "\n")
            os.chmod(pwfile, 0o600)
            _chown_to_postgres(pwfile)
            cmd.append(f"--pwfile={pwfile}")
        try:
            res = self._run(cmd, "initdb")
        finally:
            pwfile.unlink(missing_ok=True)
        if res.returncode != 0:
            raise ThrowawayPostgresError(f"initdb failed (exit {res.returncode}):\n{res.stderr.strip()}")

    def _write_config(self) -> None:
        method = "trust" if self.password is None else "scram-sha-256"
        if self.ssl:
            for role, name in (("cert", "server.crt"), ("key", "server.key"), ("ca", "root.crt")):
                if self.ssl.get(role):
                    target = self.data_dir / name
                    shutil.copyfile(self.ssl[role], target)
                    os.chmod(target, 0o600)  # the server refuses a key others can read
                    _chown_to_postgres(target)
        extra = "".join(f"{line}\n" for line in self.hba)
        (self.data_dir / "pg_hba.conf").write_text(
            "# written by headwater.embedded.postgres\n"
            f"{extra}"
            "local  all          all                 trust\n"
            "local  replication  all                 trust\n"
            f"host   all          all  127.0.0.1/32   {method}\n"
            f"host   replication  all  127.0.0.1/32   {method}\n"
        )
        with (self.data_dir / "postgresql.conf").open("a") as f:
            f.write("\n# throwaway cluster settings (headwater.embedded.postgres)\ninclude 'headwater.conf'\n")
        self._write_settings()

    def _write_settings(self) -> None:
        socket_dir = str(self.data_dir)
        if len(socket_dir) > 90:  # unix socket paths are limited to 107 bytes; TCP is used anyway
            socket_dir = ""
        settings: dict[str, Any] = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": socket_dir,
            "wal_level": "logical",
            "max_replication_slots": 20,
            "max_wal_senders": 20,
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "TimeZone": "UTC",
            "log_timezone": "UTC",
        }
        # New in 15.20 (default 'pgoutput, test_decoding'); on 15.18 an unknown name stops the server.
        if _knows_setting(self.bin_dir, "output_plugin_libraries"):
            settings["output_plugin_libraries"] = "pgoutput, test_decoding, wal2json, decoderbufs"
        if self.ssl:
            settings.update(ssl="on", ssl_cert_file="server.crt", ssl_key_file="server.key")
            if self.ssl.get("ca"):
                settings["ssl_ca_file"] = "root.crt"
        merged = {name.lower(): (name, value) for name, value in settings.items()}
        merged.update({name.lower(): (name, value) for name, value in self.settings.items()})
        merged["port"] = ("port", self.port)
        path = self.data_dir / "headwater.conf"
        path.write_text("".join(f"{name} = {_conf_value(value)}\n" for name, value in merged.values()))
        _chown_to_postgres(path)

    def _start_server(self) -> None:
        for attempt in range(1, _START_ATTEMPTS + 1):
            log_size = self.log_file.stat().st_size if self.log_file.exists() else 0
            res = self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.log_file), check=False)
            if res.returncode == 0:
                return
            _kill_postmaster(self.data_dir)
            with self.log_file.open(errors="replace") as f:
                f.seek(log_size)
                new_log = f.read()
            if self._fixed_port or attempt == _START_ATTEMPTS or not any(e in new_log for e in _BIND_ERRORS):
                raise ThrowawayPostgresError(
                    f"PostgreSQL did not start on {self.host}:{self.port} (pg_ctl exit {res.returncode}): "
                    f"{(res.stderr or res.stdout).strip()}\n--- server log ---\n{self.server_log()}"
                )
            self.port = free_port(self.host)  # somebody took the port: try another one
            self._write_settings()

    def _stop_server(self) -> None:
        pid = _postmaster_pid(self.data_dir)
        if pid is None or not _pid_alive(pid):
            return
        try:
            res = self._pg_ctl("stop", "-m", "fast", "-w", "-t", "30", check=False)
        except ThrowawayPostgresError:
            res = None
        if res is None or res.returncode != 0 or _pid_alive(pid):
            _kill_postmaster(self.data_dir)

    def _teardown(self) -> None:
        if self.root_dir is None:
            return
        _kill_postmaster(self.data_dir)
        shutil.rmtree(self.root_dir, ignore_errors=True)
        self.root_dir = None


# --------------------------------------------------------------------------------------------------
# Replication slots (the tests and benchmarks clean up with this)


def drop_replication_slot(conn, slot_name: str, timeout: float = 10.0, *, terminate: bool = True) -> None:
    """Drop a slot, retrying while it is still "active" (its walsender may still be exiting).

    After ``timeout`` the consumer is terminated (``terminate=True``) and the drop tried once more.
    A missing slot is not an error.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                    (slot_name,),
                )
            if not conn.autocommit:
                conn.commit()
            return
        except psycopg2.errors.ObjectInUse:
            if not conn.autocommit:
                conn.rollback()
            if time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            if not terminate:
                raise
            terminate = False
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT pg_terminate_backend(active_pid, 5000) FROM pg_replication_slots "
                    "WHERE slot_name = %s AND active_pid IS NOT NULL",
                    (slot_name,),
                )
            deadline = time.monotonic() + timeout
