"""Custom converters (`converters`, Debezium's CustomConverter SPI in Python) and custom snapshot
queries (`snapshot.query.mode=custom`, Debezium's SnapshotQuery SPI) in the standalone runner,
with the plug-ins of tests/helpers/custom_plugins.py. The same through the Spark source:
tests/spark/test_custom_plugins.py."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from headwater import config as cfg
from headwater.config.errors import ConfigError
from headwater.engine.connector import ConnectorError
from helpers.capture import RunningCapture, base_properties, drop_sentinels, emit_sentinel_and_wait, wait_snapshot_done
from helpers.custom_plugins import EvenRowsOnly, Tagged

SETUP = """
CREATE EXTENSION isn;
CREATE TABLE conv (id serial PRIMARY KEY, i isbn, flag bool NOT NULL DEFAULT true, note text DEFAULT 'dflt',
                   amount numeric(8,2));
INSERT INTO conv (i, flag, note, amount) VALUES ('978-0-393-04002-9', false, NULL, 1.5), (NULL, true, 'x', NULL);
CREATE TABLE plain (id int PRIMARY KEY, t text);
INSERT INTO plain VALUES (1, 'a');
"""

CONVERTERS = {
    "converters": "isbn,bools,tag",
    "isbn.type": "helpers.custom_plugins:IsbnConverter", "isbn.schema.name": "io.debezium.postgresql.type.Isbn",
    "bools.type": "helpers.custom_plugins:BooleanAsInt",
    "tag.type": "helpers.custom_plugins:Tagged", "tag.columns": "public.conv.id,note", "tag.prefix": "#",
    "tag.schema.name": "io.example.Tag", "tag.param.origin": "test", "tag.null.text": "(null)",
}


def _run(pg_db: Any, tmp_path: Path, slot: str, workload: list[str] = (), **props: str) -> list[dict[str, Any]]:
    capture = RunningCapture(base_properties(pg_db, tmp_path, slot, **props), tmp_path / "out.jsonl").start()
    try:
        wait_snapshot_done(pg_db, capture, 30)
        for statement in workload:
            pg_db.execute(statement)
        emit_sentinel_and_wait(pg_db, capture)
    finally:
        capture.stop()
    if capture.error is not None:
        raise capture.error
    return drop_sentinels(capture.records())


def _changes(records: list[dict[str, Any]], table: str) -> list[tuple[Any, ...]]:
    return [(r["value"]["payload"]["op"], r["key"]["payload"], r["value"]["payload"]["before"],
             r["value"]["payload"]["after"]) for r in records
            if r["topic"] == f"dbserver1.public.{table}" and r["value"] is not None]


def _fields(record: dict[str, Any], part: str = "after") -> dict[str, dict[str, Any]]:
    block = next(f for f in record["value"]["schema"]["fields"] if f["field"] == part)
    return {f["field"]: f for f in block["fields"]}


@pytest.mark.parametrize("workers", ["0", "2"])  # streamed events built in the runner, or in worker processes
def test_converters_in_snapshot_and_streaming(pg_db, tmp_path, workers):
    pg_db.execute(SETUP)
    pg_db.execute("ALTER TABLE conv REPLICA IDENTITY FULL")
    Tagged.seen.clear()
    records = _run(pg_db, tmp_path, f"hw_conv_{workers}", [
        "INSERT INTO conv (i, flag, note) VALUES ('0-393-04002-X', false, 'z')",
        "UPDATE conv SET note = NULL, flag = true WHERE id = 3",
        "DELETE FROM conv WHERE id = 1",
    ], **CONVERTERS, **{"encoding.workers": workers})
    assert _changes(records, "conv") == [
        ("r", {"id": "#1"}, None, {"id": "#1", "i": "0-393-04002-X", "flag": 0, "note": "(null)", "amount": "AJY="}),
        ("r", {"id": "#2"}, None, {"id": "#2", "i": None, "flag": 1, "note": "#x", "amount": None}),
        ("c", {"id": "#3"}, None, {"id": "#3", "i": "0-393-04002-X", "flag": 0, "note": "#z", "amount": None}),
        ("u", {"id": "#3"}, {"id": "#3", "i": "0-393-04002-X", "flag": 0, "note": "#z", "amount": None},
         {"id": "#3", "i": "0-393-04002-X", "flag": 1, "note": "(null)", "amount": None}),
        ("d", {"id": "#1"}, {"id": "#1", "i": "0-393-04002-X", "flag": 0, "note": "(null)", "amount": "AJY="}, None),
    ]
    tag = {"type": "string", "name": "io.example.Tag", "parameters": {"origin": "test"}}
    for record in (records[0], next(r for r in records if r["value"]["payload"]["op"] == "u")):
        # serial: Debezium's default parser gives 0, through the converter "#0"
        assert record["key"]["schema"]["fields"] == [{**tag, "optional": False, "default": "#0", "field": "id"}]
        fields = _fields(record)
        # the default passes through the converter ('dflt' -> '#dflt', true -> 1); the schema is
        # optional when the column is nullable
        assert fields["note"] == {"type": "string", "optional": True, "name": "io.example.Tag",
                                  "parameters": {"origin": "test"}, "default": "#dflt", "field": "note"}
        assert fields["flag"] == {"type": "int16", "optional": False, "name": "io.example.BooleanAsInt",
                                  "default": 1, "field": "flag"}
        assert fields["i"] == {"type": "string", "optional": True, "name": "io.debezium.postgresql.type.Isbn",
                               "field": "i"}
        # no converter takes amount: Headwater's own schema
        assert fields["amount"]["name"] == "org.apache.kafka.connect.data.Decimal"
    # a table no converter takes is unchanged
    assert _changes(records, "plain") == [("r", {"id": 1}, None, {"id": 1, "t": "a"})]
    # the converters see the columns as Debezium describes them (the snapshot's JDBC metadata)
    seen: dict[tuple[str, str], Any] = {}
    for column in Tagged.seen:  # the snapshot's first (streaming describes a serial column as int4)
        seen.setdefault((column.data_collection, column.name), column)
    if workers == "0":  # (with workers, the streamed schemas are built in the worker processes)
        assert ("public.plain", "t") in seen
    ident, note, amount = seen["public.conv", "id"], seen["public.conv", "note"], seen["public.conv", "amount"]
    assert (ident.type_name, ident.jdbc_type, ident.optional, ident.has_default_value, ident.default_value) == (
        "serial", 1111, False, True, "0")
    assert (note.type_name, note.jdbc_type, note.native_type, note.default_value, note.optional) == (
        "text", 12, 25, "dflt", True)
    assert (amount.type_name, amount.length, amount.scale, amount.has_default_value) == ("numeric", 8, 2, False)


# -- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("props", "message"), [
    ({"converters": "isbn", "isbn.type": "io.debezium.test.IsbnConverter"},
     "isbn.type='io.debezium.test.IsbnConverter' looks like a Java class name: Headwater runs plug-ins written in "
     "Python; name the Python custom converter class as package.module:Class"),
    ({"converters": "isbn", "isbn.type": "no_such_module_here:X"},
     "isbn.type='no_such_module_here:X': cannot import module 'no_such_module_here': ModuleNotFoundError"),
    ({"converters": "isbn", "isbn.type": "helpers.custom_plugins:Missing"},
     "isbn.type='helpers.custom_plugins:Missing': module 'helpers.custom_plugins' has no 'Missing'"),
    ({"converters": "isbn", "isbn.type": "helpers.custom_plugins:NotAConverter"},
     "isbn.type='helpers.custom_plugins:NotAConverter': NotAConverter is not a custom converter: it has no "
     "method converter_for (a custom converter defines configure, converter_for)"),
    ({"converters": "isbn"}, "missing required property 'isbn.type'"),
    ({"snapshot.query.mode": "custom", "snapshot.query.mode.custom.name": "io.debezium.MySnapshotQuery"},
     "snapshot.query.mode.custom.name='io.debezium.MySnapshotQuery' looks like a Java class name"),
    ({"snapshot.query.mode": "custom", "snapshot.query.mode.custom.name": "helpers.custom_plugins:Tagged"},
     "Tagged is not a snapshot query: it has no method snapshot_query"),
    ({"snapshot.query.mode": "custom"}, "snapshot.query.mode.custom.name"),
])
def test_plugins_that_cannot_load_are_configuration_errors(pg_db, tmp_path, props, message):
    with pytest.raises(ConfigError) as info:
        cfg.from_properties(base_properties(pg_db, tmp_path, "unused", **props))
    assert message in str(info.value)


def test_custom_query_name_without_custom_mode_warns(pg_db, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        cfg.from_properties(base_properties(pg_db, tmp_path, "unused", **{
            "snapshot.query.mode.custom.name": "helpers.custom_plugins:EvenRowsOnly"}))
    assert "snapshot.query.mode.custom.name has no effect: snapshot.query.mode is not custom" in caplog.text


def _failing_run(pg_db: Any, tmp_path: Path, slot: str, **props: str) -> str:
    capture = RunningCapture(base_properties(pg_db, tmp_path, slot, **props), tmp_path / "out.jsonl").start()
    capture.thread.join(60)
    with pytest.raises(ConnectorError) as info:
        capture.stop()
    return str(info.value)


def test_converter_for_that_raises_names_converter_and_column(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    error = _failing_run(pg_db, tmp_path, "hw_conv_raise", converters="bad",
                         **{"bad.type": "helpers.custom_plugins:RaisesInConverterFor"})
    assert error == ("custom converter 'bad' (helpers.custom_plugins:RaisesInConverterFor): converter_for() failed for "
                     "column public.t.id: RuntimeError: no idea what to do")


def test_registering_twice_is_an_error(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    error = _failing_run(pg_db, tmp_path, "hw_conv_twice", converters="twice",
                         **{"twice.type": "helpers.custom_plugins:RegistersTwice"})
    assert error == ("column public.t.id: custom converter 'twice' (helpers.custom_plugins:RegistersTwice) "
                     "registered twice for the same column")


def test_value_conversion_failure_stops_the_connector(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, s text)")
    pg_db.execute("INSERT INTO t VALUES (1, 'ok'), (2, 'bad')")
    error = _failing_run(pg_db, tmp_path, "hw_conv_fail", converters="f",
                         **{"f.type": "helpers.custom_plugins:FailsOnBad"})
    assert "cannot process the change event of table public.t in the snapshot" in error
    assert ", column s: custom converter 'f' (helpers.custom_plugins:FailsOnBad) failed on column public.t.s: " \
           "ValueError: cannot take 'bad'. event.processing.failure.handling.mode=fail stops here" in error


def test_value_conversion_failure_is_skipped_with_warn(pg_db, tmp_path, caplog):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, s text)")
    pg_db.execute("INSERT INTO t VALUES (1, 'ok'), (2, 'bad')")
    with caplog.at_level(logging.WARNING):
        records = _run(pg_db, tmp_path, "hw_conv_warn", ["INSERT INTO t VALUES (3, 'bad'), (4, 'fine')"],
                       converters="f", **{"f.type": "helpers.custom_plugins:FailsOnBad",
                                          "event.processing.failure.handling.mode": "warn"})
    assert [r[3] for r in _changes(records, "t")] == [{"id": 1, "s": "ok"}, {"id": 4, "s": "fine"}]
    assert "skipped the change event of table public.t in the snapshot at LSN" in caplog.text
    assert "(event.processing.failure.handling.mode=warn): custom converter 'f' (helpers.custom_plugins:FailsOnBad) " \
           "failed on column public.t.s: ValueError: cannot take 'bad'" in caplog.text


def test_none_for_a_required_column_is_an_error(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, s text NOT NULL)")
    pg_db.execute("INSERT INTO t VALUES (1, 'x')")
    error = _failing_run(pg_db, tmp_path, "hw_conv_none", converters="none",
                         **{"none.type": "helpers.custom_plugins:ReturnsNone", "none.columns": "s"})
    assert ", column s: custom converter 'none' (helpers.custom_plugins:ReturnsNone) returned None for column " \
           "public.t.s, whose schema is not optional" in error


# -- snapshot queries --------------------------------------------------------------------------

QUERY = {"snapshot.query.mode": "custom", "snapshot.query.mode.custom.name": "helpers.custom_plugins:EvenRowsOnly"}


def test_custom_snapshot_query(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE evens (id int PRIMARY KEY, a text, b int)")
    pg_db.execute("INSERT INTO evens SELECT g, 'a' || g, g * 10 FROM generate_series(1, 5) g")
    pg_db.execute("CREATE TABLE overridden (id int PRIMARY KEY)")
    pg_db.execute("INSERT INTO overridden SELECT generate_series(1, 4)")
    pg_db.execute("CREATE TABLE skipped (id int PRIMARY KEY)")
    pg_db.execute("INSERT INTO skipped VALUES (2)")
    EvenRowsOnly.calls.clear()
    records = _run(pg_db, tmp_path, "hw_query", ["INSERT INTO skipped VALUES (4)"], **QUERY, **{
        "snapshot.query.mode.custom.skip.table": "skipped",
        "column.exclude.list": "public.evens.b",
        # an override wins over the custom query (as in Debezium)
        "snapshot.select.statement.overrides": "public.overridden",
        "snapshot.select.statement.overrides.public.overridden": "SELECT * FROM public.overridden WHERE id > 3"})
    assert [(r["topic"].split(".")[-1], r["value"]["payload"]["op"], r["value"]["payload"]["after"],
             r["value"]["payload"]["source"]["snapshot"]) for r in records] == [
        ("evens", "r", {"id": 2, "a": "a2"}, "first"),
        ("evens", "r", {"id": 4, "a": "a4"}, "last_in_data_collection"),
        ("overridden", "r", {"id": 4}, "last"),
        ("skipped", "c", {"id": 4}, "false"),  # not snapshotted, but streamed
    ]
    # quoted table and columns, without the columns the column filter leaves out
    assert sorted(EvenRowsOnly.calls) == [('"public"."evens"', ['"id"', '"a"']), ('"public"."skipped"', ['"id"'])]


def test_custom_snapshot_query_that_raises(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    error = _failing_run(pg_db, tmp_path, "hw_query_raise", **{
        "snapshot.query.mode": "custom", "snapshot.query.mode.custom.name": "helpers.custom_plugins:QueryRaises"})
    assert error == ("snapshot query helpers.custom_plugins:QueryRaises failed for table public.t: "
                     "KeyError: '\"public\".\"t\"'")


def test_select_whose_columns_the_table_does_not_have(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
    error = _failing_run(pg_db, tmp_path, "hw_query_cols", **{
        "snapshot.select.statement.overrides": "public.t",
        "snapshot.select.statement.overrides.public.t": "SELECT id, v AS other FROM public.t"})
    assert error == ("snapshot of table public.t: the custom SELECT returns column 'other', which the table does not "
                     "have (its columns: id, v)")
