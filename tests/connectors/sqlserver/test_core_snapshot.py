"""The SQL Server connector's snapshot against the emulator (in-process engine): snapshot.mode
(initial, initial_only, no_data, always, when_needed, recovery), snapshot.isolation.mode's locks
(a writer holding a lock makes the locking modes time out; snapshot isolation reads past it), the
schema history, and a stored position the CDC cleanup removed (a clear error, or a new snapshot)."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest
from test_core_streaming import create_table, data_events, props, run_until, snapshot_stored, summary

from headwater.engine.connector import ConnectorError
from helpers.capture import RunningCapture
from helpers.sqlserver import SqlServerEmulator, wait_for


def _setup(sqlserver: SqlServerEmulator, db: str) -> None:
    create_table(sqlserver, db)
    sqlserver.execute("INSERT INTO dbo.items VALUES (1, 'one'), (2, 'two')", database=db)
    # captured before the connector starts: its position lies after these rows
    wait_for(lambda: sqlserver.execute(f"SELECT COUNT(*) FROM {db}.cdc.dbo_items_CT")[0][0] == 2, "the capture")


def _topic(db: str) -> str:
    return f"server1.{db}.dbo.items"


def _history_tables(path: Path) -> list[str]:
    return [c["id"] for line in path.read_text().splitlines() for c in json.loads(line)["tableChanges"]]


def test_initial_then_streaming_and_history(sqlserver: SqlServerEmulator, sqlserver_db: str, tmp_path: Path) -> None:
    _setup(sqlserver, sqlserver_db)
    records = run_until(props(sqlserver, sqlserver_db, tmp_path), tmp_path / "out.jsonl",
                        lambda r: len(data_events(r)) >= 3,
                        lambda: sqlserver.execute("INSERT INTO dbo.items VALUES (3, 'three')", database=sqlserver_db))
    t = _topic(sqlserver_db)
    assert summary(records) == [(t, "r", 1), (t, "r", 2), (t, "c", 3)]
    markers = [r["value"]["source"]["snapshot"] for r in data_events(records)]
    assert markers == ["first", "last", "false"]
    assert _history_tables(tmp_path / "history.dat") == [f'"{sqlserver_db}"."dbo"."items"']


def test_initial_only_does_not_stream(sqlserver: SqlServerEmulator, sqlserver_db: str, tmp_path: Path) -> None:
    _setup(sqlserver, sqlserver_db)
    capture = RunningCapture(props(sqlserver, sqlserver_db, tmp_path, **{"snapshot.mode": "initial_only"}),
                             tmp_path / "out.jsonl").start()
    try:
        wait_for(lambda: len(data_events(capture.records())) >= 2, "the snapshot")
        sqlserver.execute("INSERT INTO dbo.items VALUES (3, 'three')", database=sqlserver_db)
        time.sleep(1.5)
    finally:
        capture.stop()
    assert [op for _, op, _ in summary(capture.records())] == ["r", "r"]


def test_no_data_records_the_schema_and_streams(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                tmp_path: Path) -> None:
    _setup(sqlserver, sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path, **{"snapshot.mode": "no_data", "include.schema.changes": "true"})
    records = run_until(p, tmp_path / "out.jsonl", lambda r: len(data_events(r)) >= 1,
                        lambda: sqlserver.execute("INSERT INTO dbo.items VALUES (3, 'three')", database=sqlserver_db))
    assert summary(records) == [(_topic(sqlserver_db), "c", 3)]
    schema_events = [r for r in records if r["topic"] == "server1"]
    assert [e["value"]["tableChanges"][0]["type"] for e in schema_events] == ["CREATE"]
    assert _history_tables(tmp_path / "history.dat") == [f'"{sqlserver_db}"."dbo"."items"']


def test_always_snapshots_on_every_start(sqlserver: SqlServerEmulator, sqlserver_db: str, tmp_path: Path) -> None:
    _setup(sqlserver, sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path, **{"snapshot.mode": "always"})
    first = run_until(p, tmp_path / "first.jsonl", lambda r: len(data_events(r)) >= 2)
    sqlserver.execute("INSERT INTO dbo.items VALUES (3, 'three')", database=sqlserver_db)
    # the capture job is asynchronous (as on a real server): a snapshot taken before it has read the
    # insert sees the row in the table and then streams its change too (at-least-once), so wait for it
    wait_for(lambda: sqlserver.execute(f"SELECT COUNT(*) FROM {sqlserver_db}.cdc.dbo_items_CT WHERE id = 3")[0][0]
             == 1, "the capture")
    second = run_until(p, tmp_path / "second.jsonl", lambda r: len(data_events(r)) >= 3)
    t = _topic(sqlserver_db)
    assert summary(first) == [(t, "r", 1), (t, "r", 2)]
    # the row inserted while stopped is in the new snapshot, and not streamed a second time
    assert summary(second) == [(t, "r", 1), (t, "r", 2), (t, "r", 3)]


def _clean_up_past(sqlserver: SqlServerEmulator, db: str) -> None:
    """Changes the connector has not read, then the cleanup removes them (the low water mark moves
    past the stored offset)."""
    sqlserver.execute("INSERT INTO dbo.items VALUES (3, 'lost')", database=db)
    before = sqlserver.execute(f"SELECT {db}.sys.fn_cdc_get_max_lsn()")[0][0]
    wait_for(lambda: sqlserver.execute(f"SELECT {db}.sys.fn_cdc_get_max_lsn()")[0][0] != before, "the capture")
    sqlserver.execute("INSERT INTO dbo.items VALUES (4, 'lost too')", database=db)
    wait_for(lambda: sqlserver.execute(f"SELECT COUNT(*) FROM {db}.cdc.dbo_items_CT WHERE id = 4")[0][0] == 1,
             "the capture")
    sqlserver.execute("DECLARE @lsn binary(10) = sys.fn_cdc_get_max_lsn(); "
                      "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_items', @low_water_mark = @lsn",
                      database=db)


def test_cleanup_past_the_offset_is_a_clear_error(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                  tmp_path: Path) -> None:
    _setup(sqlserver, sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path)
    run_until(p, tmp_path / "first.jsonl", lambda r: len(data_events(r)) >= 2)
    _clean_up_past(sqlserver, sqlserver_db)
    capture = RunningCapture(p, tmp_path / "second.jsonl").start()
    wait_for(lambda: not capture.alive(), "the run to stop")
    with pytest.raises(ConnectorError) as failure:
        capture.stop()
    message = str(failure.value)
    assert f"database {sqlserver_db!r}" in message and "cleanup" in message and "when_needed" in message
    assert capture.records() == []


def test_when_needed_takes_a_new_snapshot_after_cleanup(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                        tmp_path: Path) -> None:
    _setup(sqlserver, sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path, **{"snapshot.mode": "when_needed"})
    run_until(p, tmp_path / "first.jsonl", lambda r: len(data_events(r)) >= 2)
    _clean_up_past(sqlserver, sqlserver_db)
    second = run_until(p, tmp_path / "second.jsonl", lambda r: len(data_events(r)) >= 4)
    assert [op for _, op, _ in summary(second)] == ["r"] * 4


def test_recovery_rebuilds_a_lost_history(sqlserver: SqlServerEmulator, sqlserver_db: str, tmp_path: Path) -> None:
    _setup(sqlserver, sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path)
    run_until(p, tmp_path / "first.jsonl", lambda r: len(data_events(r)) >= 2)
    (tmp_path / "history.dat").unlink()
    # without the history the stored offset's table structures are unknown: a clear error
    capture = RunningCapture(p, tmp_path / "second.jsonl").start()
    wait_for(lambda: not capture.alive(), "the run to stop")
    with pytest.raises(ConnectorError, match="schema history"):
        capture.stop()
    # recovery: the history is written again from the tables as they are, no snapshot rows
    recovered = run_until({**p, "snapshot.mode": "recovery"}, tmp_path / "third.jsonl",
                          lambda r: len(data_events(r)) >= 1,
                          lambda: sqlserver.execute("INSERT INTO dbo.items VALUES (5, 'five')",
                                                    database=sqlserver_db))
    assert summary(recovered) == [(_topic(sqlserver_db), "c", 5)]
    assert _history_tables(tmp_path / "history.dat") == [f'"{sqlserver_db}"."dbo"."items"']


def test_configuration_based_schema_properties(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                               tmp_path: Path) -> None:
    """snapshot.mode.configuration.based.snapshot.schema=false: the data snapshot records no
    structure (no history, no schema-change event); a restart then finds no history and, with
    ...snapshot.on.schema.error=true, records the current structure instead of stopping."""
    _setup(sqlserver, sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path, **{
        "snapshot.mode": "configuration_based", "include.schema.changes": "true",
        "snapshot.mode.configuration.based.snapshot.data": "true",
        "snapshot.mode.configuration.based.start.stream": "true"})
    first = run_until(p, tmp_path / "first.jsonl", lambda r: len(data_events(r)) >= 2)
    assert [op for _, op, _ in summary(first)] == ["r", "r"]
    assert [r for r in first if r["topic"] == "server1"] == []
    assert not (tmp_path / "history.dat").exists() or _history_tables(tmp_path / "history.dat") == []
    # without the history: the error of a missing history, unless on.schema.error says to record it
    # (snapshot.data=true would snapshot again on every start, like `always`)
    p["snapshot.mode.configuration.based.snapshot.data"] = "false"
    capture = RunningCapture(p, tmp_path / "second.jsonl").start()
    wait_for(lambda: not capture.alive(), "the run to stop")
    with pytest.raises(ConnectorError, match="schema history"):
        capture.stop()
    recovering = {**p, "snapshot.mode.configuration.based.snapshot.on.schema.error": "true"}
    third = run_until(recovering, tmp_path / "third.jsonl", lambda r: len(data_events(r)) >= 1,
                      lambda: sqlserver.execute("INSERT INTO dbo.items VALUES (3, 'three')", database=sqlserver_db))
    assert summary(third) == [(_topic(sqlserver_db), "c", 3)]
    assert _history_tables(tmp_path / "history.dat") == [f'"{sqlserver_db}"."dbo"."items"']


@contextlib.contextmanager
def _writer_holding_a_lock(sqlserver: SqlServerEmulator, db: str):  # type: ignore[no-untyped-def]
    conn = sqlserver.connect(db, autocommit=False)
    try:
        conn.cursor().execute("INSERT INTO dbo.items VALUES (9, 'uncommitted')")
        yield
    finally:
        conn.rollback()
        conn.close()


@pytest.mark.parametrize("isolation", ["exclusive", "repeatable_read"])
def test_locking_modes_wait_for_a_writer_and_time_out(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                      tmp_path: Path, isolation: str) -> None:
    _setup(sqlserver, sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path, **{"snapshot.isolation.mode": isolation,
                                                    "snapshot.lock.timeout.ms": "500"})
    with _writer_holding_a_lock(sqlserver, sqlserver_db):
        capture = RunningCapture(p, tmp_path / "out.jsonl").start()
        wait_for(lambda: not capture.alive(), "the snapshot to give up")
    with pytest.raises(ConnectorError, match=r"locking table .*items.*snapshot\.lock\.timeout\.ms=500"):
        capture.stop()


@pytest.mark.parametrize("isolation", ["snapshot", "read_committed"])
def test_non_locking_modes_read_past_a_writer(sqlserver: SqlServerEmulator, sqlserver_db: str, tmp_path: Path,
                                              isolation: str) -> None:
    _setup(sqlserver, sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path, **{"snapshot.isolation.mode": isolation,
                                                    "snapshot.lock.timeout.ms": "500"})
    with _writer_holding_a_lock(sqlserver, sqlserver_db):
        capture = RunningCapture(p, tmp_path / "out.jsonl").start()
        try:
            wait_for(lambda: snapshot_stored(tmp_path / "offsets.json") or not capture.alive(), "the snapshot")
        finally:
            capture.stop()
    assert [i for _, _, i in summary(capture.records())] == [1, 2]


def test_key_range_chunks_read_every_row_once_in_key_order(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                            tmp_path: Path) -> None:
    """The T-SQL chunk dialect and chunk reads (for executors): a composite key of an int and a
    string, bounds read as text and cast back, rows inserted out of order."""
    from headwater import config as cfg
    from headwater.connectors.sqlserver import snapshot as snap
    from headwater.connectors.sqlserver.connector import SqlServerConnector
    from headwater.engine.snapshot_plan import plan_chunks

    sqlserver.execute("CREATE TABLE dbo.pairs (a int NOT NULL, b nvarchar(10) NOT NULL, t datetime2 NULL, "
                      "PRIMARY KEY (a, b))", database=sqlserver_db)
    values = [(a, f"k{b:02d}") for a in (3, 1, 2) for b in (7, 1, 5, 3, 9, 2)]
    sqlserver.execute("INSERT INTO dbo.pairs (a, b, t) VALUES " + ", ".join(
        f"({a}, N'{b}', '2024-01-0{a} 10:00:00.123456{a}')" for a, b in values), database=sqlserver_db)
    config = cfg.from_properties(props(sqlserver, sqlserver_db, tmp_path), sink_type="jsonl",
                                 sink={"path": str(tmp_path / "out.jsonl")})
    connector = SqlServerConnector(config.connector)
    source = connector.capture_source(parallel=False)
    source.open()
    try:
        point = source.open_snapshot(None, False)
        (table,) = source.snapshot_tables(point)
        conn = source.conns[sqlserver_db]
        chunks = plan_chunks(source.chunk_dialect_for(sqlserver_db), [table], {}, 5)
        assert len(chunks) == 4 and chunks[0].lower is None and chunks[-1].upper is None
        columns = list(table.table.columns)
        key = [table.table.column("a"), table.table.column("b")]
        read = [(r[0], r[1]) for ch in chunks
                for r in snap.chunk_rows(conn, table.table.id, columns, key, ch.lower, ch.upper)]
        assert read == sorted(values)
    finally:
        source.close()


def test_cleanup_past_the_streaming_position_stops_the_stream(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                              tmp_path: Path) -> None:
    """The cleanup job removes changes while the connector is between two iterations: not skipped
    in silence (Debezium would read on from the instance's new start)."""
    _setup(sqlserver, sqlserver_db)
    # the cleanup's inserts wait for two capture cycles: on a loaded machine that took over 4 s,
    # and the connector read the change the cleanup was to remove first
    p = props(sqlserver, sqlserver_db, tmp_path, **{"poll.interval.ms": "15000", "heartbeat.interval.ms": "1"})
    capture = RunningCapture(p, tmp_path / "out.jsonl").start()
    try:
        wait_for(lambda: snapshot_stored(tmp_path / "offsets.json"), "the snapshot")
        sqlserver.execute("INSERT INTO dbo.items VALUES (10, 'streamed')", database=sqlserver_db)
        wait_for(lambda: len(data_events(capture.records())) == 3, "the streamed change")
        beats = len(capture.records())
        # right after an idle iteration (its heartbeat), the connector sleeps 15 s
        wait_for(lambda: len(capture.records()) > beats, "an iteration", timeout=30)
        _clean_up_past(sqlserver, sqlserver_db)
        wait_for(lambda: not capture.alive(), "the stream to stop", timeout=45)
    finally:
        with pytest.raises(ConnectorError) as failure:
            capture.stop()
    assert "cleanup moved the start of capture instance 'dbo_items'" in str(failure.value)
    assert [i for _, _, i in summary(capture.records())] == [1, 2, 10]  # nothing after the gap


def test_a_database_added_later_is_snapshotted_alone(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                     tmp_path: Path) -> None:
    """database.names grows: the new database gets its snapshot; the first one streams on from its
    stored position (no second snapshot of it, and its changes made meanwhile are streamed)."""
    _setup(sqlserver, sqlserver_db)
    run_until(props(sqlserver, sqlserver_db, tmp_path), tmp_path / "first.jsonl", lambda r: len(data_events(r)) >= 2)
    added = f"{sqlserver_db}_added"
    sqlserver.execute(f"CREATE DATABASE {added}")
    sqlserver.execute("EXEC sys.sp_cdc_enable_db", database=added)
    try:
        _setup(sqlserver, added)
        sqlserver.execute("UPDATE dbo.items SET name = 'ONE' WHERE id = 1", database=sqlserver_db)
        both = props(sqlserver, f"{sqlserver_db},{added}", tmp_path)
        second = run_until(both, tmp_path / "second.jsonl", lambda r: len(data_events(r)) >= 3)
        assert sorted(summary(second)) == sorted([(_topic(sqlserver_db), "u", 1), (_topic(added), "r", 1),
                                                  (_topic(added), "r", 2)])
        stored = json.loads((tmp_path / "offsets.json").read_text())["offsets"]
        (offset,) = stored.values()
        assert offset["databases"][added]["snapshot_completed"] is True
    finally:
        with contextlib.suppress(Exception):
            sqlserver.execute(f"DROP DATABASE {added}")


def test_snapshot_steps_run_once_when_the_end_is_asked_before_the_plan(sqlserver: SqlServerEmulator,
                                                                        sqlserver_db: str, tmp_path: Path) -> None:
    """The Spark source asks for the snapshot's end (completed_offset) before it plans the chunks: a
    database's snapshot steps — its maximum LSN, its structure in the schema history — are taken once, and
    the chunks carry that LSN and the engine's per-database markers."""
    from headwater import config as cfg
    from headwater.connectors.sqlserver.connector import SqlServerConnector
    from headwater.connectors.sqlserver.source_info import parse_offset
    from headwater.engine.capture import plan_snapshot

    _setup(sqlserver, sqlserver_db)
    config = cfg.from_properties(props(sqlserver, sqlserver_db, tmp_path), sink_type="jsonl",
                                 sink={"path": str(tmp_path / "out.jsonl")})
    connector = SqlServerConnector(config.connector)
    source = connector.capture_source(parallel=True)
    source.open()
    try:
        point = source.open_snapshot(None, False)
        done = parse_offset(source.completed_offset(point.offset), source.databases)[sqlserver_db]
        sqlserver.execute("INSERT INTO dbo.items VALUES (3, 'three')", database=sqlserver_db)  # moves the max LSN
        wait_for(lambda: sqlserver.execute(f"SELECT COUNT(*) FROM {sqlserver_db}.cdc.dbo_items_CT")[0][0] == 3,
                 "the capture")
        chunks = plan_snapshot(connector, source, point, 2)
        units = [source.snapshot_unit(point, chunk) for chunk in chunks]
    finally:
        source.close()
    assert [u.lsn for u in units] == [done.commit_lsn] * len(units)
    assert [(c.partition, c.first_table, c.last_table) for c in chunks] == [(sqlserver_db, True, True)] * 2
    assert [len(u.records) for u in units] == [1, 0]  # the table's CREATE schema change, with the first chunk
    assert _history_tables(tmp_path / "history.dat") == [f'"{sqlserver_db}"."dbo"."items"']
