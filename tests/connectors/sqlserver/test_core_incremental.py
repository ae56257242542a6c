"""SQL Server's side of incremental and blocking snapshots (connectors/sqlserver/incremental.py)
against the emulator: the source's own queries, and runs of the in-process engine — changes made
while an incremental snapshot reads, a restart in the middle of one, a blocking snapshot."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_core_streaming import props

import headwater.config as cfg
from headwater.connectors.sqlserver.connector import SqlServerConnector
from headwater.connectors.sqlserver.incremental import parse_collection, signal_table
from headwater.engine.connector import ConnectorError
from headwater.engine.signals.connector import SnapshotTableError
from headwater.relational.table import Column, TableId
from helpers.capture import RunningCapture
from helpers.sqlserver import SqlServerEmulator, wait_for


def setup_tables(sqlserver: SqlServerEmulator, db: str, rows: int = 40) -> None:
    sqlserver.execute("CREATE TABLE dbo.debezium_signal (id varchar(64) NOT NULL PRIMARY KEY, type varchar(32) NOT "
                      "NULL, data varchar(2048) NULL)", database=db)
    sqlserver.execute("CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY, name varchar(40) NULL)", database=db)
    sqlserver.execute("CREATE TABLE dbo.lines (o int NOT NULL, code varchar(5) NOT NULL, at datetime2(7) NOT NULL, "
                      "CONSTRAINT pk_lines PRIMARY KEY (o, code))", database=db)
    sqlserver.execute("CREATE TABLE dbo.nokey (x int NULL)", database=db)
    for table in ("debezium_signal", "items", "lines", "nokey"):
        sqlserver.execute(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', "
                          "@role_name = NULL, @supports_net_changes = 0", database=db)
    values = ", ".join(f"({i}, 'item-{i}')" for i in range(1, rows + 1))
    sqlserver.execute(f"INSERT INTO dbo.items (id, name) VALUES {values}", database=db)
    lines = ", ".join(f"({o}, 'L{c}', '2024-01-02T03:04:05.{o:03d}{c}123')" for o in range(1, 5) for c in range(1, 4))
    sqlserver.execute(f"INSERT INTO dbo.lines (o, code, at) VALUES {lines}", database=db)
    # the capture job is asynchronous (as on a real server): a connector started before it has read
    # these inserts would stream them too, which the tests below do not expect
    wait_for(lambda: sqlserver.execute(f"SELECT COUNT(*) FROM {db}.cdc.dbo_items_CT")[0][0] == rows
             and sqlserver.execute(f"SELECT COUNT(*) FROM {db}.cdc.dbo_lines_CT")[0][0] == 12, "the capture")


def signal_props(sqlserver: SqlServerEmulator, db: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    return props(sqlserver, db, tmp_path, **{"signal.data.collection": f"{db}.dbo.debezium_signal",
                                            "snapshot.mode": "no_data", "incremental.snapshot.chunk.size": "7",
                                            **extra})


def send(sqlserver: SqlServerEmulator, db: str, signal_id: str, data: dict[str, Any],
         kind: str = "execute-snapshot") -> None:
    sqlserver.execute("INSERT INTO dbo.debezium_signal (id, type, data) VALUES (?, ?, ?)", database=db,
                      params=(signal_id, kind, json.dumps(data)))


def table_events(records: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    return [r for r in records if r["topic"].endswith(f".dbo.{table}") and r["value"] is not None]


def replay(events: list[dict[str, Any]]) -> dict[int, Any]:
    """The table a consumer rebuilds from the events in order."""
    state: dict[int, Any] = {}
    for e in events:
        v = e["value"]
        if v["op"] == "d":
            state.pop(v["before"]["id"], None)
        else:
            state[v["after"]["id"]] = v["after"]["name"]
    return state


# -------------------------------------------------------------------------------------- no server


def test_signal_table_names() -> None:
    assert parse_collection("db.dbo.sig") == TableId("db", "dbo", "sig")
    assert parse_collection("[my.db].[dbo].[odd]]name]") == TableId("my.db", "dbo", "odd]name")
    with pytest.raises(ValueError, match=r"databaseName\.schemaName\.tableName"):
        parse_collection("dbo.sig")
    config = cfg.from_properties({"connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
                                  "topic.prefix": "s", "database.names": "a,b", "database.hostname": "h",
                                  "database.user": "u", "database.password": "p",
                                  "signal.data.collection": "a.dbo.s1,b.dbo.s2"}).connector
    with pytest.raises(ConnectorError, match="several signal tables"):
        signal_table(config)


@pytest.mark.parametrize(("props_", "error"), [
    ({"signal.data.collection": "other.dbo.sig"}, "is not one of database.names"),
    ({"incremental.snapshot.allow.schema.changes": "true"}, "allow.schema.changes=true is not supported"),
])
def test_configurations_refused(props_: dict[str, str], error: str) -> None:
    base = {"connector.class": "io.debezium.connector.sqlserver.SqlServerConnector", "topic.prefix": "s",
            "database.names": "db1", "database.hostname": "h", "database.user": "u", "database.password": "p"}
    try:
        config = cfg.from_properties({**base, **props_})
    except Exception as exc:  # refused while loading the configuration
        assert error in str(exc)
        return
    with pytest.raises(ConnectorError, match=error):
        SqlServerConnector(config.connector)


def test_lower_bound_is_debeziums_with_nulls_first() -> None:
    from headwater.connectors.sqlserver.incremental import _lower_bound

    a = Column("a", 1, "int", optional=False)
    b = Column("b", 2, "int", optional=True)
    assert _lower_bound([a], (5,), inclusive=False) == ("([a] > ?)", [5])
    assert _lower_bound([a, b], (5, 7), inclusive=False) == ("(([a] > ?) OR ([a] = ? AND ([b] > ? AND [b] IS NOT "
                                                             "NULL)))", [5, 5, 7])
    assert _lower_bound([a, b], (5, None), inclusive=False) == ("(([a] > ?) OR ([a] = ? AND [b] IS NOT NULL))",
                                                                [5, 5])


# -------------------------------------------------------------------------------------- the source


def open_source(sqlserver: SqlServerEmulator, db: str, tmp_path: Path, **extra: str) -> Any:
    config = cfg.from_properties(signal_props(sqlserver, db, tmp_path, **extra)).connector
    capture = SqlServerConnector(config).capture_source(parallel=False)
    capture.open()
    capture.resume_offset(None)  # no_data: the structure is recorded, as before streaming
    return capture


def test_source_reads_chunks_with_debeziums_statements(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                       tmp_path: Path) -> None:
    db = sqlserver_db
    setup_tables(sqlserver, db)
    capture = open_source(sqlserver, db, tmp_path, **{"incremental.snapshot.option.recompile": "true",
                                                     "table.include.list": "dbo.items,dbo.lines,dbo.nokey"})
    try:
        source = capture.incremental_source()
        # the signal table is captured although table.include.list leaves it out, but is no data collection
        assert source.captured_tables() == [f"{db}.dbo.items", f"{db}.dbo.lines", f"{db}.dbo.nokey"]
        assert source.chunk_columns(f"{db}.dbo.lines", None) == ["o", "code"]
        assert source.chunk_columns(f"{db}.dbo.items", "name") == ["name"]
        with pytest.raises(SnapshotTableError) as no_key:
            source.chunk_columns(f"{db}.dbo.nokey", None)
        assert no_key.value.status == "NO_PRIMARY_KEY"
        with pytest.raises(SnapshotTableError) as unknown:
            source.chunk_columns(f"{db}.dbo.missing", None)
        assert unknown.value.status == "UNKNOWN_SCHEMA"
        # a signal's name in brackets or another case is the id the table's records carry
        assert source.collection_id(f"[{db.upper()}].[DBO].[Items]") == f"{db}.dbo.items"
        assert source.collection_id(f"{db}.dbo.missing") == f"{db}.dbo.missing"

        items = f"{db}.dbo.items"
        assert source.maximum_key(items, ["id"], "(id < 30)") == (29,)
        entry = source._entry(items)
        sql, params, _ = source.chunk_query(entry, ["id"], (7,), (29,), 7, "(id < 30)")
        assert sql == (f"SELECT TOP 7 * FROM [{db}].[dbo].[items] WHERE ([id] > ?) AND NOT ([id] > ?) AND (id < 30) "
                       "ORDER BY [id] OPTION(RECOMPILE)")
        assert params == [7, 29]
        keys: list[int] = []
        after = None
        while True:
            rows = source.read_chunk(items, ["id"], after, (29,), 7, "(id < 30)")
            if not rows:
                break
            keys += [r.chunk_key[0] for r in rows]
            assert all(r.message_key == {"id": r.chunk_key[0]} for r in rows)
            after = rows[-1].chunk_key
        assert keys == list(range(1, 30))

        # a composite key with a datetime2(7) column (read as text, compared by SQL Server as its type)
        lines = f"{db}.dbo.lines"
        maximum = source.maximum_key(lines, ["o", "code"], None)
        assert maximum == (4, "L3")
        got = []
        after = None
        while rows := source.read_chunk(lines, ["o", "code"], after, maximum, 5, None):
            got += [r.chunk_key for r in rows]
            after = rows[-1].chunk_key
        assert got == [(o, f"L{c}") for o in range(1, 5) for c in range(1, 4)]
        at = source.read_chunk(lines, ["at"], None, ("9999-12-31",), 2, None)
        second = source.read_chunk(lines, ["at"], at[-1].chunk_key, ("9999-12-31 00:00:00",), 100, None)
        assert len(at) + len(second) == 12

        # read events carry the stream position of the database
        position = {"databases": {db: {"commit_lsn": "00000025:00000010:0003", "change_lsn": "00000025:00000010:0002",
                                       "event_serial_no": 1}}}
        records = source.read_events(items, source.read_chunk(items, ["id"], None, (29,), 2, None), position)
        assert [r.value["after"] for r in records] == [{"id": 1, "name": "item-1"}, {"id": 2, "name": "item-2"}]
        block = records[0].value["source"]
        assert (block["snapshot"], block["commit_lsn"], block["change_lsn"], block["event_serial_no"]) == \
            ("incremental", "00000025:00000010:0003", "00000025:00000010:0002", 1)
        assert records[0].offset == position and records[0].table == items

        source.insert_signal("x-1", "log", '{"message": "hi"}')
        source.delete_signal("x-1")
        source.insert_signal("x-2", "log", None)
        rows = sqlserver.execute("SELECT id, type, data FROM dbo.debezium_signal", database=db)
        assert rows == [("x-2", "log", None)]
    finally:
        capture.close()
        capture.close()


def test_signal_source_works_without_an_open_capture(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                     tmp_path: Path) -> None:
    """`headwater signal --channel source`: the source inserts into the signal table on its own."""
    setup_tables(sqlserver, sqlserver_db, rows=1)
    config = cfg.from_properties(signal_props(sqlserver, sqlserver_db.upper(), tmp_path)).connector
    capture = SqlServerConnector(config).capture_source(parallel=False)
    source = capture.incremental_source()
    source.insert_signal("ad-hoc", "execute-snapshot", '{"data-collections": ["x"]}')
    source.close()
    source.close()
    assert sqlserver.execute("SELECT id FROM dbo.debezium_signal", database=sqlserver_db) == [("ad-hoc",)]


# -------------------------------------------------------------------------------------- runs


def test_changes_during_an_incremental_snapshot_replay_to_the_table(sqlserver: SqlServerEmulator,
                                                                    sqlserver_db: str, tmp_path: Path) -> None:
    db = sqlserver_db
    setup_tables(sqlserver, db, rows=60)
    p = signal_props(sqlserver, db, tmp_path, **{"incremental.snapshot.chunk.size": "5"})
    capture = RunningCapture(p, tmp_path / "out.jsonl").start()
    stop = threading.Event()
    try:
        wait_for(lambda: (tmp_path / "offsets.json").exists() or not capture.alive(), "streaming")
        send(sqlserver, db, "is-1", {"data-collections": [f"{db}.dbo.items"], "type": "incremental"})

        def churn() -> None:  # updates, deletes and inserts while the chunks are read
            i = 0
            while not stop.is_set() and i < 40:
                i += 1
                sqlserver.execute(f"UPDATE dbo.items SET name = 'u{i}' WHERE id = {(i * 7) % 60 + 1}", database=db)
                if i % 5 == 0:
                    sqlserver.execute(f"DELETE FROM dbo.items WHERE id = {(i * 11) % 60 + 1}", database=db)
                    sqlserver.execute(f"INSERT INTO dbo.items (id, name) VALUES ({100 + i}, 'n{i}')", database=db)
                time.sleep(0.05)

        worker = threading.Thread(target=churn)
        worker.start()
        worker.join()
        expected = {row[0]: row[1] for row in sqlserver.execute("SELECT id, name FROM dbo.items", database=db)}

        def done() -> bool:
            reads = [e for e in table_events(capture.records(), "items") if e["value"]["op"] == "r"]
            return replay(table_events(capture.records(), "items")) == expected and len(reads) > 0 and \
                not capture_running(tmp_path)
        wait_for(lambda: done() or not capture.alive(), "the incremental snapshot's events", timeout=90)
    finally:
        stop.set()
        capture.stop()
    events = table_events(capture.records(), "items")
    assert replay(events) == expected
    reads = [e for e in events if e["value"]["op"] == "r"]
    assert {e["value"]["source"]["snapshot"] for e in reads} == {"incremental"}
    assert len({e["value"]["after"]["id"] for e in reads}) == len(reads)  # each row at most once


def capture_running(workdir: Path) -> bool:
    """The stored offset says an incremental snapshot is in progress."""
    stored = json.loads((workdir / "offsets.json").read_text())["offsets"]
    return any("incremental_snapshot_collections" in o for o in stored.values())


def test_restart_in_the_middle_resumes_at_the_chunk(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                    tmp_path: Path) -> None:
    db = sqlserver_db
    setup_tables(sqlserver, db, rows=80)
    p = signal_props(sqlserver, db, tmp_path, **{"incremental.snapshot.chunk.size": "4"})
    first = RunningCapture(p, tmp_path / "out1.jsonl").start()
    try:
        wait_for(lambda: (tmp_path / "offsets.json").exists() or not first.alive(), "streaming")
        send(sqlserver, db, "restart-1", {"data-collections": [f"{db}.dbo.items"], "type": "incremental"})
        wait_for(lambda: len([e for e in table_events(first.records(), "items") if e["value"]["op"] == "r"]) >= 12
                 or not first.alive(), "the first chunks", timeout=60)
    finally:
        first.stop()
    before = [e["value"]["after"]["id"] for e in table_events(first.records(), "items")]
    assert 12 <= len(before) < 80, "the snapshot must be stopped in the middle"
    stored = json.loads((tmp_path / "offsets.json").read_text())["offsets"]
    offset = next(iter(stored.values()))
    assert "incremental_snapshot_primary_key" in offset and "databases" in offset
    second = RunningCapture(p, tmp_path / "out2.jsonl").start()
    try:
        wait_for(lambda: {e["value"]["after"]["id"] for e in table_events(second.records(), "items")}
                 | set(before) >= set(range(1, 81)) or not second.alive(), "the rest of the snapshot", timeout=90)
        wait_for(lambda: not capture_running(tmp_path), "the snapshot's end in the offsets", timeout=30)
    finally:
        second.stop()
    after = [e["value"]["after"]["id"] for e in table_events(second.records(), "items")]
    assert sorted(set(before) | set(after)) == list(range(1, 81))
    # it goes on at the chunk after the last key stored: at most one chunk is read again
    assert len(set(before) & set(after)) <= 4
    assert min(after) > max(before) - 4


def test_blocking_snapshot_stops_streaming_and_goes_on(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                       tmp_path: Path) -> None:
    db = sqlserver_db
    setup_tables(sqlserver, db, rows=3)
    p = props(sqlserver, db, tmp_path, **{"signal.data.collection": f"{db}.dbo.debezium_signal",
                                         "snapshot.mode": "initial"})
    capture = RunningCapture(p, tmp_path / "out.jsonl").start()
    try:
        wait_for(lambda: len(table_events(capture.records(), "items")) >= 3 or not capture.alive(), "the snapshot")
        sqlserver.execute("UPDATE dbo.items SET name = 'changed' WHERE id = 2", database=db)
        wait_for(lambda: len(table_events(capture.records(), "items")) >= 4 or not capture.alive(), "the update")
        send(sqlserver, db, "block-1", {"data-collections": [f"{db}.dbo.items"], "type": "blocking"})
        wait_for(lambda: len(table_events(capture.records(), "items")) >= 7 or not capture.alive(),
                 "the blocking snapshot")
        sqlserver.execute("INSERT INTO dbo.items (id, name) VALUES (9, 'after')", database=db)
        wait_for(lambda: len(table_events(capture.records(), "items")) >= 8 or not capture.alive(),
                 "streaming after it")
    finally:
        capture.stop()
    records = capture.records()
    events = table_events(records, "items")
    ops = [(e["value"]["op"], e["value"]["source"]["snapshot"], e["value"]["after"]["id"]) for e in events]
    # the initial snapshot (items, then lines and nokey), the update, the blocking snapshot of items alone
    assert [(op, i) for op, _, i in ops] == [("r", 1), ("r", 2), ("r", 3), ("u", 2), ("r", 1), ("r", 2), ("r", 3),
                                             ("c", 9)]
    assert [m for _, m, _ in ops[4:]] == ["first", "true", "last", "false"]
    assert events[5]["value"]["after"]["name"] == "changed"
    signal_record = next(r for r in records if r["topic"].endswith(".debezium_signal"))
    position = signal_record["value"]["source"]
    for e in events[4:7]:  # the blocking snapshot's records carry the stream's position
        src = e["value"]["source"]
        assert (src["commit_lsn"], src["change_lsn"], src["event_serial_no"]) == \
            (position["commit_lsn"], position["change_lsn"], position["event_serial_no"])
    assert not [e for e in events if e["value"]["op"] == "r" and e["topic"].endswith("debezium_signal")]
