"""Matching rules of message.key.columns (Debezium's CustomKeyMapper), message.prefix.include/exclude.list
(LogicalDecodingMessageFilter) and the value comparison of skip.messages.without.change."""

from __future__ import annotations

from decimal import Decimal

import pytest

from headwater.config.relational import parse_message_key_columns
from headwater.connectors.postgres.events import same_value
from headwater.relational.filters import PrefixFilter
from headwater.relational.key_mapper import KeyColumnMapper, KeyColumnsError
from headwater.relational.table import TableId


def keys(spec: str, table: str, columns: list[str]) -> list[str] | None:
    schema, name = table.split(".")
    mapper = KeyColumnMapper.from_spec(spec)
    assert mapper is not None
    return mapper.key_columns(TableId(None, schema, name), columns)


def test_key_columns_regex_is_anchored_and_case_insensitive():
    assert keys("public.t.*:code", "public.tab", ["id", "code"]) == ["code"]
    assert keys("t.*:code", "public.tab", ["id", "code"]) is None  # anchored at the start
    assert keys("public.ta:code", "public.tab", ["id", "code"]) is None  # ... and at the end
    assert keys("PUBLIC.Mixed:v", "public.mixed", ["ID", "V"]) == ["V"]
    assert keys("(.*).orders:a,b", "app.orders", ["c", "b", "a"]) == ["a", "b"]  # entry order


def test_key_columns_the_dot_before_the_column_is_a_regex_dot():
    # "public.t.*" + "." + "code" also matches column "xcode" (as Debezium, recorded: key_columns_regex)
    assert keys("public.t.*:code", "public.ta", ["id", "code", "xcode"]) == ["code", "xcode"]


def test_key_columns_entries_add_up_in_entry_order():
    spec = "public.t.*:code;(.*).orders:a;public.tab2:id"
    assert keys(spec, "public.tab2", ["id", "code", "name"]) == ["code", "id"]
    assert keys(spec, "public.other", ["id"]) is None  # no match: the primary key stays
    assert keys("public.tab2:zzz", "public.tab2", ["id"]) is None


def test_key_columns_column_selected_twice_is_an_error():
    with pytest.raises(KeyColumnsError, match=r"selects column\(s\) code of table public\.tab2 more than once"):
        keys("public.t.*:code;public.tab2:code", "public.tab2", ["id", "code"])


def test_key_columns_unescaped_comma_splits_the_regex_like_any_debezium_list():
    # "public.t{1,2}" is not one regex for Debezium: the list is split at the comma
    assert keys(r"public.t{1\,2}:a", "public.tt", ["a"]) == ["a"]


def test_key_columns_validation_follows_debezium():
    assert parse_message_key_columns(" a.b:x, y ;c.d:z;") == [("a.b", ["x", "y"]), ("c.d", ["z"])]
    for bad in ("a.b", "a.b:", "a:b:c", "a.b:x,,y", "a.b:x;;c.d:y", " "):
        with pytest.raises(ValueError):
            parse_message_key_columns(bad)
    assert KeyColumnMapper.from_spec(None) is None and KeyColumnMapper.from_spec("") is None


def test_prefix_filter_include_and_exclude():
    include = PrefixFilter.build(include=[r"app\..*", "AUDIT"])
    assert include("app.x") and include("audit") and include("Audit")
    assert not include("myapp.x") and not include("audit2") and not include("app") and not include("")
    exclude = PrefixFilter.build(exclude=["debug.*"])
    assert not exclude("debug") and not exclude("Debug.y")
    assert exclude("app.debug") and exclude("")
    assert PrefixFilter.build()("anything")


def test_same_value_follows_java_equals():
    assert same_value({"a": 1, "b": None}, {"a": 1, "b": None})
    assert not same_value({"a": 1, "b": None}, {"a": 1, "b": 0})
    assert same_value(float("nan"), float("nan"))  # Double.equals
    assert not same_value(0.0, -0.0)
    assert not same_value(Decimal("1.0"), Decimal("1.00"))  # BigDecimal.equals: the scale counts
    assert same_value(b"\x00\x01", b"\x00\x01")
    assert same_value([1.5, None], [1.5, None]) and not same_value([1], [1, 2])
    assert not same_value(1, True)


def test_message_key_columns_match_a_catalog_qualified_table_both_ways() -> None:
    """Tables with a catalog (SQL Server's databases): an entry may name `db.schema.table` or
    `schema.table` (Debezium's Key.matchColumn tries both)."""
    table = TableId("sales", "dbo", "accounts")
    columns = ["id", "region", "name"]
    assert KeyColumnMapper.from_spec("sales.dbo.accounts:id,region").key_columns(table, columns) == ["id", "region"]
    assert KeyColumnMapper.from_spec("dbo.accounts:region").key_columns(table, columns) == ["region"]
    assert KeyColumnMapper.from_spec("other.dbo.accounts:region").key_columns(table, columns) is None
    # without a catalog only schema.table is the table's name
    assert KeyColumnMapper.from_spec("sales.dbo.accounts:id").key_columns(TableId(None, "dbo", "accounts"),
                                                                          columns) is None
