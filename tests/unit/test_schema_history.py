"""The schema history (headwater.relational.schema_history): Debezium's file format, recovery to a
position, crash safety of appends, the store/skip options.

DEBEZIUM_LINES are two lines of the history file Debezium 3.6.3's SQL Server connector wrote while
recording the include_schema_changes golden files (FileSchemaHistory): the snapshot's CREATE of
dbo.products and the ALTER that streaming recorded when the second capture instance (with the new
column in_stock) took over.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from headwater.relational.schema_change import ColumnDescription, TableChange
from headwater.relational.schema_history import (
    FileSchemaHistory,
    HistoryRecord,
    HistoryScope,
    MemorySchemaHistory,
    SchemaHistoryError,
    StopPoint,
    apply_records,
    create_schema_history,
    recover_tables,
)
from headwater.relational.table import Column, TableId

DB = "include_schema_changes"
SOURCE = {"server": "server1", "database": DB}
PRODUCTS = TableId(DB, "dbo", "products")

DEBEZIUM_LINES = [
    '{"source":{"server":"server1","database":"include_schema_changes"},"position":{"event_serial_no":1,"commit_lsn":"00000000:01eec478:0000","change_lsn":"NULL","snapshot":"INITIAL","snapshot_completed":false},"ts_ms":1795797940465,"databaseName":"include_schema_changes","schemaName":"dbo","tableChanges":[{"type":"CREATE","id":"\\"include_schema_changes\\".\\"dbo\\".\\"products\\"","table":{"defaultCharsetName":null,"primaryKeyColumnNames":["id"],"columns":[{"name":"id","jdbcType":4,"typeName":"int","typeExpression":"int","charsetName":null,"length":10,"scale":0,"position":1,"optional":false,"autoIncremented":false,"generated":false,"comment":null,"hasDefaultValue":false,"enumValues":[]},{"name":"name","jdbcType":-9,"typeName":"nvarchar","typeExpression":"nvarchar","charsetName":null,"length":100,"position":2,"optional":false,"autoIncremented":false,"generated":false,"comment":null,"hasDefaultValue":false,"enumValues":[]},{"name":"description","jdbcType":-9,"typeName":"nvarchar","typeExpression":"nvarchar","charsetName":null,"length":512,"position":3,"optional":true,"autoIncremented":false,"generated":false,"comment":null,"hasDefaultValue":true,"defaultValueExpression":"(N\'none\')","enumValues":[]},{"name":"weight","jdbcType":3,"typeName":"decimal","typeExpression":"decimal","charsetName":null,"length":8,"scale":3,"position":4,"optional":true,"autoIncremented":false,"generated":false,"comment":null,"hasDefaultValue":true,"enumValues":[]}],"attributes":[]},"comment":null}]}',
    '{"source":{"server":"server1","database":"include_schema_changes"},"position":{"event_serial_no":1,"commit_lsn":"00000000:01eed990:0000","change_lsn":"00000000:01eed8f8:0000"},"ts_ms":1795797949136,"databaseName":"include_schema_changes","schemaName":"dbo","ddl":"N/A","tableChanges":[{"type":"ALTER","id":"\\"include_schema_changes\\".\\"dbo\\".\\"products\\"","table":{"defaultCharsetName":null,"primaryKeyColumnNames":["id"],"columns":[{"name":"id","jdbcType":4,"typeName":"int","typeExpression":"int","charsetName":null,"length":10,"scale":0,"position":1,"optional":false,"autoIncremented":false,"generated":false,"comment":null,"hasDefaultValue":false,"enumValues":[]},{"name":"name","jdbcType":-9,"typeName":"nvarchar","typeExpression":"nvarchar","charsetName":null,"length":100,"position":2,"optional":false,"autoIncremented":false,"generated":false,"comment":null,"hasDefaultValue":false,"enumValues":[]},{"name":"description","jdbcType":-9,"typeName":"nvarchar","typeExpression":"nvarchar","charsetName":null,"length":512,"position":3,"optional":true,"autoIncremented":false,"generated":false,"comment":null,"hasDefaultValue":true,"defaultValueExpression":"(N\'none\')","enumValues":[]},{"name":"weight","jdbcType":3,"typeName":"decimal","typeExpression":"decimal","charsetName":null,"length":8,"scale":3,"position":4,"optional":true,"autoIncremented":false,"generated":false,"comment":null,"hasDefaultValue":true,"enumValues":[]},{"name":"in_stock","jdbcType":-7,"typeName":"bit","typeExpression":"bit","charsetName":null,"length":1,"scale":0,"position":5,"optional":false,"autoIncremented":false,"generated":false,"comment":null,"hasDefaultValue":true,"defaultValueExpression":"((1))","enumValues":[]}],"attributes":[]},"comment":null}]}',
]

# dbo.products as the catalog describes it (the same facts test_schema_change.py checks against the
# schema-change topic)
PRODUCTS_V1 = (
    ColumnDescription("id", 4, "int", 1, type_expression="int", length=10, scale=0, optional=False),
    ColumnDescription("name", -9, "nvarchar", 2, type_expression="nvarchar", length=100, optional=False),
    ColumnDescription("description", -9, "nvarchar", 3, type_expression="nvarchar", length=512, optional=True,
                      has_default_value=True, default_value_expression="(N'none')"),
    ColumnDescription("weight", 3, "decimal", 4, type_expression="decimal", length=8, scale=3, optional=True,
                      has_default_value=True),
)
PRODUCTS_V2 = (*PRODUCTS_V1,
               ColumnDescription("in_stock", -7, "bit", 5, type_expression="bit", length=1, scale=0, optional=False,
                                 has_default_value=True, default_value_expression="((1))"))
SNAPSHOT_POSITION = {"event_serial_no": 1, "commit_lsn": "00000000:01eec478:0000", "change_lsn": "NULL",
                     "snapshot": "INITIAL", "snapshot_completed": False}
ALTER_POSITION = {"event_serial_no": 1, "commit_lsn": "00000000:01eed990:0000",
                  "change_lsn": "00000000:01eed8f8:0000"}


def _lsn(text: str) -> tuple[int, ...]:
    # SQL Server's comparator: change LSNs, "NULL" (snapshot records) before every real one
    return (-1,) if text in (None, "NULL") else tuple(int(p, 16) for p in text.split(":"))


def up_to(change_lsn: str) -> StopPoint:
    return StopPoint(SOURCE, lambda position: _lsn(position.get("change_lsn")) <= _lsn(change_lsn))


def column_from_description(d: Mapping[str, Any]) -> Column:
    return Column(d["name"], d["position"], d["typeName"], length=d.get("length"), scale=d.get("scale"),
                  optional=d["optional"], default_expression=d.get("defaultValueExpression"))


def _create(columns=PRODUCTS_V1, kind="CREATE", table=PRODUCTS) -> TableChange:
    return TableChange(kind, table, columns=columns, primary_key=("id",))


def _started(path: Path, **kw: Any) -> FileSchemaHistory:
    history = FileSchemaHistory(path, **kw)
    history.start()
    return history


def test_records_are_written_exactly_as_debezium_writes_them(tmp_path):
    history = _started(tmp_path / "h" / "history.dat")  # the directory is created
    history.record(SOURCE, SNAPSHOT_POSITION, database_name=DB, schema_name="dbo", ddl=None,
                   changes=[_create()], ts_ms=1795797940465)
    history.record(SOURCE, ALTER_POSITION, database_name=DB, schema_name="dbo", ddl="N/A",
                   changes=[_create(PRODUCTS_V2, "ALTER")], ts_ms=1795797949136)
    history.stop()
    assert (tmp_path / "h" / "history.dat").read_text(encoding="utf-8") == "".join(
        line + "\n" for line in DEBEZIUM_LINES)


def test_recovery_from_a_debezium_file_stops_at_the_offset(tmp_path):
    path = tmp_path / "schema-history.dat"
    path.write_text("\n".join(DEBEZIUM_LINES) + "\n", encoding="utf-8")
    history = _started(path)
    assert history.exists()
    # an offset before the capture instance switch: the snapshot's structure
    before = recover_tables(history, [up_to("00000000:01eed8f0:0000")], column_from_description)
    assert before[PRODUCTS].column_names() == ["id", "name", "description", "weight"]
    assert before[PRODUCTS].primary_key == ("id",)
    assert before[PRODUCTS].column("description").default_expression == "(N'none')"
    # at the switch (the ALTER's own position) and after it: the new column
    at = recover_tables(history, [up_to("00000000:01eed8f8:0000")], column_from_description)
    assert at[PRODUCTS].column_names()[-1] == "in_stock"
    assert at[PRODUCTS].column("in_stock").optional is False
    # another database's offsets apply nothing of this one
    other = StopPoint({"server": "server1", "database": "other"}, lambda _p: True)
    assert history.recover([other]) == []
    history.stop()


def test_a_torn_last_line_is_cut_off_and_appending_continues(tmp_path, caplog):
    path = tmp_path / "history.dat"
    complete = "".join(line + "\n" for line in DEBEZIUM_LINES[:1]).encode()
    torn_line = DEBEZIUM_LINES[1].encode()
    for cut in range(1, len(torn_line), 97):  # a write interrupted after `cut` bytes
        path.write_bytes(complete + torn_line[:cut])
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            history = _started(path)
        assert "incomplete" in caplog.text
        assert path.read_bytes() == complete
        assert len(history.records()) == 1
        history.record(SOURCE, ALTER_POSITION, database_name=DB, schema_name="dbo", ddl="N/A",
                       changes=[_create(PRODUCTS_V2, "ALTER")], ts_ms=1795797949136)
        history.stop()
        assert path.read_bytes() == complete + torn_line + b"\n"


def test_a_complete_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "history.dat"
    path.write_bytes(DEBEZIUM_LINES[0].encode())  # the crash came between the line and its newline
    history = _started(path)
    assert len(history.records()) == 1
    history.record(SOURCE, ALTER_POSITION, database_name=DB, schema_name="dbo", ddl="N/A",
                   changes=[_create(PRODUCTS_V2, "ALTER")], ts_ms=1795797949136)
    history.stop()
    assert path.read_text(encoding="utf-8") == DEBEZIUM_LINES[0] + "\n" + DEBEZIUM_LINES[1] + "\n"


def test_a_damaged_line_before_the_last_stops_the_connector(tmp_path):
    path = tmp_path / "history.dat"
    path.write_text('{"source":{"server"\n' + DEBEZIUM_LINES[0] + "\n", encoding="utf-8")
    with pytest.raises(SchemaHistoryError, match="line 1 is not a history record"):
        FileSchemaHistory(path).start()


_APPENDER = textwrap.dedent("""
    import sys
    from headwater.relational.schema_change import ColumnDescription, TableChange
    from headwater.relational.schema_history import FileSchemaHistory
    from headwater.relational.table import TableId
    history = FileSchemaHistory(sys.argv[1])
    history.start()
    columns = tuple(ColumnDescription(f"c{i}", 12, "varchar", i, length=4000) for i in range(1, 200))
    n = 0
    while True:
        n += 1
        change = TableChange("CREATE", TableId("db", "dbo", f"t{n}"), columns=columns)
        history.record({"server": "s", "database": "db"}, {"n": n}, database_name="db", schema_name="dbo",
                       ddl=None, changes=[change], ts_ms=n)
        print(n, flush=True)
""")


def test_sigkill_while_appending_loses_no_acknowledged_record(tmp_path):
    path = tmp_path / "history.dat"
    child = subprocess.Popen([sys.executable, "-c", _APPENDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        acknowledged = 0
        deadline = time.monotonic() + 60
        assert child.stdout is not None
        while acknowledged < 40 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            acknowledged = int(line)
        assert acknowledged >= 40, "the appending process did not get going"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    history = _started(path)
    positions = [r.position["n"] for r in history.records()]
    assert positions == list(range(1, len(positions) + 1))  # in order, none torn or doubled
    assert len(positions) >= acknowledged
    history.record({"server": "s", "database": "db"}, {"n": len(positions) + 1}, database_name="db",
                   schema_name="dbo", ddl=None, changes=[], ts_ms=0)
    history.stop()
    assert len(_started(path).records()) == len(positions) + 1


def test_exists_and_storage(tmp_path):
    path = tmp_path / "a" / "b.dat"
    history = FileSchemaHistory(path)
    assert not history.storage_exists() and not history.exists()
    history.start()
    assert history.storage_exists() and not history.exists()  # an empty file holds no history
    history.record(SOURCE, SNAPSHOT_POSITION, database_name=DB, schema_name="dbo", ddl=None, changes=[_create()],
                   ts_ms=1)
    assert history.exists()
    history.stop()
    with pytest.raises(SchemaHistoryError, match="stopped"):
        history.record(SOURCE, SNAPSHOT_POSITION, database_name=DB, schema_name="dbo", ddl=None, changes=None,
                       ts_ms=1)


def test_buffering_syncs_once_at_the_end(tmp_path, monkeypatch):
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    history = _started(tmp_path / "history.dat")
    synced.clear()
    with history.buffering():
        for n in range(5):
            history.record(SOURCE, {"n": n}, database_name=DB, schema_name="dbo", ddl=None,
                           changes=[_create(table=TableId(DB, "dbo", f"t{n}"))], ts_ms=n)
        assert synced == []
    assert len(synced) == 1
    history.record(SOURCE, {"n": 9}, database_name=DB, schema_name="dbo", ddl=None, changes=[], ts_ms=9)
    assert len(synced) == 2
    history.stop()
    assert len(_started(tmp_path / "history.dat").records()) == 6


def test_ddl_without_table_changes_needs_skip_unparseable_ddl(caplog):
    history = MemorySchemaHistory()
    history.start()
    history.record(SOURCE, {"change_lsn": "NULL"}, database_name=DB, schema_name="dbo",
                   ddl="ALTER TABLE t ADD c INT", changes=None, ts_ms=1)
    with pytest.raises(SchemaHistoryError, match=r"skip\.unparseable\.ddl"):
        history.recover([StopPoint(SOURCE, lambda _p: True)])
    history.skip_unparseable_ddl = True
    with caplog.at_level(logging.WARNING):
        assert history.recover([StopPoint(SOURCE, lambda _p: True)]) == []
    assert "ALTER TABLE t ADD c INT" in caplog.text


def test_records_without_source_or_position_are_skipped(tmp_path):
    path = tmp_path / "history.dat"
    path.write_text('{"databaseName":"x","tableChanges":[]}\n' + DEBEZIUM_LINES[0] + "\n", encoding="utf-8")
    history = _started(path)
    assert [r.database_name for r in history.recover([StopPoint(SOURCE, lambda _p: True)])] == [DB]


def test_rename_and_drop_apply_in_order():
    history = MemorySchemaHistory()
    history.start()
    old, new = TableId(DB, "dbo", "old"), TableId(DB, "dbo", "new")
    for n, change in enumerate([_create(table=old), _create(table=PRODUCTS),
                                TableChange("ALTER", new, columns=PRODUCTS_V2, primary_key=("id",), previous_id=old),
                                TableChange("DROP", PRODUCTS)]):
        history.record(SOURCE, {"n": n}, database_name=DB, schema_name="dbo", ddl=None, changes=[change], ts_ms=n)
    everything = StopPoint(SOURCE, lambda _p: True)
    tables = recover_tables(history, [everything], column_from_description)
    assert list(tables) == [new] and tables[new].column_names()[-1] == "in_stock"
    first_two = apply_records(history.recover([StopPoint(SOURCE, lambda p: p["n"] < 2)]), column_from_description)
    assert set(first_two) == {old, PRODUCTS}


def test_history_record_document_round_trip():
    record = HistoryRecord.create(SOURCE, {"lsn": b"\x00\x01"}, database_name=None, schema_name=None, ddl=None,
                                  changes=None, ts_ms=None)
    assert record.document() == {"source": SOURCE, "position": {"lsn": "AAE="}}
    parsed = HistoryRecord.from_document(json.loads(HistoryRecord.create(
        SOURCE, ALTER_POSITION, database_name=DB, schema_name="dbo", ddl="N/A",
        changes=[_create(PRODUCTS_V2, "ALTER")], ts_ms=5).line()))
    assert parsed.changes() == [_create(PRODUCTS_V2, "ALTER")]
    assert parsed.line().decode() == DEBEZIUM_LINES[1].replace("1795797949136", "5")


@pytest.mark.parametrize(("scope", "expected"), [
    # (captured, in captured schema, builtin) -> snapshot, streaming
    (HistoryScope(), {(True, True, False): (True, True), (False, True, False): (True, True),
                      (False, False, False): (True, True), (False, False, True): (False, True)}),
    (HistoryScope(store_only_captured_tables=True),
     {(True, True, False): (True, True), (False, True, False): (False, False), (False, False, False): (False, False)}),
    (HistoryScope(store_only_captured_databases=True),
     {(True, True, False): (True, True), (False, True, False): (True, True), (False, False, False): (False, False)}),
])
def test_store_only_captured_options(scope, expected):
    for (captured, in_schema, builtin), (snapshot, streaming) in expected.items():
        assert scope.snapshot_includes(captured=captured, in_captured_schema=in_schema, builtin=builtin) is snapshot
        assert scope.streaming_includes(captured=captured, in_captured_schema=in_schema) is streaming


def test_create_schema_history_names_what_is_supported(tmp_path):
    file_history = create_schema_history("io.debezium.storage.file.history.FileSchemaHistory",
                                         file_filename=str(tmp_path / "h.dat"), skip_unparseable_ddl=True)
    assert isinstance(file_history, FileSchemaHistory) and file_history.skip_unparseable_ddl
    assert isinstance(create_schema_history("io.debezium.relational.history.MemorySchemaHistory"),
                      MemorySchemaHistory)
    with pytest.raises(SchemaHistoryError, match=r"file\.filename"):
        create_schema_history("io.debezium.storage.file.history.FileSchemaHistory")
    with pytest.raises(SchemaHistoryError, match="no Kafka client"):
        create_schema_history("io.debezium.storage.kafka.history.KafkaSchemaHistory")
    with pytest.raises(SchemaHistoryError, match="not supported"):
        create_schema_history("com.example.S3History")
