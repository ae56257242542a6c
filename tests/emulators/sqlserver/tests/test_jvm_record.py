"""record.py step by step (no emulator needed), the scenario folders' conventions, and — when asked for
with HEADWATER_SQLSERVER_E2E=1 — one whole recording against the emulator."""

from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from emulators.sqlserver import record as rec
from emulators.sqlserver.jvm.classpath import Classpath

SCENARIOS = Path(rec.__file__).resolve().parent / "scenarios"
SCENARIO_DIRS = sorted(p for p in SCENARIOS.iterdir() if p.is_dir())
SUBS = {"HOST": "127.0.0.1", "PORT": "14330", "PASSWORD": "pw", "WORKDIR": "/tmp/w"}


# -- splitting T-SQL ---------------------------------------------------------------------------

def test_split_batches_at_go_lines() -> None:
    text = "CREATE DATABASE a;\nGO\nUSE a;\ngo  \nSELECT 'GO';\nSELECT 1\n  GO -- trailing comment\nSELECT 2"
    assert rec.split_batches(text) == ["CREATE DATABASE a;", "USE a;", "SELECT 'GO';\nSELECT 1", "SELECT 2"]


def test_go_count_repeats_and_comment_only_batches_drop() -> None:
    text = "-- just a comment\nGO\nINSERT INTO t VALUES (1);\nGO 3\n\n\nGO\n"
    assert rec.split_batches(text) == ["INSERT INTO t VALUES (1);"] * 3


def test_wait_lines_become_wait_items() -> None:
    text = "INSERT INTO t VALUES (1);\n--@wait\nDELETE FROM t;\nGO\n--@wait\n"
    assert rec.split_batches(text) == ["INSERT INTO t VALUES (1);", rec.WAIT, "DELETE FROM t;", rec.WAIT]


# -- properties --------------------------------------------------------------------------------

def test_read_properties_fills_placeholders_and_splits_options() -> None:
    props, options = rec.read_properties(
        "# comment\n! also\ndatabase.hostname=${HOST}\ndatabase.port = ${PORT}\n"
        "schema.history.internal.file.filename=${WORKDIR}/h.dat\nrecord.quiet.seconds=20\nx=a=b\n", SUBS)
    assert props == {"database.hostname": "127.0.0.1", "database.port": "14330",
                     "schema.history.internal.file.filename": "/tmp/w/h.dat", "x": "a=b"}
    assert options == {"quiet.seconds": "20"}


def test_read_properties_rejects_unknown_placeholders_and_bad_lines() -> None:
    with pytest.raises(rec.RecordError, match=r"unknown placeholder \$\{USER\}"):
        rec.read_properties("database.user=${USER}", SUBS)
    with pytest.raises(rec.RecordError, match="expected key=value"):
        rec.read_properties("just words", SUBS)
    with pytest.raises(rec.RecordError, match=r"database\.names"):
        rec.database_names({})


# -- the scenario folders ------------------------------------------------------------------------

@pytest.mark.parametrize("directory", SCENARIO_DIRS, ids=[p.name for p in SCENARIO_DIRS])
def test_scenario_follows_the_conventions(directory: Path) -> None:
    scenario = rec.Scenario.load(directory)
    props, _ = rec.read_properties(scenario.props_text, SUBS)
    for key, value in {"connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
                       "database.hostname": "127.0.0.1", "database.port": "14330", "database.user": "sa",
                       "database.password": "pw", "database.encrypt": "false", "topic.prefix": "server1",
                       "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
                       "schema.history.internal.file.filename": "/tmp/w/schema-history.dat"}.items():
        assert props.get(key) == value, key
    setup = "\n".join(b for b in scenario.setup if isinstance(b, str))
    for db in rec.database_names(props):
        assert re.search(rf"^CREATE DATABASE {db};$", setup, re.M), db
        assert f"ALTER DATABASE {db} SET ALLOW_SNAPSHOT_ISOLATION ON;" in setup, db
    assert setup.count("EXEC sys.sp_cdc_enable_db;") == len(rec.database_names(props))
    everything = setup + "\n" + "\n".join(b for b in scenario.workload if isinstance(b, str))
    enables = re.findall(r"EXEC sys\.sp_cdc_enable_table (.*?);", everything, re.S)
    assert enables, "no table is CDC-enabled"
    for call in enables:
        assert "@role_name = NULL" in call and "@supports_net_changes = 0" in call, call
    # every CDC-enabled table is created by the scenario (any schema, bracketed names too)
    for name in re.findall(r"@source_name = N'([^']+)'", " ".join(enables)):
        assert re.search(rf"CREATE TABLE [^\n(]*\[?{re.escape(name)}\]?\s*\(", everything), name
    assert scenario.workload, "a scenario streams something"


def test_variants_share_their_sql_through_links() -> None:
    for name, base in [("basic_crud_function", "basic_crud"), ("types_double_connect_base64", "types"),
                       ("types_string_adaptive_hex", "types"), ("types_precise_connect_base64url", "types")]:
        for f in ("setup.sql", "workload.sql"):
            path = SCENARIOS / name / f
            assert path.is_symlink() and path.resolve() == (SCENARIOS / base / f).resolve(), path


def test_type_scenarios_cover_every_mode() -> None:
    seen: dict[str, set[str]] = {"decimal.handling.mode": set(), "time.precision.mode": set(),
                                 "binary.handling.mode": set(), "data.query.mode": set(),
                                 "snapshot.isolation.mode": set()}
    defaults = {"decimal.handling.mode": "precise", "time.precision.mode": "adaptive",
                "binary.handling.mode": "bytes", "data.query.mode": "direct",
                "snapshot.isolation.mode": "repeatable_read"}
    for directory in SCENARIO_DIRS:
        props, _ = rec.read_properties((directory / "props.txt").read_text(), SUBS)
        for key in seen:
            seen[key].add(props.get(key, defaults[key]))
    assert seen["decimal.handling.mode"] == {"precise", "double", "string"}
    assert seen["time.precision.mode"] == {"adaptive", "connect"}
    assert seen["binary.handling.mode"] == {"bytes", "base64", "base64-url-safe", "hex"}
    assert seen["data.query.mode"] == {"direct", "function"}
    assert seen["snapshot.isolation.mode"] == {"read_uncommitted", "read_committed", "repeatable_read", "snapshot",
                                               "exclusive"}


# -- running batches, waiting ----------------------------------------------------------------------

class FakeCursor:
    def __init__(self, fail_on: str | None = None) -> None:
        self.executed: list[str] = []
        self.fail_on = fail_on

    def execute(self, sql: str) -> None:
        if self.fail_on and self.fail_on in sql:
            raise RuntimeError("Invalid object name 'nope'.")
        self.executed.append(sql)

    def nextset(self) -> bool:
        return False


class FakeConnection:
    def __init__(self, cursor: FakeCursor) -> None:
        self._cursor = cursor

    def cursor(self) -> FakeCursor:
        return self._cursor


def test_run_batches_executes_in_order_and_calls_wait() -> None:
    cur = FakeCursor()
    calls: list[int] = []
    n = rec.run_batches(FakeConnection(cur), ["A", rec.WAIT, "B"], on_wait=lambda: calls.append(len(cur.executed)))
    assert (n, cur.executed, calls) == (2, ["A", "B"], [1])


def test_run_batches_names_the_failing_batch() -> None:
    with pytest.raises(rec.RecordError, match=r"(?s)setup.sql batch 2 failed: Invalid object name 'nope'.*SELECT nope"):
        rec.run_batches(FakeConnection(FakeCursor(fail_on="nope")), ["SELECT 1", "SELECT nope"], what="setup.sql")


def test_wait_for_capture_needs_a_max_lsn_and_a_settled_position() -> None:
    readings = iter([[(None, None)], [(b"\x01", b"\x01")], [(b"\x02", b"\x02")]] + [[(b"\x03", b"\x02")]] * 100)
    seen: list[Any] = []

    def positions() -> list[tuple[bytes | None, bytes | None]]:
        value = next(readings)
        seen.append(value)
        return value

    rec.wait_for_capture(positions, settle=0.05, poll=0.01, timeout=5)
    assert len(seen) >= 4  # returned only after the transaction mark stopped moving
    with pytest.raises(rec.RecordError, match="did not catch up"):
        rec.wait_for_capture(lambda: [(None, None)], settle=0.01, poll=0.01, timeout=0.1)


def test_wait_quiet_returns_the_settled_count() -> None:
    counts = iter([0, 1, 2, 3] + [3] * 1000)
    assert rec.wait_quiet(lambda: next(counts), quiet=0.05, poll=0.01) == 3
    forever = iter(range(10**6))
    with pytest.raises(rec.RecordError, match="kept coming"):
        rec.wait_quiet(lambda: next(forever), quiet=0.5, poll=0.01, timeout=0.2)


def test_start_emulator_reads_the_address_line(tmp_path: Path) -> None:
    fake = [sys.executable, "-c", "import time; print('127.0.0.1:14330', flush=True); time.sleep(60)"]
    emulator = rec.start_emulator("pw", tmp_path / "emu.log", command=fake, timeout=30)
    try:
        assert (emulator.host, emulator.port) == ("127.0.0.1", 14330)
    finally:
        emulator.stop()
    assert emulator.process is not None and emulator.process.poll() is not None
    broken = [sys.executable, "-c", "import sys; sys.stderr.write('no postgres here'); sys.exit(1)"]
    with pytest.raises(rec.RecordError, match=r"(?s)did not print HOST:PORT.*no postgres here"):
        rec.start_emulator("pw", tmp_path / "broken.log", command=broken, timeout=30)


# -- output ------------------------------------------------------------------------------------

def _event() -> dict[str, Any]:
    source = {"version": "3.6.3.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 1700000000000,
              "snapshot": "false", "db": "basic_crud", "sequence": None, "ts_us": 1, "ts_ns": 2, "schema": "dbo",
              "table": "customers", "change_lsn": "00000025:00000d08:0003", "commit_lsn": "00000025:00000d08:0025",
              "event_serial_no": 1}
    return {"topic": "server1.basic_crud.dbo.customers", "key": {"schema": {}, "payload": {"id": 1001}},
            "value": {"schema": {}, "payload": {"before": None, "after": {"id": 1001}, "source": source, "op": "c",
                                                "ts_ms": 5, "ts_us": 6, "ts_ns": 7,
                                                "transaction": {"id": "00000025:00000d08:0025", "total_order": 1,
                                                                "data_collection_order": 1}}},
            "headers": [{"key": "__debezium.context.runId", "value": {"schema": {}, "payload": "r-1"}}]}


def test_normalize_masks_what_varies_and_keeps_the_rest() -> None:
    event = rec.normalize_event(_event())
    payload = event["value"]["payload"]
    source = payload["source"]
    assert (source["change_lsn"], source["commit_lsn"]) == ("<lsn>", "<lsn>")
    assert (source["ts_ms"], source["ts_us"], source["ts_ns"], source["version"]) == ("<ts>", "<ts>", "<ts>",
                                                                                      "<version>")
    assert source["db"] == "basic_crud" and source["event_serial_no"] == 1 and source["sequence"] is None
    assert payload["ts_ms"] == "<ts>" and payload["transaction"]["id"] == "<txid>:<lsn>"
    assert payload["transaction"]["total_order"] == 1
    assert event["headers"][0]["value"]["payload"] == "<runId>"
    assert event["key"]["payload"] == {"id": 1001}


def test_write_events_and_provenance(tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    assert rec.write_events(out, [_event(), {"topic": "server1.basic_crud.dbo.customers", "key": None,
                                             "value": None, "headers": []}]) == 2
    lines = out.read_text().splitlines()
    assert '"commit_lsn":"<lsn>"' in lines[0] and lines[1].endswith('"value":null,"headers":[]}')
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("debezium-connector-sqlserver-3.6.3.Final.jar", "mssql-jdbc-12.4.2.jre8.jar"):
        (jars / name).write_bytes(b"")
    scenario = rec.Scenario.load(SCENARIOS / "basic_crud")
    text = rec.provenance(scenario=scenario, classpath=Classpath(jars, "oracle"), command=["record.py", "--x"],
                          props={"database.password": "secret", "topic.prefix": "server1"},
                          events=[_event(), _event()], emulator="started by record.py",
                          started=dt.datetime(2026, 11, 27, 15, 0, tzinfo=dt.UTC))
    assert "Debezium SQL Server connector: 3.6.3.Final (oracle jars)" in text
    assert "mssql-jdbc 12.4.2.jre8" in text
    assert "`record.py --x`" in text
    assert "database.password=***" in text and "secret" not in text
    assert "Events: 2 (server1.basic_crud.dbo.customers: 2)" in text
    assert "tests/emulators/sqlserver/scenarios/basic_crud" in text


# The whole recording, compared with the golden files: test_debezium_e2e.py.


def _notification(ident: str) -> dict[str, Any]:
    schema = {"type": "struct", "name": rec.NOTIFICATION_SCHEMA, "version": 1, "fields": []}
    return {"topic": "server1.notifications",
            "key": {"schema": {"name": "io.debezium.connector.common.NotificationKey"}, "payload": {"id": ident}},
            "value": {"schema": schema,
                      "payload": {"id": ident, "type": "STARTED", "aggregate_type": "Initial Snapshot",
                                  "additional_data": {"connector_name": "server1"}, "timestamp": 1795813966257}},
            "headers": []}


def test_normalize_masks_notification_clock_and_random_ids_only() -> None:
    event = rec.normalize_event(_notification("c74a4a53-3e69-466c-8fee-cc7f5742ede9"))
    assert event["key"]["payload"] == {"id": "<uuid>"}
    assert event["value"]["payload"]["id"] == "<uuid>" and event["value"]["payload"]["timestamp"] == "<ts>"
    assert event["value"]["payload"]["additional_data"] == {"connector_name": "server1"}
    shuffled = _notification("ad-hoc-1")
    shuffled["value"]["payload"]["additional_data"] = {"maximum_key": "3", "connector_name": "server1"}
    assert list(rec.normalize_event(shuffled)["value"]["payload"]["additional_data"]) == ["connector_name",
                                                                                          "maximum_key"]
    answer = rec.normalize_event(_notification("ad-hoc-1"))  # a signal's own id: deterministic, kept
    assert answer["key"]["payload"] == {"id": "ad-hoc-1"} and answer["value"]["payload"]["id"] == "ad-hoc-1"
    # a data row that happens to have "id" and "timestamp" fields is not a notification
    uuid = "c74a4a53-3e69-466c-8fee-cc7f5742ede9"
    plain = {"topic": "server1.db.dbo.t", "key": {"schema": {}, "payload": {"id": uuid}}, "value": None, "headers": []}
    assert rec.normalize_event(plain)["key"]["payload"]["id"] == uuid


def test_normalize_masks_the_tombstone_after_an_insert_delete_watermark() -> None:
    tombstone = {"topic": "server1.db.dbo.debezium_signal",
                 "key": {"schema": {}, "payload": {"id": "4b7530e7-902a-4e5a-80ab-001f3dc9f738-open"}},
                 "value": None, "headers": []}
    assert rec.normalize_event(tombstone)["key"]["payload"] == {"id": "<window>-open"}
    user = {"topic": "server1.db.dbo.debezium_signal", "key": {"schema": {}, "payload": {"id": "ad-hoc-1"}},
            "value": None, "headers": []}
    assert rec.normalize_event(user)["key"]["payload"] == {"id": "ad-hoc-1"}
