"""Topic naming strategies and Avro name adjustment (headwater.relational.topic_naming), checked
against what the real Debezium 3.6.3 produced in the recorded topic_* / names_* scenarios and
against its source (AbstractTopicNamingStrategy, SchemaNameAdjuster)."""

from __future__ import annotations

import pytest

from headwater.config import ConfigError, Configuration, connector_fields
from headwater.connectors.postgres.connector import PostgresConnector
from headwater.model.schema import NO_DEFAULT, OPTIONAL_STRING
from headwater.relational.table import Column, Table, TableId
from headwater.relational.table_schema import build_table_schema
from headwater.relational.topic_naming import (
    DEFAULT_STRATEGY,
    DEFAULT_UNICODE_STRATEGY,
    SCHEMA_UNICODE_STRATEGY,
    NameAdjuster,
    NamingError,
    TopicNaming,
    resolve_strategy,
)

T = TableId(None, "public", "Ünïcode tábla")


def test_schema_strategy_replaces_invalid_characters_with_underscore() -> None:
    naming = TopicNaming("dbserver1")
    assert naming.data_change_topic(T) == "dbserver1.public._n_code_t_bla"
    assert naming.data_change_topic(TableId(None, "Sales Dept", "order$lines")) == "dbserver1.Sales_Dept.order_lines"
    # dots and hyphens are valid in topic names
    assert naming.data_change_topic(TableId(None, "public", "dot.table")) == "dbserver1.public.dot.table"
    assert naming.data_change_topic(TableId(None, "public", "my-table")) == "dbserver1.public.my-table"


def test_default_strategy_leaves_out_the_schema() -> None:
    naming = TopicNaming("dbserver1", strategy=DEFAULT_STRATEGY)
    assert naming.data_change_topic(TableId(None, "public", "t")) == "dbserver1.t"
    assert naming.data_change_topic(TableId(None, "app", "t")) == "dbserver1.t"


def test_unicode_strategies_escape_underscore_and_invalid_characters_also_in_the_prefix() -> None:
    naming = TopicNaming("srv_1", strategy=SCHEMA_UNICODE_STRATEGY)
    assert naming.data_change_topic(T) == "srv_u005f1.public._u00dcn_u00efcode_u0020t_u00e1bla"
    assert naming.data_change_topic(TableId(None, "public", "my-table")) == "srv_u005f1.public.my-table"
    # transaction and heartbeat topics are not sanitized
    assert naming.transaction_topic() == "srv_1.transaction"
    assert naming.heartbeat_topic() == "__debezium-heartbeat.srv_1"
    default = TopicNaming("dbserver1", strategy=DEFAULT_UNICODE_STRATEGY)
    assert default.data_change_topic(TableId(None, "app", "snake_case")) == "dbserver1.snake_u005fcase"


def test_delimiter_and_fixed_topics() -> None:
    naming = TopicNaming("srv-1", delimiter="_", transaction="meta.transaction", heartbeat_prefix="hb")
    assert naming.data_change_topic(TableId(None, "public", "t")) == "srv-1_public_t"
    assert naming.transaction_topic() == "srv-1_meta.transaction"
    assert naming.heartbeat_topic() == "hb_srv-1"
    assert naming.message_topic() == "srv-1.message"  # Debezium hard-codes the dot


def test_sanitize_edge_cases() -> None:
    naming = TopicNaming("p")
    assert naming.sanitize(".") == "_"
    assert naming.sanitize("..") == "__"
    assert naming.sanitize("a" * 300) == "a" * 249
    assert naming.sanitize("x\U0001f600") == "x__"  # two UTF-16 code units, two replacements
    assert TopicNaming("p", strategy=SCHEMA_UNICODE_STRATEGY).sanitize("\U0001f600") == "_ud83d_ude00"


def test_strategy_names() -> None:
    assert resolve_strategy(None) == "io.debezium.schema.SchemaTopicNamingStrategy"
    assert resolve_strategy("DefaultTopicNamingStrategy") == DEFAULT_STRATEGY
    with pytest.raises(NamingError, match="SchemaUnicodeTopicNamingStrategy"):
        resolve_strategy("io.debezium.schema.DefaultRegexTopicNamingStrategy")


@pytest.mark.parametrize(
    ("mode", "fields", "name", "expected"),
    [
        ("none", True, "1st col", "1st col"),
        ("avro", True, "1st col", "_1st_col"),
        ("avro", True, "ümlaut", "_mlaut"),
        ("avro", True, "a-b", "a_b"),
        ("avro", True, "_under", "_under"),
        ("avro", True, "a.b", "a_b"),          # fields: a dot is invalid
        ("avro", False, "srv-1.public.my-table.Value", "srv_1.public.my_table.Value"),
        ("avro_unicode", True, "1st col", "_u0031st_u0020col"),
        ("avro_unicode", True, "_under", "_u005funder"),
        ("avro_unicode", True, "väl", "v_u00e4l"),
        ("avro_unicode", True, "\u0140x", "_u140x"),  # Debezium pads to 4 digits only from 1-2
        ("avro_unicode", False, "srv-1.public._n_code.Key", "srv_u002d1.public._u005fn_u005fcode.Key"),
    ],
)
def test_name_adjustment(mode: str, fields: bool, name: str, expected: str) -> None:
    assert NameAdjuster(mode, fields=fields).adjust(name) == expected


def test_two_names_adjusted_to_the_same_replacement_are_an_error() -> None:
    adjuster = NameAdjuster("avro", fields=True)
    assert adjuster.adjust("a-b") == "a_b"
    assert adjuster.adjust("a-b") == "a_b"
    assert adjuster.adjust("a_b") == "a_b"  # valid names are not remembered (as in Debezium)
    with pytest.raises(NamingError, match=r"'a b'.*'a-b'"):
        adjuster.adjust("a b")


BASE = {"connector.class": "postgresql", "database.hostname": "h", "database.user": "u", "database.dbname": "d",
        "topic.prefix": "srv"}


def test_unknown_strategy_is_a_configuration_error_listing_the_supported_ones() -> None:
    with pytest.raises(ConfigError) as info:
        Configuration.build({**BASE, "topic.naming.strategy": "com.acme.MyStrategy"}, connector_fields("postgresql"))
    text = "\n".join(info.value.problems)
    assert "topic.naming.strategy" in text and "io.debezium.schema.DefaultUnicodeTopicNamingStrategy" in text
    with pytest.raises(ConfigError):
        Configuration.build({**BASE, "topic.delimiter": "/"}, connector_fields("postgresql"))


def test_connector_topics_come_from_the_strategy() -> None:
    config = Configuration.build({**BASE, "topic.naming.strategy": SCHEMA_UNICODE_STRATEGY, "topic.delimiter": "-",
                                  "heartbeat.interval.ms": "1000",
                                  "topic.heartbeat.prefix": "hb"}, connector_fields("postgresql"))
    settings = PostgresConnector(config).builder_settings()
    assert settings.message_topic == "srv.message"
    assert settings.transaction_topic == "srv-transaction"
    assert settings.heartbeat_topic == "hb-srv"
    assert settings.registry(None).topic_for(TableId(None, "public", "a_b")) == "srv-public-a_u005fb"


class _TextConverters:
    def schema_for(self, table, column):
        return OPTIONAL_STRING

    def converter_for(self, table, column, schema):
        return str

    def default_for(self, table, column, schema):
        return NO_DEFAULT

    def fallback_for(self, table, column, schema):
        return None


def test_adjusted_names_in_schemas_rows_and_keys() -> None:
    table = Table(TableId(None, "public", "my-table"), (Column("1st col", 1, "text"), Column("ümlaut", 2, "text")),
                  ("1st col",))
    ts = build_table_schema(table, _TextConverters(), topic_prefix="srv-1", source_schema=OPTIONAL_STRING,
                            topic="srv-1.public.my-table", schema_names=NameAdjuster("avro"),
                            field_names=NameAdjuster("avro", fields=True))
    assert ts.row_schema.name == "srv_1.public.my_table.Value"
    assert ts.envelope_schema.name == "srv_1.public.my_table.Envelope"
    assert ts.key_schema is not None and ts.key_schema.name == "srv_1.public.my_table.Key"
    assert [f.name for f in ts.row_schema.fields] == ["_1st_col", "_mlaut"]
    row = ts.row(["1", "x"])
    assert row == {"_1st_col": "1", "_mlaut": "x"}
    assert ts.key(row) == {"_1st_col": "1"}


def test_two_columns_adjusted_to_the_same_field_name_are_an_error() -> None:
    table = Table(TableId(None, "public", "t"), (Column("a-b", 1, "text"), Column("a b", 2, "text")))
    with pytest.raises(NamingError, match="conflicts"):
        build_table_schema(table, _TextConverters(), topic_prefix="srv", source_schema=OPTIONAL_STRING,
                           field_names=NameAdjuster("avro", fields=True))


def test_a_key_column_left_out_of_the_value_is_refused_with_the_reason() -> None:
    from headwater.relational.filters import ColumnFilter
    from headwater.relational.key_mapper import KeyColumnsError

    table = Table(TableId(None, "public", "t"), (Column("id", 1, "text"), Column("v", 2, "text")), ("id",))
    with pytest.raises(KeyColumnsError, match="key column\\(s\\) id are left out of the value"):
        build_table_schema(table, _TextConverters(), topic_prefix="srv", source_schema=OPTIONAL_STRING,
                           column_filter=ColumnFilter.build(None, ["public.t.id"]))
