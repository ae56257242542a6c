"""Column mappers: `column.truncate.to.N.chars`, `column.mask.with.N.chars`,
`column.mask.hash[.v2].<algorithm>.with.salt.<salt>`, `column.propagate.source.type` and
`datatype.propagate.source.type`, as Debezium's `ColumnMappers` applies them.

Database-independent. Each property is one rule; a column gets the mapper of the *first* rule
that matches it (Debezium's order: truncate, mask, column propagate, datatype propagate, hash v1,
hash v2). Column rules match `<schema>.<table>.<column>` (datatype rules
`<schema>.<table>.<type name>`) fully and case-insensitively. A mapper may change the column's
*value* field schema (parameters; key fields are never mapped) and wraps the converted value:

- truncate: parameter `truncateLength=N` and strings/bytes cut to N characters/bytes, only when
  the source column's length is unknown (< 0) or greater than N (any type; values of other
  types pass through);
- mask: parameter `masked=true` on any matching column; character columns (JDBC CHAR, VARCHAR,
  ...) get N asterisks *for every value, NULL included*;
- hash: parameter `masked=true`; character columns get the lower-case hex digest of
  salt + bytes(value), cut to the column length when it is > 0; NULL stays NULL. v1 hashes the
  Java serialization of the string (`ObjectOutputStream.writeObject`), v2 its UTF-8 bytes;
- propagate: parameters `__debezium.source.column.type` (upper-cased), `.length` (unless
  unset), `.scale` (if known) and `.name`; values unchanged.

The connector describes its columns the way Debezium sees them (`SourceColumn`: JDBC type,
type name, length, scale) through an optional `source_column(table, column)` method of its
value converters. Objects here are picklable (they travel to worker processes); the value
functions are made per table build.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from headwater.config.fields import split_list
from headwater.model.schema import Schema
from headwater.relational.table import Column, Table, TableId

# java.sql.Types that MaskStrings treats as character data
CHAR, VARCHAR, LONGVARCHAR, CLOB, NCHAR, NVARCHAR, LONGNVARCHAR, NCLOB, DATALINK = (
    1, 12, -1, 2005, -15, -9, -16, 2011, 70)
OTHER = 1111
CHARACTER_JDBC_TYPES = frozenset((CHAR, VARCHAR, LONGVARCHAR, CLOB, NCHAR, NVARCHAR, LONGNVARCHAR, NCLOB, DATALINK))

UNSET_LENGTH = -1

TYPE_NAME_PARAMETER = "__debezium.source.column.type"
TYPE_LENGTH_PARAMETER = "__debezium.source.column.length"
TYPE_SCALE_PARAMETER = "__debezium.source.column.scale"
COLUMN_NAME_PARAMETER = "__debezium.source.column.name"

_TRUNCATE_KEY = re.compile(r"column\.truncate\.to\.(\d+)\.chars")
_MASK_KEY = re.compile(r"column\.mask\.with\.(\d+)\.chars")
_HASH_KEY = re.compile(r"column\.mask\.hash\.([^.]+)\.with\.salt\.(.+)", re.DOTALL)
_HASH_V2_KEY = re.compile(r"column\.mask\.hash\.v2\.([^.]+)\.with\.salt\.(.+)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class SourceColumn:
    """A column as Debezium's `Column` describes it (what the mappers look at)."""

    name: str
    type_name: str
    jdbc_type: int = OTHER
    length: int = UNSET_LENGTH
    scale: int | None = None


def default_source_column(table: Table, column: Column) -> SourceColumn:
    """For connectors that do not describe their columns: the generic metadata."""
    return SourceColumn(column.name, column.type_name, OTHER,
                        column.length if column.length is not None else UNSET_LENGTH, column.scale)


@dataclass(frozen=True)
class MapperRule:
    kind: str                              # "truncate" | "mask" | "propagate" | "hash"
    patterns: tuple[re.Pattern[str], ...]
    by_datatype: bool = False              # match `<schema>.<table>.<type name>`
    length: int = 0                        # truncate / mask
    algorithm: str = ""                    # hashlib name (hash)
    salt: bytes = b""
    version: int = 1                       # hashing strategy

    def matches(self, table_id: TableId, source: SourceColumn) -> bool:
        text = f"{table_id.identifier()}.{source.type_name if self.by_datatype else source.name}"
        return any(p.fullmatch(text) for p in self.patterns)


class ColumnMappers:
    """The configured rules; `for_column` gives a column's (schema, value mapper)."""

    def __init__(self, rules: Iterable[MapperRule] = ()) -> None:
        self.rules: tuple[MapperRule, ...] = tuple(rules)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __repr__(self) -> str:
        return f"ColumnMappers({[r.kind for r in self.rules]})"

    @classmethod
    def from_config(cls, cfg: Any) -> ColumnMappers:
        """Rules from a `headwater.config.Configuration` (lists already split as for every regex list)."""
        from headwater.config.relational import column_transform_keys

        props: dict[str, Any] = dict(column_transform_keys(cfg))
        for key in ("column.propagate.source.type", "datatype.propagate.source.type"):
            props[key] = cfg.get(key)
        return cls.from_properties(props)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> ColumnMappers:
        """Rules from connector properties (values: comma-separated strings or lists of regexes),
        in Debezium's order."""
        truncate, mask, hash_v1, hash_v2 = [], [], [], []
        for key, value in props.items():
            patterns = _patterns(value)
            if not patterns:
                continue
            if m := _TRUNCATE_KEY.fullmatch(key):
                truncate.append(MapperRule("truncate", patterns, length=int(m.group(1))))
            elif m := _MASK_KEY.fullmatch(key):
                mask.append(MapperRule("mask", patterns, length=int(m.group(1))))
            elif m := _HASH_V2_KEY.fullmatch(key):
                hash_v2.append(MapperRule("hash", patterns, algorithm=_hashlib_name(m.group(1)),
                                          salt=m.group(2).encode(), version=2))
            elif m := _HASH_KEY.fullmatch(key):
                hash_v1.append(MapperRule("hash", patterns, algorithm=_hashlib_name(m.group(1)),
                                          salt=m.group(2).encode(), version=1))
        rules = [*truncate, *mask]
        if patterns := _patterns(props.get("column.propagate.source.type")):
            rules.append(MapperRule("propagate", patterns))
        if patterns := _patterns(props.get("datatype.propagate.source.type")):
            rules.append(MapperRule("propagate", patterns, by_datatype=True))
        return cls([*rules, *hash_v1, *hash_v2])

    def rule_for(self, table_id: TableId, source: SourceColumn) -> MapperRule | None:
        for rule in self.rules:
            if rule.matches(table_id, source):
                return rule
        return None

    def for_column(self, table_id: TableId, source: SourceColumn,
                   schema: Schema) -> tuple[Schema, Callable[[Any], Any] | None] | None:
        """None when no rule matches; else the value field's schema (before optionality and
        default are applied) and the function applied to every converted value, None included
        (None: values unchanged)."""
        rule = self.rule_for(table_id, source)
        if rule is None:
            return None
        return apply_rule(rule, source, schema)


def apply_rule(rule: MapperRule, source: SourceColumn,
               schema: Schema) -> tuple[Schema, Callable[[Any], Any] | None]:
    character = source.jdbc_type in CHARACTER_JDBC_TYPES
    if rule.kind == "truncate":
        if not (source.length < 0 or source.length > rule.length):
            return schema, None
        return with_parameters(schema, {"truncateLength": str(rule.length)}), truncating(rule.length)
    if rule.kind == "mask":
        mask = "*" * rule.length
        return with_parameters(schema, {"masked": "true"}), ((lambda _value: mask) if character else None)
    if rule.kind == "hash":
        mapper = None
        if character:
            mapper = hashing(rule.algorithm, rule.salt, rule.version,
                             source.length if source.length > 0 else None)
        return with_parameters(schema, {"masked": "true"}), mapper
    if rule.kind == "propagate":
        params = {TYPE_NAME_PARAMETER: source.type_name.upper()}
        if source.length != UNSET_LENGTH:
            params[TYPE_LENGTH_PARAMETER] = str(source.length)
        if source.scale is not None:
            params[TYPE_SCALE_PARAMETER] = str(source.scale)
        params[COLUMN_NAME_PARAMETER] = source.name
        return with_parameters(schema, params), None
    raise ValueError(f"unknown column mapper kind {rule.kind!r}")


def with_parameters(schema: Schema, params: Mapping[str, str]) -> Schema:
    merged = dict(schema.parameters or {})
    merged.update(params)
    return Schema(schema.type, optional=schema.optional, name=schema.name, version=schema.version,
                  parameters=merged, default=schema.default, fields=schema.fields, items=schema.items,
                  keys=schema.keys, values=schema.values, doc=schema.doc)


# -------------------------------------------------------------------------------------------
# value functions


def java_length(s: str) -> int:
    """String.length(): UTF-16 code units."""
    if s.isascii():
        return len(s)
    return len(s) + sum(1 for c in s if c > "\uffff")


def java_prefix(s: str, n: int) -> str:
    """String.substring(0, n) (UTF-16 code units; a cut surrogate pair keeps its high half)."""
    if s.isascii() or all(c <= "\uffff" for c in s):
        return s[:n]
    units = s.encode("utf-16-le", "surrogatepass")[: 2 * n]
    return units.decode("utf-16-le", "surrogatepass")


def truncating(n: int) -> Callable[[Any], Any]:
    """TruncatingValueConverter: strings to n UTF-16 units, bytes to n bytes, others unchanged."""

    def truncate(value: Any) -> Any:
        if type(value) is str:
            if len(value) > n or (not value.isascii() and java_length(value) > n):
                return java_prefix(value, n)
            return value
        if isinstance(value, (bytes, bytearray)) and len(value) > n:
            return bytes(value[:n])
        return value

    return truncate


def _modified_utf8(s: str) -> bytes:
    """Java's modified UTF-8 (DataOutput.writeUTF): NUL as C0 80, supplementary characters as
    two 3-byte surrogates."""
    if s.isascii() and "\0" not in s:
        return s.encode()
    out = []
    for c in s:
        cp = ord(c)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append((chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF))).encode("utf-8", "surrogatepass"))
        elif cp == 0:
            out.append(b"\xc0\x80")
        else:
            out.append(c.encode("utf-8", "surrogatepass"))
    return b"".join(out)


_STREAM_HEADER = b"\xac\xed\x00\x05"  # STREAM_MAGIC, STREAM_VERSION


def java_serialized_string(s: str) -> bytes:
    """`ObjectOutputStream.writeObject(String)` output: header, TC_STRING/TC_LONGSTRING, length, modified UTF-8."""
    data = _modified_utf8(s)
    if len(data) <= 0xFFFF:
        return _STREAM_HEADER + b"\x74" + len(data).to_bytes(2, "big") + data
    return _STREAM_HEADER + b"\x7c" + len(data).to_bytes(8, "big") + data


def hashing(algorithm: str, salt: bytes, version: int, length: int | None) -> Callable[[Any], Any]:
    """HashValueConverter (+ TruncatingValueConverter(length)): hex digest of salt + value bytes."""
    base = hashlib.new(algorithm)
    base.update(salt)
    encode = java_serialized_string if version == 1 else _utf8

    def hash_value(value: Any) -> Any:
        if value is None:
            return None
        h = base.copy()
        h.update(encode(value if type(value) is str else str(value)))
        digest = h.hexdigest()
        return digest[:length] if length is not None else digest

    return hash_value


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


# -------------------------------------------------------------------------------------------
# configuration


_JAVA_DIGESTS = {
    "MD2": "md2", "MD5": "md5", "SHA": "sha1", "SHA1": "sha1", "SHA-1": "sha1", "SHA-224": "sha224",
    "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512", "SHA-512/224": "sha512_224",
    "SHA-512/256": "sha512_256", "SHA3-224": "sha3_224", "SHA3-256": "sha3_256", "SHA3-384": "sha3_384",
    "SHA3-512": "sha3_512",
}


def _hashlib_name(java_name: str) -> str:
    name = _JAVA_DIGESTS.get(java_name.upper())
    if name is None:
        raise ValueError(f"unsupported hash algorithm {java_name!r}")
    hashlib.new(name)  # fails early when this Python lacks it
    return name


def _patterns(value: Any) -> tuple[re.Pattern[str], ...]:
    if not value:
        return ()
    items = split_list(value) if isinstance(value, str) else list(value)
    return tuple(re.compile(p.strip(), re.IGNORECASE) for p in items if p and p.strip())


__all__ = [
    "CHARACTER_JDBC_TYPES",
    "ColumnMappers",
    "MapperRule",
    "SourceColumn",
    "apply_rule",
    "default_source_column",
    "hashing",
    "java_serialized_string",
    "truncating",
    "with_parameters",
]
