"""headwater.embedded.postgres against real PostgreSQL 15 clusters (no mocks)."""

from __future__ import annotations

import os
import select
import signal
import time

import psycopg2
import psycopg2.errors
import psycopg2.extras
import pytest

from headwater.embedded.postgres import (
    PostgresNotFoundError,
    ThrowawayPostgres,
    ThrowawayPostgresError,
    find_pg_bin,
)
from helpers.postgres import PostgresForTests, wait_for_slot_active, wal_lsn_after
from helpers.processes import running


def _show(conn, name: str) -> str:
    with conn.cursor() as cur:
        cur.execute(f"SHOW {name}")
        return cur.fetchone()[0]


def test_start_query_stop_removes_everything():
    server = ThrowawayPostgres()
    assert server.start() is server
    assert server.start() is server  # idempotent
    root, data = server.root_dir, server.data_dir
    pid = int((data / "postmaster.pid").read_text().split()[0])
    assert (data / "PG_VERSION").read_text().strip() == "15"
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT current_user, inet_server_port(), current_setting('TimeZone')")
        assert cur.fetchone() == ("postgres", server.port, "UTC")
    conn.close()

    server.stop()
    assert not root.exists()
    assert not running(pid)
    server.stop()  # a second stop is harmless


def test_context_manager_and_keep():
    with PostgresForTests(keep=True) as server:
        server.psql("CREATE TABLE kept(x int); INSERT INTO kept VALUES (42)")
        root = server.root_dir
    try:
        assert (root / "data" / "PG_VERSION").exists()  # kept after stop
        server.start()  # restarts the same cluster
        assert server.psql("SELECT x FROM kept").strip() == "42"
        server.keep = False
        server.stop()
        assert not root.exists()
    finally:
        server.keep = False
        server.stop()


def test_two_clusters_at_once():
    with PostgresForTests() as a, PostgresForTests() as b:
        assert a.port != b.port
        assert a.data_dir != b.data_dir
        a.psql("CREATE TABLE only_in_a(x int)")
        assert a.psql("SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'").strip() == "1"
        assert b.psql("SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'").strip() == "0"


def test_defaults_enable_logical_decoding(pg_server):
    conn = pg_server.connect()
    try:
        assert _show(conn, "wal_level") == "logical"
        assert _show(conn, "max_replication_slots") == "20"
        assert _show(conn, "max_wal_senders") == "20"
        assert _show(conn, "listen_addresses") == "127.0.0.1"
        assert _show(conn, "fsync") == "off"
        assert _show(conn, "log_timezone") == "UTC"
        assert _show(conn, "server_encoding") == "UTF8"
    finally:
        conn.close()


def test_pgoutput_slot_streams_changes(pg_db):
    pg_db.execute("CREATE TABLE t(id int PRIMARY KEY, v text); CREATE PUBLICATION pub FOR TABLE t")
    repl = pg_db.connect(connection_factory=psycopg2.extras.LogicalReplicationConnection)
    cur = repl.cursor()
    cur.create_replication_slot("hw_slot", output_plugin="pgoutput")
    # the session cluster is shared (other tests' slots, e.g. the SQL Server emulator's, may be there)
    assert pg_db.execute("SELECT plugin, slot_type, database FROM pg_replication_slots "
                         "WHERE database = current_database()") == [
        ("pgoutput", "logical", pg_db.name)
    ]

    watcher = pg_db.connect()
    pg_db.execute("INSERT INTO t VALUES (1, 'a')")
    end_lsn = wal_lsn_after(watcher)
    cur.start_replication(slot_name="hw_slot", decode=False, options={"proto_version": "1", "publication_names": "pub"})
    assert wait_for_slot_active(watcher, "hw_slot", timeout=10) == repl.get_backend_pid()

    kinds = []
    deadline = time.monotonic() + 30
    while not kinds or kinds[-1] != "C":
        msg = cur.read_message()
        if msg is None:
            assert time.monotonic() < deadline, f"no commit message; got {kinds}"
            select.select([cur], [], [], 1.0)
            continue
        kinds.append(chr(msg.payload[0]))
    assert kinds == ["B", "R", "I", "C"]
    assert msg.data_start <= _lsn(end_lsn)
    # Left streaming on purpose: pg_db's teardown closes the consumer and drops its slot, retrying
    # while the walsender exits.


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def test_wait_for_slot_inactive_and_timeout(pg_db):
    conn = pg_db.connect()
    pg_db.execute("SELECT pg_create_logical_replication_slot('idle_slot', 'pgoutput')")
    assert wait_for_slot_active(conn, "idle_slot", timeout=1, active=False) is None
    with pytest.raises(TimeoutError, match="did not become active"):
        wait_for_slot_active(conn, "idle_slot", timeout=0.2)


def test_password_rejects_wrong_password(pg_cluster):
    server = pg_cluster(password="s3cret pass")
    with server.connect() as conn, conn.cursor() as cur:  # dsn() carries the right password
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    conn.close()
    assert server.psql("SELECT 2").strip() == "2"
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(server.dsn(password="wrong"))
    no_password = f"host={server.host} port={server.port} user=postgres dbname=postgres"
    with pytest.raises(psycopg2.OperationalError, match="password"):
        psycopg2.connect(no_password, passfile=os.devnull)


def test_settings_override_wal_level_replica(pg_cluster):
    server = pg_cluster(settings={"wal_level": "replica", "work_mem": "7MB"})
    conn = server.connect()
    try:
        assert _show(conn, "wal_level") == "replica"
        assert _show(conn, "work_mem") == "7MB"
        with (
            pytest.raises(psycopg2.errors.ObjectNotInPrerequisiteState, match="wal_level >= logical"),
            conn.cursor() as cur,
        ):
            cur.execute("SELECT pg_create_logical_replication_slot('nope', 'pgoutput')")
    finally:
        conn.close()


def test_reload_and_restart(pg_cluster):
    server = pg_cluster()
    server.psql("ALTER SYSTEM SET work_mem = '13MB'")
    server.reload()
    assert server.psql("SHOW work_mem").strip() == "13MB"
    server.psql("ALTER SYSTEM SET max_connections = 42")
    old_pid = int((server.data_dir / "postmaster.pid").read_text().split()[0])
    server.restart()
    assert server.psql("SHOW max_connections").strip() == "42"
    assert int((server.data_dir / "postmaster.pid").read_text().split()[0]) != old_pid


def test_psql_reports_errors_and_runs_files(pg_cluster, tmp_path):
    server = pg_cluster()
    with pytest.raises(ThrowawayPostgresError, match='relation "missing" does not exist'):
        server.psql("SELECT * FROM missing")
    script = tmp_path / "setup.sql"
    script.write_text("CREATE TABLE f(x int);\nINSERT INTO f VALUES (1), (2);\nSELECT sum(x) FROM f;\n")
    assert server.psql(script).strip() == "3"
    server.create_database("other")
    assert server.psql("SELECT current_database()", dbname="other").strip() == "other"
    server.drop_database("other")


def test_stop_after_server_was_killed(pg_cluster):
    server = pg_cluster()
    pid = int((server.data_dir / "postmaster.pid").read_text().split()[0])
    root = server.root_dir
    os.kill(pid, signal.SIGKILL)
    server.stop()
    assert not root.exists()


def test_missing_binaries_say_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("HEADWATER_PG_BIN", str(tmp_path))
    with pytest.raises(PostgresNotFoundError, match=r"scripts/setup\.sh"):
        ThrowawayPostgres()
    monkeypatch.delenv("HEADWATER_PG_BIN")
    assert (find_pg_bin() / "initdb").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root needs the postgres user to traverse the base dir")
def test_base_dir_not_traversable_by_postgres(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(ThrowawayPostgresError, match="cannot enter"):
        ThrowawayPostgres(private).start()
    assert list(private.iterdir()) == []
