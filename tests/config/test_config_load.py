"""headwater.config.load / from_properties end to end."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

import headwater.config as hc
from headwater.config import ConfigError, from_properties, load

# Effective properties of the conformance runs (shared/conformance/golden/basic_crud.meta.json),
# recorded from the real Debezium 3.6.3.Final PostgreSQL connector: they must load unchanged.
GOLDEN_PROPERTIES = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.dbname": "oracle_basic_crud",
    "database.hostname": "127.0.0.1",
    "database.port": "55432",
    "database.user": "postgres",
    "header.converter.schemas.enable": "true",
    "key.converter.schemas.enable": "true",
    "name": "dbz-oracle",
    "offset.flush.interval.ms": "1000",
    "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
    "plugin.name": "pgoutput",
    "slot.drop.on.stop": "true",
    "slot.name": "dbz_oracle_oracle_basic_crud",
    "snapshot.mode": "initial",
    "topic.prefix": "dbserver1",
    "value.converter.schemas.enable": "true",
}


def test_public_api_exports() -> None:
    for name in ("Field", "FieldType", "FieldSet", "Configuration", "ConfigError", "load", "from_properties"):
        assert hasattr(hc, name)


def test_load_kafka_connect_json(tmp_path: Path, pg_props: dict[str, str]) -> None:
    p = tmp_path / "pg.json"
    p.write_text(json.dumps({"name": "fulfillment-connector", "config": pg_props}))
    cfg = load(p, overrides=["slot.name=override_slot"])
    assert cfg.connector_key == "postgresql"
    assert cfg.name == "fulfillment-connector"
    assert cfg.connector.get("name") == "fulfillment-connector"
    assert cfg.connector.get("slot.name") == "override_slot"
    assert cfg.connector.get("database.port") == 5432
    assert cfg.sink_type is None
    assert cfg.sink.raw == {}
    assert cfg.warnings == []
    assert cfg.source_path == p


def test_load_properties_file(tmp_path: Path, pg_props: dict[str, str]) -> None:
    p = tmp_path / "pg.properties"
    p.write_text("\n".join(f"{k}={v}" for k, v in pg_props.items()) + "\nname=inventory\n")
    cfg = load(p)
    assert cfg.name == "inventory"
    assert cfg.connector.get("table.include.list") == ["public.inventory"]


def test_load_debezium_server_file(tmp_path: Path, caplog: Any) -> None:
    p = tmp_path / "application.properties"
    p.write_text(
        "debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n"
        "debezium.source.database.hostname=localhost\n"
        "debezium.source.database.user=postgres\n"
        "debezium.source.database.password=server-secret-pw\n"
        "debezium.source.database.dbname=inventory\n"
        "debezium.source.topic.prefix=tutorial\n"
        "debezium.source.snapshot.mode=never\n"
        "debezium.sink.type=jsonl\n"
        "debezium.sink.jsonl.path=/tmp/events.jsonl\n"
        "debezium.format.value=json\n"
        "debezium.format.value.schemas.enable=false\n"
        "debezium.transforms=unwrap\n"
        "quarkus.log.level=INFO\n"
    )
    with caplog.at_level(logging.WARNING, logger="headwater.config"):
        cfg = load(p)
    assert cfg.sink_type == "jsonl"
    assert cfg.sink.get("path") == "/tmp/events.jsonl"
    assert cfg.sink.get("fsync") is True
    assert cfg.format == {"value": "json"}
    assert cfg.connector.get("value.converter.schemas.enable") is False
    assert cfg.connector.get("snapshot.mode") == "no_data"
    assert cfg.extra == {"debezium.transforms": "unwrap"}
    assert len(cfg.warnings) == 3  # transforms, quarkus, snapshot.mode alias
    assert "server-secret-pw" not in repr(cfg)
    assert "server-secret-pw" not in caplog.text


def test_sinks(pg_props: dict[str, str]) -> None:
    cfg = from_properties(pg_props, sink_type="files", sink={"directory": "/out", "fsync": "false"})
    assert cfg.sink.get("directory") == "/out" and cfg.sink.get("fsync") is False
    cfg = from_properties(pg_props, sink_type="STDOUT")
    assert cfg.sink_type == "stdout" and cfg.sink.get("pretty") is False
    with pytest.raises(ConfigError) as info:
        from_properties(pg_props, sink_type="jsonl", sink={"pth": "/x"})
    assert info.value.problems == [
        "sink jsonl: unknown property 'pth'; did you mean 'path'?",
        "sink jsonl: missing required property 'path': File that receives one JSON record "
        "({topic, key, value, headers}) per line.",
    ]


def test_unknown_sink_type(pg_props: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        from_properties(pg_props, sink_type="kinesis")
    assert info.value.problems == [
        "unknown sink type 'kinesis' (debezium.sink.type): supported sink types are jsonl, files, stdout"
    ]


def test_sink_options_need_a_type(pg_props: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="without a sink type"):
        from_properties(pg_props, sink={"path": "/x"})


def test_unsupported_format(pg_props: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        from_properties({**pg_props, "debezium.format.value": "avro"})
    assert info.value.problems == ["unsupported format 'avro' for debezium.format.value: supported formats are json"]


def test_problems_of_every_part_in_one_error(tmp_path: Path, pg_props: dict[str, str]) -> None:
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"name": "a", "config": {**pg_props, "name": "b", "slot.nam": "x"}}))
    with pytest.raises(ConfigError) as info:
        load(p, overrides=["debezium.sink.type=nope", "debezium.format.key=protobuf"])
    err = info.value
    assert len(err.problems) == 4
    assert str(err).splitlines()[0] == f"invalid configuration in {p}: 4 problems"
    assert "postgres-secret-pw" not in str(err)


def test_missing_or_unknown_connector_class(pg_props: dict[str, str]) -> None:
    del pg_props["connector.class"]
    with pytest.raises(ConfigError) as info:
        from_properties(pg_props)
    assert info.value.problems[0].startswith("missing required property 'connector.class': supported connectors")
    with pytest.raises(ConfigError, match=re.escape("unsupported connector.class 'x.Y'")):
        from_properties({**pg_props, "connector.class": "x.Y"})


def test_short_connector_key_and_programmatic_values(pg_props: dict[str, str]) -> None:
    cfg = from_properties(
        {
            **pg_props,
            "connector.class": "postgresql",
            "max.batch.size": 10,
            "slot.drop.on.stop": True,
            "schema.include.list": ["public", "s{1,2}"],
        }
    )
    assert cfg.connector.get("max.batch.size") == 10
    assert cfg.connector.get("slot.drop.on.stop") is True
    assert cfg.connector.get("schema.include.list") == ["public", "s{1,2}"]


def test_conformance_properties_load_unchanged() -> None:
    cfg = from_properties(GOLDEN_PROPERTIES)
    assert cfg.warnings == []
    assert cfg.name == "dbz-oracle"
    assert cfg.connector.get("database.port") == 55432
    assert cfg.connector.get("offset.flush.interval.ms") == 1000


def test_ignored_property_warnings_reach_headwater_config(pg_props: dict[str, str]) -> None:
    cfg = from_properties({**pg_props, "tasks.max": "1"})
    assert cfg.warnings == [
        "property 'tasks.max' is ignored: Headwater runs one ordered reader per connector, as "
        "Debezium's PostgreSQL connector does"
    ]
