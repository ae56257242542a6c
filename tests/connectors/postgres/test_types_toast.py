"""Type mappings added for the `types` scenario, and unchanged-TOAST placeholders (spec §7.9)."""

from __future__ import annotations

import base64

from headwater.connectors.postgres import types as t
from headwater.connectors.postgres.pgoutput import UNCHANGED_TOAST
from headwater.model.schema import NO_DEFAULT
from headwater.relational.table import Column, Table, TableId
from headwater.relational.table_schema import build_table_schema
from headwater.serialization.json import JsonConverter

P = b"__debezium_unavailable_value"


def _pg(name: str, modifier: int = -1, element: str | None = None) -> t.PgType:
    return t.PgType(name, 0, modifier, element=None if element is None else t.PgType(element, 0))


def test_hstore_as_json_in_java_hashmap_order():
    assert t._hstore_json('"a"=>"1", "b c"=>NULL') == '{"a":"1","b c":null}'
    assert t._hstore_json("") == "{}"
    assert t._hstore_json('"k"=>"v\\"q\\\\"') == '{"k":"v\\"q\\\\"}'
    # HashMap buckets: "b" (98) lands after "a" (97) whatever the text order
    assert t._hstore_json('"b"=>"2", "a"=>"1"') == '{"a":"1","b":"2"}'
    # "Aa" and "BB" share a hash code: insertion order inside the bucket
    assert t.java_hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert t._java_string_hash("b c") == 95269


def test_point_struct_with_wkb():
    value = t._point("(1.5,-2.25)")
    assert (value["x"], value["y"], value["srid"]) == (1.5, -2.25, None)
    assert base64.b64encode(value["wkb"]).decode() == "AQEAAAAAAAAAAAD4PwAAAAAAAALA"
    schema, _ = t.schema_and_converter(_pg("point"))
    assert schema.to_json()["doc"] == "Geometry (POINT)"
    assert [f.name for f in schema.fields] == ["x", "y", "wkb", "srid"]


def test_adaptive_temporal_precision():
    schema, conv = t.schema_and_converter(_pg("time", 3))
    assert (schema.type, schema.name, conv("13:45:30.123")) == ("int32", "io.debezium.time.Time", 49530123)
    schema, conv = t.schema_and_converter(_pg("timestamp", 0))
    assert (schema.name, conv("2024-02-29 13:45:30")) == ("io.debezium.time.Timestamp", 1709214330000)
    assert t.schema_and_converter(_pg("timestamp"))[0].name == "io.debezium.time.MicroTimestamp"
    _, conv = t.schema_and_converter(_pg("timestamptz", 3))
    assert conv("2024-02-29 13:45:30.5+00") == "2024-02-29T13:45:30.500Z"
    _, conv = t.schema_and_converter(_pg("timestamptz", 0))
    assert conv("2024-02-29 13:45:30+01") == "2024-02-29T12:45:30Z"


def _placeholder(pg: t.PgType, setting: bytes = P):
    schema, _ = t.schema_and_converter(pg)
    return t.unavailable_value(pg, schema, setting)


def test_placeholder_shapes_per_type():
    text = P.decode()
    assert _placeholder(_pg("text")) == text
    assert _placeholder(_pg("jsonb")) == text
    assert _placeholder(_pg("bytea")) == P
    assert _placeholder(_pg("_text", element="text")) == [text]
    assert _placeholder(_pg("_int4", element="int4")) == list(P)
    assert _placeholder(_pg("_int8", element="int8")) == list(P)
    assert _placeholder(_pg("_int4", element="int4"), b"\xff") == [-1]  # Java bytes are signed
    assert _placeholder(_pg("_bytea", element="bytea")) == [P]
    assert _placeholder(_pg("hstore")) == f'{{"{text}":"{text}"}}'
    # fixed-width types are never TOASTed: no check is compiled for them
    assert _placeholder(_pg("int4")) is NO_DEFAULT
    assert _placeholder(_pg("timestamptz")) is NO_DEFAULT
    assert t.placeholder_bytes("hex:00ff") == b"\x00\xff"


def _table() -> Table:
    def col(name: str, pg: t.PgType, pos: int, optional: bool = True) -> Column:
        return Column(name=name, position=pos, type_name=pg.name, type_oid=0, type_modifier=-1, length=None,
                      scale=None, optional=optional, default_expression=None, generated=False, native=pg)

    return Table(TableId(None, "public", "t"), (
        col("id", _pg("int4"), 1, optional=False), col("body", _pg("text"), 2), col("data", _pg("bytea"), 3),
        col("tags", _pg("_text", element="text"), 4)), ("id",), {})


def test_row_replaces_unchanged_toast_with_placeholders():
    from headwater.connectors.postgres.source_info import SOURCE_SCHEMA

    schema = build_table_schema(_table(), t.PostgresValueConverters(), topic_prefix="p",
                                source_schema=SOURCE_SCHEMA)
    row = schema.row(["1", UNCHANGED_TOAST, UNCHANGED_TOAST, UNCHANGED_TOAST])
    assert row == {"id": 1, "body": P.decode(), "data": P, "tags": [P.decode()]}
    assert schema.row(["2", "x", "\\x00", "{a}"]) == {"id": 2, "body": "x", "data": b"\x00", "tags": ["a"]}
    assert schema.row(["3", None, None, None])["body"] is None
    # each row gets its own list
    assert schema.row(["1", None, None, UNCHANGED_TOAST])["tags"] is not row["tags"]
    out = JsonConverter(schemas_enable=False).to_jsonable(schema.row_schema, row)
    assert out["data"] == base64.b64encode(P).decode()

    custom = build_table_schema(_table(), t.PostgresValueConverters(unavailable_placeholder="hex:00"),
                                topic_prefix="p", source_schema=SOURCE_SCHEMA)
    assert custom.row(["1", UNCHANGED_TOAST, UNCHANGED_TOAST, None])["data"] == b"\x00"
