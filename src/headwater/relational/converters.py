"""Custom converters: Debezium's `CustomConverter` SPI for Python (`converters=...`).

A custom converter decides, column by column, whether it takes over a column's schema and values:

```python
from headwater.model.schema import Schema
from headwater.relational.converters import ConverterRegistration, RelationalColumn

class IsbnConverter:
    def configure(self, props: dict[str, str]) -> None:          # the `<name>.*` properties
        self.schema = Schema("string", name=props.get("schema.name"))

    def converter_for(self, column: RelationalColumn, registration: ConverterRegistration) -> None:
        if column.type_name == "isbn":
            registration.register(self.schema, lambda value: value)
```

It is configured as `converters=isbn`, `isbn.type=package.module:IsbnConverter` and any
`isbn.<param>=...` (given to `configure` with the `isbn.` prefix stripped, `type` included, as
Debezium passes them). As in Debezium's `CustomConverterRegistry`, the converters are asked in
the order listed and the first that registers wins; a column nobody registers keeps Headwater's
own schema and conversion. What Headwater does with a registration (see
`headwater.relational.table_schema`), as Debezium's `TableSchemaBuilder` does:

- the registered schema is the field's schema in the key and value structs; it is made optional
  when the column is nullable (a schema registered optional stays optional), column mappers may
  add parameters to it, and the column's default (when it has a constant one) is passed through
  the converter and becomes the schema's default;
- the converter gets every value of the column, SQL NULL included (as None), and returns the
  Connect value (None only when the schema is optional). Its input is the value as the connector
  reads it: for PostgreSQL the column's text form (`'t'`/`'f'` for booleans, `'{1,2}'` for
  arrays, `'\\x0102'` for bytea), the same in the snapshot and in streaming; a default is given in
  the same form; an unchanged TOAST value as the placeholder Headwater would emit for the column.

Converter instances are created from the configuration in every process that builds events
(the runner, its encoding workers, Spark executors): only names and settings travel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from headwater.model.schema import Schema
from headwater.relational.plugins import PluginError, error_reason, instantiate, load_class

CONVERTER_METHODS = ("configure", "converter_for")


@dataclass(frozen=True, slots=True)
class RelationalColumn:
    """A column as a custom converter sees it (Debezium's `RelationalColumn`)."""

    name: str
    data_collection: str            # the table: "schema.table"
    type_name: str                  # e.g. "int4", "varchar", "isbn" (snapshot: "serial" for serial columns)
    type_expression: str
    jdbc_type: int                  # java.sql.Types constant, as Debezium reports it
    native_type: int                # the database's type code (PostgreSQL: the type OID)
    length: int | None              # None when unset; precision for numeric columns
    scale: int | None
    optional: bool
    default_value: Any              # the constant default in the converter's input form, else None
    has_default_value: bool         # the column has a default expression (constant or not)
    charset_name: str | None = None


class ConverterRegistration:
    """The callback a converter registers its schema and value function with (at most once per column)."""

    __slots__ = ("_owner", "converter", "schema")

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self.schema: Schema | None = None
        self.converter: Callable[[Any], Any] | None = None

    def register(self, schema: Schema, converter: Callable[[Any], Any]) -> None:
        if self.schema is not None:
            raise PluginError(f"{self._owner} registered twice for the same column")
        if not isinstance(schema, Schema):
            raise PluginError(f"{self._owner} registered {type(schema).__name__!s} as the schema; expected a "
                              "headwater.model.schema.Schema")
        if not callable(converter):
            raise PluginError(f"{self._owner} registered a converter that is not callable")
        self.schema = schema
        self.converter = converter


class CustomConverter(Protocol):
    """What a custom converter implements."""

    def configure(self, props: dict[str, str]) -> None:
        """The converter's `<name>.*` properties, prefix stripped (`type` included)."""

    def converter_for(self, column: RelationalColumn, registration: ConverterRegistration) -> None:
        """Call `registration.register(schema, converter)` to take over `column`, or return without."""


@dataclass(frozen=True, slots=True)
class Registered:
    """A column taken over by a custom converter."""

    label: str                       # "custom converter 'isbn' (pkg.mod:Class)"
    schema: Schema
    converter: Callable[[Any], Any]


@dataclass(frozen=True)
class ConverterSpec:
    name: str                        # the symbolic name listed in `converters`
    type: str                        # package.module:Class
    properties: tuple[tuple[str, str], ...]

    @property
    def label(self) -> str:
        return f"custom converter {self.name!r} ({self.type.strip()})"


@dataclass(frozen=True)
class CustomConverters:
    """The configured converters (picklable settings; `create()` makes the instances)."""

    specs: tuple[ConverterSpec, ...]

    @classmethod
    def from_config(cls, config: Any) -> CustomConverters | None:
        """From `converters` and `<name>.*`; None when none are configured. The configuration's
        validation has checked that every `<name>.type` is there and names a converter class."""
        specs = []
        for name in config.get("converters") or []:
            props = config.with_prefix(f"{name}.")
            specs.append(ConverterSpec(name, props["type"], tuple(sorted(props.items()))))
        return cls(tuple(specs)) if specs else None

    def create(self) -> ConverterRegistry:
        """The converter instances, created and configured once per process."""
        registry = _INSTANCES.get(self)
        if registry is None:
            registry = _INSTANCES[self] = ConverterRegistry(self)
        return registry


_INSTANCES: dict[CustomConverters, ConverterRegistry] = {}


class ConverterRegistry:
    """Configured converter instances (Debezium's `CustomConverterRegistry`)."""

    def __init__(self, settings: CustomConverters) -> None:
        self.instances: list[tuple[ConverterSpec, Any]] = []
        for spec in settings.specs:
            prop = f"{spec.name}.type"
            cls = load_class(spec.type, prop, "custom converter", CONVERTER_METHODS)
            instance = instantiate(cls, prop, spec.type)
            try:
                instance.configure(dict(spec.properties))
            except Exception as exc:
                raise PluginError(f"{spec.label}: configure() failed: {error_reason(exc)}") from None
            self.instances.append((spec, instance))

    def converter_for(self, column: RelationalColumn) -> Registered | None:
        """The first registration for `column`, or None."""
        for spec, instance in self.instances:
            registration = ConverterRegistration(spec.label)
            try:
                instance.converter_for(column, registration)
            except PluginError as exc:
                raise PluginError(f"column {column.data_collection}.{column.name}: {exc}") from None
            except Exception as exc:
                raise PluginError(f"{spec.label}: converter_for() failed for column {column.data_collection}."
                                  f"{column.name}: {error_reason(exc)}") from None
            if registration.schema is not None and registration.converter is not None:
                return Registered(spec.label, registration.schema, registration.converter)
        return None


class ConversionError(ValueError):
    """A custom converter failed on a value (handled per event.processing.failure.handling.mode)."""


def value_function(registered: Registered, column_label: str, *, optional: bool, marker: Any = None,
                   unavailable_input: Any = None) -> Callable[[Any], Any]:
    """The row builder's function for a converted column: every raw value (None included) through
    the converter; the connector's `marker` for an unavailable value becomes `unavailable_input`."""
    user = registered.converter
    label = registered.label

    def convert(value: Any) -> Any:
        if marker is not None and value is marker:
            value = unavailable_input
        try:
            out = user(value)
        except Exception as exc:
            raise ConversionError(f"{label} failed on column {column_label}: {error_reason(exc)}") from None
        if out is None and not optional:
            raise ConversionError(f"{label} returned None for column {column_label}, whose schema is not optional")
        return out

    return convert
