"""Shared fixtures: one throwaway PostgreSQL cluster per test session, a fresh database per test.

``tests/`` is put on ``sys.path`` so helper modules under ``tests/`` (e.g. ``tests/helpers/x.py``) import
as ``helpers.x`` from any test file, whatever pytest's import mode.
"""

from __future__ import annotations

import re
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from headwater.embedded.postgres import drop_replication_slot  # noqa: E402
from helpers.jvm import short_lived_jvms  # noqa: E402
from helpers.postgres import PostgresForTests  # noqa: E402

short_lived_jvms()  # see helpers/jvm.py: C1 for the JVMs the tests start, not the session's Spark


def pytest_configure(config: pytest.Config) -> None:
    # CI stops a run that is too slow with SIGTERM, which by default kills Python without running
    # fixture finalizers or atexit handlers; turn it into KeyboardInterrupt so clusters get stopped.
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _interrupt)


# The test files that take longest (seconds of one run on two xdist workers, 2026-11-25; the two
# conformance files 2026-11-27, when every scenario ran through `headwater run` and Spark). They run
# first: `scripts/test.sh` hands whole files to the workers in collection order
# (--dist loadfile --no-loadscope-reorder), so a long file started last would leave one worker
# running it alone at the end. Every other file keeps its place after these.
SLOW_FILES: dict[str, float] = {
    "spark/test_delivery_guarantees.py": 800,
    "spark/test_cluster.py": 470,
    "spark/test_delta_sink.py": 370,
    "spark/test_typed_snapshot.py": 230,
    "spark/test_typed_changes.py": 200,
    "spark/test_kafka.py": 170,
    "spark/test_source_conformance.py": 300,
    "conformance/test_extra_scenarios.py": 250,
    "spark/test_sqlserver_conformance.py": 400,
    "spark/test_sqlserver_pipeline.py": 230,
    "connectors/sqlserver/test_scenarios.py": 150,
    "spark/test_pipeline_demo.py": 125,
    "connectors/postgres/test_streaming_v2.py": 105,
    "connectors/postgres/test_crash_restart.py": 75,
    "connectors/postgres/test_retries.py": 70,
    "conformance/test_conformance.py": 50,
}


# What a test needs, from the fixtures it uses (pyproject.toml registers the markers):
# `pytest -m "not spark"` runs what needs no JVM, `-m "not (postgres or spark or kafka)"` what
# needs nothing started at all.
NEEDS: dict[str, frozenset[str]] = {
    "postgres": frozenset({"pg_db", "pg_server", "pg_cluster"}),
    "spark": frozenset({"spark"}),
    "kafka": frozenset({"kafka"}),
}
# directories whose tests start their servers themselves (the recorded scenarios run their own
# PostgreSQL; the Spark tests' subprocesses their own sessions; the emulators are backed by one)
NEEDS_BY_DIRECTORY = {"conformance": ("postgres",), "spark": ("spark",), "emulators": ("postgres",),
                      "connectors/sqlserver": ("postgres",)}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def relative(item: pytest.Item) -> str:
        return Path(str(item.path)).resolve().relative_to(TESTS_DIR).as_posix()

    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        needs = {marker for marker, names in NEEDS.items() if fixtures & names}
        parts = relative(item).split("/")
        for depth in (1, 2):
            needs.update(NEEDS_BY_DIRECTORY.get("/".join(parts[:depth]), ()))
        for marker in sorted(needs):
            item.add_marker(marker)
    items.sort(key=lambda item: -SLOW_FILES.get(relative(item), 0.0))  # stable: other files keep their order


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresForTests]:
    """One PostgreSQL 15 cluster (wal_level=logical, trust auth, 127.0.0.1, free port) for the session."""
    server = PostgresForTests().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_cluster() -> Iterator[Callable[..., PostgresForTests]]:
    """Factory for extra clusters with their own options, stopped after the test:
    ``pg_cluster(settings={"wal_level": "replica"})``, ``pg_cluster(password="secret")``."""
    started: list[PostgresForTests] = []

    def make(*args: Any, **kwargs: Any) -> PostgresForTests:
        cluster = PostgresForTests(*args, **kwargs)
        started.append(cluster)
        return cluster.start()

    yield make
    for cluster in reversed(started):
        cluster.stop()


class PgDatabase:
    """A database of its own on the session's cluster (see the ``pg_db`` fixture)."""

    def __init__(self, server: PostgresForTests, name: str):
        self.server = server
        self.name = name
        self.dsn = server.dsn(name)
        self._connections: list[Any] = []

    def connect(self, autocommit: bool = True, **kwargs: Any):
        """A psycopg2 connection to this database, closed at teardown if the test did not close it."""
        conn = self.server.connect(self.name, autocommit=autocommit, **kwargs)
        self._connections.append(conn)
        return conn

    def execute(self, sql: str, params: Any = None) -> list[tuple[Any, ...]] | None:
        """Run SQL in autocommit on a short-lived connection; the rows of the last statement, if any."""
        conn = self.server.connect(self.name)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else None
        finally:
            conn.close()

    def psql(self, sql_or_file: Any) -> str:
        return self.server.psql(sql_or_file, dbname=self.name)

    def _drop(self) -> None:
        for conn in self._connections:
            if not conn.closed:
                conn.close()
        admin = self.server.connect()
        try:
            with admin.cursor() as cur:
                cur.execute("SELECT slot_name FROM pg_replication_slots WHERE database = %s", (self.name,))
                slots = [row[0] for row in cur.fetchall()]
            for slot in slots:
                drop_replication_slot(admin, slot, timeout=10.0)
        finally:
            admin.close()
        self.server.drop_database(self.name)

    def __repr__(self) -> str:
        return f"<PgDatabase {self.name} on {self.server.host}:{self.server.port}>"


@pytest.fixture
def pg_db(pg_server: PostgresForTests, request: pytest.FixtureRequest) -> Iterator[PgDatabase]:
    """A fresh, uniquely named database on the session cluster; at teardown its replication slots
    (retrying "is active" for up to 10 s) and the database itself are dropped."""
    stem = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")[:40]
    name = f"t_{stem}_{uuid.uuid4().hex[:8]}"
    pg_server.create_database(name)
    db = PgDatabase(pg_server, name)
    try:
        yield db
    finally:
        db._drop()
