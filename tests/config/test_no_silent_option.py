"""No option is silently ignored: every defined property is read by the code that acts on it, or is
marked as having no effect (``ignored_reason``: accepted with a warning at start that names it).

"Read" is decided from the source: the property's name must appear as a string constant in
``src/headwater`` somewhere other than the definitions (``Field(...)``, ``DynamicField(...)``,
``FieldSet(...)`` with its checks), the reference generator, and the cross-field validation checks
(a property that is only validated does nothing). A new property that nothing reads fails here
until it is implemented, refused or marked.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from headwater.config import ConfigError, connector_fields, from_properties
from headwater.config.fields import DynamicField, Field, FieldSet
from headwater.config.registry import registered_connectors
from headwater.config.sinks import SINK_FIELDS

SRC = Path(__file__).resolve().parents[2] / "src" / "headwater"
NOT_READING = {SRC / "config" / "docs.py"}  # renders the reference; reads no value

# Properties with one supported value, which is what the code does: any other value is refused at
# start (the value given here must be), so there is nothing to read.
ONE_SUPPORTED_VALUE = {
    "plugin.name": "decoderbufs",
    "key.converter": "io.confluent.connect.avro.AvroConverter",
    "value.converter": "io.confluent.connect.avro.AvroConverter",
    "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter",
    "incremental.snapshot.allow.schema.changes": "true",
}
MINIMAL = {"connector.class": "postgresql", "database.hostname": "h", "database.user": "u",
           "database.dbname": "d", "topic.prefix": "p"}


def _field_sets() -> list[tuple[str, FieldSet]]:
    sets = [(key, connector_fields(key)) for key in registered_connectors()]
    sets += [(f"sink {kind}", fields) for kind, fields in SINK_FIELDS.items()]
    return sets


def _check_ranges(sets: list[tuple[str, FieldSet]]) -> dict[Path, list[tuple[int, int]]]:
    """Line ranges of the cross-field checks: reading a property there only validates it."""
    ranges: dict[Path, list[tuple[int, int]]] = {}
    for _, fields in sets:
        for check in fields.checks:
            lines, first = inspect.getsourcelines(check)
            ranges.setdefault(Path(inspect.getsourcefile(check)).resolve(), []).append(
                (first, first + len(lines) - 1))
    return ranges


def _constants_outside_definitions(checks: dict[Path, list[tuple[int, int]]],
                                   root: Path = SRC) -> dict[str, set[str]]:
    """String constant -> the files under `root` where it stands outside a field definition or a check."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path in NOT_READING:
            continue
        tree = ast.parse(path.read_text(), str(path))
        skip: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("Field", "DynamicField", "FieldSet"):
                skip.update(id(n) for n in ast.walk(node))
        spans = checks.get(path.resolve(), [])
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in skip:
                continue
            if any(lo <= node.lineno <= hi for lo, hi in spans):
                continue
            found.setdefault(node.value, set()).add(str(path.relative_to(root)))
    return found


@pytest.fixture(scope="module")
def constants() -> dict[str, set[str]]:
    return _constants_outside_definitions(_check_ranges(_field_sets()))


def _unread(fields: FieldSet, constants: dict[str, set[str]]) -> list[str]:
    missing = [f.name for f in fields
               if not f.ignored_reason and f.name not in constants and f.name not in ONE_SUPPORTED_VALUE]
    # a dynamic family is read where its prefix is matched (a plain or a regex constant)
    texts = {c.replace("\\", "") for c in constants}
    for d in fields.dynamic:
        if not d.ignored_reason and not any(d.prefix in t for t in texts):
            missing.append(d.prefix + "*")
    return missing


@pytest.mark.parametrize("name,fields", _field_sets(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_property_is_read_or_marked_as_having_no_effect(name, fields, constants):
    missing = _unread(fields, constants)
    assert not missing, (
        f"{name}: these properties are defined but nothing reads them and they are not marked as having "
        f"no effect (ignored_reason): {', '.join(missing)}")


def test_the_walk_finds_an_unread_property(constants):
    """The check itself can fail: a property that nothing reads is reported."""
    unread = FieldSet(Field("headwater.test.never.read.anywhere", type=connector_fields("postgresql")["name"].type),
                      dynamic=[DynamicField(prefix="headwater.test.family.", pattern="x")])
    assert _unread(unread, constants) == ["headwater.test.never.read.anywhere", "headwater.test.family.*"]


def test_reads_in_definitions_and_checks_do_not_count(tmp_path):
    """Only a read outside the definitions and the validation checks counts."""
    module = tmp_path / "demo.py"
    module.write_text(
        "def _check(cfg, report):\n"
        "    if cfg.get('demo.only.checked'):\n"
        "        report.warn('x')\n"
        "\n"
        "FIELDS = FieldSet(Field('demo.only.defined', T.STRING), Field('demo.read', T.STRING),\n"
        "                  checks=(required_when('demo.read', 'x', 'demo.only.in.checks.list'),))\n"
        "\n"
        "def use(cfg):\n"
        "    return cfg.get('demo.read')\n")
    found = _constants_outside_definitions({module.resolve(): [(1, 3)]}, root=tmp_path)
    assert "demo.read" in found
    assert not {"demo.only.checked", "demo.only.defined", "demo.only.in.checks.list"} & set(found)


@pytest.mark.parametrize("name,value", sorted(ONE_SUPPORTED_VALUE.items()))
def test_a_property_with_one_supported_value_refuses_the_others(name, value):
    with pytest.raises(ConfigError) as info:
        from_properties({**MINIMAL, name: value})
    assert name in str(info.value)


def test_properties_with_no_effect_warn_at_start():
    """A marked property is accepted with a warning that names it and says it has no effect."""
    fields = connector_fields("postgresql")
    marked = [f for f in fields if f.ignored_reason]
    assert marked
    for f in marked:
        config = _accepted_with(f)
        assert any(f.name in w and "ignored" in w for w in config.warnings), (f.name, config.warnings)
    quiet = from_properties(MINIMAL)
    assert not [w for w in quiet.warnings if "ignored" in w], "a default configuration warns"


def _accepted_with(f: Field):
    """The configuration with `f` set to the first of a few plausible values that is valid."""
    default = str(f.default).lower() if isinstance(f.default, bool) else f.default
    candidates = [default, *f.allowed, "true", "1", "k=v", "x"]
    for value in candidates:
        if value is None or isinstance(value, list):
            continue
        try:
            return from_properties({**MINIMAL, f.name: str(value)})
        except ConfigError:
            continue
    raise AssertionError(f"no valid value found for {f.name}")


def test_the_spark_sources_no_effect_list_names_real_properties():
    from headwater.engine.feed import NO_EFFECT_IN_SPARK

    for connector in ("postgresql", "sqlserver"):
        fields = connector_fields(connector)
        assert set(NO_EFFECT_IN_SPARK) <= set(fields.names()), connector
        assert not [n for n in NO_EFFECT_IN_SPARK if fields[n].ignored_reason], "ignored everywhere: one warning"
