"""The SQL Server connector's streaming loop against the emulator (in-process engine): several
databases in one connector, `max.iteration.transactions`, both `data.query.mode` values giving the
same events, restart de-duplication inside a transaction, and a capture instance disabled while
streaming (function mode's error 208)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from headwater.connectors.sqlserver.source_info import partition_order
from headwater.engine.connector import ConnectorError
from headwater.engine.offsets import FileOffsetStore
from helpers.capture import RunningCapture, read_records
from helpers.sqlserver import SqlServerEmulator, wait_for


def props(sqlserver: SqlServerEmulator, databases: str, workdir: Path, **extra: str) -> dict[str, str]:
    p = {
        "connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
        "database.hostname": sqlserver.host,
        "database.port": str(sqlserver.port),
        "database.user": "sa",
        "database.password": sqlserver.password,
        "database.encrypt": "false",
        "database.names": databases,
        "topic.prefix": "server1",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(workdir / "history.dat"),
        "offset.storage.file.filename": str(workdir / "offsets.json"),
        "offset.flush.interval.ms": "100",
        "poll.interval.ms": "100",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
    }
    p.update(extra)
    return p


def data_events(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["value"] is not None and "op" in r["value"]]


def summary(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(topic, op, id) of each data event, in order."""
    out = []
    for r in data_events(records):
        v = r["value"]
        row = v["after"] if v["after"] is not None else v["before"]
        out.append((r["topic"], v["op"], row["id"]))
    return out


def run_until(p: dict[str, str], out: Path, done: Callable[[list[dict[str, Any]]], bool],
              action: Callable[[], None] | None = None, timeout: float = 60) -> list[dict[str, Any]]:
    capture = RunningCapture(p, out).start()
    try:
        if action is not None:
            wait_for(lambda: snapshot_stored(Path(p["offset.storage.file.filename"])) or not capture.alive(),
                     "the snapshot's end", timeout)
            action()
        wait_for(lambda: done(capture.records()) or not capture.alive(), "the events", timeout)
        time.sleep(0.5)  # nothing more may come
    finally:
        capture.stop()
    return capture.records()


def snapshot_stored(offsets: Path) -> bool:
    """The stored offset says every database's snapshot completed (or streaming went on)."""
    if not offsets.exists():
        return False
    stored = json.loads(offsets.read_text())["offsets"]
    return bool(stored) and all(not e.get("snapshot") or e.get("snapshot_completed")
                                for o in stored.values() for e in o["databases"].values())


def create_table(sqlserver: SqlServerEmulator, db: str, table: str = "items") -> None:
    sqlserver.execute(f"CREATE TABLE dbo.{table} (id int NOT NULL PRIMARY KEY, name varchar(40) NULL)", database=db)
    sqlserver.execute(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', "
                      "@role_name = NULL, @supports_net_changes = 0", database=db)


def test_several_databases_stream_into_their_own_topics(sqlserver: SqlServerEmulator, tmp_path: Path) -> None:
    dbs = []
    for n in range(2):
        name = f"core_multi_{n}_{int(time.time() * 1000) % 10**8}"
        sqlserver.execute(f"CREATE DATABASE {name}")
        sqlserver.execute("EXEC sys.sp_cdc_enable_db", database=name)
        create_table(sqlserver, name)
        sqlserver.execute(f"INSERT INTO dbo.items VALUES ({n + 1}, 'snap')", database=name)
        wait_captured(sqlserver, name, 1)
        dbs.append(name)

    def workload() -> None:
        for n, name in enumerate(dbs):
            sqlserver.execute(f"INSERT INTO dbo.items VALUES ({n + 10}, 'streamed')", database=name)
        sqlserver.execute("UPDATE dbo.items SET name = 'changed' WHERE id = 10", database=dbs[0])

    try:
        records = run_until(props(sqlserver, ",".join(dbs), tmp_path), tmp_path / "out.jsonl",
                            lambda r: len(data_events(r)) >= 5, workload)
    finally:
        for name in dbs:  # each holds a replication slot of the emulator's PostgreSQL
            sqlserver.execute(f"DROP DATABASE {name}")
    got = summary(records)
    t0, t1 = (f"server1.{d}.dbo.items" for d in dbs)
    # snapshots one database after the other, in Debezium's partition order (a hash of the names)
    snapshot_rows = {dbs[0]: (t0, "r", 1), dbs[1]: (t1, "r", 2)}
    assert got[:2] == [snapshot_rows[d] for d in partition_order("server1", dbs)]
    assert sorted(got[2:]) == sorted([(t0, "c", 10), (t1, "c", 11), (t0, "u", 10)])
    # within a database, LSN order
    assert [g for g in got if g[0] == t0][1:] == [(t0, "c", 10), (t0, "u", 10)]
    sources = [r["value"]["source"] for r in data_events(records)]
    # each database has its own markers: its first and only snapshot row is its last
    assert [s["snapshot"] for s in sources[:2]] == ["last", "last"]
    stored = json.loads((tmp_path / "offsets.json").read_text())["offsets"]
    (offset,) = stored.values()
    assert set(offset["databases"]) == set(dbs)


def wait_captured(sqlserver: SqlServerEmulator, db: str, rows: int, capture_instance: str = "dbo_items") -> None:
    """Wait until the capture job has written `rows` change rows: rows inserted before a connector
    starts then lie at or before its snapshot's maximum LSN (otherwise such a row may come twice,
    read and then created — what repeatable_read allows, but not what these tests are about)."""
    wait_for(lambda: sqlserver.execute(f"SELECT COUNT(*) FROM {db}.cdc.{capture_instance}_CT")[0][0] >= rows,
             "the capture")


def _workload(sqlserver: SqlServerEmulator, db: str) -> None:
    sqlserver.execute("INSERT INTO dbo.items VALUES (2, 'two')", database=db)
    sqlserver.execute("BEGIN TRANSACTION; INSERT INTO dbo.items VALUES (3, 'three'); "
                      "UPDATE dbo.items SET name = 'ONE' WHERE id = 1; DELETE FROM dbo.items WHERE id = 2; "
                      "COMMIT TRANSACTION", database=db)
    sqlserver.execute("INSERT INTO dbo.items VALUES (4, 'four')", database=db)


EXPECTED_STREAM = [("c", 2), ("c", 3), ("u", 1), ("d", 2), ("c", 4)]


@pytest.mark.parametrize("mode", ["function", "direct"])
@pytest.mark.parametrize("max_transactions", ["0", "1", "500"])
def test_query_modes_and_iteration_sizes_give_the_same_events(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                               tmp_path: Path, mode: str,
                                                               max_transactions: str) -> None:
    create_table(sqlserver, sqlserver_db)
    sqlserver.execute("INSERT INTO dbo.items VALUES (1, 'one')", database=sqlserver_db)
    wait_captured(sqlserver, sqlserver_db, 1)
    p = props(sqlserver, sqlserver_db, tmp_path, **{"data.query.mode": mode,
                                                    "max.iteration.transactions": max_transactions,
                                                    "streaming.fetch.size": "2"})
    records = run_until(p, tmp_path / "out.jsonl", lambda r: len(data_events(r)) >= 6,
                        lambda: _workload(sqlserver, sqlserver_db))
    events = data_events(records)
    assert [(e["value"]["op"], (e["value"]["after"] or e["value"]["before"])["id"]) for e in events] == \
        [("r", 1), *EXPECTED_STREAM]
    serials = [e["value"]["source"]["event_serial_no"] for e in events[1:]]
    assert serials == [1, 1, 2, 1, 1]  # an update pair counts 2
    tx = {e["value"]["source"]["commit_lsn"] for e in events[2:5]}
    assert len(tx) == 1  # one transaction, one commit LSN
    tombstones = [r for r in records if r["value"] is None]
    assert len(tombstones) == 1


def test_restart_inside_a_transaction_skips_what_was_delivered(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                                tmp_path: Path) -> None:
    create_table(sqlserver, sqlserver_db)
    sqlserver.execute("INSERT INTO dbo.items VALUES (1, 'one')", database=sqlserver_db)
    wait_captured(sqlserver, sqlserver_db, 1)
    first = run_until(props(sqlserver, sqlserver_db, tmp_path), tmp_path / "first.jsonl",
                      lambda r: len(data_events(r)) >= 6, lambda: _workload(sqlserver, sqlserver_db))
    events = data_events(first)
    # the offset as if the run had stopped right after the transaction's update (serial 2 at its position)
    update = events[3]["value"]["source"]
    assert events[3]["value"]["op"] == "u"
    store = FileOffsetStore(tmp_path / "offsets.json")
    partition = {"server": "server1"}
    stored = store.load(partition)
    assert stored is not None
    stored["databases"][sqlserver_db] = {"commit_lsn": update["commit_lsn"], "change_lsn": update["change_lsn"],
                                         "event_serial_no": update["event_serial_no"]}
    store.save(partition, stored)
    second = run_until(props(sqlserver, sqlserver_db, tmp_path), tmp_path / "second.jsonl",
                       lambda r: len(data_events(r)) >= 2)
    assert summary(second) == [(f"server1.{sqlserver_db}.dbo.items", "d", 2), (f"server1.{sqlserver_db}.dbo.items",
                                                                             "c", 4)]


def test_disabled_capture_instance_is_dropped_in_function_mode(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                                tmp_path: Path) -> None:
    create_table(sqlserver, sqlserver_db, "a")
    create_table(sqlserver, sqlserver_db, "b")
    p = props(sqlserver, sqlserver_db, tmp_path, **{"data.query.mode": "function"})
    out = tmp_path / "out.jsonl"

    def workload() -> None:
        sqlserver.execute("INSERT INTO dbo.a VALUES (1, 'a1')", database=sqlserver_db)
        # streamed before its capture instance goes (disabling drops the change table); a fixed
        # sleep was too short when the capture job or the connector lagged on a loaded machine
        wait_for(lambda: data_events(read_records(out)), "the change of dbo.a")
        sqlserver.execute("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'a', "
                          "@capture_instance = N'dbo_a'", database=sqlserver_db)
        sqlserver.execute("INSERT INTO dbo.b VALUES (1, 'b1')", database=sqlserver_db)
        sqlserver.execute("INSERT INTO dbo.a VALUES (2, 'not captured')", database=sqlserver_db)
        sqlserver.execute("INSERT INTO dbo.b VALUES (2, 'b2')", database=sqlserver_db)

    records = run_until(p, out, lambda r: len(data_events(r)) >= 3, workload)
    topic = f"server1.{sqlserver_db}.dbo."
    assert summary(records) == [(topic + "a", "c", 1), (topic + "b", "c", 1), (topic + "b", "c", 2)]


def test_capture_instance_switch_and_restart_from_the_history(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                               tmp_path: Path) -> None:
    """Spec §6: a second capture instance after ALTER TABLE: an ALTER schema change where its
    changes begin, the new column in the events; a restart rebuilds that structure from the schema
    history (the catalog alone cannot say which structure the stored position had)."""
    create_table(sqlserver, sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path, **{"include.schema.changes": "true"})

    def switch() -> None:
        sqlserver.execute("INSERT INTO dbo.items VALUES (2, 'before')", database=sqlserver_db)
        time.sleep(1.0)
        sqlserver.execute("ALTER TABLE dbo.items ADD extra int NULL", database=sqlserver_db)
        sqlserver.execute("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', "
                          "@role_name = NULL, @supports_net_changes = 0, @capture_instance = N'dbo_items_v2'",
                          database=sqlserver_db)
        sqlserver.execute("INSERT INTO dbo.items VALUES (3, 'after', 30)", database=sqlserver_db)

    first = run_until(p, tmp_path / "first.jsonl", lambda r: len(data_events(r)) >= 2, switch)
    schema_events = [r["value"]["tableChanges"][0]["type"] for r in first if r["topic"] == "server1"]
    assert schema_events == ["CREATE", "ALTER"]
    rows = [r["value"]["after"] for r in data_events(first)]
    assert rows == [{"id": 2, "name": "before"}, {"id": 3, "name": "after", "extra": 30}]

    sqlserver.execute("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'items', "
                      "@capture_instance = N'dbo_items'", database=sqlserver_db)
    second = run_until(p, tmp_path / "second.jsonl", lambda r: len(data_events(r)) >= 1,
                       lambda: sqlserver.execute("INSERT INTO dbo.items VALUES (4, 'restarted', 40)",
                                                 database=sqlserver_db))
    assert [r["value"]["after"] for r in data_events(second)] == [{"id": 4, "name": "restarted", "extra": 40}]
    assert [r for r in second if r["topic"] == "server1"] == []  # nothing new to tell


def test_heartbeats_and_skipped_operations(sqlserver: SqlServerEmulator, sqlserver_db: str, tmp_path: Path) -> None:
    create_table(sqlserver, sqlserver_db)
    sqlserver.execute("CREATE TABLE dbo.beats (id int IDENTITY(1, 1) PRIMARY KEY, at datetime2 NOT NULL)",
                      database=sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path, **{"heartbeat.interval.ms": "200", "skipped.operations": "u,d",
                                                    "heartbeat.action.query":
                                                        "INSERT INTO dbo.beats (at) VALUES (SYSDATETIME())"})

    def workload() -> None:
        sqlserver.execute("INSERT INTO dbo.items VALUES (1, 'one')", database=sqlserver_db)
        sqlserver.execute("UPDATE dbo.items SET name = 'ONE' WHERE id = 1", database=sqlserver_db)
        sqlserver.execute("DELETE FROM dbo.items WHERE id = 1", database=sqlserver_db)
        sqlserver.execute("INSERT INTO dbo.items VALUES (2, 'two')", database=sqlserver_db)

    records = run_until(p, tmp_path / "out.jsonl", lambda r: len(data_events(r)) >= 2, workload)
    assert [(op, i) for _, op, i in summary(records)] == [("c", 1), ("c", 2)]
    assert [r for r in records if r["value"] is None] == []  # no delete, no tombstone
    heartbeats = [r for r in records if r["topic"] == "__debezium-heartbeat.server1"]
    assert heartbeats and heartbeats[0]["key"] == {"serverName": "server1"} and "ts_ms" in heartbeats[0]["value"]
    # heartbeat.action.query ran (committed) in the captured database, once per heartbeat record
    beats = sqlserver.execute("SELECT COUNT(*) FROM dbo.beats", database=sqlserver_db)[0][0]
    assert beats >= len(heartbeats) > 0


def test_restart_inside_a_transaction_continues_its_metadata(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                              tmp_path: Path) -> None:
    """provide.transaction.metadata: the offset keeps Debezium's transaction keys, so a restart in
    the middle of a transaction sends no second BEGIN and goes on counting."""
    create_table(sqlserver, sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path, **{"provide.transaction.metadata": "true"})

    def workload() -> None:
        sqlserver.execute("BEGIN TRANSACTION; INSERT INTO dbo.items VALUES (2, 'a'); INSERT INTO dbo.items "
                          "VALUES (3, 'b'); INSERT INTO dbo.items VALUES (4, 'c'); COMMIT TRANSACTION",
                          database=sqlserver_db)
        sqlserver.execute("INSERT INTO dbo.items VALUES (5, 'd')", database=sqlserver_db)

    first = run_until(p, tmp_path / "first.jsonl", lambda r: len(data_events(r)) >= 4, workload)
    events = data_events(first)
    second_event = events[1]["value"]
    tx_id = second_event["transaction"]["id"]
    assert second_event["transaction"]["total_order"] == 2 and tx_id == second_event["source"]["commit_lsn"]
    store = FileOffsetStore(tmp_path / "offsets.json")
    stored = store.load({"server": "server1"})
    assert stored is not None
    source = second_event["source"]
    collection = f"{sqlserver_db}.dbo.items"
    stored["databases"][sqlserver_db] = {
        "commit_lsn": source["commit_lsn"], "change_lsn": source["change_lsn"],
        "event_serial_no": source["event_serial_no"], "transaction_id": tx_id,
        f"transaction_data_collection_order_{collection}": 2}
    store.save({"server": "server1"}, stored)
    second = run_until(p, tmp_path / "second.jsonl", lambda r: len(data_events(r)) >= 2)
    transactions = [(r["value"]["status"], r["value"]["id"], r["value"]["event_count"]) for r in second
                    if r["topic"] == "server1.transaction"]
    assert transactions[0] == ("END", tx_id, 3)          # no second BEGIN for the open transaction
    assert transactions[1][0] == "BEGIN" and transactions[1][1] != tx_id
    resumed = data_events(second)[0]["value"]
    assert (resumed["after"]["id"], resumed["transaction"]["total_order"],
            resumed["transaction"]["data_collection_order"]) == (4, 3, 3)
    latest = json.loads((tmp_path / "offsets.json").read_text())["offsets"]
    (offset,) = latest.values()
    assert "transaction_id" in offset["databases"][sqlserver_db]


def test_key_columns_column_filters_and_masks(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                              tmp_path: Path) -> None:
    sqlserver.execute("CREATE TABLE dbo.people (id int NOT NULL PRIMARY KEY, name varchar(40) NOT NULL, "
                      "secret varchar(40) NULL, note varchar(40) NULL)", database=sqlserver_db)
    sqlserver.execute("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'people', "
                      "@role_name = NULL, @supports_net_changes = 0", database=sqlserver_db)
    sqlserver.execute("INSERT INTO dbo.people VALUES (1, 'ann', 'pin-1', 'x')", database=sqlserver_db)
    wait_captured(sqlserver, sqlserver_db, 1, "dbo_people")
    p = props(sqlserver, sqlserver_db, tmp_path, **{
        "message.key.columns": "dbo.people:name", "column.exclude.list": "dbo.people.note",
        "column.mask.with.5.chars": "dbo.people.secret"})
    records = run_until(p, tmp_path / "out.jsonl", lambda r: len(data_events(r)) >= 2,
                        lambda: sqlserver.execute("INSERT INTO dbo.people VALUES (2, 'bob', 'pin-2', 'y')",
                                                  database=sqlserver_db))
    events = data_events(records)
    assert [e["key"] for e in events] == [{"name": "ann"}, {"name": "bob"}]
    assert [e["value"]["after"] for e in events] == [{"id": 1, "name": "ann", "secret": "*****"},
                                                     {"id": 2, "name": "bob", "secret": "*****"}]


def test_initial_statements_and_updates_without_change(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                       tmp_path: Path) -> None:
    """database.initial.statements run on each new connection (here: a row per connection);
    skip.messages.without.change leaves out an update that changed only an excluded column."""
    create_table(sqlserver, sqlserver_db)
    sqlserver.execute("ALTER TABLE dbo.items ADD note varchar(20) NULL", database=sqlserver_db)
    sqlserver.execute("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'items', "
                      "@capture_instance = N'dbo_items'", database=sqlserver_db)
    sqlserver.execute("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', "
                      "@role_name = NULL, @supports_net_changes = 0", database=sqlserver_db)
    sqlserver.execute("CREATE TABLE dbo.sessions (id int IDENTITY(1, 1) PRIMARY KEY, at datetime2 NOT NULL)",
                      database=sqlserver_db)
    p = props(sqlserver, sqlserver_db, tmp_path, **{
        "database.initial.statements": "INSERT INTO dbo.sessions (at) VALUES (SYSDATETIME())",
        "skip.messages.without.change": "true", "column.exclude.list": r".*\.items\.note",
        "table.include.list": r"dbo\.items"})

    def workload() -> None:
        sqlserver.execute("INSERT INTO dbo.items VALUES (1, 'one', 'a')", database=sqlserver_db)
        sqlserver.execute("UPDATE dbo.items SET note = 'b' WHERE id = 1", database=sqlserver_db)  # left out
        sqlserver.execute("UPDATE dbo.items SET name = 'ONE' WHERE id = 1", database=sqlserver_db)

    records = run_until(p, tmp_path / "out.jsonl", lambda r: len(data_events(r)) >= 2, workload)
    events = data_events(records)
    assert [(e["value"]["op"], e["value"]["after"]) for e in events] == [
        ("c", {"id": 1, "name": "one"}), ("u", {"id": 1, "name": "ONE"})]
    assert sqlserver.execute("SELECT COUNT(*) FROM dbo.sessions", database=sqlserver_db)[0][0] >= 1

    broken = props(sqlserver, sqlserver_db, tmp_path / "broken", **{"database.initial.statements": "SELEC 1"})
    capture = RunningCapture(broken, tmp_path / "broken.jsonl").start()
    wait_for(lambda: not capture.alive(), "the run to stop")
    with pytest.raises(ConnectorError, match=re.escape("database.initial.statements: statement 'SELEC 1' failed")):
        capture.stop()


@pytest.mark.parametrize("mode", ["fail", "warn", "skip"])
def test_event_processing_failure_handling_mode(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    from headwater.connectors.sqlserver.streaming import event_failed

    failure = ValueError("value 70000 out of range for smallint")
    if mode == "fail":
        with pytest.raises(ConnectorError, match=re.escape("table db.dbo.t at commit LSN x: value 70000 out of range")):
            event_failed(mode, "db.dbo.t", failure, "at commit LSN x")
        return
    with caplog.at_level("DEBUG"):
        event_failed(mode, "db.dbo.t", failure, "at commit LSN x")
    (message,) = [r for r in caplog.records if "skipped the change event" in r.getMessage()]
    assert message.levelname == ("WARNING" if mode == "warn" else "DEBUG")


def _transactions(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(status, database) of each transaction record."""
    out = []
    for r in records:
        if r["topic"] == "server1.transaction":
            v = r["value"]
            db = v["data_collections"][0]["data_collection"].split(".")[0] if v["status"] == "END" else "?"
            out.append((v["status"], db))
    return out


def test_idle_end_of_transaction_only_with_one_database(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                         tmp_path: Path) -> None:
    """provide.transaction.metadata: Debezium sends the END of a database's last transaction once
    2 × the capture job's pollinginterval passed idle and the job's last scan was empty — asked on
    its metadata connection, which with several databases is in the login's default database
    (master: no capture job, no scan sessions), so there the END comes only with the database's
    next transaction (the golden file of two_databases_function_txmeta)."""
    second = f"{sqlserver_db}_b"
    sqlserver.execute(f"CREATE DATABASE {second}")
    sqlserver.execute(f"ALTER DATABASE {second} SET ALLOW_SNAPSHOT_ISOLATION ON")
    sqlserver.execute("EXEC sys.sp_cdc_enable_db", database=second)
    try:
        for db in (sqlserver_db, second):
            create_table(sqlserver, db)
            # the connector's end delay: 2 × 1 s (the emulator scans every 0.1 s regardless)
            sqlserver.execute("EXEC sys.sp_cdc_change_job @job_type = N'capture', @pollinginterval = 1", database=db)
        one = RunningCapture(props(sqlserver, sqlserver_db, tmp_path / "one", **{
            "provide.transaction.metadata": "true"}), tmp_path / "one.jsonl").start()
        try:
            wait_for(lambda: snapshot_stored(tmp_path / "one" / "offsets.json") or not one.alive(), "the snapshot")
            sqlserver.execute("INSERT INTO dbo.items VALUES (1, 'one')", database=sqlserver_db)
            wait_for(lambda: ("END", sqlserver_db) in _transactions(one.records()) or not one.alive(),
                     "the idle END with one database")
        finally:
            one.stop()
        assert _transactions(one.records()) == [("BEGIN", "?"), ("END", sqlserver_db)]

        both = RunningCapture(props(sqlserver, f"{sqlserver_db},{second}", tmp_path / "both", **{
            "provide.transaction.metadata": "true"}), tmp_path / "both.jsonl").start()
        try:
            wait_for(lambda: snapshot_stored(tmp_path / "both" / "offsets.json") or not both.alive(), "the snapshot")
            sqlserver.execute("INSERT INTO dbo.items VALUES (2, 'two')", database=sqlserver_db)
            sqlserver.execute("INSERT INTO dbo.items VALUES (1, 'one')", database=second)
            wait_for(lambda: len(data_events(both.records())) >= 3 or not both.alive(), "the changes")
            time.sleep(5)  # 2.5 × the end delay, idle: with one database the END came by now
            assert _transactions(both.records()) == [("BEGIN", "?"), ("BEGIN", "?")]
            sqlserver.execute("INSERT INTO dbo.items VALUES (3, 'three')", database=sqlserver_db)
            wait_for(lambda: len(data_events(both.records())) >= 4 or not both.alive(), "the next change")
        finally:
            both.stop()
        # the next transaction of the database ends its open one; the other database's stays open
        assert _transactions(both.records()) == [("BEGIN", "?"), ("BEGIN", "?"), ("END", sqlserver_db),
                                                 ("BEGIN", "?")]
    finally:
        sqlserver.execute(f"DROP DATABASE {second}")
