"""`replica.identity.autoset.values` with real PostgreSQL: applied when streaming starts (after the
snapshot), to captured tables only, as Debezium 3.6.3 does (recorded behaviour: the extra scenarios
replica_identity_autoset and replica_identity_autoset_denied)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from headwater.connectors.postgres.replica_identity import apply_autoset
from headwater.relational.table import TableId
from helpers.capture import RunningCapture, base_properties, drop_sentinels, emit_sentinel_and_wait, wait_slot_active

SETUP = """
CREATE TABLE full_me (id int PRIMARY KEY, name text, qty int);
CREATE TABLE by_index (id int PRIMARY KEY, code text NOT NULL, note text);
CREATE UNIQUE INDEX by_index_code ON by_index (code);
CREATE TABLE skipped (id int PRIMARY KEY, name text);
INSERT INTO full_me VALUES (1, 'one', 10), (2, 'two', 20);
INSERT INTO by_index VALUES (1, 'c1', 'n1'), (2, 'c2', 'n2');
INSERT INTO skipped VALUES (1, 'one');
"""
AUTOSET = "public.full_me:FULL,public.by_index:INDEX BY_INDEX_CODE,public.skipped:FULL"


def identities(pg_db: Any) -> dict[str, str]:
    rows = pg_db.execute("SELECT relname, relreplident::text FROM pg_class "
                         "WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'")
    return dict(rows or [])


def _wait(predicate: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_standalone_sets_identities_when_streaming_starts(pg_db, tmp_path: Path) -> None:
    pg_db.execute(SETUP)
    props = base_properties(pg_db, tmp_path, "hw_ri_standalone", **{
        "replica.identity.autoset.values": AUTOSET, "table.exclude.list": "public.skipped"})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    try:
        wait_slot_active(pg_db, "hw_ri_standalone", capture)
        _wait(lambda: identities(pg_db)["full_me"] == "f")
        assert identities(pg_db) == {"full_me": "f", "by_index": "i", "skipped": "d"}  # skipped: not captured
        assert pg_db.execute("SELECT indexrelid::regclass::text FROM pg_index WHERE indisreplident") == [
            ("by_index_code",)]  # the unquoted name folded to lower case, as PostgreSQL does for Debezium
        pg_db.execute("UPDATE full_me SET qty = 11 WHERE id = 1")
        pg_db.execute("DELETE FROM full_me WHERE id = 2")
        pg_db.execute("UPDATE by_index SET note = 'x' WHERE id = 1")
        emit_sentinel_and_wait(pg_db, capture)
    finally:
        capture.stop()
    streamed = [r["value"]["payload"] for r in drop_sentinels(capture.records())
                if r["value"] is not None and r["value"]["payload"]["op"] != "r"]
    assert [(p["source"]["table"], p["op"], p["before"]) for p in streamed] == [
        ("full_me", "u", {"id": 1, "name": "one", "qty": 10}),
        ("full_me", "d", {"id": 2, "name": "two", "qty": 20}),
        ("by_index", "u", None),  # the index column did not change: no old tuple
    ]


def test_snapshot_only_run_changes_nothing(pg_db, tmp_path: Path) -> None:
    """Debezium applies the property when streaming starts: never with snapshot.mode=initial_only."""
    pg_db.execute(SETUP)
    props = base_properties(pg_db, tmp_path, "hw_ri_snaponly", **{
        "replica.identity.autoset.values": AUTOSET, "snapshot.mode": "initial_only"})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    try:
        _wait(lambda: len(capture.records()) >= 5 or not capture.alive())
        capture.thread.join(60)
    finally:
        capture.stop()
    assert len(capture.records()) == 5
    assert identities(pg_db) == {"full_me": "d", "by_index": "d", "skipped": "d"}


@pytest.fixture
def limited(pg_db: Any) -> Any:
    """A connector user with REPLICATION LOGIN and SELECT, owning only `a_mine` and `c_mine`."""
    pg_db.execute("""
        DO $$ BEGIN
          IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'hw_ri_limited') THEN
            CREATE ROLE hw_ri_limited LOGIN REPLICATION PASSWORD 'sekret-pw';
          END IF;
        END $$;
        CREATE TABLE a_mine (id int PRIMARY KEY, name text);
        CREATE TABLE b_theirs (id int PRIMARY KEY, name text);
        CREATE TABLE c_mine (id int PRIMARY KEY, name text);
        ALTER TABLE a_mine OWNER TO hw_ri_limited;
        ALTER TABLE c_mine OWNER TO hw_ri_limited;
        GRANT SELECT ON b_theirs TO hw_ri_limited;
        CREATE PUBLICATION dbz_publication FOR ALL TABLES;
    """)
    return pg_db


def _connect_as(pg_db: Any, user: str, password: str | None = None) -> Any:
    conn = psycopg2.connect(host=pg_db.server.host, port=pg_db.server.port, dbname=pg_db.name, user=user,
                            password=password)
    conn.autocommit = True
    return conn


def test_permission_error_is_one_line_and_later_tables_are_left(limited, caplog) -> None:
    conn = _connect_as(limited, "hw_ri_limited", "sekret-pw")
    tables = [TableId(None, "public", n) for n in ("a_mine", "b_theirs", "c_mine")]
    try:
        with caplog.at_level(logging.INFO, logger="headwater.connectors.postgres.replica_identity"):
            done = apply_autoset(conn, "public.*:FULL", tables)
    finally:
        conn.close()
    assert done == ['ALTER TABLE "public"."a_mine" REPLICA IDENTITY FULL']
    assert identities(limited) == {"a_mine": "f", "b_theirs": "d", "c_mine": "d"}
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors[0] == (
        "replica.identity.autoset.values: could not set the replica identity of table public.b_theirs: "
        "'ALTER TABLE \"public\".\"b_theirs\" REPLICA IDENTITY FULL' needs ownership of the table (or membership "
        "in its owner role 'postgres'), which user 'hw_ri_limited' lacks (must be owner of table b_theirs); "
        "the table keeps REPLICA IDENTITY DEFAULT")
    assert "c_mine is left as it is: after the failed ALTER TABLE on public.b_theirs" in errors[1]
    assert len(errors) == 2
    assert all("\n" not in e and "sekret" not in e for e in errors)


def test_standalone_goes_on_streaming_after_a_permission_error(limited, tmp_path: Path, caplog) -> None:
    props = base_properties(limited, tmp_path, "hw_ri_denied", **{
        "database.user": "hw_ri_limited", "replica.identity.autoset.values": "public.b_theirs:FULL"})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    try:
        with caplog.at_level(logging.ERROR, logger="headwater.connectors.postgres.replica_identity"):
            wait_slot_active(limited, "hw_ri_denied", capture)
            limited.execute("INSERT INTO b_theirs VALUES (1, 'one')")
            limited.execute("DELETE FROM b_theirs WHERE id = 1")
            emit_sentinel_and_wait(limited, capture)
    finally:
        capture.stop()
    assert [r.getMessage().split(":")[1].strip() for r in caplog.records] == [
        "could not set the replica identity of table public.b_theirs"]
    deletes = [r["value"]["payload"] for r in drop_sentinels(capture.records())
               if r["value"] is not None and r["value"]["payload"]["op"] == "d"]
    assert [d["before"] for d in deletes] == [{"id": 1, "name": None}]  # DEFAULT: only the key


def test_already_set_executes_nothing_and_failures_are_logged(pg_db, caplog) -> None:
    pg_db.execute("""
        CREATE TABLE "Mixed Case" (id int PRIMARY KEY, name text);
        CREATE TABLE already (id int PRIMARY KEY, code text NOT NULL);
        CREATE UNIQUE INDEX already_code ON already (code);
        ALTER TABLE already REPLICA IDENTITY USING INDEX already_code;
        CREATE TABLE twice (id int PRIMARY KEY);
        CREATE TABLE unknown_index (id int PRIMARY KEY);
    """)
    conn = _connect_as(pg_db, pg_db.server.user)
    tables = [TableId(None, "public", n) for n in ("Mixed Case", "already", "twice")]
    try:
        with caplog.at_level(logging.INFO, logger="headwater.connectors.postgres.replica_identity"):
            done = apply_autoset(conn, "public.mixed.case:FULL,public.already:INDEX already_code,"
                                 "public.tw.*:FULL,public.twice:NOTHING,nomatch.x:FULL", tables)
            assert apply_autoset(conn, "public.unknown_index:INDEX nope",
                                 [TableId(None, "public", "unknown_index")]) == []
    finally:
        conn.close()
    # a name that needs quotes works (Debezium writes it unquoted and fails there)
    assert done == ['ALTER TABLE "public"."Mixed Case" REPLICA IDENTITY FULL']
    assert identities(pg_db) == {"Mixed Case": "f", "already": "i", "twice": "d", "unknown_index": "d"}
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert ("INFO", "replica identity of table public.already is already USING INDEX already_code") in messages
    assert ("ERROR", "replica.identity.autoset.values: 2 entries match table public.twice ('public.tw.*:FULL', "
            "'public.twice:NOTHING'); its replica identity is left as it is") in messages
    assert ("WARNING", "replica.identity.autoset.values entry 'nomatch.x:FULL' matches no captured table") in messages
    assert ("ERROR", "replica.identity.autoset.values: could not set the replica identity of table "
            "public.unknown_index: 'ALTER TABLE \"public\".\"unknown_index\" REPLICA IDENTITY USING INDEX \"nope\"' "
            "failed: index \"nope\" for table \"unknown_index\" does not exist; the table keeps REPLICA IDENTITY "
            "DEFAULT") in messages
