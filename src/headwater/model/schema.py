"""Kafka Connect style schemas: the type system every change event is described in.

A `Schema` mirrors `org.apache.kafka.connect.data.Schema`: a primitive or structured type, its
optionality, an optional logical-type name/version/parameters and a default value. Debezium's
events carry these schemas verbatim (JSON converter with `schemas.enable=true`), so the rendering
in `to_json` follows Kafka's `JsonConverter.asJsonSchema` key for key.

Schemas are immutable after construction and are shared by every event of a table version, so
the serialized form is computed once and cached (`json_bytes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

PRIMITIVE_TYPES = frozenset(
    {"int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string", "bytes"}
)
ALL_TYPES = PRIMITIVE_TYPES | {"array", "map", "struct"}


class _NoDefault:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:  # unpickled as the module's one instance (`is NO_DEFAULT` holds)
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


class Schema:
    """An immutable Connect schema. Struct schemas hold `fields`; arrays `items`; maps `keys`/`values`."""

    __slots__ = (
        "_field_index",
        "_json",
        "_json_bytes",
        "default",
        "doc",
        "fields",
        "items",
        "keys",
        "name",
        "optional",
        "parameters",
        "type",
        "values",
        "version",
    )

    def __init__(
        self,
        type: str,
        *,
        optional: bool = False,
        name: str | None = None,
        version: int | None = None,
        parameters: Mapping[str, str] | None = None,
        default: Any = NO_DEFAULT,
        fields: Iterable[Field] = (),
        items: Schema | None = None,
        keys: Schema | None = None,
        values: Schema | None = None,
        doc: str | None = None,
    ) -> None:
        if type not in ALL_TYPES:
            raise ValueError(f"unknown Connect schema type {type!r}")
        self.type = type
        self.optional = optional
        self.name = name
        self.version = version
        self.parameters = dict(parameters) if parameters else None
        self.default = default
        self.fields: tuple[Field, ...] = tuple(fields)
        self.items = items
        self.keys = keys
        self.values = values
        self.doc = doc
        self._field_index = {f.name: f for f in self.fields}
        self._json: dict[str, Any] | None = None
        self._json_bytes: bytes | None = None

    def field(self, name: str) -> Field | None:
        return self._field_index.get(name)

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    def to_json(self) -> dict[str, Any]:
        """The schema as Kafka's JsonConverter renders it (a fresh dict the caller may keep)."""
        if self._json is None:
            self._json = _render(self)
        return self._json

    @property
    def json_bytes(self) -> bytes:
        if self._json_bytes is None:
            self._json_bytes = orjson.dumps(self.to_json())
        return self._json_bytes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.json_bytes)

    def __repr__(self) -> str:
        label = self.name or self.type
        return f"Schema({label}{', optional' if self.optional else ''})"


class Field:
    """A named member of a struct schema."""

    __slots__ = ("name", "schema")

    def __init__(self, name: str, schema: Schema) -> None:
        self.name = name
        self.schema = schema

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.schema!r})"


# Kafka's JsonConverter names the floating-point types after Java's.
_JSON_TYPE_NAMES = {"float32": "float", "float64": "double"}


def render_json_bytes(schema: Schema, *, decimal_numeric: bool = False) -> bytes:
    """The schema's JSON text; `decimal_numeric`: Decimal defaults as JSON numbers (the JSON
    converter's decimal.format=numeric) instead of base64 (uncached: the converter caches it)."""
    if not decimal_numeric:
        return schema.json_bytes
    return orjson.dumps(_render(schema, decimal_numeric=True))


def _render(schema: Schema, field_name: str | None = None, decimal_numeric: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _JSON_TYPE_NAMES.get(schema.type, schema.type)}
    if schema.type == "struct":
        out["fields"] = [_render(f.schema, f.name, decimal_numeric) for f in schema.fields]
    elif schema.type == "array":
        assert schema.items is not None
        out["items"] = _render(schema.items, None, decimal_numeric)
    elif schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        out["keys"] = _render(schema.keys, None, decimal_numeric)
        out["values"] = _render(schema.values, None, decimal_numeric)
    out["optional"] = schema.optional
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters:
        out["parameters"] = dict(schema.parameters)
    if schema.has_default:
        out["default"] = _json_value(schema, schema.default, decimal_numeric)
    if field_name is not None:
        out["field"] = field_name
    return out


def _json_value(schema: Schema, value: Any, decimal_numeric: bool = False) -> Any:
    """A default value as JsonConverter writes it (bytes and decimals base64-encoded, or decimals
    as numbers with decimal.format=numeric)."""
    import base64
    from decimal import Decimal

    if isinstance(value, Decimal):
        from headwater.model.values import decimal_json_number, decimal_to_unscaled_bytes

        scale = int((schema.parameters or {}).get("scale", "0"))
        if decimal_numeric:
            return orjson.Fragment(decimal_json_number(value, scale))
        value = decimal_to_unscaled_bytes(value, scale)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    return value


def struct(name: str | None, fields: Iterable[tuple[str, Schema]], *, optional: bool = False,
           version: int | None = None) -> Schema:
    return Schema("struct", name=name, optional=optional, version=version,
                  fields=[Field(n, s) for n, s in fields])


def replace(schema: Schema, *, optional: bool | None = None, default: Any = NO_DEFAULT) -> Schema:
    """A copy with another optionality and/or default (schemas are immutable)."""
    return Schema(
        schema.type, optional=schema.optional if optional is None else optional, name=schema.name,
        version=schema.version, parameters=schema.parameters,
        default=schema.default if default is NO_DEFAULT else default, fields=schema.fields,
        items=schema.items, keys=schema.keys, values=schema.values, doc=schema.doc,
    )


# Frequently used primitives.
INT8 = Schema("int8")
INT16 = Schema("int16")
INT32 = Schema("int32")
INT64 = Schema("int64")
FLOAT32 = Schema("float32")
FLOAT64 = Schema("float64")
BOOLEAN = Schema("boolean")
STRING = Schema("string")
BYTES = Schema("bytes")
OPTIONAL_INT64 = Schema("int64", optional=True)
OPTIONAL_STRING = Schema("string", optional=True)
OPTIONAL_BYTES = Schema("bytes", optional=True)
