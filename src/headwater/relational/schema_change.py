"""Debezium's table changes and schema-change events, for connectors that keep a schema history.

A *table change* (Debezium's ``TableChanges.TableChange``) says that a table was created, altered
or dropped, and holds the table's whole structure after the change. It has two renderings, and
they differ in shape:

- in the schema history (``JsonTableChangeSerializer``): ``{"type", "id", ["previousId"],
  "table": {"defaultCharsetName", "primaryKeyColumnNames", "columns": [...], "attributes": [...]},
  "comment"}``; a column leaves out ``nativeType``/``length``/``scale`` when unset and
  ``defaultValueExpression`` when absent, and carries ``hasDefaultValue`` and ``enumValues``
  (``[]`` when none);
- in the schema-change topic (``ConnectTableChangeSerializer``): a Connect struct
  ``io.debezium.connector.schema.Change`` ``{type, id, table: {defaultCharsetName,
  primaryKeyColumnNames, columns, comment}}`` — no ``previousId``, ``attributes`` or
  ``hasDefaultValue``; unset fields are null and ``enumValues`` is null when empty.

``SchemaChangeEvents`` builds the record Debezium sends to the schema-change topic
(``include.schema.changes``): key ``io.debezium.connector.<connector>.SchemaChangeKey``
``{databaseName}``, value ``io.debezium.connector.<connector>.SchemaChangeValue`` ``{source, ts_ms,
databaseName, schemaName, ddl, tableChanges}``.

Nothing here knows a particular database: a connector describes its columns
(``ColumnDescription``, from its own type catalog) and passes its ``source`` block and schema.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from headwater.engine.records import SourceRecord
from headwater.model.schema import (
    INT32,
    INT64,
    OPTIONAL_STRING,
    STRING,
    Schema,
    struct,
)
from headwater.relational.table import Column, Table, TableId

TableChangeType = Literal["CREATE", "ALTER", "DROP"]
CHANGE_TYPES: tuple[str, ...] = ("CREATE", "ALTER", "DROP")

# --- Connect schemas of the schema-change topic (io.debezium.schema.SchemaFactory) -------------

_OPTIONAL_INT32 = Schema("int32", optional=True)
_OPTIONAL_BOOLEAN = Schema("boolean", optional=True)
_OPTIONAL_STRING_ARRAY = Schema("array", items=STRING, optional=True)

COLUMN_SCHEMA = struct(
    "io.debezium.connector.schema.Column",
    [
        ("name", STRING),
        ("jdbcType", INT32),
        ("nativeType", _OPTIONAL_INT32),
        ("typeName", STRING),
        ("typeExpression", OPTIONAL_STRING),
        ("charsetName", OPTIONAL_STRING),
        ("length", _OPTIONAL_INT32),
        ("scale", _OPTIONAL_INT32),
        ("position", INT32),
        ("optional", _OPTIONAL_BOOLEAN),
        ("autoIncremented", _OPTIONAL_BOOLEAN),
        ("generated", _OPTIONAL_BOOLEAN),
        ("comment", OPTIONAL_STRING),
        ("defaultValueExpression", OPTIONAL_STRING),
        ("enumValues", _OPTIONAL_STRING_ARRAY),
    ],
    version=1,
)
TABLE_SCHEMA = struct(
    "io.debezium.connector.schema.Table",
    [
        ("defaultCharsetName", OPTIONAL_STRING),
        ("primaryKeyColumnNames", _OPTIONAL_STRING_ARRAY),
        ("columns", Schema("array", items=COLUMN_SCHEMA)),
        ("comment", OPTIONAL_STRING),
    ],
    optional=True,
    version=1,
)
CHANGE_SCHEMA = struct(
    "io.debezium.connector.schema.Change",
    [("type", STRING), ("id", STRING), ("table", TABLE_SCHEMA)],
    version=1,
)


def schema_change_key_schema(connector: str) -> Schema:
    """``io.debezium.connector.<connector>.SchemaChangeKey`` {databaseName}."""
    return struct(f"io.debezium.connector.{connector}.SchemaChangeKey", [("databaseName", STRING)], version=1)


def schema_change_value_schema(connector: str, source_schema: Schema) -> Schema:
    """``io.debezium.connector.<connector>.SchemaChangeValue`` around the connector's source block."""
    return struct(
        f"io.debezium.connector.{connector}.SchemaChangeValue",
        [
            ("source", source_schema),
            ("ts_ms", INT64),
            ("databaseName", OPTIONAL_STRING),
            ("schemaName", OPTIONAL_STRING),
            ("ddl", OPTIONAL_STRING),
            ("tableChanges", Schema("array", items=CHANGE_SCHEMA)),
        ],
        version=1,
    )


# --- table identifiers as Debezium quotes them ----------------------------------------------------

def _quote(part: str) -> str:
    # TableId.quote: a part already starting *or* ending with the quote is left alone (Debezium's
    # check is "neither starts nor ends with it"); otherwise inner quotes are doubled
    if not part:
        return '""'
    if part[0] != '"' and part[-1] != '"':
        return '"' + part.replace('"', '""') + '"'
    return part


def double_quoted(table_id: TableId) -> str:
    """``TableId.toDoubleQuotedString``: ``"db"."schema"."table"`` (empty/absent parts left out)."""
    parts = [p for p in (table_id.catalog, table_id.schema) if p]
    return ".".join([*(_quote(p) for p in parts), _quote(table_id.table)])


_QUOTES = "\"'`"


def parse_table_id(text: str, *, use_catalog_before_schema: bool = False) -> TableId:
    """``TableId.parse``: dot-separated parts, each plain or quoted with ``"``, ``'`` or a backtick
    (a doubled quote inside stands for itself). Two parts are (schema, table), or (catalog, table)
    with ``use_catalog_before_schema``; more than three: the first three."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            raise ValueError(f"invalid table identifier {text!r}")
        if text[i] in _QUOTES:
            quote, i, buf = text[i], i + 1, []
            while True:
                if i >= n:
                    raise ValueError(f"invalid table identifier {text!r}: unterminated quote")
                if text[i] == quote:
                    if i + 1 < n and text[i + 1] == quote:
                        buf.append(quote)
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            parts.append("".join(buf))
        else:
            start = i
            while i < n and text[i] != "." and not text[i].isspace():
                i += 1
            if i == start:
                raise ValueError(f"invalid table identifier {text!r}")
            parts.append(text[start:i])
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        if text[i] != ".":
            raise ValueError(f"invalid table identifier {text!r}: unexpected {text[i]!r}")
        i += 1
    if len(parts) == 1:
        return TableId(None, None, parts[0])
    if len(parts) == 2:
        return TableId(parts[0], None, parts[1]) if use_catalog_before_schema else TableId(None, parts[0], parts[1])
    return TableId(parts[0], parts[1], parts[2])


# --- columns and table changes -------------------------------------------------------------------

@dataclass(frozen=True)
class ColumnDescription:
    """A column as Debezium's relational model (``io.debezium.relational.Column``) holds it.

    ``native_type`` and ``length`` are None where Debezium's are unset (-1): the history leaves
    them out. ``has_default_value`` is Debezium's flag (which it also sets for every optional
    column: an implicit NULL default), ``default_value_expression`` the expression when known."""

    name: str
    jdbc_type: int
    type_name: str
    position: int
    native_type: int | None = None
    type_expression: str | None = None
    charset_name: str | None = None
    length: int | None = None
    scale: int | None = None
    optional: bool = True
    auto_incremented: bool = False
    generated: bool = False
    comment: str | None = None
    has_default_value: bool = False
    default_value_expression: str | None = None
    enum_values: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The history rendering (JsonTableChangeSerializer), keys in Debezium's order."""
        d: dict[str, Any] = {"name": self.name, "jdbcType": self.jdbc_type}
        if self.native_type is not None:
            d["nativeType"] = self.native_type
        d["typeName"] = self.type_name
        d["typeExpression"] = self.type_expression
        d["charsetName"] = self.charset_name
        if self.length is not None:
            d["length"] = self.length
        if self.scale is not None:
            d["scale"] = self.scale
        d["position"] = self.position
        d["optional"] = self.optional
        d["autoIncremented"] = self.auto_incremented
        d["generated"] = self.generated
        d["comment"] = self.comment
        d["hasDefaultValue"] = self.has_default_value
        if self.default_value_expression is not None:
            d["defaultValueExpression"] = self.default_value_expression
        d["enumValues"] = list(self.enum_values)
        return d

    def to_struct(self) -> dict[str, Any]:
        """The schema-change-topic rendering (ConnectTableChangeSerializer): every field of
        ``COLUMN_SCHEMA``, in order; unset ones null."""
        return {
            "name": self.name,
            "jdbcType": self.jdbc_type,
            "nativeType": self.native_type,
            "typeName": self.type_name,
            "typeExpression": self.type_expression,
            "charsetName": self.charset_name,
            "length": self.length,
            "scale": self.scale,
            "position": self.position,
            "optional": self.optional,
            "autoIncremented": self.auto_incremented,
            "generated": self.generated,
            "comment": self.comment,
            "defaultValueExpression": self.default_value_expression,
            "enumValues": list(self.enum_values) if self.enum_values else None,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ColumnDescription:
        """Back from the history rendering, as JsonTableChangeSerializer reads it: a missing
        ``hasDefaultValue`` (older histories) is implied by a default expression."""
        try:
            expression = d.get("defaultValueExpression")
            has_default = d.get("hasDefaultValue")
            return cls(
                name=d["name"],
                jdbc_type=int(d["jdbcType"]),
                native_type=d.get("nativeType"),
                type_name=d["typeName"],
                type_expression=d.get("typeExpression"),
                charset_name=d.get("charsetName"),
                length=d.get("length"),
                scale=d.get("scale"),
                position=int(d["position"]),
                optional=bool(d.get("optional", True)),
                auto_incremented=bool(d.get("autoIncremented", False)),
                generated=bool(d.get("generated", False)),
                comment=d.get("comment"),
                has_default_value=bool(has_default) or expression is not None,
                default_value_expression=expression,
                enum_values=tuple(d.get("enumValues") or ()),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed column in a table change: {dict(d)!r} ({e!r})") from e


@dataclass(frozen=True)
class TableChange:
    """One entry of ``tableChanges``. ``columns`` and ``primary_key`` are empty for a DROP (which
    Debezium writes without a table)."""

    type: TableChangeType
    id: TableId
    columns: tuple[ColumnDescription, ...] = ()
    primary_key: tuple[str, ...] = ()
    previous_id: TableId | None = None   # an ALTER that renamed the table
    default_charset_name: str | None = None
    comment: str | None = None
    attributes: tuple[tuple[str, str | None], ...] = field(default=())  # Debezium's table attributes

    def __post_init__(self) -> None:
        if self.type not in CHANGE_TYPES:
            raise ValueError(f"table change type must be one of {', '.join(CHANGE_TYPES)}, got {self.type!r}")

    @property
    def has_table(self) -> bool:
        return self.type != "DROP"

    def to_json(self) -> dict[str, Any]:
        """The history rendering (JsonTableChangeSerializer.toDocument), keys in Debezium's order."""
        d: dict[str, Any] = {"type": self.type, "id": double_quoted(self.id)}
        if self.previous_id is not None:
            d["previousId"] = double_quoted(self.previous_id)
        if self.has_table:
            d["table"] = {
                "defaultCharsetName": self.default_charset_name,
                "primaryKeyColumnNames": list(self.primary_key),
                "columns": [c.to_json() for c in self.columns],
                "attributes": [{"name": n, "value": v} for n, v in self.attributes],
            }
            d["comment"] = self.comment
        return d

    def to_struct(self) -> dict[str, Any]:
        """The schema-change-topic rendering (ConnectTableChangeSerializer.toStruct)."""
        table = None
        if self.has_table:
            table = {
                "defaultCharsetName": self.default_charset_name,
                "primaryKeyColumnNames": list(self.primary_key),
                "columns": [c.to_struct() for c in self.columns],
                "comment": self.comment,
            }
        return {"type": self.type, "id": double_quoted(self.id), "table": table}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], *, use_catalog_before_schema: bool = False) -> TableChange:
        """Back from the history rendering (JsonTableChangeSerializer.fromDocument)."""
        kind = d.get("type")
        if kind not in CHANGE_TYPES:
            raise ValueError(f"table change type must be one of {', '.join(CHANGE_TYPES)}, got {kind!r}")
        if not isinstance(d.get("id"), str):
            raise ValueError(f"table change without an id: {dict(d)!r}")
        table_id = parse_table_id(d["id"], use_catalog_before_schema=use_catalog_before_schema)
        previous = d.get("previousId")
        previous_id = parse_table_id(previous, use_catalog_before_schema=use_catalog_before_schema) \
            if previous is not None else None
        if kind == "DROP":
            return cls("DROP", table_id, previous_id=previous_id)
        table = d.get("table")
        if not isinstance(table, Mapping) or not isinstance(table.get("columns"), list):
            raise ValueError(f"{kind} table change for {d['id']} has no table columns")
        attributes = tuple((a.get("name"), a.get("value")) for a in table.get("attributes") or ())
        return cls(
            kind,  # type: ignore[arg-type]
            table_id,
            columns=tuple(ColumnDescription.from_json(c) for c in table["columns"]),
            primary_key=tuple(table.get("primaryKeyColumnNames") or ()),
            previous_id=previous_id,
            default_charset_name=table.get("defaultCharsetName"),
            # Debezium writes the table comment next to the table, and reads it from inside (where
            # it never is): the comment does not survive a round trip there; here it does
            comment=d.get("comment", table.get("comment")),
            attributes=attributes,
        )


Describe = Callable[[Table, Column], ColumnDescription]


def table_change(kind: TableChangeType, table: Table, describe: Describe, *, previous_id: TableId | None = None,
                 default_charset_name: str | None = None, comment: str | None = None,
                 attributes: Iterable[tuple[str, str | None]] = ()) -> TableChange:
    """The change of ``table`` (its structure after the change), columns described by the connector."""
    if kind == "DROP":
        return TableChange("DROP", table.id, previous_id=previous_id)
    return TableChange(kind, table.id, columns=tuple(describe(table, c) for c in table.columns),
                       primary_key=tuple(table.primary_key), previous_id=previous_id,
                       default_charset_name=default_charset_name, comment=comment, attributes=tuple(attributes))


def table_change_json(kind: TableChangeType, table: Table, describe: Describe, **options: Any) -> dict[str, Any]:
    """Debezium's JsonTableChangeSerializer item for ``table`` (the history rendering)."""
    return table_change(kind, table, describe, **options).to_json()


# --- the schema-change topic ------------------------------------------------------------------

class SchemaChangeEvents:
    """Builds the records of the schema-change topic (``include.schema.changes``), as Debezium's
    EventDispatcher.SchemaChangeEventReceiver does: one record per schema change event, on
    ``topic`` (``topic.prefix`` under Debezium's topic naming strategies), with the context headers
    (Debezium adds them to these records too).

    ``ddl`` is what the connector has: a DDL statement, or — for connectors that read no DDL —
    whatever Debezium puts there (SQL Server: null from the snapshot, ``"N/A"`` while streaming)."""

    def __init__(self, connector: str, topic: str, source_schema: Schema,
                 clock: Callable[[], int] = time.time_ns) -> None:
        self.topic = topic
        self.key_schema = schema_change_key_schema(connector)
        self.value_schema = schema_change_value_schema(connector, source_schema)
        self._clock = clock

    def record(self, *, database: str, schema: str | None, ddl: str | None, changes: Sequence[TableChange],
               source: dict[str, Any], offset: dict[str, Any], ts_ms: int | None = None,
               collection: str | None = None) -> SourceRecord:
        """The record of one schema change. ``source``: the connector's source block for it;
        ``offset``: the connector offset the record carries; ``ts_ms``: when it was processed
        (default: now); ``collection``: the data collection id the record is about, if any."""
        if ts_ms is None:
            ts_ms = self._clock() // 1_000_000
        value = {
            "source": source,
            "ts_ms": ts_ms,
            "databaseName": database,
            "schemaName": schema,
            "ddl": ddl,
            "tableChanges": [c.to_struct() for c in changes],
        }
        return SourceRecord(self.topic, self.key_schema, {"databaseName": database}, self.value_schema, value,
                            offset, (), None, collection)
