"""The SQL Server connector's configuration: Debezium 3.6 names, defaults, validation, refusals and
the warnings for properties without effect (src/headwater/connectors/sqlserver/config.py)."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.config import ConfigError, HeadwaterConfig, connector_fields, from_properties
from headwater.config.registry import default_connector_class, resolve_connector
from headwater.connectors.sqlserver.config import (
    FILE_HISTORY,
    KAFKA_HISTORY,
    MEMORY_HISTORY,
    SQLSERVER_FIELDS,
    application_intent,
    driver_options,
    login_timeout,
    schema_history,
    snapshot_isolation_mode,
)

MINIMAL = {
    "connector.class": "io.debezium.connector.sqlserver.SqlServerConnector",
    "database.hostname": "sqlhost",
    "database.user": "dbz",
    "database.password": "Secret#Pw1",
    "database.names": "testDB",
    "topic.prefix": "server1",
}


def load(**extra: str) -> HeadwaterConfig:
    return from_properties({**MINIMAL, **{k.replace("__", "."): v for k, v in extra.items()}})


def with_props(props: dict[str, str]) -> HeadwaterConfig:
    return from_properties({**MINIMAL, **props})


def problems(props: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        from_properties({**MINIMAL, **props})
    return info.value.problems


# ------------------------------------------------------------------------------------------ registry


@pytest.mark.parametrize("value", ["io.debezium.connector.sqlserver.SqlServerConnector", "sqlserver", "SqlServer"])
def test_connector_class_values_resolve_to_sqlserver(value: str) -> None:
    key, fields = resolve_connector(value)
    assert key == "sqlserver" and fields is SQLSERVER_FIELDS


def test_postgresql_stays_the_default_connector() -> None:
    assert default_connector_class() == "io.debezium.connector.postgresql.PostgresConnector"
    pg = connector_fields("postgresql")
    # the SQL Server definitions of shared properties do not leak into PostgreSQL's
    assert pg["snapshot.fetch.size"].default == 10240 and pg["snapshot.fetch.size"].ignored_reason
    assert "PostgreSQL" in (pg["tasks.max"].ignored_reason or "")
    assert pg["query.fetch.size"].default == 0
    assert pg["include.schema.changes"].ignored_reason
    assert "database.names" not in pg


# ------------------------------------------------------------------------------------------ defaults


def test_minimal_configuration_has_debezium_36_defaults_and_no_warning() -> None:
    config = with_props({})
    assert config.connector_key == "sqlserver"
    assert config.warnings == []
    c = config.connector
    expected = {
        "database.port": 1433,
        "database.names": ["testDB"],
        "database.instance": None,
        "database.encrypt": "true",
        "database.trustServerCertificate": False,
        "database.applicationIntent": "readwrite",
        "snapshot.mode": "initial",
        "snapshot.isolation.mode": "repeatable_read",
        "snapshot.locking.mode": "exclusive",
        "snapshot.lock.timeout.ms": 10000,
        "snapshot.fetch.size": 2000,
        "snapshot.max.threads": 1,
        "data.query.mode": "direct",
        "max.iteration.transactions": 500,
        "streaming.fetch.size": 0,
        "query.fetch.size": 10000,
        "poll.interval.ms": 500,
        "include.schema.changes": True,
        "table.ignore.builtin": True,
        "schema.history.internal": FILE_HISTORY,
        "schema.history.internal.file.filename": None,
        "schema.history.internal.store.only.captured.tables.ddl": False,
        "time.precision.mode": "adaptive",
        "decimal.handling.mode": "precise",
        "binary.handling.mode": "bytes",
        "tasks.max": 1,
        "skipped.operations": ["t"],
        "tombstones.on.delete": True,
        "database.query.timeout.ms": 600000,
        "unavailable.value.placeholder": "__debezium_unavailable_value",
        "database.sqlserver.agent.status.query": None,
    }
    assert {k: c.get(k) for k in expected} == expected
    assert driver_options(c) == {"Encrypt": "yes", "TrustServerCertificate": "no", "ApplicationIntent": "ReadWrite"}
    assert login_timeout(c) is None
    assert snapshot_isolation_mode(c) == "repeatable_read"


def test_user_may_be_omitted_for_driver_authentication() -> None:
    props = {k: v for k, v in MINIMAL.items() if k not in ("database.user", "database.password")}
    config = from_properties({**props, "driver.authentication": "ActiveDirectoryMSI"})
    assert config.connector.get("database.user") is None
    assert driver_options(config.connector)["Authentication"] == "ActiveDirectoryMSI"


def test_required_properties() -> None:
    props = {"connector.class": "sqlserver"}
    with pytest.raises(ConfigError) as info:
        from_properties(props)
    missing = sorted(p.split("'")[1] for p in info.value.problems if p.startswith("missing required"))
    assert missing == ["database.hostname", "database.names", "topic.prefix"]


# ------------------------------------------------------------------------------------------ database.names


def test_several_databases() -> None:
    config = load(database__names=" db_one , db_two,db_three ")
    assert config.connector.get("database.names") == ["db_one", "db_two", "db_three"]


@pytest.mark.parametrize("value", ["", "  ", ",", " , "])
def test_empty_database_names_cannot_be_empty(value: str) -> None:
    assert problems({"database.names": value}) == [
        f"invalid value '{value}' for property 'database.names': Cannot be empty"]


def test_a_database_listed_twice_is_refused() -> None:
    (problem,) = problems({"database.names": "Sales,inventory,sales"})
    assert "'sales' is listed twice (as 'Sales')" in problem


def test_a_database_name_longer_than_sql_server_allows_is_refused() -> None:
    (problem,) = problems({"database.names": "x" * 129})
    assert "longer than 128 characters" in problem


# ------------------------------------------------------------------------------------------ snapshot


@pytest.mark.parametrize(
    "mode", ["always", "initial", "initial_only", "no_data", "recovery", "when_needed", "configuration_based",
             "INITIAL", " when_needed "])
def test_snapshot_modes_of_debezium_36(mode: str) -> None:
    assert load(snapshot__mode=mode).connector.get("snapshot.mode") == mode.strip().lower()


def test_schema_only_is_a_deprecated_alias_of_no_data() -> None:
    config = load(snapshot__mode="schema_only")
    assert config.connector.get("snapshot.mode") == "no_data"
    assert config.warnings == ["value 'schema_only' for property 'snapshot.mode' is deprecated; use 'no_data' instead"]


def test_custom_snapshot_mode_is_refused_clearly() -> None:
    (problem,) = problems({"snapshot.mode": "custom", "snapshot.mode.custom.name": "mine"})
    assert problem.startswith("snapshot.mode=custom is not supported: it loads a Java Snapshotter")


def test_when_needed_no_data_is_refused_clearly() -> None:
    (problem,) = problems({"snapshot.mode": "when_needed_no_data"})
    assert problem.startswith("snapshot.mode=when_needed_no_data (new in Debezium 3.6) is not supported yet")


def test_custom_snapshotter_name_alone_warns() -> None:
    config = load(snapshot__mode__custom__name="mine")
    assert config.warnings == ["'snapshot.mode.custom.name' has no effect: snapshot.mode=custom is not supported"]


def test_unknown_snapshot_mode_lists_the_allowed_values() -> None:
    (problem,) = problems({"snapshot.mode": "never"})
    assert problem.startswith("invalid value 'never' for property 'snapshot.mode': allowed values are always, "
                              "initial, initial_only, no_data, recovery, when_needed, configuration_based "
                              "(schema_only is a deprecated alias of no_data)")


def test_configuration_based_properties() -> None:
    config = load(snapshot__mode="configuration_based",
                  snapshot__mode__configuration__based__snapshot__schema="true",
                  snapshot__mode__configuration__based__snapshot__on__schema__error="true")
    c = config.connector
    assert c.get("snapshot.mode.configuration.based.snapshot.schema") is True
    assert c.get("snapshot.mode.configuration.based.snapshot.on.schema.error") is True
    assert config.warnings == []  # unlike PostgreSQL, SQL Server keeps a schema history: both act


@pytest.mark.parametrize("mode", ["exclusive", "snapshot", "repeatable_read", "read_committed", "read_uncommitted"])
def test_snapshot_isolation_modes(mode: str) -> None:
    config = load(snapshot__isolation__mode=mode.upper())
    assert config.connector.get("snapshot.isolation.mode") == mode
    assert snapshot_isolation_mode(config.connector) == mode


def test_unknown_isolation_mode_is_an_error() -> None:
    (problem,) = problems({"snapshot.isolation.mode": "serializable"})
    assert problem == ("invalid value 'serializable' for property 'snapshot.isolation.mode': allowed values are "
                       "exclusive, snapshot, repeatable_read, read_committed, read_uncommitted")


def test_locking_modes() -> None:
    assert load(snapshot__locking__mode="none").connector.get("snapshot.locking.mode") == "none"
    (problem,) = problems({"snapshot.locking.mode": "custom"})
    assert problem.startswith("snapshot.locking.mode=custom is not supported")
    config = load(snapshot__locking__mode__custom__name="x")
    assert config.warnings == ["property 'snapshot.locking.mode.custom.name' is ignored: snapshot.locking.mode=custom "
                               "(a Java SnapshotLock) is not supported"]


@pytest.mark.parametrize("value,ok", [("-1", True), ("0", True), ("5000", True), ("-2", False)])
def test_lock_timeout_accepts_minus_one_for_no_limit(value: str, ok: bool) -> None:
    if ok:
        assert load(snapshot__lock__timeout__ms=value).connector.get("snapshot.lock.timeout.ms") == int(value)
    else:
        assert problems({"snapshot.lock.timeout.ms": value}) == [
            "invalid value '-2' for property 'snapshot.lock.timeout.ms': must be >= -1"]


def test_snapshot_fetch_size_is_used_and_must_be_positive() -> None:
    config = load(snapshot__fetch__size="500")
    assert config.connector.get("snapshot.fetch.size") == 500 and config.warnings == []
    assert problems({"snapshot.fetch.size": "0"}) == [
        "invalid value '0' for property 'snapshot.fetch.size': must be >= 1"]


# ------------------------------------------------------------------------------------------ streaming


@pytest.mark.parametrize("mode", ["direct", "function", "FUNCTION"])
def test_data_query_modes(mode: str) -> None:
    assert load(data__query__mode=mode).connector.get("data.query.mode") == mode.lower()


def test_unknown_data_query_mode() -> None:
    assert problems({"data.query.mode": "table"}) == [
        "invalid value 'table' for property 'data.query.mode': allowed values are direct, function"]


@pytest.mark.parametrize("name", ["max.iteration.transactions", "streaming.fetch.size", "query.fetch.size"])
def test_streaming_sizes_are_non_negative(name: str) -> None:
    assert with_props({name: "0"}).connector.get(name) == 0
    assert problems({name: "-1"}) == [f"invalid value '-1' for property '{name}': must be >= 0"]


def test_agent_status_query() -> None:
    query = "SELECT [#db].dbo.agent_running()"
    assert load(database__sqlserver__agent__status__query=query).connector.get(
        "database.sqlserver.agent.status.query") == query


# ------------------------------------------------------------------------------------------ data types


def test_time_precision_modes() -> None:
    assert load(time__precision__mode="connect").connector.get("time.precision.mode") == "connect"
    for mode in ("isostring", "microseconds", "nanoseconds", "adaptive_time_microseconds"):
        (problem,) = problems({"time.precision.mode": mode})
        assert problem.startswith(f"time.precision.mode={mode} is not supported for SQL Server")


@pytest.mark.parametrize("name,value", [("decimal.handling.mode", "string"), ("binary.handling.mode", "hex"),
                                        ("binary.handling.mode", "base64-url-safe")])
def test_shared_type_modes(name: str, value: str) -> None:
    assert with_props({name: value}).connector.get(name) == value


# ------------------------------------------------------------------------------------------ schema history


def test_history_classes() -> None:
    config = load(schema__history__internal=MEMORY_HISTORY)
    assert schema_history(config.connector, offsets_in_memory=False) == ("memory", None)
    config = load(schema__history__internal=FILE_HISTORY, schema__history__internal__file__filename="/x/h.dat")
    assert schema_history(config.connector, offsets_in_memory=True) == ("file", "/x/h.dat")


def test_history_follows_the_offsets_when_not_set() -> None:
    c = with_props({}).connector
    assert schema_history(c, offsets_in_memory=False) == ("file", None)
    assert schema_history(c, offsets_in_memory=True) == ("memory", None)


def test_kafka_history_is_refused_saying_what_is_supported() -> None:
    (problem,) = problems({"schema.history.internal": KAFKA_HISTORY,
                           "schema.history.internal.kafka.topic": "h",
                           "schema.history.internal.kafka.bootstrap.servers": "k:9092"})
    assert problem.startswith(f"invalid value '{KAFKA_HISTORY}' for property 'schema.history.internal': Headwater "
                              f"keeps the schema history in a file ({FILE_HISTORY}")
    assert MEMORY_HISTORY in problem


def test_unknown_history_class() -> None:
    (problem,) = problems({"schema.history.internal": "com.example.MyHistory"})
    assert problem.endswith(f"supported schema histories are {FILE_HISTORY} and {MEMORY_HISTORY}")


def test_file_name_with_memory_history_warns() -> None:
    config = load(schema__history__internal=MEMORY_HISTORY, schema__history__internal__file__filename="h.dat")
    assert config.warnings == ["'schema.history.internal.file.filename' has no effect: schema.history.internal is "
                               "the memory history"]


def test_kafka_history_settings_warn() -> None:
    config = with_props({"schema.history.internal.kafka.recovery.attempts": "5",
                         "schema.history.internal.producer.security.protocol": "SSL"})
    assert len(config.warnings) == 2
    assert all("is ignored: used only by the Kafka schema history" in w for w in config.warnings)


# ------------------------------------------------------------------------------------------ driver


def test_connection_properties_become_odbc_keywords() -> None:
    c = with_props({"database.encrypt": "false", "database.trustServerCertificate": "true",
                    "database.applicationIntent": "ReadOnly"}).connector
    assert driver_options(c) == {"Encrypt": "no", "TrustServerCertificate": "yes", "ApplicationIntent": "ReadOnly"}
    assert with_props({"database.encrypt": "STRICT"}).connector.get("database.encrypt") == "strict"
    assert driver_options(with_props({"database.encrypt": "strict"}).connector)["Encrypt"] == "strict"


def test_jdbc_options_with_an_odbc_equivalent_are_passed_on() -> None:
    config = with_props({
        "driver.hostNameInCertificate": "*.example.net",
        "driver.multiSubnetFailover": "true",
        "driver.connectRetryCount": "3",
        "database.packetSize": "8192",
        "driver.integratedSecurity": "true",
        "driver.KeepAlive": "30",
        "driver.loginTimeout": "7",
    })
    assert config.warnings == []
    options = driver_options(config.connector)
    assert {k: options[k] for k in ("HostnameInCertificate", "MultiSubnetFailover", "ConnectRetryCount",
                                    "PacketSize", "Trusted_Connection", "KeepAlive")} == {
        "HostnameInCertificate": "*.example.net", "MultiSubnetFailover": "yes", "ConnectRetryCount": "3",
        "PacketSize": "8192", "Trusted_Connection": "yes", "KeepAlive": "30"}
    assert login_timeout(config.connector) == 7


def test_driver_options_win_over_database_ones_with_a_warning() -> None:
    config = with_props({"database.encrypt": "true", "driver.encrypt": "false",
                         "database.loginTimeout": "5", "driver.loginTimeout": "9"})
    assert driver_options(config.connector)["Encrypt"] == "no"
    assert login_timeout(config.connector) == 9
    assert sorted(config.warnings) == [
        "'database.encrypt' is ignored: 'driver.encrypt' is set",
        "'database.loginTimeout' is ignored: 'driver.loginTimeout' sets the same driver option",
    ]


def test_invalid_pass_through_values() -> None:
    found = problems({"driver.multiSubnetFailover": "maybe", "driver.encrypt": "always", "driver.packetSize": "big"})
    assert sorted(found) == [
        "invalid value 'always' for property 'driver.encrypt': expected true, false or strict",
        "invalid value 'big' for property 'driver.packetSize': expected a non-negative integer",
        "invalid value 'maybe' for property 'driver.multiSubnetFailover': expected true or false",
    ]


def test_jdbc_only_options_warn() -> None:
    config = with_props({"driver.responseBuffering": "adaptive", "database.trustStorePassword": "Hidden#1"})
    assert len(config.warnings) == 2
    assert all("mssql-jdbc option without an equivalent" in w for w in config.warnings)
    assert "Hidden#1" not in repr(config)


@pytest.mark.parametrize("option,use", [("user", "database.user"), ("password", "database.password"),
                                        ("serverName", "database.hostname"), ("portNumber", "database.port"),
                                        ("databaseName", "database.names"), ("instanceName", "database.instance")])
def test_driver_options_that_the_connector_sets_are_refused(option: str, use: str) -> None:
    (problem,) = problems({f"driver.{option}": "x"})
    assert problem == f"invalid property name 'driver.{option}': the connector sets this option itself; use {use}"


def test_unknown_driver_option_is_an_unknown_property() -> None:
    (problem,) = problems({"driver.noSuchOption": "1"})
    assert problem.startswith("unknown property 'driver.noSuchOption'")


def test_read_only_intent_forces_snapshot_isolation() -> None:
    config = load(driver__applicationIntent="ReadOnly", snapshot__isolation__mode="exclusive")
    assert application_intent(config.connector) == "ReadOnly"
    assert snapshot_isolation_mode(config.connector) == "snapshot"
    assert config.warnings == [
        "snapshot.isolation.mode=exclusive is replaced by snapshot: a read-only connection "
        "(applicationIntent=ReadOnly, an Always On replica) supports only SNAPSHOT isolation, as in Debezium"]
    # driver.applicationIntent wins over database.applicationIntent (Debezium 3.6)
    config = load(database__applicationIntent="ReadOnly", driver__applicationIntent="ReadWrite")
    assert application_intent(config.connector) == "ReadWrite"


def test_truststore_is_accepted_with_a_warning_and_never_shown() -> None:
    config = with_props({"database.ssl.truststore": "/etc/ts.jks", "database.ssl.truststore.password": "Ts#Secret9"})
    assert [w.split(":")[0] for w in config.warnings] == ["property 'database.ssl.truststore' is ignored",
                                                        "property 'database.ssl.truststore.password' is ignored"]
    assert "Ts#Secret9" not in repr(config) and "Ts#Secret9" not in " ".join(config.warnings)


def test_passwords_are_not_printed_in_errors() -> None:
    found = problems({"database.password": "Pw#Secret9", "database.port": "not-a-port"})
    assert "Pw#Secret9" not in " ".join(found)


# ------------------------------------------------------------------------------------------ no effect


def test_tasks_max_warns_that_one_process_captures_every_database() -> None:
    config = load(tasks__max="2", database__names="a,b")
    assert config.warnings == ["property 'tasks.max' is ignored: one Headwater process captures every database of "
                               "database.names, in one ordered stream (Debezium may start up to one task per database)"]


def test_every_property_without_effect_warns_at_start() -> None:
    fields = connector_fields("sqlserver")
    marked = [f for f in fields if f.ignored_reason]
    assert {"tasks.max", "snapshot.max.threads", "include.schema.comments"} <= {f.name for f in marked}
    # signals and incremental snapshots have their effect (issue 22)
    assert not {"signal.data.collection", "incremental.snapshot.chunk.size", "incremental.snapshot.option.recompile",
                "incremental.snapshot.allow.schema.changes"} & {f.name for f in marked}
    for f in marked:
        config = _accepted_with(f.name, [*f.allowed, "1", "true", "k=v", "x"])
        assert any(f.name in w and "ignored" in w for w in config.warnings), (f.name, config.warnings)


def _accepted_with(name: str, candidates: list[str]) -> HeadwaterConfig:
    """The configuration with `name` set to the first candidate value that is valid."""
    for value in candidates:
        try:
            return with_props({name: value})
        except ConfigError:
            continue
    raise AssertionError(f"no valid value for {name}")


def test_signals_are_declared_as_for_postgresql() -> None:
    pg, ss = connector_fields("postgresql"), connector_fields("sqlserver")
    for name in ("signal.enabled.channels", "signal.data.collection", "incremental.snapshot.chunk.size",
                 "incremental.snapshot.watermarking.strategy"):
        assert ss[name] is pg[name] and not ss[name].ignored_reason  # in effect (issue 22)


# ------------------------------------------------------------------------------------------ spec §5

# Every property of spec/sqlserver.md §5.1-§5.5 (MS-211..MS-284) and the Debezium 3.6 additions.
SPEC_PROPERTIES = """
name connector.class tasks.max database.hostname database.port database.user database.password database.instance
database.names topic.prefix schema.include.list schema.exclude.list table.include.list table.exclude.list
column.include.list column.exclude.list column.mask.hash.SHA-256.with.salt.x time.precision.mode
decimal.handling.mode include.schema.changes tombstones.on.delete column.truncate.to.20.chars
column.mask.with.5.chars column.propagate.source.type datatype.propagate.source.type message.key.columns
binary.handling.mode schema.name.adjustment.mode converters snapshot.mode snapshot.include.collection.list
snapshot.isolation.mode event.processing.failure.handling.mode poll.interval.ms max.queue.size
max.queue.size.in.bytes max.batch.size heartbeat.interval.ms snapshot.delay.ms snapshot.fetch.size query.fetch.size
snapshot.lock.timeout.ms snapshot.select.statement.overrides provide.transaction.metadata
retriable.restart.connector.wait.ms skipped.operations signal.data.collection incremental.snapshot.allow.schema.changes
incremental.snapshot.chunk.size max.iteration.transactions incremental.snapshot.option.recompile topic.naming.strategy
topic.delimiter topic.cache.size topic.heartbeat.prefix topic.transaction schema.history.internal.kafka.topic
schema.history.internal.kafka.bootstrap.servers schema.history.internal.kafka.recovery.poll.interval.ms
schema.history.internal.kafka.query.timeout.ms schema.history.internal.kafka.create.timeout.ms
schema.history.internal.kafka.recovery.attempts schema.history.internal.skip.unparseable.ddl
schema.history.internal.store.only.captured.tables.ddl schema.history.internal.producer.security.protocol
schema.history.internal.consumer.security.protocol driver.encrypt database.encrypt database.ssl.truststore
database.ssl.truststore.password database.applicationIntent database.sqlserver.agent.status.query
schema.history.internal heartbeat.action.query snapshot.max.threads include.schema.comments table.ignore.builtin
unavailable.value.placeholder data.query.mode streaming.fetch.size snapshot.locking.mode
snapshot.locking.mode.custom.name database.trustServerCertificate field.name.adjustment.mode
snapshot.mode.configuration.based.snapshot.data snapshot.mode.configuration.based.snapshot.schema
snapshot.mode.configuration.based.start.stream snapshot.mode.configuration.based.snapshot.on.schema.error
snapshot.mode.configuration.based.snapshot.on.data.error snapshot.query.mode skip.messages.without.change
database.query.timeout.ms signal.enabled.channels notification.enabled.channels errors.max.retries
custom.metric.tags schema.history.internal.file.filename
""".split()


def test_every_spec_property_is_defined() -> None:
    fields = connector_fields("sqlserver")
    missing = [p for p in SPEC_PROPERTIES if p not in fields and fields.dynamic_for(p) is None]
    assert missing == []


def test_source_struct_version_and_other_unlisted_properties_are_unknown() -> None:
    """Properties Debezium 3.6 no longer has for SQL Server (or internal ones) are not silently taken."""
    for name in ("database.dbname", "database.server.id", "streaming.lsn.optimization"):
        (problem,) = problems({name: "x"})
        assert problem.startswith(f"unknown property '{name}'")


def test_a_connector_field_marked_replaces_takes_the_common_fields_place() -> None:
    from headwater.config.fields import Field, FieldSet, FieldType

    common = FieldSet(Field("a", FieldType.INT, 1), Field("b", FieldType.INT, 2))
    merged = common.merge(FieldSet(Field("b", FieldType.INT, 3, replaces=True), Field("c", FieldType.INT, 4)))
    assert merged.names() == ["a", "b", "c"] and merged["b"].default == 3
    with pytest.raises(ValueError, match="duplicate"):
        common.merge(FieldSet(Field("b", FieldType.INT, 3)))
    # the SQL Server definitions sit where the common ones were
    names = connector_fields("sqlserver").names()
    assert names.index("tasks.max") < names.index("topic.prefix")


def test_postgresql_only_property_is_unknown_for_sqlserver() -> None:
    """include.unknown.datatypes is PostgreSQL's (Debezium's SQL Server connector has none): an error
    naming it, not a property accepted and ignored."""
    assert any("include.unknown.datatypes" in p for p in problems({"include.unknown.datatypes": "true"}))
