"""The SQL Server connector when the server misbehaves, on an emulator in this process (its TDS
server can be stopped and started again on the same port, and its Agent stopped): a lost
connection is retried per `errors.max.retries` without losing a change; with no retries the run
stops with the cause; no maximum LSN with the Agent stopped is reported, not fatal; a wrong
password is a clear, non-retried error that does not show the password."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_core_streaming import data_events, props, snapshot_stored, summary

from headwater.engine.connector import ConnectorError
from helpers.capture import RunningCapture
from helpers.sqlserver import PASSWORD, connect, emulator_in_process, wait_for


class InProcess:
    """The in-process emulator with the interface the tests' helpers use, and a TDS restart."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.host, self.port = engine.address
        self.password = PASSWORD

    def execute(self, sql: str, database: str = "master") -> list[tuple[Any, ...]]:
        with contextlib.closing(connect(self.host, self.port, self.password, database)) as conn:
            cur = conn.cursor()
            cur.execute(sql)
            return [tuple(r) for r in cur.fetchall()] if cur.description is not None else []

    def restart_network(self, down_seconds: float) -> None:
        """Close every connection and the listener, then listen again on the same port."""
        from emulators.sqlserver.tds.server import TdsServer

        self.tds.stop()
        time.sleep(down_seconds)
        self.tds = TdsServer(self.engine, host=self.host, port=self.port)
        self.tds.start()


@pytest.fixture
def emulator(pg_server: Any) -> Iterator[InProcess]:
    with emulator_in_process(pg_server, capture_interval=0.1) as engine:
        emulator = InProcess(engine)
        yield emulator
        _drop_created(emulator)


@pytest.fixture
def restartable(pg_server: Any) -> Iterator[InProcess]:
    """An in-process emulator whose TDS server the test owns (to stop and start it again)."""
    from emulators.sqlserver.engine.server import EmulatorServer
    from emulators.sqlserver.tds.server import TdsServer

    engine = EmulatorServer(pg_server, PASSWORD, capture_interval=0.1)
    tds = TdsServer(engine, host="127.0.0.1", port=0)
    engine.address = tds.start()
    emulator = InProcess(engine)
    emulator.tds = tds  # type: ignore[attr-defined]
    try:
        yield emulator
        _drop_created(emulator)
    finally:
        emulator.tds.stop()  # type: ignore[attr-defined]
        engine.close()


_created: list[str] = []


def _drop_created(emulator: InProcess) -> None:
    """Drop the databases the tests created: the emulator runs on the session's shared PostgreSQL,
    where each CDC database holds a replication slot other tests would see."""
    while _created:
        name = _created.pop()
        with contextlib.suppress(Exception):
            emulator.execute(f"DROP DATABASE {name}")


def _database(emulator: InProcess) -> str:
    name = f"core_fail_{uuid.uuid4().hex[:8]}"
    emulator.execute(f"CREATE DATABASE {name}")
    _created.append(name)
    emulator.execute("EXEC sys.sp_cdc_enable_db", database=name)
    emulator.execute("CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY, name varchar(40) NULL)", database=name)
    emulator.execute("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', "
                     "@role_name = NULL, @supports_net_changes = 0", database=name)
    return name


FAST_RETRIES = {"retriable.restart.connector.wait.ms": "100", "errors.retry.delay.initial.ms": "100",
                "errors.retry.delay.max.ms": "300"}


def test_lost_connection_is_retried_without_losing_changes(restartable: InProcess, tmp_path: Path) -> None:
    db = _database(restartable)
    restartable.execute("INSERT INTO dbo.items VALUES (1, 'one')", database=db)
    # captured before the snapshot's position is taken: row 1 is not streamed again
    wait_for(lambda: restartable.execute(f"SELECT COUNT(*) FROM {db}.cdc.dbo_items_CT")[0][0] == 1, "the capture")
    p = props(restartable, db, tmp_path, **FAST_RETRIES, **{"errors.max.retries": "20"})  # type: ignore[arg-type]
    capture = RunningCapture(p, tmp_path / "out.jsonl").start()
    try:
        wait_for(lambda: snapshot_stored(tmp_path / "offsets.json"), "the snapshot")
        restartable.execute("INSERT INTO dbo.items VALUES (2, 'two')", database=db)
        wait_for(lambda: len(data_events(capture.records())) >= 2, "the first change")
        restartable.restart_network(down_seconds=1.0)
        restartable.execute("INSERT INTO dbo.items VALUES (3, 'three')", database=db)
        wait_for(lambda: len(data_events(capture.records())) >= 3 or not capture.alive(), "the change after the loss")
        assert capture.alive()
    finally:
        capture.stop()
    got = summary(capture.records())
    # at least once: everything arrives, in order (a change may come again after the retry)
    ids = [i for _, op, i in got if op == "c"]
    assert got[0][1:] == ("r", 1) and ids[0] == 2 and ids[-1] == 3 and sorted(set(ids)) == [2, 3]


def test_lost_connection_without_retries_stops_with_the_cause(restartable: InProcess, tmp_path: Path) -> None:
    db = _database(restartable)
    p = props(restartable, db, tmp_path, **FAST_RETRIES, **{"errors.max.retries": "0"})  # type: ignore[arg-type]
    capture = RunningCapture(p, tmp_path / "out.jsonl").start()
    wait_for(lambda: snapshot_stored(tmp_path / "offsets.json"), "the snapshot")
    restartable.restart_network(down_seconds=3.0)
    wait_for(lambda: not capture.alive(), "the run to stop")
    with pytest.raises(ConnectorError) as failure:
        capture.stop()
    message = str(failure.value)
    assert "the connection to the server was lost" in message and "errors.max.retries=0" in message
    assert PASSWORD not in message


def test_wrong_password_is_clear_and_not_retried(emulator: InProcess, tmp_path: Path) -> None:
    db = _database(emulator)
    p = props(emulator, db, tmp_path, **FAST_RETRIES, **{"errors.max.retries": "5",  # type: ignore[arg-type]
                                                        "database.password": "not-the-password-42"})
    capture = RunningCapture(p, tmp_path / "out.jsonl").start()
    wait_for(lambda: not capture.alive(), "the run to stop")
    with pytest.raises(ConnectorError) as failure:
        capture.stop()
    message = str(failure.value)
    assert "18456" in message and "database.password" in message
    assert "not-the-password-42" not in message
    assert not failure.value.retriable


def test_no_maximum_lsn_with_the_agent_stopped(emulator: InProcess, tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    db = _database(emulator)
    emulator.engine.agent_running = False
    p = props(emulator, db, tmp_path, **{"snapshot.mode": "no_data"})
    caplog.set_level(logging.INFO, logger="headwater.connectors.sqlserver")
    capture = RunningCapture(p, tmp_path / "out.jsonl").start()
    try:
        wait_for(lambda: any("SQL Server Agent is not running" in r.getMessage() for r in caplog.records)
                 or not capture.alive(), "the Agent check")
        emulator.execute("INSERT INTO dbo.items VALUES (1, 'one')", database=db)
        time.sleep(1.0)
        assert capture.alive() and data_events(capture.records()) == []  # nothing captured: streaming waits
        emulator.engine.agent_running = True
        wait_for(lambda: len(data_events(capture.records())) >= 1 or not capture.alive(), "the change")
    finally:
        capture.stop()
    errors = [r for r in caplog.records if "SQL Server Agent is not running" in r.getMessage()]
    assert len(errors) == 1 and errors[0].levelno == logging.ERROR  # once per episode
    assert [op for _, op, _ in summary(capture.records())] == ["c"]
