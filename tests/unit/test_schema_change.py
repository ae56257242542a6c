"""Schema-change events and table changes (headwater.relational.schema_change) against Debezium's.

The golden records are what Debezium 3.6.3's SQL Server connector sent to the schema-change topic
in the include_schema_changes scenario (tests/conformance/sqlserver/include_schema_changes). The
tables' column metadata is written out here by hand, as the connector's catalog would describe it
(getColumns' view: nvarchar lengths in characters, decimal precision/scale, default expressions as
SQL Server stores them, optional columns with Debezium's implicit NULL default).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulators.sqlserver.record import normalize_event
from headwater.model.envelope import COMMON_SOURCE_FIELDS
from headwater.model.schema import OPTIONAL_INT64, OPTIONAL_STRING, STRING, struct
from headwater.relational.schema_change import (
    ColumnDescription,
    SchemaChangeEvents,
    TableChange,
    double_quoted,
    parse_table_id,
    table_change,
    table_change_json,
)
from headwater.relational.table import Column, Table, TableId
from headwater.serialization.json import JsonConverter, RecordSerializer

GOLDEN = Path(__file__).resolve().parents[1] / "conformance" / "sqlserver" / "include_schema_changes" / "events.jsonl"
DB = "include_schema_changes"

# SQL Server's source block, as the golden records' value schema shows it
SOURCE_SCHEMA = struct("io.debezium.connector.sqlserver.Source", [
    *COMMON_SOURCE_FIELDS, ("schema", STRING), ("table", STRING), ("change_lsn", OPTIONAL_STRING),
    ("commit_lsn", OPTIONAL_STRING), ("event_serial_no", OPTIONAL_INT64)], version=1)

CONTEXT_HEADERS = [("__debezium.context.connectorLogicalName", "server1"), ("__debezium.context.taskId", "0"),
                   ("__debezium.context.connectorName", "sqlserver"), ("__debezium.context.runId", "run-1")]


def _int(name: str, position: int) -> ColumnDescription:
    return ColumnDescription(name, 4, "int", position, type_expression="int", length=10, scale=0, optional=False)


def _nvarchar(name: str, position: int, length: int, *, optional: bool = False,
              default: str | None = None) -> ColumnDescription:
    return ColumnDescription(name, -9, "nvarchar", position, type_expression="nvarchar", length=length,
                             optional=optional, has_default_value=optional or default is not None,
                             default_value_expression=default)


PRODUCTS_V1 = (
    _int("id", 1),
    _nvarchar("name", 2, 100),
    _nvarchar("description", 3, 512, optional=True, default="(N'none')"),
    ColumnDescription("weight", 3, "decimal", 4, type_expression="decimal", length=8, scale=3, optional=True,
                      has_default_value=True),
)
PRODUCTS_V2 = (*PRODUCTS_V1,
               ColumnDescription("in_stock", -7, "bit", 5, type_expression="bit", length=1, scale=0, optional=False,
                                 has_default_value=True, default_value_expression="((1))"))
NOT_CAPTURED = (_int("id", 1),)
BRANDS = (_int("id", 1), _nvarchar("name", 2, 50))


def _table(name: str, described: tuple[ColumnDescription, ...]) -> tuple[Table, dict[str, ColumnDescription]]:
    columns = tuple(Column(d.name, d.position, d.type_name, optional=d.optional,
                           default_expression=d.default_value_expression) for d in described)
    return Table(TableId(DB, "dbo", name), columns, ("id",)), {d.name: d for d in described}


def _source(table: str, *, snapshot: str, change_lsn: str | None, commit_lsn: str,
            serial: int | None) -> dict[str, object]:
    ts_us = 1_795_797_940_000_000
    return {"version": "3.6.3.Final", "connector": "sqlserver", "name": "server1", "ts_ms": ts_us // 1000,
            "snapshot": snapshot, "db": DB, "sequence": None, "ts_us": ts_us, "ts_ns": ts_us * 1000,
            "schema": "dbo", "table": table, "change_lsn": change_lsn, "commit_lsn": commit_lsn,
            "event_serial_no": serial}


def _golden_schema_changes() -> list[str]:
    return [line for line in GOLDEN.read_text(encoding="utf-8").splitlines()
            if json.loads(line)["topic"] == "server1"]


def test_schema_change_records_equal_debeziums_golden_records():
    events = SchemaChangeEvents("sqlserver", "server1", SOURCE_SCHEMA)
    steps = [
        # (table, columns, change type, ddl, source block)
        ("not_captured", NOT_CAPTURED, "CREATE", None,
         _source("not_captured", snapshot="true", change_lsn=None, commit_lsn="00000000:01eec478:0000", serial=None)),
        ("products", PRODUCTS_V1, "CREATE", None,
         _source("products", snapshot="true", change_lsn=None, commit_lsn="00000000:01eec478:0000", serial=None)),
        ("products", PRODUCTS_V2, "ALTER", "N/A",
         _source("products", snapshot="false", change_lsn="00000000:01eed8f8:0000",
                 commit_lsn="00000000:01eed990:0000", serial=1)),
        ("brands", BRANDS, "CREATE", "N/A",
         _source("brands", snapshot="false", change_lsn="00000000:01ef70d0:0000",
                 commit_lsn="00000000:01ef7160:0000", serial=1)),
    ]
    conv = JsonConverter(True)
    serializer = RecordSerializer(conv, conv, conv, CONTEXT_HEADERS)
    produced = []
    for name, described, kind, ddl, source in steps:
        table, by_name = _table(name, described)
        change = table_change(kind, table, lambda _t, c, by_name=by_name: by_name[c.name])
        record = events.record(database=DB, schema="dbo", ddl=ddl, changes=[change], source=source,
                               offset={"databases": {DB: {"commit_lsn": source["commit_lsn"]}}},
                               ts_ms=1_795_797_941_000)
        assert record.topic == "server1" and record.op is None
        event = normalize_event(json.loads(serializer.line(record)))
        produced.append(json.dumps(event, ensure_ascii=False, separators=(",", ":")))
    golden = _golden_schema_changes()
    assert len(golden) == 4
    for ours, theirs in zip(produced, golden, strict=True):
        assert ours == theirs  # the text: field order included


def test_history_rendering_differs_from_the_topic_rendering():
    table, by_name = _table("products", PRODUCTS_V2)
    item = table_change_json("ALTER", table, lambda _t, c: by_name[c.name])
    assert list(item) == ["type", "id", "table", "comment"]
    assert list(item["table"]) == ["defaultCharsetName", "primaryKeyColumnNames", "columns", "attributes"]
    weight, in_stock = item["table"]["columns"][3], item["table"]["columns"][4]
    # unset nativeType / scale are left out; hasDefaultValue without an expression; enumValues []
    assert "nativeType" not in weight and weight["hasDefaultValue"] is True and "defaultValueExpression" not in weight
    assert in_stock["defaultValueExpression"] == "((1))" and in_stock["enumValues"] == []
    assert "scale" not in item["table"]["columns"][1]
    struct_value = table_change("ALTER", table, lambda _t, c: by_name[c.name]).to_struct()
    assert list(struct_value) == ["type", "id", "table"]
    assert list(struct_value["table"]) == ["defaultCharsetName", "primaryKeyColumnNames", "columns", "comment"]
    assert struct_value["table"]["columns"][3]["nativeType"] is None
    assert struct_value["table"]["columns"][3]["enumValues"] is None
    assert "hasDefaultValue" not in struct_value["table"]["columns"][3]


def test_table_change_round_trips_through_the_history_rendering():
    described = (*PRODUCTS_V2, ColumnDescription("size", 12, "varchar", 6, type_expression="varchar", length=3,
                                                  enum_values=("S", "M", "L"), native_type=7, comment="c"))
    change = TableChange("ALTER", TableId(DB, "dbo", "products"), columns=described, primary_key=("id",),
                         previous_id=TableId(DB, "dbo", "items"), attributes=(("a", "b"),), comment="t")
    doc = change.to_json()
    assert doc["previousId"] == '"include_schema_changes"."dbo"."items"'
    assert doc["table"]["attributes"] == [{"name": "a", "value": "b"}]
    assert TableChange.from_json(json.loads(json.dumps(doc))) == change
    assert change.to_struct()["table"]["columns"][5]["enumValues"] == ["S", "M", "L"]


def test_drop_has_no_table():
    change = TableChange("DROP", TableId(DB, "dbo", "gone"))
    assert change.to_json() == {"type": "DROP", "id": '"include_schema_changes"."dbo"."gone"'}
    assert change.to_struct() == {"type": "DROP", "id": '"include_schema_changes"."dbo"."gone"', "table": None}
    assert TableChange.from_json(change.to_json()) == change


def test_unknown_change_type_is_refused():
    with pytest.raises(ValueError, match="CREATE, ALTER, DROP"):
        TableChange("RENAME", TableId(None, "s", "t"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no table columns"):
        TableChange.from_json({"type": "CREATE", "id": '"s"."t"'})


@pytest.mark.parametrize(("table_id", "text"), [
    (TableId("db", "dbo", "t"), '"db"."dbo"."t"'),
    (TableId(None, "dbo", 'we"ird.name'), '"dbo"."we""ird.name"'),
    (TableId("db", None, "t"), '"db"."t"'),
    (TableId(None, None, "t"), '"t"'),
])
def test_double_quoted_table_ids_parse_back(table_id, text):
    assert double_quoted(table_id) == text
    assert parse_table_id(text, use_catalog_before_schema=table_id.catalog is not None) == table_id


def test_table_id_parsing_follows_debezium():
    assert parse_table_id("db.dbo.t") == TableId("db", "dbo", "t")
    assert parse_table_id(' "a b" . c ') == TableId(None, "a b", "c")
    assert parse_table_id("`x`.y") == TableId(None, "x", "y")
    for bad in ("", "a..b", '"open', "a b"):
        with pytest.raises(ValueError, match="invalid table identifier"):
            parse_table_id(bad)


def test_schema_change_key_and_value_schema_names_follow_the_connector():
    events = SchemaChangeEvents("db2", "prefix", SOURCE_SCHEMA)
    assert events.key_schema.name == "io.debezium.connector.db2.SchemaChangeKey"
    assert events.value_schema.name == "io.debezium.connector.db2.SchemaChangeValue"
    record = events.record(database="D", schema=None, ddl=None, changes=[], source={}, offset={},
                           collection="S.T")
    assert record.topic == "prefix" and record.key == {"databaseName": "D"} and record.table == "S.T"
    assert record.context_headers  # Debezium adds the context headers to schema change records
