"""Column mappers (column.truncate/mask/mask.hash/propagate.source.type): headwater.relational.column_mappers,
their hook in build_table_schema, and how the PostgreSQL connector describes columns for them.
Expected values come from Debezium 3.6.3 (tests/conformance/extra/golden/column_*.jsonl, propagate_types.jsonl)."""

from __future__ import annotations

import pickle

import pytest

from headwater.config import from_properties
from headwater.connectors.postgres import types as t
from headwater.connectors.postgres.events import BuilderSettings
from headwater.connectors.postgres.schemas import pg_source_column
from headwater.connectors.postgres.source_info import SOURCE_SCHEMA
from headwater.model.schema import Schema
from headwater.relational import column_mappers as cm
from headwater.relational.column_mappers import ColumnMappers, SourceColumn
from headwater.relational.table import Column, Table, TableId
from headwater.relational.table_schema import build_table_schema

TID = TableId(None, "public", "people")
SALT = "CzQMA0cB5K"


def _src(name: str, type_name: str = "varchar", jdbc: int = cm.VARCHAR, length: int = 2147483647,
         scale: int | None = 0) -> SourceColumn:
    return SourceColumn(name, type_name, jdbc, length, scale)


def _pg(name: str, modifier: int = -1, *, element: str | None = None, kind: str = "b") -> t.PgType:
    return t.PgType(name, 0, modifier, kind=kind, element=None if element is None else t.PgType(element, 0))


def test_rules_in_debezium_order_first_match_wins():
    m = ColumnMappers.from_properties({
        f"column.mask.hash.v2.SHA-256.with.salt.{SALT}": "public.people.name",
        "column.mask.with.3.chars": "public.people.name",
        "column.truncate.to.2.chars": "public.people.name",
        "column.propagate.source.type": "public.people.name",
        f"column.mask.hash.SHA-256.with.salt.{SALT}": "public.people.email",
        "datatype.propagate.source.type": r".+\.int4",
    })
    assert [(r.kind, r.by_datatype, r.version) for r in m.rules] == [
        ("truncate", False, 1), ("mask", False, 1), ("propagate", False, 1), ("propagate", True, 1),
        ("hash", False, 1), ("hash", False, 2)]
    assert m.rule_for(TID, _src("name")).kind == "truncate"
    hash_v1 = m.rule_for(TID, _src("email"))
    assert (hash_v1.kind, hash_v1.version, hash_v1.algorithm, hash_v1.salt) == ("hash", 1, "sha256", SALT.encode())
    assert m.rule_for(TID, _src("qty", "int4", cm.OTHER, 10)).by_datatype


def test_patterns_are_anchored_and_case_insensitive():
    m = ColumnMappers.from_properties({"column.mask.with.5.chars": r"public\.people\.CODE, public.people.e.*"})
    assert m.rule_for(TID, _src("code")) is not None
    assert m.rule_for(TID, _src("email")) is not None
    assert m.rule_for(TID, _src("xcode")) is None
    assert m.rule_for(TableId(None, "public", "people2"), _src("code")) is None
    # datatype rules see `<schema>.<table>.<type>`: a bare type name matches nothing (as in Debezium)
    d = ColumnMappers.from_properties({"datatype.propagate.source.type": ["varchar", r".+\.bpchar"]})
    assert d.rule_for(TID, _src("a", "varchar")) is None
    assert d.rule_for(TID, _src("a", "bpchar")) is not None
    assert not ColumnMappers.from_properties({})


def test_mask_and_truncate():
    m = ColumnMappers.from_properties({"column.mask.with.5.chars": "public.people.(email|qty)",
                                       "column.truncate.to.4.chars": "public.people.(name|id|short)"})
    string = Schema("string")
    schema, mask = m.for_column(TID, _src("email"), string)
    assert schema.parameters == {"masked": "true"}
    assert [mask("x"), mask(None), mask("")] == ["*****"] * 3
    # non-character columns: the parameter, but values pass through
    schema, mapper = m.for_column(TID, _src("qty", "int4", cm.OTHER, 10), Schema("int32"))
    assert (schema.parameters, mapper) == ({"masked": "true"}, None)
    schema, cut = m.for_column(TID, _src("name", length=20), string)
    assert schema.parameters == {"truncateLength": "4"}
    assert [cut("Alexander"), cut("Zoë Ünïcode"), cut("abc"), cut(None), cut(b"\x00\x01\x02\x03\x04")] == \
        ["Alex", "Zoë ", "abc", None, b"\x00\x01\x02\x03"]
    assert cut("a😀bc") == "a😀b"          # Java counts UTF-16 units
    # any type whose length is unknown or > N gets the parameter; values of other types are kept
    schema, cut = m.for_column(TID, _src("id", "int4", cm.OTHER, 10), Schema("int32"))
    assert schema.parameters == {"truncateLength": "4"} and cut(123456) == 123456
    # not possible when the column is not longer than N: nothing at all
    assert m.for_column(TID, _src("short", length=3), string) == (string, None)


def test_hash_v1_and_v2_as_debezium():
    v1 = cm.hashing("sha256", SALT.encode(), 1, 40)
    v2 = cm.hashing("sha256", SALT.encode(), 2, None)
    assert v1("Alice") == "91b1b7e6505507b2e1df181c19d8fbbf30b9c06b"
    assert v1("") == "7b061bc77caec9afdc6b986ab6c4de894d58006b"
    assert v1("Zoë Ünïcode") == "a74652e9211068626e9e9f898bf665610f749537"
    assert cm.hashing("sha256", SALT.encode(), 1, 10)("Köln") == "3a898a9ebe"
    assert v2("alice@example.com") == "7404d2ed8506279b8038b571358626038ec8d8c769c367caf81eec0c02d58d97"
    assert v2("") == "38bc986eb4a5475fab16ac693f6c1b4c2445600da5c5aec3d04301e48d6d0d68"
    assert v1(None) is None and v2(None) is None
    # ObjectOutputStream: header, TC_STRING, length, modified UTF-8 (NUL and supplementary chars)
    assert cm.java_serialized_string("A") == b"\xac\xed\x00\x05t\x00\x01A"
    assert cm.java_serialized_string("\0😀") == b"\xac\xed\x00\x05t\x00\x08\xc0\x80\xed\xa0\xbd\xed\xb8\x80"
    assert cm.java_serialized_string("x" * 70000)[:13] == b"\xac\xed\x00\x05|" + (70000).to_bytes(8, "big")
    # column length: the hash is cut to it; text (unknown length 2^31-1) keeps all 64 digits
    m = ColumnMappers.from_properties({f"column.mask.hash.SHA-256.with.salt.{SALT}": "public.people.(city|note)"})
    schema, h = m.for_column(TID, _src("city", length=10), Schema("string"))
    assert schema.parameters == {"masked": "true"} and h("Berlin") == "228b813265"
    assert len(m.for_column(TID, _src("note", "text"), Schema("string"))[1]("x")) == 64


def test_propagate_parameters():
    m = ColumnMappers.from_properties({"column.propagate.source.type": "public.people.*"})
    decimal = Schema("bytes", name="org.apache.kafka.connect.data.Decimal", version=1,
                     parameters={"scale": "2", "connect.decimal.precision": "10"})
    schema, mapper = m.for_column(TID, _src("price", "numeric", cm.OTHER, 10, 2), decimal)
    assert mapper is None
    assert schema.parameters == {"scale": "2", "connect.decimal.precision": "10",
                                 "__debezium.source.column.type": "NUMERIC", "__debezium.source.column.length": "10",
                                 "__debezium.source.column.scale": "2", "__debezium.source.column.name": "price"}
    schema, _ = m.for_column(TID, _src("ratio", "numeric", cm.OTHER, 0, None), Schema("struct"))
    assert schema.parameters == {"__debezium.source.column.type": "NUMERIC", "__debezium.source.column.length": "0",
                                 "__debezium.source.column.name": "ratio"}
    schema, _ = m.for_column(TID, _src("x", "foo", cm.OTHER, cm.UNSET_LENGTH, None), Schema("string"))
    assert "__debezium.source.column.length" not in schema.parameters


def test_postgres_source_columns_snapshot_and_relation():
    def col(name: str, pg: t.PgType, type_name: str | None = None, default: str | None = None) -> Column:
        return Column(name, 1, type_name or pg.name, default_expression=default, native=pg)

    def both(c: Column) -> tuple[tuple, tuple]:
        return tuple(tuple(getattr(pg_source_column(c, from_relation=r), f) for f in
                           ("type_name", "jdbc_type", "length", "scale")) for r in (False, True))

    serial = col("id", _pg("int4"), default="nextval('items_id_seq'::regclass)")
    assert both(serial) == (("serial", cm.OTHER, 10, 0), ("int4", cm.OTHER, 10, 0))
    assert both(col("title", _pg("varchar", 34))) == (("varchar", cm.VARCHAR, 30, 0),) * 2
    assert both(col("body", _pg("text"))) == (("text", cm.VARCHAR, 2147483647, 0),) * 2
    assert both(col("code", _pg("bpchar", 8))) == (("bpchar", cm.CHAR, 4, 0),) * 2
    assert both(col("price", _pg("numeric", (10 << 16) + 2 + 4))) == (("numeric", cm.OTHER, 10, 2),) * 2
    assert both(col("ratio", _pg("numeric"))) == (("numeric", cm.OTHER, 0, None), ("numeric", cm.OTHER, 131089, 0))
    assert both(col("created", _pg("timestamp", 3))) == (("timestamp", cm.OTHER, 26, 3),) * 2
    assert both(col("at", _pg("timestamptz"))) == (("timestamptz", cm.OTHER, 35, 6),) * 2
    assert both(col("d", _pg("date"))) == (("date", cm.OTHER, 13, 0),) * 2
    assert both(col("f", _pg("float8"))) == (("float8", cm.OTHER, 17, 17),) * 2
    assert both(col("tags", _pg("_text", element="text"))) == (("_text", 2003, 2147483647, 0),) * 2
    assert both(col("mood", _pg("mood", kind="e")))[0][1] == cm.VARCHAR


def _table() -> Table:
    return Table(TID, (
        Column("id", 1, "int4", optional=False, native=_pg("int4")),
        Column("name", 2, "varchar", length=20, native=_pg("varchar", 24)),
        Column("email", 3, "text", native=_pg("text")),
        Column("note", 4, "text", optional=False, native=_pg("text")),
        Column("plain", 5, "text", native=_pg("text")),
    ), ("id",))


class _Converters(t.PostgresValueConverters):
    def source_column(self, table, column):
        return pg_source_column(column, from_relation=True)


def test_build_table_schema_hook():
    mappers = ColumnMappers.from_properties({"column.mask.with.3.chars": "public.people.(email|id)",
                                            "column.truncate.to.2.chars": "public.people.(name|note)"})
    conv = _Converters()
    plain = build_table_schema(_table(), conv, topic_prefix="p", source_schema=SOURCE_SCHEMA)
    mapped = build_table_schema(_table(), conv, topic_prefix="p", source_schema=SOURCE_SCHEMA, mappers=mappers)
    assert mapped.key_schema.to_json() == plain.key_schema.to_json()        # keys are never mapped
    params = {f.name: f.schema.parameters for f in mapped.row_schema.fields}
    assert params == {"id": {"masked": "true"}, "name": {"truncateLength": "2"}, "email": {"masked": "true"},
                      "note": {"truncateLength": "2"}, "plain": None}
    assert [p.mapper is None for p in mapped.plan] == [True, False, False, False, True]
    raw = ("7", "Alexander", None, None, "kept")
    assert plain.row(raw) == {"id": 7, "name": "Alexander", "email": None, "note": "", "plain": "kept"}
    assert mapped.row(raw) == {"id": 7, "name": "Al", "email": "***", "note": "", "plain": "kept"}
    assert mapped.key(mapped.row(raw)) == {"id": 7}
    # unchanged TOAST: the placeholder goes through the mapper too
    toast = mapped.row(("7", "x", conv.unavailable_marker, conv.unavailable_marker, None))
    assert toast["email"] == "***" and toast["note"] == "__"
    # an empty rule set is no rule set: the same plan as without mappers
    empty = build_table_schema(_table(), conv, topic_prefix="p", source_schema=SOURCE_SCHEMA,
                               mappers=ColumnMappers())
    assert all(p.mapper is None for p in empty.plan)


def test_mappers_survive_pickling_into_builder_settings():
    mappers = ColumnMappers.from_properties({f"column.mask.hash.v2.SHA-256.with.salt.{SALT}": "public.people.email",
                                            "column.truncate.to.2.chars": "public.people.name"})
    settings = BuilderSettings(server="p", dbname="db", message_topic="p.message", topic_delimiter=".",
                               table_filter=None, column_filter=None, key_columns=None, include_unknown=False,
                               tombstones_on_delete=True, skipped_operations=frozenset(),
                               provide_transaction_metadata=False, transaction_topic="p.transaction",
                               column_mappers=mappers)
    copy = pickle.loads(pickle.dumps(settings))
    registry = copy.registry(None)
    captured = registry.build(_table(), ("id", "name", "email", "note", "plain"))
    row = captured.schema.row(("1", "Alexander", "alice@example.com", "n", None))
    assert row["name"] == "Al"
    assert row["email"] == cm.hashing("sha256", SALT.encode(), 2, None)("alice@example.com")


def test_from_config():
    cfg = from_properties({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "p",
        "database.hostname": "h", "database.user": "u", "database.dbname": "d",
        "column.mask.with.4.chars": r"public\.a\.x,public.b.y",
        f"column.mask.hash.SHA-256.with.salt.{SALT}": "public.c.z",
        "column.propagate.source.type": "public.a.w",
    }, sink_type="stdout").connector
    m = ColumnMappers.from_config(cfg)
    assert [(r.kind, len(r.patterns)) for r in m.rules] == [("mask", 2), ("propagate", 1), ("hash", 1)]
    with pytest.raises(ValueError):
        ColumnMappers.from_properties({"column.mask.hash.NOPE-1.with.salt.x": "a.b.c"})
