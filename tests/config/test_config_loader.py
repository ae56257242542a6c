"""File formats: .properties, Kafka Connect JSON, YAML, Debezium Server layout, overrides."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from headwater.config import ConfigError, load_properties_file, parse_text
from headwater.config.loader import LoadedConfig, sniff_format

# ------------------------------------------------------------------------------- .properties


def props(text: str) -> dict[str, str]:
    return parse_text(text, "properties", source="t.properties").connector


def test_properties_basic_forms() -> None:
    text = "# comment\n! also a comment\n\na=1\nb = 2\nc: 3\nd 4\n  e\t=\t5  \nf=\ng:\nh=x=y:z\n"
    assert props(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5  ", "f": "", "g": "", "h": "x=y:z"}


def test_properties_continuation_lines() -> None:
    text = "table.include.list=public.a,\\\n    public.b,\\\n\tpublic.c\nnext=1\n"
    assert props(text) == {"table.include.list": "public.a,public.b,public.c", "next": "1"}


def test_properties_even_backslashes_do_not_continue() -> None:
    assert props("a=x\\\\\nb=y\n") == {"a": "x\\", "b": "y"}


def test_properties_comment_inside_continuation_is_value() -> None:
    assert props("a=1\\\n# not a comment\n") == {"a": "1# not a comment"}


def test_properties_continuation_at_end_of_file() -> None:
    assert props("a=1\\") == {"a": "1"}


def test_properties_escapes() -> None:
    text = "k\\ ey\\:x=caf\\u00e9\\tend\\\\\\n\nregex=public\\\\.orders\nq=\\q\n"
    assert props(text) == {"k ey:x": "café\tend\\\n", "regex": "public\\.orders", "q": "q"}


def test_properties_crlf_and_bom(tmp_path: Path) -> None:
    p = tmp_path / "c.properties"
    p.write_bytes("\ufeffa=1\r\nb=2\rc=3".encode())
    assert load_properties_file(p).connector == {"a": "1", "b": "2", "c": "3"}


def test_properties_errors_name_file_and_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_text("a=1\njustakey\n=novalue\nu=\\u12G4\n", "properties", source="config.properties")
    assert info.value.problems == [
        "config.properties:2: expected key=value",
        "config.properties:3: expected key=value (the key is empty)",
        "config.properties:4: malformed \\uxxxx escape",
    ]
    assert str(info.value).splitlines()[0] == "invalid configuration in config.properties: 3 problems"


def test_properties_duplicate_keys_last_wins_with_warning() -> None:
    loaded = parse_text("a=1\nb=2\na=3\n", "properties", source="x.properties")
    assert loaded.connector == {"b": "2", "a": "3"}
    assert loaded.warnings == ["x.properties:3: property 'a' is also set on line 1; the last value is used"]


# ------------------------------------------------------------------------------- JSON


def test_kafka_connect_json(tmp_path: Path, pg_props: dict[str, str]) -> None:
    p = tmp_path / "connector.json"
    p.write_text(json.dumps({"name": "fulfillment-connector", "config": pg_props}))
    loaded = load_properties_file(p)
    assert loaded.name == "fulfillment-connector"
    assert loaded.connector == pg_props
    assert loaded.source_path == p
    assert not loaded.server_layout


def test_flat_and_nested_json() -> None:
    loaded = parse_text(
        '{"database": {"hostname": "h", "port": 5432}, "slot.drop.on.stop": true, '
        '"table.include.list": ["public.a", "public.b{1,2}"], "database.password": null, "ratio": 1.5}',
        "json",
    )
    assert loaded.name is None
    assert loaded.connector == {
        "database.hostname": "h",
        "database.port": "5432",
        "slot.drop.on.stop": "true",
        "table.include.list": "public.a,public.b{1\\,2}",
        "database.password": "",
        "ratio": "1.5",
    }


def test_connect_json_extra_top_level_keys_warn() -> None:
    loaded = parse_text('{"name": "n", "config": {"a": "1"}, "tasks": []}', "json", source="c.json")
    assert loaded.connector == {"a": "1"}
    assert loaded.warnings == ["c.json: ignored top-level 'tasks' (only 'name' and 'config' are used)"]


def test_json_syntax_error_has_position() -> None:
    with pytest.raises(ConfigError) as info:
        parse_text('{\n  "a": "1",\n  "b": \n}', "json", source="c.json")
    (p,) = info.value.problems
    assert p.startswith("c.json:4:1: invalid JSON: ")


def test_json_must_be_an_object() -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        parse_text("[1, 2]", "json")


def test_duplicate_after_flattening_is_an_error() -> None:
    with pytest.raises(ConfigError, match=re.escape("'database.hostname' is given twice")):
        parse_text('{"database": {"hostname": "a"}, "database.hostname": "b"}', "json")


# ------------------------------------------------------------------------------- YAML


def test_yaml_nested_and_scalars() -> None:
    text = (
        "connector.class: io.debezium.connector.postgresql.PostgresConnector\n"
        "database:\n"
        "  hostname: db.example.com\n"
        "  port: 5432\n"
        "  password: 'pw'\n"
        "topic:\n"
        "  prefix: 1.10\n"
        "slot.drop.on.stop: true\n"
        "tombstones.on.delete: yes\n"
        "snapshot.delay.ms: 0010\n"
        "schema.include.list: [public, inventory]\n"
        "signal.data.collection:\n"
        "created: 2024-01-02\n"
    )
    loaded = parse_text(text, "yaml")
    assert loaded.connector == {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "db.example.com",
        "database.port": "5432",
        "database.password": "pw",
        "topic.prefix": "1.10",
        "slot.drop.on.stop": "true",
        "tombstones.on.delete": "yes",
        "snapshot.delay.ms": "0010",
        "schema.include.list": "public,inventory",
        "signal.data.collection": "",
        "created": "2024-01-02",
    }


def test_yaml_connect_shape(tmp_path: Path) -> None:
    p = tmp_path / "c.yml"
    p.write_text("name: inventory\nconfig:\n  topic.prefix: inv\n  database.port: '5432'\n")
    loaded = load_properties_file(p)
    assert loaded.name == "inventory"
    assert loaded.connector == {"topic.prefix": "inv", "database.port": "5432"}


def test_yaml_syntax_error_has_position(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("a: 1\nb: [unclosed\nc: 2\n")
    with pytest.raises(ConfigError) as info:
        load_properties_file(p)
    (problem,) = info.value.problems
    assert problem.startswith(f"{p}:")
    assert "invalid YAML" in problem
    line = int(problem[len(str(p)) + 1 :].split(":")[0])
    assert line >= 2


def test_empty_yaml_is_empty_config() -> None:
    assert parse_text("# nothing\n", "yaml").connector == {}


# ------------------------------------------------------------------------------- Debezium Server layout

SERVER = """\
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.database.hostname=localhost
debezium.source.database.password=server-secret-pw
debezium.source.topic.prefix=tutorial
debezium.sink.type=jsonl
debezium.sink.jsonl.path=/tmp/events.jsonl
debezium.sink.jsonl.fsync=false
debezium.sink.kafka.producer.bootstrap.servers=kafka:9092
debezium.format.key=json
debezium.format.value=json
debezium.format.key.schemas.enable=false
debezium.format.value.schemas.enable=true
debezium.format.header.schemas.enable=false
debezium.format.value.replace.null.with.default=false
debezium.transforms=unwrap
debezium.transforms.unwrap.type=io.debezium.transforms.ExtractNewRecordState
quarkus.log.level=INFO
"""


def test_debezium_server_layout() -> None:
    loaded = parse_text(SERVER, "properties", source="application.properties")
    assert loaded.server_layout
    assert loaded.connector == {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "offset.storage.file.filename": "data/offsets.dat",
        "database.hostname": "localhost",
        "database.password": "server-secret-pw",
        "topic.prefix": "tutorial",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "true",
        "header.converter.schemas.enable": "false",
        "value.converter.replace.null.with.default": "false",
    }
    assert loaded.sink_type == "jsonl"
    assert loaded.sink == {"path": "/tmp/events.jsonl", "fsync": "false"}
    assert loaded.all_sinks["kafka"] == {"producer.bootstrap.servers": "kafka:9092"}
    assert loaded.format == {"key": "json", "value": "json"}
    assert loaded.extra == {
        "debezium.transforms": "unwrap",
        "debezium.transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
    }
    assert len(loaded.warnings) == 3
    assert loaded.warnings[0].startswith("application.properties:16: ignored 'debezium.transforms'")
    assert loaded.warnings[2] == (
        "application.properties:18: ignored 'quarkus.log.level': a Debezium Server file takes "
        "connector properties under 'debezium.source.'"
    )
    assert loaded.unused_sink_warnings() == ["ignored 'debezium.sink.kafka.*' options: the sink type is 'jsonl'"]
    assert "server-secret-pw" not in repr(loaded)


def test_debezium_server_layout_in_yaml() -> None:
    text = (
        "debezium:\n"
        "  source:\n"
        "    topic.prefix: t\n"
        "    database: {hostname: h}\n"
        "  sink:\n"
        "    type: stdout\n"
        "    stdout: {pretty: true}\n"
    )
    loaded = parse_text(text, "yaml")
    assert loaded.connector == {"topic.prefix": "t", "database.hostname": "h"}
    assert loaded.sink_type == "stdout"
    assert loaded.sink == {"pretty": "true"}


# ------------------------------------------------------------------------------- format selection


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ('{"a": "1"}', "json"),
        ("  {\n}", "json"),
        ("a=1\nb: 2\n", "properties"),
        ("# c\na.b=x:y\n", "properties"),
        ("a:\n  b: 1\n", "yaml"),
        ("---\na: 1\n", "yaml"),
        ("a: 1\n", "properties"),
    ],
)
def test_sniff_format(text: str, fmt: str) -> None:
    assert sniff_format(text) == fmt


def test_extension_wins_over_content(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("a=1\n")  # valid YAML: a plain scalar, not a mapping
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_properties_file(p)


def test_unknown_extension_sniffs(tmp_path: Path) -> None:
    p = tmp_path / "connector.conf"
    p.write_text('{"name": "x", "config": {"a": "1"}}')
    assert load_properties_file(p).name == "x"
    q = tmp_path / "application"
    q.write_text("debezium.source.a=1\n")
    assert load_properties_file(q).connector == {"a": "1"}


def test_missing_file() -> None:
    with pytest.raises(ConfigError) as info:
        load_properties_file("/nonexistent/dir/c.properties")
    assert info.value.problems[0].startswith("/nonexistent/dir/c.properties: cannot read file")


def test_unknown_format() -> None:
    with pytest.raises(ConfigError, match="unknown format 'toml'"):
        parse_text("a=1", "toml")


# ------------------------------------------------------------------------------- overrides


def test_overrides_route_like_a_server_file() -> None:
    loaded = parse_text('{"name": "n", "config": {"slot.name": "a"}}', "json")
    loaded.apply_overrides(
        [
            "slot.name=b",
            "snapshot.select.statement.overrides.public.t=SELECT * FROM t WHERE a=1",
            "debezium.sink.type=files",
            "debezium.sink.files.directory=/tmp/out",
            "debezium.source.topic.prefix=p",
            "debezium.format.value.schemas.enable=false",
        ]
    )
    assert loaded.connector == {
        "slot.name": "b",
        "snapshot.select.statement.overrides.public.t": "SELECT * FROM t WHERE a=1",
        "topic.prefix": "p",
        "value.converter.schemas.enable": "false",
    }
    assert loaded.sink_type == "files"
    assert loaded.sink == {"directory": "/tmp/out"}


def test_sink_type_after_sink_options() -> None:
    loaded = LoadedConfig().apply_overrides(["debezium.sink.jsonl.path=/x", "debezium.sink.type=jsonl"])
    assert loaded.sink == {"path": "/x"}


def test_malformed_overrides_are_named() -> None:
    with pytest.raises(ConfigError) as info:
        LoadedConfig().apply_overrides(["good=1", "no-equals", "=value", "database.password hunter2"])
    assert info.value.problems == [
        "invalid override #2 'no-equals': expected KEY=VALUE",
        "invalid override #3 '=value': expected KEY=VALUE",
        "invalid override #4 'database.password …': expected KEY=VALUE",
    ]
    assert "hunter2" not in str(info.value)
