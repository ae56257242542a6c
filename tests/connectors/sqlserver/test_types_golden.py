"""Every column of the `types` scenarios' tables, read from the emulator through `select_expression`
and converted under each recorded mode combination, against Debezium's golden events: the field
schemas (JSON, key order, defaults) and the values of every row the table ends with."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulators.sqlserver.record import run_batches, split_batches
from headwater.connectors.sqlserver.columns import CatalogColumn, column_from_catalog, columns_query, quote_name
from headwater.connectors.sqlserver.types import UNAVAILABLE, SqlServerValueConverters, TypeSettings, select_expression
from headwater.model.schema import Schema
from headwater.relational.table import Table, TableId
from headwater.relational.table_schema import build_table_schema
from headwater.serialization.json import JsonConverter
from helpers.sqlserver import SqlServerEmulator

TESTS = Path(__file__).resolve().parents[2]
SCENARIO = TESTS / "emulators" / "sqlserver" / "scenarios" / "types"
GOLDEN = TESTS / "conformance" / "sqlserver"
MODES = ["types", "types_double_connect_base64", "types_precise_connect_base64url", "types_string_adaptive_hex"]
TABLES = ("all_types", "defaults")
_names = itertools.count(1)


def _props(scenario: str) -> dict[str, str]:
    out = {}
    for line in (TESTS / "emulators" / "sqlserver" / "scenarios" / scenario / "props.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _golden(scenario: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (GOLDEN / scenario / "events.jsonl").read_text().splitlines() if line]


@pytest.fixture(scope="module")
def types_db(sqlserver: SqlServerEmulator) -> Iterator[tuple[str, dict[str, Table], dict[str, list[tuple]]]]:
    """The scenario's setup.sql and workload.sql in a database of its own; its tables (from the
    catalog query) and their rows (through the select expressions)."""
    name = f"hwtypes{os.getpid()}_{next(_names)}"

    def own(sql: str) -> str:
        return sql.replace("DATABASE types", f"DATABASE {name}").replace("USE types", f"USE {name}")

    with contextlib.closing(sqlserver.connect()) as conn:
        for script in ("setup.sql", "workload.sql"):
            run_batches(conn, split_batches(own((SCENARIO / script).read_text())))
        cur = conn.cursor()
        cur.execute(columns_query(name))
        catalog = [CatalogColumn.from_row(r) for r in cur.fetchall()]
        tables = {}
        rows = {}
        for table in TABLES:
            columns = tuple(column_from_catalog(c) for c in catalog if c.table == table and c.schema == "dbo")
            tables[table] = Table(TableId(name, "dbo", table), columns, ("id",))
            exprs = ", ".join(select_expression(c) for c in columns)
            cur.execute(f"SELECT {exprs} FROM {quote_name(name)}.[dbo].{quote_name(table)} ORDER BY [id]")
            rows[table] = [tuple(r) for r in cur.fetchall()]
    yield name, tables, rows
    sqlserver.execute(f"DROP DATABASE {name}")  # CDC databases hold backing-store resources


def _final_rows(events: list[dict[str, Any]], topic: str) -> dict[int, dict[str, Any]]:
    """key id -> the row the table holds after the golden events (deleted rows dropped)."""
    state: dict[int, dict[str, Any]] = {}
    for e in events:
        if e["topic"] != topic or e["value"] is None:
            continue
        payload = e["value"]["payload"]
        key = e["key"]["payload"]["id"]
        if payload["after"] is None:
            state.pop(key, None)
        else:
            state[key] = payload["after"]
    return state


def _row_schema_json(events: list[dict[str, Any]], topic: str) -> dict[str, Any]:
    for e in events:
        if e["topic"] == topic and e["value"] is not None:
            return e["value"]["schema"]["fields"][1]
    raise AssertionError(f"no event on {topic}")


def _schema(name: str, tables: dict[str, Table], settings: TypeSettings) -> Any:
    return build_table_schema(tables[name], SqlServerValueConverters(settings), topic_prefix="server1",
                              source_schema=Schema("struct"), topic=f"server1.types.dbo.{name}")


@pytest.mark.parametrize("scenario", MODES)
@pytest.mark.parametrize("table", TABLES)
def test_schemas_and_values_equal_golden(types_db: Any, scenario: str, table: str) -> None:
    _, tables, rows = types_db
    settings = TypeSettings.from_config(_props(scenario))
    events = _golden(scenario)
    topic = f"server1.types.dbo.{table}"
    ts = _schema(table, tables, settings)
    want_schema = _row_schema_json(events, topic)
    got_schema = {**ts.row_schema.to_json(), "field": "after"}
    assert json.dumps(got_schema) == json.dumps(want_schema)

    converter = JsonConverter(schemas_enable=False)
    want_rows = _final_rows(events, topic)
    got_rows = {r[0]: converter.to_jsonable(ts.row_schema, ts.row(r)) for r in rows[table]}
    assert sorted(got_rows) == sorted(want_rows)
    for key, want in want_rows.items():
        got = got_rows[key]
        assert list(got) == list(want)
        for field, value in want.items():
            assert got[field] == value and type(got[field]) is type(value), (key, field, got[field], value)


@pytest.mark.parametrize("scenario", MODES)
def test_unavailable_lob_values_equal_golden(types_db: Any, scenario: str) -> None:
    """text/ntext/image left out of an update row get the placeholder, the (max) columns stay null
    (the golden before-image of the first update)."""
    _, tables, rows = types_db
    settings = TypeSettings.from_config(_props(scenario))
    ts = _schema("all_types", tables, settings)
    events = [e for e in _golden(scenario) if e["value"] is not None and e["value"]["payload"]["op"] == "u"]
    before = events[0]["value"]["payload"]["before"]
    names = tables["all_types"].column_names()
    raw = list(next(r for r in rows["all_types"] if r[0] == 1))
    lobs = ("c_text", "c_ntext", "c_image", "c_varchar_max", "c_nvarchar_max", "c_varbinary_max")
    for name in lobs:
        raw[names.index(name)] = UNAVAILABLE
    got = JsonConverter(schemas_enable=False).to_jsonable(ts.row_schema, ts.row(raw))
    assert [got[name] for name in lobs] == [before[name] for name in lobs]
    assert [before[name] for name in lobs[3:]] == [None, None, None]
