"""Validation of connector properties against COMMON_FIELDS + POSTGRES_FIELDS."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from headwater.config import ConfigError, Configuration, FieldSet, connector_fields, resolve_connector
from headwater.config.relational import parse_mask_hash_key, parse_message_key_columns, split_statements
from headwater.connectors.postgres.config import (
    CONNECTOR_CLASS_ALIASES,
    POSTGRES_FIELDS,
    libpq_options,
    lsn_flush_mode,
    parse_stream_params,
)
from headwater.connectors.postgres.replica_identity import parse_autoset

PG_FIELDS = connector_fields("postgresql")


def build(props: dict[str, str], **extra: str) -> Configuration:
    return Configuration.build({**props, **extra}, PG_FIELDS)


def problems(props: dict[str, str], **extra: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        build(props, **extra)
    return info.value.problems


# ------------------------------------------------------------------------------- defaults


@pytest.mark.parametrize(
    ("name", "default"),
    [
        ("name", "headwater"),
        ("tasks.max", 1),
        ("plugin.name", "pgoutput"),
        ("slot.name", "debezium"),
        ("slot.drop.on.stop", False),
        ("publication.name", "dbz_publication"),
        ("publication.autocreate.mode", "all_tables"),
        ("database.port", 5432),
        ("database.sslmode", "prefer"),
        ("database.tcpKeepAlive", True),
        ("database.query.timeout.ms", 600000),
        ("snapshot.mode", "initial"),
        ("snapshot.locking.mode", "none"),
        ("snapshot.query.mode", "select_all"),
        ("snapshot.lock.timeout.ms", 10000),
        ("snapshot.fetch.size", 10240),
        ("snapshot.max.threads", 1),
        ("snapshot.delay.ms", 0),
        ("max.batch.size", 2048),
        ("max.queue.size", 8192),
        ("max.queue.size.in.bytes", 0),
        ("poll.interval.ms", 500),
        ("skipped.operations", ["t"]),
        ("tombstones.on.delete", True),
        ("provide.transaction.metadata", False),
        ("decimal.handling.mode", "precise"),
        ("time.precision.mode", "adaptive"),
        ("binary.handling.mode", "bytes"),
        ("hstore.handling.mode", "json"),
        ("interval.handling.mode", "numeric"),
        ("include.unknown.datatypes", False),
        ("money.fraction.digits", 2),
        ("schema.refresh.mode", "columns_diff"),
        ("slot.max.retries", 6),
        ("slot.retry.delay.ms", 10000),
        ("status.update.interval.ms", 10000),
        ("xmin.fetch.interval.ms", 0),
        ("flush.lsn.source", True),
        ("lsn.flush.mode", None),
        ("unavailable.value.placeholder", "__debezium_unavailable_value"),
        ("heartbeat.interval.ms", 0),
        ("errors.max.retries", -1),
        ("errors.retry.delay.initial.ms", 300),
        ("errors.retry.delay.max.ms", 10000),
        ("retriable.restart.connector.wait.ms", 10000),
        ("event.processing.failure.handling.mode", "fail"),
        ("schema.name.adjustment.mode", "none"),
        ("field.name.adjustment.mode", "none"),
        ("topic.delimiter", "."),
        ("topic.transaction", "transaction"),
        ("topic.heartbeat.prefix", "__debezium-heartbeat"),
        ("topic.naming.strategy", "io.debezium.schema.SchemaTopicNamingStrategy"),
        ("topic.cache.size", 10000),
        ("incremental.snapshot.chunk.size", 1024),
        ("incremental.snapshot.watermarking.strategy", "insert_insert"),
        ("signal.enabled.channels", ["source"]),
        ("signal.kafka.groupId", "kafka-signal"),
        ("signal.kafka.poll.timeout.ms", 100),
        ("kafka.consumer.offset.commit.enabled", False),
        ("key.converter", "org.apache.kafka.connect.json.JsonConverter"),
        ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
        ("key.converter.schemas.enable", True),
        ("value.converter.schemas.enable", True),
        ("header.converter.schemas.enable", True),
        ("key.converter.replace.null.with.default", True),
        ("value.converter.replace.null.with.default", True),
        ("offset.flush.interval.ms", 60000),
        ("offset.flush.timeout.ms", 5000),
        ("offset.storage.file.filename", None),
        ("table.include.list", ["public.inventory"]),
        ("table.exclude.list", None),
        ("snapshot.mode.configuration.based.snapshot.data", False),
        ("publish.via.partition.root", False),
        ("snapshot.isolation.mode", "serializable"),
    ],
)
def test_typed_defaults(pg_props: dict[str, str], name: str, default: Any) -> None:
    cfg = build(pg_props)
    assert cfg.get(name) == default
    assert cfg[name] == default


def test_typed_values(pg_props: dict[str, str]) -> None:
    cfg = build(
        pg_props,
        **{
            "max.batch.size": " 100 ",
            "max.queue.size": "1000",
            "max.queue.size.in.bytes": "9223372036854775807",
            "tombstones.on.delete": "FALSE",
            "snapshot.mode": "Initial_Only",
            "skipped.operations": "c, d",
            "database.port": "15432",
        },
    )
    assert cfg.get("max.batch.size") == 100
    assert cfg.get("max.queue.size.in.bytes") == 2**63 - 1
    assert cfg.get("tombstones.on.delete") is False
    assert cfg.get("snapshot.mode") == "initial_only"
    assert cfg.get("skipped.operations") == ["c", "d"]
    assert cfg.get("database.port") == 15432
    assert cfg.is_set("database.port") and not cfg.is_set("slot.name")
    assert cfg.raw["max.batch.size"] == " 100 "


def test_list_values_are_copies(pg_props: dict[str, str]) -> None:
    cfg = build(pg_props)
    cfg.get("skipped.operations").append("c")
    assert cfg.get("skipped.operations") == ["t"]


def test_get_unknown_name(pg_props: dict[str, str]) -> None:
    cfg = build(pg_props)
    with pytest.raises(KeyError):
        cfg.get("no.such.property")
    assert cfg.get("no.such.property", 7) == 7


# ------------------------------------------------------------------------------- conversion errors


def test_bad_int(pg_props: dict[str, str]) -> None:
    assert problems(pg_props, **{"max.batch.size": "abc"}) == [
        "invalid value 'abc' for property 'max.batch.size': expected an integer"
    ]


@pytest.mark.parametrize("value", ["1.5", "1_000", "", "0x10"])
def test_bad_int_forms(pg_props: dict[str, str], value: str) -> None:
    (p,) = problems(pg_props, **{"slot.max.retries": value})
    assert p.startswith(f"invalid value '{value}' for property 'slot.max.retries': expected")


def test_int_out_of_range(pg_props: dict[str, str]) -> None:
    (p,) = problems(pg_props, **{"max.batch.size": str(2**31)})
    assert "32-bit integer" in p


@pytest.mark.parametrize("value", ["yes", "1", "on", "tru"])
def test_bad_bool(pg_props: dict[str, str], value: str) -> None:
    assert problems(pg_props, **{"tombstones.on.delete": value}) == [
        f"invalid value '{value}' for property 'tombstones.on.delete': expected true or false"
    ]


def test_bad_enum_lists_allowed_values_and_alias(pg_props: dict[str, str]) -> None:
    assert problems(pg_props, **{"snapshot.mode": "sometimes"}) == [
        "invalid value 'sometimes' for property 'snapshot.mode': allowed values are always, initial, "
        "initial_only, no_data, when_needed, configuration_based, custom "
        "(never is a deprecated alias of no_data)"
    ]


def test_alias_never_maps_to_no_data_with_warning(pg_props: dict[str, str], caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="headwater.config"):
        cfg = build(pg_props, **{"snapshot.mode": "NEVER"})
    assert cfg.get("snapshot.mode") == "no_data"
    assert cfg.warnings == ["value 'never' for property 'snapshot.mode' is deprecated; use 'no_data' instead"]
    assert "deprecated" in caplog.text


def test_decoderbufs_is_rejected(pg_props: dict[str, str]) -> None:
    assert problems(pg_props, **{"plugin.name": "decoderbufs"}) == [
        "plugin.name=decoderbufs is not supported: Headwater reads pgoutput only (built into "
        "PostgreSQL 10+); set plugin.name=pgoutput"
    ]
    assert build(pg_props, **{"plugin.name": "PGOUTPUT"}).get("plugin.name") == "pgoutput"


def test_other_enums(pg_props: dict[str, str]) -> None:
    cfg = build(
        pg_props,
        **{
            "publication.autocreate.mode": "filtered",
            "database.sslmode": "verify-full",
            "binary.handling.mode": "base64-url-safe",
            "event.processing.failure.handling.mode": "ignore",
        },
    )
    assert cfg.get("publication.autocreate.mode") == "filtered"
    assert cfg.get("database.sslmode") == "verify-full"
    assert cfg.get("binary.handling.mode") == "base64-url-safe"
    assert cfg.get("event.processing.failure.handling.mode") == "skip"
    (p,) = problems(pg_props, **{"database.sslmode": "verify"})
    assert "disable, allow, prefer, require, verify-ca, verify-full" in p


# ------------------------------------------------------------------------------- unknown / required


def test_unknown_property_did_you_mean(pg_props: dict[str, str]) -> None:
    assert problems(pg_props, **{"slot.nam": "x"}) == ["unknown property 'slot.nam'; did you mean 'slot.name'?"]


def test_unknown_property_without_hint(pg_props: dict[str, str]) -> None:
    assert problems(pg_props, **{"zzzzqqq": "x"}) == ["unknown property 'zzzzqqq'"]


def test_unknown_database_key_is_an_error(pg_props: dict[str, str]) -> None:
    (p,) = problems(pg_props, **{"database.hostnme": "x"})
    assert p == "unknown property 'database.hostnme'; did you mean 'database.hostname'?"


def test_missing_required(pg_props: dict[str, str]) -> None:
    del pg_props["topic.prefix"]
    del pg_props["database.hostname"]
    ps = problems(pg_props)
    assert len(ps) == 2
    assert ps[0].startswith("missing required property 'topic.prefix': Namespace for all topics")
    assert ps[1] == "missing required property 'database.hostname': IP address or host name of the database server."


def test_blank_required_counts_as_missing(pg_props: dict[str, str]) -> None:
    (p,) = problems(pg_props, **{"database.dbname": "  "})
    assert p.startswith("missing required property 'database.dbname'")


def test_all_problems_reported_together(pg_props: dict[str, str]) -> None:
    del pg_props["database.user"]
    with pytest.raises(ConfigError) as info:
        build(pg_props, **{"slot.nam": "x", "max.batch.size": "abc", "tombstones.on.delete": "maybe"})
    err = info.value
    assert len(err.problems) == 4
    lines = str(err).splitlines()
    assert lines[0] == "invalid configuration: 4 problems"
    assert len(lines) == 5


# ------------------------------------------------------------------------------- cross-field rules


@pytest.mark.parametrize("kind", ["schema", "table", "column", "message.prefix"])
def test_include_exclude_are_mutually_exclusive(pg_props: dict[str, str], kind: str) -> None:
    pg_props.pop("table.include.list")
    ps = problems(pg_props, **{f"{kind}.include.list": "a", f"{kind}.exclude.list": "b"})
    assert ps == [f"'{kind}.include.list' and '{kind}.exclude.list' are mutually exclusive; set only one of them"]


def test_queue_must_exceed_batch(pg_props: dict[str, str]) -> None:
    assert problems(pg_props, **{"max.queue.size": "100", "max.batch.size": "100"}) == [
        "invalid value '100' for property 'max.queue.size': must be greater than max.batch.size (100)"
    ]
    # a broken batch size is reported once, not again by the cross-field check
    assert len(problems(pg_props, **{"max.queue.size": "100", "max.batch.size": "x"})) == 1


def test_positive_values(pg_props: dict[str, str]) -> None:
    assert problems(pg_props, **{"max.batch.size": "0"}) == [
        "invalid value '0' for property 'max.batch.size': must be >= 1"
    ]
    assert problems(pg_props, **{"errors.max.retries": "-2"}) == [
        "invalid value '-2' for property 'errors.max.retries': must be >= -1"
    ]
    (p,) = problems(pg_props, **{"database.port": "70000"})
    assert "between 1 and 65535" in p


@pytest.mark.parametrize(
    ("mode_prop", "name_prop", "name"),
    [
        ("snapshot.mode", "snapshot.mode.custom.name", "mine"),
        ("snapshot.locking.mode", "snapshot.locking.mode.custom.name", "mine"),
        # a Python class (headwater.relational.snapshot_query); a Java name is refused
        ("snapshot.query.mode", "snapshot.query.mode.custom.name", "helpers.custom_plugins:EvenRowsOnly"),
    ],
)
def test_custom_modes_need_a_name(pg_props: dict[str, str], mode_prop: str, name_prop: str, name: str) -> None:
    assert problems(pg_props, **{mode_prop: "custom"}) == [
        f"missing required property '{name_prop}': required when {mode_prop}=custom"
    ]
    assert build(pg_props, **{mode_prop: "custom", name_prop: name}).get(name_prop) == name


def test_notification_sink_needs_its_topic(pg_props: dict[str, str]) -> None:
    (p,) = problems(pg_props, **{"notification.enabled.channels": "log,sink"})
    assert "notification.sink.topic.name" in p
    cfg = build(pg_props, **{"notification.enabled.channels": "log,sink", "notification.sink.topic.name": "n"})
    assert cfg.warnings == []


@pytest.mark.parametrize("value", ["Debezium", "my-slot", "a" * 64, "slot.1"])
def test_slot_name_rules(pg_props: dict[str, str], value: str) -> None:
    (p,) = problems(pg_props, **{"slot.name": value})
    assert p.startswith(f"invalid value '{value}' for property 'slot.name': ")
    assert "lower-case letters, digits and underscores" in p


def test_slot_name_ok(pg_props: dict[str, str]) -> None:
    assert build(pg_props, **{"slot.name": "dbz_oracle_" + "x" * 52}).get("slot.name").startswith("dbz_")


@pytest.mark.parametrize("value", ["has space", "a/b", "ünïcode"])
def test_topic_prefix_rules(pg_props: dict[str, str], value: str) -> None:
    (p,) = problems(pg_props, **{"topic.prefix": value})
    assert "letters, digits, '-', '.' and '_'" in p


def test_skipped_operations(pg_props: dict[str, str]) -> None:
    assert build(pg_props, **{"skipped.operations": "none"}).get("skipped.operations") == ["none"]
    (p,) = problems(pg_props, **{"skipped.operations": "c,x"})
    assert "'c,x'" in p and "allowed items are c, u, d, t, none" in p
    (p,) = problems(pg_props, **{"skipped.operations": "none,c"})
    assert "cannot be combined" in p


def test_regex_lists_are_validated(pg_props: dict[str, str]) -> None:
    (p,) = problems(pg_props, **{"table.include.list": "public.ok,public.(bad"})
    assert p.startswith("invalid value 'public.ok,public.(bad' for property 'table.include.list'")
    cfg = build(pg_props, **{"table.include.list": r"public\.a{1\,3},public.b"})
    assert cfg.get("table.include.list") == [r"public\.a{1,3}", "public.b"]


def test_converter_must_be_json(pg_props: dict[str, str]) -> None:
    (p,) = problems(pg_props, **{"value.converter": "io.confluent.connect.avro.AvroConverter"})
    assert "only org.apache.kafka.connect.json.JsonConverter is supported" in p


def test_custom_converters_open_their_prefix(pg_props: dict[str, str]) -> None:
    spec = "helpers.custom_plugins:IsbnConverter"  # a Python class (headwater.relational.converters)
    cfg = build(pg_props, converters="isbn", **{"isbn.type": spec, "isbn.schema.name": "x.Isbn"})
    assert cfg.get("isbn.type") == spec
    assert cfg.with_prefix("isbn.") == {"type": spec, "schema.name": "x.Isbn"}
    (p,) = problems(pg_props, converters="isbn")
    assert p.startswith("missing required property 'isbn.type'")
    (p,) = problems(pg_props, **{"isbn.type": "x"})
    assert p.startswith("unknown property 'isbn.type'")


def test_message_key_columns(pg_props: dict[str, str]) -> None:
    value = "inventory.customers:pk1,pk2;(.*).purchaseorders:pk3,pk4"
    assert build(pg_props, **{"message.key.columns": value}).get("message.key.columns") == value
    assert parse_message_key_columns(value) == [
        ("inventory.customers", ["pk1", "pk2"]),
        ("(.*).purchaseorders", ["pk3", "pk4"]),
    ]
    (p,) = problems(pg_props, **{"message.key.columns": "inventory.customers"})
    assert "not <fully-qualified table regex>:<column>" in p


def test_replica_identity_autoset(pg_props: dict[str, str]) -> None:
    ok = " schema1.*:FULL,schema2.table2:NOTHING ,schema2.table3:INDEX Idx_Name,s.t:DEFAULT,"  # trailing ',' as Java
    assert build(pg_props, **{"replica.identity.autoset.values": ok}).is_set("replica.identity.autoset.values")
    rules = parse_autoset(ok)
    assert [(r.pattern.pattern, r.describe()) for r in rules] == [
        ("schema1.*", "FULL"), ("schema2.table2", "NOTHING"), ("schema2.table3", "USING INDEX idx_name"),
        ("s.t", "DEFAULT")]
    assert rules[0].pattern.fullmatch("SCHEMA1.Orders") and not rules[1].pattern.fullmatch("schema2.table22")

    def problem(value: str) -> str:
        (p,) = problems(pg_props, **{"replica.identity.autoset.values": value})
        return p

    fmt = "is not <schema>.<table regex>:<DEFAULT|FULL|NOTHING|INDEX index_name>"
    assert f"entry 'schema1.*:EVERYTHING' {fmt}" in problem("schema1.*:EVERYTHING")
    assert f"entry 'a.b:INDEX x y' {fmt}" in problem("a.b:FULL,a.b:INDEX x y")
    assert f"entry 'a.b:INDEX' {fmt}" in problem("a.b:INDEX")
    assert parse_autoset("a.b:INDEX  two_spaces")[0].index == "two_spaces"  # as Debezium's SQL reads it
    assert f"entry 'a.b:INDEX my-idx' {fmt}" in problem("a.b:INDEX my-idx")  # Debezium's name: .\w*
    assert f"entry '' {fmt}" in problem("a.b:FULL,,c.d:FULL")
    assert f"entry 'a b:FULL' {fmt}" in problem("a b:FULL")
    assert f"entry 'a.b' {fmt}" in problem("a.b")
    # Debezium accepts lower case, then applies none of the entries (recorded): refused here
    assert problem("a.b:FULL,c.d:full") == (
        "invalid value 'a.b:FULL,c.d:full' for property 'replica.identity.autoset.values': entry 'c.d:full': "
        "write the identity in upper case (FULL); Debezium 3.6.3 accepts lower case but then applies none of "
        "the entries")
    assert "write the identity in upper case (INDEX)" in problem("a.b:index idx")
    assert "entry 'a.(b:FULL': the table regex is invalid" in problem("a.(b:FULL")


def test_slot_stream_params(pg_props: dict[str, str]) -> None:
    cfg = build(pg_props, **{"slot.stream.params": "add-tables=public.t,public.t2;include-lsn=true"})
    assert parse_stream_params(cfg.get("slot.stream.params")) == {
        "add-tables": "public.t,public.t2",
        "include-lsn": "true",
    }
    (p,) = problems(pg_props, **{"slot.stream.params": "a=1;oops"})
    assert "item 'oops' is not key=value" in p


def test_custom_metric_tags(pg_props: dict[str, str]) -> None:
    assert build(pg_props, **{"custom.metric.tags": "k1=v1,k2=v2"}).get("custom.metric.tags") == "k1=v1,k2=v2"
    (p,) = problems(pg_props, **{"custom.metric.tags": "k1"})
    assert "key=value" in p


def test_unavailable_placeholder_hex(pg_props: dict[str, str]) -> None:
    assert build(pg_props, **{"unavailable.value.placeholder": "hex:deadbeef"})
    (p,) = problems(pg_props, **{"unavailable.value.placeholder": "hex:abc"})
    assert "hexadecimal" in p


def test_initial_statements_split() -> None:
    assert split_statements("SET a=1; SET b='x;;y';;") == ["SET a=1", "SET b='x;y';"]


# ------------------------------------------------------------------------------- dynamic families


def test_column_transform_families(pg_props: dict[str, str]) -> None:
    cfg = build(
        pg_props,
        **{
            "column.truncate.to.20.chars": "public.t.a",
            "column.mask.with.0.chars": "public.t.b,public.t.c",
            "column.mask.hash.SHA-256.with.salt.CzQMA0cB5K": "inventory.orders.customerName",
            "column.mask.hash.v2.SHA-512/256.with.salt.s.a.l.t": "x.y.z",
            "column.propagate.source.type": ".*",
        },
    )
    assert cfg.get("column.mask.with.0.chars") == ["public.t.b", "public.t.c"]
    assert cfg.get("column.truncate.to.20.chars") == ["public.t.a"]
    spec = parse_mask_hash_key("column.mask.hash.v2.SHA-512/256.with.salt.s.a.l.t")
    assert (spec.version, spec.hashlib_name, spec.salt) == (2, "sha512_256", "s.a.l.t")
    assert parse_mask_hash_key("column.mask.hash.sha-1.with.salt.x").hashlib_name == "sha1"


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("column.truncate.to.0.chars", "positive"),
        ("column.truncate.to.x.chars", "column.truncate.to.<length>.chars"),
        ("column.mask.with.-1.chars", "column.mask.with.<length>.chars"),
        ("column.mask.hash.MD2.with.salt.x", "unsupported hash algorithm 'MD2'"),
        ("column.mask.hash.SHA-256.salt.x", "column.mask.hash.<algorithm>.with.salt.<salt>"),
    ],
)
def test_column_transform_key_errors(pg_props: dict[str, str], key: str, fragment: str) -> None:
    (p,) = problems(pg_props, **{key: "a.b.c"})
    assert p.startswith(f"invalid property name '{key}': ")
    assert fragment in p


def test_column_transform_value_is_a_regex_list(pg_props: dict[str, str]) -> None:
    (p,) = problems(pg_props, **{"column.mask.with.3.chars": "a.(b"})
    assert "not a valid regular expression" in p


def test_snapshot_select_overrides(pg_props: dict[str, str]) -> None:
    cfg = build(
        pg_props,
        **{
            "snapshot.select.statement.overrides": "public.orders,public.missing",
            "snapshot.select.statement.overrides.public.orders": 'SELECT * FROM "public"."orders" WHERE NOT deleted',
            "snapshot.select.statement.overrides.public.other": "SELECT 1",
        },
    )
    assert cfg.with_prefix("snapshot.select.statement.overrides.") == {
        "public.orders": 'SELECT * FROM "public"."orders" WHERE NOT deleted',
        "public.other": "SELECT 1",
    }
    assert len(cfg.warnings) == 2
    assert any("public.missing" in w for w in cfg.warnings)
    assert any("'public.other' is not listed" in w for w in cfg.warnings)


def test_libpq_passthrough_and_pgjdbc_options(pg_props: dict[str, str]) -> None:
    cfg = build(
        pg_props,
        **{"database.application_name": "hw", "database.connectTimeout": "5", "database.autosave": "conservative"},
    )
    assert libpq_options(cfg) == {"application_name": "hw", "connect_timeout": "5"}
    assert cfg.warnings == [
        "property 'database.autosave' is ignored: pgJDBC-only driver option without a libpq equivalent"
    ]


def test_signal_consumer_passthrough(pg_props: dict[str, str]) -> None:
    cfg = build(pg_props, **{"signal.consumer.security.protocol": "SSL", "signal.enabled.channels": "source,kafka",
                             "signal.kafka.bootstrap.servers": "localhost:9092"})
    assert cfg.with_prefix("signal.consumer.") == {"security.protocol": "SSL"}
    assert cfg.warnings == []
    # without the Kafka channel it has no effect, and says so
    cfg = build(pg_props, **{"signal.consumer.security.protocol": "SSL"})
    assert len(cfg.warnings) == 1 and "signal.consumer.security.protocol" in cfg.warnings[0]


def test_allow_prefixes_argument(pg_props: dict[str, str]) -> None:
    cfg = Configuration.build({**pg_props, "my.plugin.x": "1"}, PG_FIELDS, allow_prefixes=["my.plugin."])
    assert cfg.get("my.plugin.x") == "1"
    assert "my.plugin.x" in cfg.dynamic_keys()


# ------------------------------------------------------------------------------- ignored / deprecated


def test_ignored_kafka_connect_properties_warn(pg_props: dict[str, str], caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="headwater.config"):
        cfg = build(
            pg_props,
            **{
                "tasks.max": "3",
                "transforms": "unwrap",
                "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
                "errors.tolerance": "all",
                "key.converter.schema.registry.url": "http://registry",
                "include.schema.changes": "false",
            },
        )
    assert cfg.warnings[0] == (
        "property 'tasks.max' is ignored: Headwater runs one ordered reader per connector, as "
        "Debezium's PostgreSQL connector does"
    )
    assert len(cfg.warnings) == 6
    assert all(" is ignored: " in w for w in cfg.warnings)
    assert "transforms.unwrap.type" in caplog.text


def test_ignored_property_values_are_still_type_checked(pg_props: dict[str, str]) -> None:
    (p,) = problems(pg_props, **{"tasks.max": "many"})
    assert p == "invalid value 'many' for property 'tasks.max': expected an integer"


def test_deprecated_property_names(pg_props: dict[str, str]) -> None:
    pg_props.pop("table.include.list")
    cfg = build(pg_props, **{"table.whitelist": "public.a"})
    assert cfg.get("table.include.list") == ["public.a"]
    assert cfg.is_set("table.include.list")
    assert cfg.warnings == ["property 'table.whitelist' is deprecated; use 'table.include.list' instead"]
    ps = problems(pg_props, **{"table.whitelist": "public.a", "table.include.list": "public.b"})
    assert ps == ["both 'table.whitelist' (deprecated) and 'table.include.list' are set; remove 'table.whitelist'"]


def test_lsn_flush_mode(pg_props: dict[str, str]) -> None:
    assert lsn_flush_mode(build(pg_props)) == "connector"
    assert lsn_flush_mode(build(pg_props, **{"flush.lsn.source": "false"})) == "manual"
    cfg = build(pg_props, **{"flush.lsn.source": "false", "lsn.flush.mode": "connector"})
    assert lsn_flush_mode(cfg) == "connector"
    assert cfg.warnings == ["'flush.lsn.source' is ignored because 'lsn.flush.mode' is set"]


# ------------------------------------------------------------------------------- secrets


def test_passwords_never_shown(pg_props: dict[str, str], caplog: Any) -> None:
    secret = pg_props["database.password"]
    props = {
        **pg_props,
        "database.sslpassword": "ssl-secret-pw",
        "signal.consumer.ssl.keystore.password": "keystore-secret-pw",
        "tasks.max": "2",
    }
    with caplog.at_level(logging.DEBUG, logger="headwater"):
        cfg = Configuration.build(props, PG_FIELDS)
    masked = cfg.masked()
    assert masked["database.password"] == "********"
    assert masked["database.sslpassword"] == "********"
    assert masked["signal.consumer.ssl.keystore.password"] == "********"
    assert masked["database.user"] == "postgres"
    for text in (repr(cfg), str(cfg), caplog.text, repr(masked)):
        for pw in (secret, "ssl-secret-pw", "keystore-secret-pw"):
            assert pw not in text
    assert cfg.get("database.password") == secret  # the value itself stays usable

    with pytest.raises(ConfigError) as info:
        Configuration.build({**props, "max.batch.size": "x", "database.pasword": "typo-secret"}, PG_FIELDS)
    text = str(info.value)
    assert "unknown property 'database.pasword'; did you mean 'database.password'?" in text
    for pw in (secret, "ssl-secret-pw", "keystore-secret-pw", "typo-secret"):
        assert pw not in text


# ------------------------------------------------------------------------------- registry


def test_resolve_connector() -> None:
    for value in CONNECTOR_CLASS_ALIASES:
        key, fields = resolve_connector(value)
        assert key == "postgresql" and fields is POSTGRES_FIELDS
    assert resolve_connector("PostgreSQL")[0] == "postgresql"
    with pytest.raises(ConfigError) as info:
        resolve_connector("io.debezium.connector.mysql.MySqlConnector")
    assert str(info.value).splitlines()[1] == (
        "  - unsupported connector.class 'io.debezium.connector.mysql.MySqlConnector': supported "
        "connectors are io.debezium.connector.postgresql.PostgresConnector (postgresql), "
        "io.debezium.connector.sqlserver.SqlServerConnector (sqlserver)"
    )


def test_empty_fieldset_rejects_everything() -> None:
    with pytest.raises(ConfigError) as info:
        Configuration.build({"a": "1"}, FieldSet())
    assert info.value.problems == ["unknown property 'a'"]


@pytest.mark.parametrize("name", ["slot.name", "topic.delimiter", "publication.name", "topic.prefix", "key.converter"])
def test_empty_values_are_validated(pg_props: dict[str, str], name: str) -> None:
    (p,) = problems(pg_props, **{name: ""})
    assert p.startswith(f"invalid value '' for property '{name}': ")


def test_empty_optional_values_are_accepted(pg_props: dict[str, str]) -> None:
    cfg = build(pg_props, **{"custom.metric.tags": "", "message.key.columns": "", "schema.exclude.list": ""})
    assert cfg.get("schema.exclude.list") == []
