"""Connectors by `connector.class`: Debezium's class name or a short alias -> the connector's
factory and its description. Each connector registers itself (with its configuration fields) in
`headwater.config.registry`; the engine imports the factory only when a connector is built, so
no connector's name or module appears outside its own package."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.config.errors import ConfigError
from headwater.config.registry import registered_connectors, resolve_connector

if TYPE_CHECKING:
    from headwater.config import Configuration
    from headwater.engine.connector import SourceConnector


@dataclass(frozen=True)
class ChangelogColumn:
    """A `source` field an append-only change log keeps as a column of its own."""

    field: str      # the field of the source block (e.g. "lsn")
    sql_type: str   # its Spark SQL type in the change log (e.g. "BIGINT")
    column: str     # the change log's column name (e.g. "lsn")


@dataclass(frozen=True)
class DerivedRowField:
    """A `source` field of typed rows computed from their columns: `inputs` are (column, SQL type)
    — the first one present in every row that derives the field — and `expression` an SQL
    expression over them (as Spark SQL evaluates it)."""

    field: str
    inputs: tuple[tuple[str, str], ...]
    expression: str


@dataclass(frozen=True)
class SourceDescription:
    """What consumers of a connector's events may know about it without importing it."""

    name: str                                    # `source.connector`, e.g. "postgresql"
    changelog_columns: tuple[ChangelogColumn, ...] = ()
    # source fields a lake sink derives for each typed row (headwater.engine.typed_rows) from the
    # rows' columns instead of the rows carrying them as text
    derived_row_fields: tuple[DerivedRowField, ...] = ()


def connector_class(key_or_class: str) -> type[SourceConnector]:
    """The connector class registered for a `connector.class` value (or key)."""
    key, _ = resolve_connector(key_or_class)
    entry = registered_connectors()[key]
    if not entry.factory:
        raise ConfigError([f"connector {key!r} has no implementation in this build"])
    module, _, attribute = entry.factory.partition(":")
    cls: Any = getattr(importlib.import_module(module), attribute)
    return cls  # type: ignore[no-any-return]


def build_connector(key_or_class: str, config: Configuration) -> SourceConnector:
    """A connector for this configuration (its `connector.class`)."""
    return connector_class(key_or_class)(config)  # type: ignore[call-arg]


def describe(name: str) -> SourceDescription | None:
    """The description of the connector whose events say `source.connector` = `name` (or
    registered under that key), or None when no registered connector writes it."""
    for key, entry in registered_connectors().items():
        if not entry.factory:
            continue
        description: SourceDescription = connector_class(key).description
        if name in (key, description.name):
            return description
    return None
