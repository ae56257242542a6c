"""What the tests do to a throwaway PostgreSQL cluster beyond starting and connecting to it: run
SQL scripts through psql, reload or restart the server (a restart is the tests' way to cut every
connection), drop databases, and watch the WAL and replication slots."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from psycopg2 import sql

from headwater.embedded.postgres import ThrowawayPostgres, ThrowawayPostgresError, clean_env


class PostgresForTests(ThrowawayPostgres):
    """A :class:`ThrowawayPostgres` with the tests' conveniences."""

    def psql(self, sql_or_file: str | os.PathLike[str], dbname: str = "postgres", *, timeout: float = 300) -> str:
        """Run SQL (a string) or a script (a Path, or a string naming an existing ``*.sql`` file) with psql.

        Output is unaligned and tuples-only (``-A -t -q``), so ``psql("SELECT 1").strip() == "1"``.
        Raises :class:`ThrowawayPostgresError` with psql's stderr when a statement fails.
        """
        cmd = [str(self.bin_dir / "psql"), *"-X -q -A -t -v ON_ERROR_STOP=1".split()]
        cmd += ["-h", self.host, "-p", str(self.port), "-U", self.user, "-d", dbname]
        is_file = isinstance(sql_or_file, os.PathLike) or (
            "\n" not in sql_or_file and sql_or_file.endswith(".sql") and os.path.isfile(sql_or_file)
        )
        cmd += ["-f", os.fspath(sql_or_file)] if is_file else ["-c", sql_or_file]
        env = clean_env(PGCONNECT_TIMEOUT="10", PGPASSFILE=os.devnull)
        if self.password is not None:
            env["PGPASSWORD"] = self.password
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            what = os.fspath(sql_or_file) if is_file else sql_or_file
            raise ThrowawayPostgresError(
                f"psql failed (exit {res.returncode}) in database {dbname!r} running {what[:200]!r}:\n"
                f"{res.stderr.strip()}"
            )
        return res.stdout

    def drop_database(self, name: str) -> None:
        """``DROP DATABASE IF EXISTS … WITH (FORCE)``; drop its logical slots first."""
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every backend and walsender is terminated."""
        self._pg_ctl("restart", "-m", "fast", "-w", "-t", "60", "-l", str(self.log_file))

    def reload(self) -> None:
        """Re-read the configuration files and wait until new sessions see the result."""
        before = self._conf_load_time()
        self._pg_ctl("reload")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._conf_load_time() != before:  # a new session inherits the postmaster's value
                return
            time.sleep(0.02)
        raise ThrowawayPostgresError(f"the server did not reload its configuration\n{self.server_log()}")

    def _conf_load_time(self) -> Any:
        return self._admin("SELECT pg_conf_load_time()")


def wal_lsn_after(conn) -> str:
    """The WAL insert position now: an LSN at or after every change this connection made.

    Uses ``pg_current_wal_insert_lsn()``: with ``synchronous_commit=off`` the write position
    (``pg_current_wal_lsn()``) can still be behind the last commit record.
    """
    with conn.cursor() as cur:
        cur.execute("SELECT pg_current_wal_insert_lsn()::text")
        return cur.fetchone()[0]


def wait_for_slot_active(conn, slot_name: str, timeout: float = 10.0, *, active: bool = True) -> int | None:
    """Wait until replication slot ``slot_name`` is in use (``active=False``: no longer in use).

    Returns the consuming backend's pid (None when waiting for inactive); raises TimeoutError.
    """
    deadline = time.monotonic() + timeout
    state: tuple[Any, ...] | None = None
    while True:
        with conn.cursor() as cur:
            cur.execute("SELECT active, active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot_name,))
            state = cur.fetchone()
        if not conn.autocommit:
            conn.rollback()
        if state is not None and bool(state[0]) == active:
            return state[1]
        if time.monotonic() >= deadline:
            now = "does not exist" if state is None else f"active={state[0]}, active_pid={state[1]}"
            raise TimeoutError(
                f"replication slot {slot_name!r} did not become {'active' if active else 'inactive'} "
                f"within {timeout} s (it {now})"
            )
        time.sleep(0.05)
