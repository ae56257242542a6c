"""Connection and replication options against real PostgreSQL: database.initial.statements (run on
non-replication connections only), database.tcpKeepAlive, database.query.timeout.ms,
database.<libpq parameter> pass-through, slot.stream.params, slot.max.retries / slot.retry.delay.ms
with the slot held by another connection, and the Kafka-Connect-only properties warned about
once each by `headwater validate` without the password."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras
import pytest

from headwater import config as cfg
from headwater.connectors.postgres.connection import connect
from headwater.connectors.postgres.connector import PostgresConnector
from headwater.engine.capture import run_capture
from headwater.engine.connector import ConnectorError
from helpers.capture import RunningCapture, base_properties
from helpers.cli import error_line, headwater, write_config


def _config(db: Any, tmp_path: Path, **extra: str) -> cfg.Configuration:
    return cfg.from_properties(base_properties(db, tmp_path, "unused", **extra)).connector


def _one(conn: Any, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()[0]


def test_initial_statements_run_on_every_normal_connection(pg_db, tmp_path: Path) -> None:
    config = _config(pg_db, tmp_path, **{
        "database.initial.statements": "SET search_path TO pg_catalog;SET application_name = 'hw;;x'"})
    conn = connect(config)
    try:
        assert _one(conn, "SHOW search_path") == "pg_catalog"
        assert _one(conn, "SHOW application_name") == "hw;x"  # ';;' is a literal semicolon
    finally:
        conn.close()
    # the replication connection does not run them (its commands are replication commands)
    repl = connect(config, replication=True)
    repl.close()


def test_failing_initial_statement_is_named(pg_db, tmp_path: Path) -> None:
    config = _config(pg_db, tmp_path, **{"database.initial.statements": "SET search_path TO public; SELEC 1"})
    with pytest.raises(ConnectorError) as info:
        connect(config)
    assert str(info.value).startswith("database.initial.statements: statement 'SELEC 1' failed: syntax error")


def test_keepalive_timeout_and_libpq_passthrough(pg_db, tmp_path: Path) -> None:
    conn = connect(_config(pg_db, tmp_path, **{
        "database.tcpKeepAlive": "false", "database.query.timeout.ms": "1500",
        "database.application_name": "from-passthrough", "database.options": "-c work_mem=7MB"}))
    try:
        assert conn.get_dsn_parameters()["keepalives"] == "0"
        assert _one(conn, "SHOW statement_timeout") == "1500ms"
        assert _one(conn, "SHOW application_name") == "from-passthrough"
        assert _one(conn, "SHOW work_mem") == "7MB"
        assert _one(conn, "SHOW DateStyle") == "ISO, MDY"  # the session settings Headwater needs still win
        with pytest.raises(psycopg2.errors.QueryCanceled):
            _one(conn, "SELECT pg_sleep(5)")
    finally:
        conn.close()
    conn = connect(_config(pg_db, tmp_path))
    try:
        assert conn.get_dsn_parameters()["keepalives"] == "1"
        assert _one(conn, "SHOW statement_timeout") == "10min"
    finally:
        conn.close()


def test_snapshot_is_not_cut_by_the_query_timeout(pg_db, tmp_path: Path) -> None:
    """database.query.timeout.ms limits the wait for a table's first rows, not the whole read."""
    # rows of 10 kB: the server flushes its 8 kB send buffer for each, so each arrives as it is made
    pg_db.execute("CREATE TABLE public.slow (id int PRIMARY KEY, pad text)")
    pg_db.execute("INSERT INTO public.slow SELECT g, repeat('x', 10000) FROM generate_series(1, 3) g")
    pg_db.execute("CREATE FUNCTION public.slow_id(i int) RETURNS int LANGUAGE sql AS "
                  "'SELECT i FROM (SELECT pg_sleep(0.4)) s'")
    props = base_properties(pg_db, tmp_path, "hw_qt", **{
        "snapshot.mode": "initial_only", "database.query.timeout.ms": "1000",
        "snapshot.select.statement.overrides": "public.slow",
        "snapshot.select.statement.overrides.public.slow": "SELECT public.slow_id(id) AS id, pad FROM public.slow"})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    capture.thread.join(60)
    capture.stop()
    assert [r["value"]["payload"]["after"]["id"] for r in capture.records()] == [1, 2, 3]

    # a table whose first row takes longer than the timeout fails the snapshot with that reason
    props["snapshot.select.statement.overrides.public.slow"] = "SELECT id, pad FROM public.slow, pg_sleep(3)"
    props["slot.name"] = "hw_qt2"
    props["offset.storage.file.filename"] = str(tmp_path / "offsets2.json")  # the first snapshot completed
    capture = RunningCapture(props, tmp_path / "out2.jsonl").start()
    capture.thread.join(60)
    with pytest.raises(ConnectorError, match=r"no rows within database.query.timeout.ms=1000"):
        capture.stop()


def test_unknown_stream_param_is_refused_by_the_server(pg_db, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.t (id int PRIMARY KEY)")
    props = base_properties(pg_db, tmp_path, "hw_params", **{"slot.stream.params": "add-tables=public.t"})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    capture.thread.join(60)
    with pytest.raises(ConnectorError) as info:
        capture.stop()
    assert str(info.value) == ("cannot start streaming from slot 'hw_params': unrecognized pgoutput option: "
                               "add-tables")


def _hold_slot(db: Any, slot: str, release: threading.Event) -> threading.Thread:
    conn = db.server.connect(db.name, connection_factory=psycopg2.extras.LogicalReplicationConnection)
    cur = conn.cursor()
    cur.execute(f'CREATE_REPLICATION_SLOT "{slot}" LOGICAL pgoutput NOEXPORT_SNAPSHOT')
    cur.start_replication(slot_name=slot, decode=False,
                          options={"proto_version": "1", "publication_names": "dbz_publication"})

    def hold() -> None:
        while not release.wait(0.05):
            cur.read_message()
        conn.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def test_slot_in_use_is_retried_then_reported(pg_db, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.t (id int PRIMARY KEY)")
    pg_db.execute("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    release = threading.Event()
    holder = _hold_slot(pg_db, "hw_busy", release)
    try:
        props = base_properties(pg_db, tmp_path, "hw_busy", **{
            "snapshot.mode": "no_data", "slot.max.retries": "3", "slot.retry.delay.ms": "100",
            "slot.drop.on.stop": "false"})
        connector = PostgresConnector(cfg.from_properties(props).connector)
        started = time.monotonic()
        source = connector.capture_source(parallel=False)
        with pytest.raises(ConnectorError) as info:
            run_capture(connector, source, None, lambda items: None, threading.Event())
        source.close()
        connector.close()
        assert time.monotonic() - started >= 0.3  # three retries, 100 ms apart
        assert "replication slot 'hw_busy' is in use by another process (PID " in str(info.value)

        # released while the connector is retrying: it goes on
        props["slot.max.retries"] = "50"
        capture = RunningCapture(props, tmp_path / "out.jsonl").start()
        time.sleep(0.5)
        release.set()
        holder.join(10)
        deadline = time.monotonic() + 30
        while not pg_db.execute("SELECT active FROM pg_replication_slots WHERE slot_name = 'hw_busy'")[0][0]:
            assert capture.thread.is_alive() and time.monotonic() < deadline
            time.sleep(0.1)
        capture.stop()
    finally:
        release.set()


def test_kafka_connect_only_properties_warn_once_each(pg_db, tmp_path: Path) -> None:
    extra = {
        "transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
        "predicates": "p", "errors.tolerance": "all", "errors.log.enable": "true", "tasks.max": "4",
        "offset.storage.topic": "offsets", "config.providers": "file",
        "value.converter.schema.registry.url": "http://registry:8081", "exactly.once.support": "required",
        "transaction.boundary": "poll", "signal.kafka.topic": "signals", "kafka.consumer.offset.commit.enabled": "true",
        "notification.sink.topic.name": "n", "custom.metric.tags": "a=b", "topic.cache.size": "5",
        "schema.history.internal.kafka.topic": "h", "include.schema.changes": "true",
        "database.sslfactory": "org.postgresql.ssl.NonValidatingFactory", "database.password": "pa55-xyz",
        "snapshot.max.threads": "4",
    }
    config = write_config(tmp_path / "app.properties", pg_db.server, pg_db.name, tmp_path, **extra)
    res = headwater("validate", config)
    assert res.returncode == 0, res.stderr
    assert "pa55-xyz" not in res.stderr + res.stdout
    for key in extra:
        if key == "database.password":
            continue
        lines = [line for line in res.stderr.splitlines() if f"property '{key}' is ignored: " in line]
        assert len(lines) == 1, (key, res.stderr)

    # the same warnings from `headwater run`, which then fails on something else (a locking plug-in)
    config = write_config(tmp_path / "run.properties", pg_db.server, pg_db.name, tmp_path,
                          **{**extra, "snapshot.locking.mode": "custom", "snapshot.locking.mode.custom.name": "x"})
    res = headwater("run", config)
    assert res.returncode == 1
    assert res.stderr.count("property 'transforms' is ignored") == 1
    assert "snapshot.locking.mode=custom" in error_line(res)
    assert "pa55-xyz" not in res.stderr + res.stdout
