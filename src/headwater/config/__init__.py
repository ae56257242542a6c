"""Headwater configuration: Debezium property names, typed fields, validation, file loading.

Typical use::

    cfg = headwater.config.load("postgres.properties", overrides=["slot.name=test"])
    cfg.connector["slot.name"]      # "test"
    cfg.connector.get("max.batch.size")  # 2048 (typed default)

Every problem in a configuration is reported in one :class:`ConfigError`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.config.common import COMMON_FIELDS
from headwater.config.configuration import Configuration, to_property_string
from headwater.config.errors import ConfigError
from headwater.config.fields import DynamicField, Field, FieldSet, FieldType, is_sensitive_key
from headwater.config.loader import SERVER_PREFIX, LoadedConfig, load_properties_file, parse_text
from headwater.config.registry import (
    ensure_builtin_connectors,
    register_connector,
    resolve_connector,
)
from headwater.config.sinks import register_sink, sink_fields

log = logging.getLogger("headwater.config")

SUPPORTED_FORMATS = ("json",)
_NO_FIELDS = FieldSet()


@dataclass(frozen=True)
class HeadwaterConfig:
    """A validated configuration: the connector's properties, the sink's, and the output format."""

    connector_key: str
    connector: Configuration
    sink_type: str | None
    sink: Configuration
    name: str
    format: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)
    source_path: Path | None = None

    def __repr__(self) -> str:
        extra = {k: ("********" if is_sensitive_key(k) else v) for k, v in self.extra.items()}
        return (
            f"HeadwaterConfig(connector_key={self.connector_key!r}, name={self.name!r}, "
            f"connector={self.connector!r}, sink_type={self.sink_type!r}, sink={self.sink!r}, "
            f"format={self.format!r}, extra={extra!r}, source_path={self.source_path!r})"
        )


def connector_fields(connector_key_or_class: str) -> FieldSet:
    """COMMON_FIELDS merged with the connector's fields (what ``load`` validates against)."""
    _, fields = resolve_connector(connector_key_or_class)
    return COMMON_FIELDS.merge(fields)


def load(path: str | Path, overrides: Iterable[str] = ()) -> HeadwaterConfig:
    """Read ``path`` (.properties / .json / .yaml), apply ``KEY=VALUE`` overrides, validate everything."""
    loaded = load_properties_file(path)
    loaded.apply_overrides(overrides)
    return build(loaded, source=str(path))


def from_properties(
    props: Mapping[str, Any],
    sink_type: str | None = None,
    sink: Mapping[str, Any] | None = None,
    *,
    format: Mapping[str, str] | None = None,
    name: str | None = None,
) -> HeadwaterConfig:
    """Validate properties given programmatically (e.g. Spark source options).

    ``debezium.*`` keys are routed as in a Debezium Server file; other keys are connector properties.
    """
    loaded = LoadedConfig(name=name)
    for k, v in props.items():
        key, value = str(k), to_property_string(v)
        if key.startswith(SERVER_PREFIX):
            loaded.route(key, value)
        else:
            loaded.connector[key] = value
    if sink_type is not None:
        loaded.sink_type = sink_type.strip() or None
    if sink:
        if loaded.sink_type is None:
            raise ConfigError("sink properties were given without a sink type")
        options = loaded.all_sinks.setdefault(loaded.sink_type, {})
        options.update({str(k): to_property_string(v) for k, v in sink.items()})
    loaded.sink = dict(loaded.all_sinks.get(loaded.sink_type, {})) if loaded.sink_type else {}
    if format:
        loaded.format.update(format)
    return build(loaded)


def build(loaded: LoadedConfig, *, source: str | None = None) -> HeadwaterConfig:
    """Validate a :class:`LoadedConfig`; one ConfigError lists every problem of every part."""
    problems: list[str] = []
    props = dict(loaded.connector)
    if loaded.name is not None:
        if "name" in props and props["name"] != loaded.name:
            problems.append(f"the top-level name '{loaded.name}' differs from property name='{props['name']}'")
        else:
            props["name"] = loaded.name

    connector_key: str | None = None
    connector: Configuration | None = None
    try:
        connector_key, fields = resolve_connector(props.get("connector.class"))
    except ConfigError as e:
        problems.extend(e.problems)
    else:
        try:
            connector = Configuration.build(props, COMMON_FIELDS.merge(fields))
        except ConfigError as e:
            problems.extend(e.problems)

    for part, value in loaded.format.items():
        if value.strip().lower() not in SUPPORTED_FORMATS:
            problems.append(
                f"unsupported format '{value}' for debezium.format.{part}: supported formats are "
                f"{', '.join(SUPPORTED_FORMATS)}"
            )

    sink_type = loaded.sink_type.strip().lower() if loaded.sink_type else None
    sink: Configuration | None = None
    if sink_type is None:
        sink = Configuration.build({}, _NO_FIELDS)
    else:
        try:
            sink = Configuration.build(loaded.sink, sink_fields(sink_type))
        except ConfigError as e:
            problems.extend(p if p.startswith("unknown sink type") else f"sink {sink_type}: {p}" for p in e.problems)

    if problems or connector is None or connector_key is None or sink is None:
        raise ConfigError(problems, source=source)

    warnings = [*loaded.warnings, *loaded.unused_sink_warnings()]
    for w in warnings:
        log.warning("%s", w)
    warnings += connector.warnings + [f"sink {sink_type}: {w}" for w in sink.warnings]
    return HeadwaterConfig(
        connector_key=connector_key,
        connector=connector,
        sink_type=sink_type,
        sink=sink,
        name=str(connector.get("name")),
        format={k: v.strip().lower() for k, v in loaded.format.items()},
        warnings=warnings,
        extra=dict(loaded.extra),
        source_path=loaded.source_path,
    )


__all__ = [
    "COMMON_FIELDS",
    "ConfigError",
    "Configuration",
    "DynamicField",
    "Field",
    "FieldSet",
    "FieldType",
    "HeadwaterConfig",
    "LoadedConfig",
    "build",
    "connector_fields",
    "ensure_builtin_connectors",
    "from_properties",
    "load",
    "load_properties_file",
    "parse_text",
    "register_connector",
    "register_sink",
    "resolve_connector",
    "sink_fields",
]
