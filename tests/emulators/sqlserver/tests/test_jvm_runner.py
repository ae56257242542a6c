"""DebeziumRunner.java end to end, without the emulator: Debezium's PostgreSQL connector (in the same
jar set, see scripts/maven/debezium-sqlserver.pom.xml) against a throwaway PostgreSQL proves the
runner's line format, its status lines, its stop conditions, resuming from the offsets file and
how it reports a connector's failure — the parts that do not depend on the SQL Server connector."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from emulators.sqlserver.jvm import (
    ClasspathError,
    DebeziumProcess,
    JvmError,
    find_classpath,
    run_debezium,
    source_launcher_problem,
)
from emulators.sqlserver.jvm.classpath import DEBEZIUM_JARS
from headwater.embedded.postgres import ThrowawayPostgres

PG_JARS = (*DEBEZIUM_JARS, "debezium-connector-postgres", "postgresql")


@pytest.fixture(scope="module")
def classpath():
    problem = source_launcher_problem()
    if problem:
        pytest.fail(problem)
    try:
        return find_classpath(PG_JARS)
    except ClasspathError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="module")
def pg():
    cluster = ThrowawayPostgres(settings={"wal_level": "logical"}).start()
    yield cluster
    cluster.stop()


def _props(pg: ThrowawayPostgres, dbname: str) -> dict[str, str]:
    return {
        "name": "runner-test",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "topic.prefix": "srv",
        "database.hostname": pg.host,
        "database.port": str(pg.port),
        "database.user": pg.user,
        "database.dbname": dbname,
        "slot.name": f"runner_{dbname}",
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public.items",
    }


def _wait_events(proc: DebeziumProcess, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while proc.event_count() < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"{proc.event_count()} events after {timeout} s, wanted {n}:\n{proc.log_tail()}")
        time.sleep(0.2)


def test_snapshot_stream_stop_and_resume(classpath, pg: ThrowawayPostgres, tmp_path: Path) -> None:
    pg.create_database("runner_a")
    with pg.connect("runner_a") as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id int PRIMARY KEY, label text)")
        cur.execute("INSERT INTO items VALUES (1, 'one'), (2, 'two')")
    workdir = tmp_path / "work"
    out = tmp_path / "events.jsonl"
    proc = DebeziumProcess(_props(pg, "runner_a"), workdir, out, classpath=classpath).start()
    try:
        # statuses are kept as they arrive, for callers that poll instead of waiting (wait_for is not called)
        deadline = time.monotonic() + 120
        while [s["status"] for s in proc.statuses] != ["started", "snapshot-completed", "streaming-connected"]:
            assert time.monotonic() < deadline, f"statuses {proc.statuses}:\n{proc.log_tail()}"
            time.sleep(0.1)
        with pg.connect("runner_a") as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO items VALUES (3, 'three')")
        _wait_events(proc, 3)
    finally:
        proc.stop()
    result = proc.wait()
    assert result.exit_code == 0, result.stderr_tail
    assert [s["status"] for s in result.statuses] == [
        "started", "snapshot-completed", "streaming-connected", "stopping", "finished"]
    assert result.statuses[3] == {"status": "stopping", "reason": "stdin"}
    assert result.finished is not None and result.finished["success"] is True and result.finished["events"] == 3
    events = result.events
    assert [e["topic"] for e in events] == ["srv.public.items"] * 3
    assert [e["value"]["payload"]["op"] for e in events] == ["r", "r", "c"]
    assert [e["key"]["payload"] for e in events] == [{"id": 1}, {"id": 2}, {"id": 3}]
    # key and value are the JsonConverter's envelopes, schemas included, embedded verbatim
    assert events[2]["value"]["schema"]["name"] == "srv.public.items.Envelope"
    assert events[2]["value"]["payload"]["after"] == {"id": 3, "label": "three"}
    assert [e["value"]["payload"]["source"]["snapshot"] for e in events] == ["first", "last", "false"]
    header_keys = {h["key"] for h in events[0]["headers"]}
    assert "__debezium.context.connectorName" in header_keys
    raw = out.read_text(encoding="utf-8").splitlines()[0]
    assert list(json.loads(raw)) == ["topic", "key", "value", "headers"]

    # a change made while nothing runs, then a second run on the same workdir: no snapshot again
    with pg.connect("runner_a") as conn, conn.cursor() as cur:
        cur.execute("UPDATE items SET label = 'uno' WHERE id = 1")
    out2 = tmp_path / "events2.jsonl"
    second = run_debezium(_props(pg, "runner_a"), workdir, out2, max_events=1, idle_timeout=60,
                          classpath=classpath, timeout=180)
    assert second.exit_code == 0, second.stderr_tail
    assert {"status": "stopping", "reason": "max-events"} in second.statuses
    assert [e["value"]["payload"]["op"] for e in second.events] == ["u"]
    assert second.events[0]["value"]["payload"]["after"] == {"id": 1, "label": "uno"}


def test_idle_timeout_ends_the_run(classpath, pg: ThrowawayPostgres, tmp_path: Path) -> None:
    pg.create_database("runner_b")
    with pg.connect("runner_b") as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id int PRIMARY KEY)")
        cur.execute("INSERT INTO items VALUES (7)")
    result = run_debezium(_props(pg, "runner_b"), tmp_path / "w", tmp_path / "e.jsonl", idle_timeout=1.5,
                          classpath=classpath, timeout=180)
    assert result.exit_code == 0, result.stderr_tail
    assert {"status": "stopping", "reason": "idle"} in result.statuses
    assert [e["key"]["payload"] for e in result.events] == [{"id": 7}]


def test_connector_failure_is_reported(classpath, tmp_path: Path) -> None:
    props = {
        "database.hostname": "127.0.0.1",
        "database.port": "1",  # nothing listens there
        "database.user": "sa",
        "database.password": "x",
        "database.names": "testDB",
        "database.encrypt": "false",
        "database.loginTimeout": "2",
        "topic.prefix": "server1",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
    }
    result = run_debezium(props, tmp_path / "w", tmp_path / "e.jsonl", idle_timeout=1, startup_timeout=60,
                          classpath=classpath, timeout=120)
    assert result.exit_code == 3
    assert result.finished is not None and result.finished["success"] is False
    assert result.error is not None and "Connector configuration is not valid" in result.error
    assert "port 1 has failed" in result.error
    assert result.events == []
    # the runner wrote the schema history path it was given by default into the properties file
    assert "schema-history.dat" in (tmp_path / "w" / "runner.properties").read_text()


def test_wait_for_raises_when_the_runner_ends_first(classpath, tmp_path: Path) -> None:
    props = {"database.hostname": "127.0.0.1", "database.port": "1", "database.user": "sa",
             "database.password": "x", "database.names": "testDB", "database.encrypt": "false",
             "database.loginTimeout": "2", "topic.prefix": "server1",
             "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory"}
    proc = DebeziumProcess(props, tmp_path / "w", tmp_path / "e.jsonl", classpath=classpath).start()
    with pytest.raises(JvmError, match="Connector configuration is not valid"):
        proc.wait_for("streaming-connected", timeout=120)
    assert proc.wait().exit_code == 3
