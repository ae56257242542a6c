"""Which connectors exist: ``connector.class`` value -> connector key and its FieldSet."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass

from headwater.config.errors import ConfigError
from headwater.config.fields import FieldSet

BUILTIN_CONNECTOR_MODULES = ("headwater.connectors.postgres.config", "headwater.connectors.sqlserver.config")


@dataclass(frozen=True)
class ConnectorEntry:
    key: str
    class_names: tuple[str, ...]  # the first is the canonical (Debezium) class name
    fields: FieldSet
    # "module:attribute" of the connector's factory (the engine loads it: headwater.engine.registry)
    factory: str = ""


_REGISTRY: dict[str, ConnectorEntry] = {}
_BY_CLASS: dict[str, str] = {}


def register_connector(key: str, class_names: Iterable[str], fields: FieldSet, factory: str = "") -> None:
    """Register a connector under ``key``; ``class_names`` are the accepted connector.class values,
    ``factory`` names the connector's factory as ``module:attribute`` (imported when first used)."""
    names = tuple(class_names)
    for n in names:
        owner = _BY_CLASS.get(n)
        if owner is not None and owner != key:
            raise ValueError(f"connector.class {n!r} is already registered for {owner!r}")
    old = _REGISTRY.get(key)
    if old is not None:
        for n in old.class_names:
            _BY_CLASS.pop(n, None)
    _REGISTRY[key] = ConnectorEntry(key, names, fields, factory)
    for n in (*names, key):
        _BY_CLASS[n] = key


def ensure_builtin_connectors() -> None:
    """Import the built-in connectors' config modules (each registers itself)."""
    for module in BUILTIN_CONNECTOR_MODULES:
        importlib.import_module(module)


def registered_connectors() -> dict[str, ConnectorEntry]:
    """Every connector by key, in key order (not import order, which depends on who imports first)."""
    ensure_builtin_connectors()
    return {key: _REGISTRY[key] for key in sorted(_REGISTRY)}


def default_connector_class() -> str:
    """The `connector.class` assumed where none is given (the Spark source's options): the first
    built-in connector module's (its CONNECTOR_CLASS), whichever connector was imported first."""
    ensure_builtin_connectors()
    return str(importlib.import_module(BUILTIN_CONNECTOR_MODULES[0]).CONNECTOR_CLASS)


def supported_classes() -> list[str]:
    return [f"{e.class_names[0]} ({e.key})" for e in registered_connectors().values()]


def resolve_connector(value: str | None) -> tuple[str, FieldSet]:
    """Map a ``connector.class`` value to (connector key, connector FieldSet); ConfigError if unknown."""
    ensure_builtin_connectors()
    v = (value or "").strip()
    key = _BY_CLASS.get(v)
    if key is None:
        lowered = {n.lower(): k for n, k in _BY_CLASS.items()}
        key = lowered.get(v.lower())
    if key is None:
        what = f"unsupported connector.class '{v}'" if v else "missing required property 'connector.class'"
        raise ConfigError(f"{what}: supported connectors are {', '.join(supported_classes())}")
    return key, _REGISTRY[key].fields
