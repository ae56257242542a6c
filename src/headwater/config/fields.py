"""Field definitions: one definition per property, used for parsing, validation and docs."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from headwater.config.configuration import Configuration

Validator = Callable[[Any], "str | None"]
"""Takes the converted value, returns an error message (``"must be >= 1"``) or None."""


class FieldType(enum.Enum):
    STRING = "string"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    LIST = "list"  # comma-separated -> list[str]; "\," escapes a comma
    PASSWORD = "password"
    ENUM = "enum"
    CLASS = "class"


@dataclass(frozen=True, eq=False)
class Field:
    """A connector/engine property with Debezium's name, typed default and validation."""

    name: str
    type: FieldType
    default: Any = None
    doc: str = ""
    required: bool = False
    allowed: tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    validator: Validator | None = None
    group: str = "connector"
    ignored_reason: str | None = None
    deprecated_names: tuple[str, ...] = ()
    # Extensions beyond the minimal shape:
    unsupported: Mapping[str, str] = field(default_factory=dict)
    """ENUM values Debezium knows but Headwater rejects: value -> the complete error message."""
    default_doc: str | None = None
    """How the docs show the default when it is computed elsewhere (e.g. ``<topic.prefix>-signal``)."""
    names_prefixes: bool = False
    """LIST field whose items N each permit properties ``N.*`` (e.g. ``converters`` -> ``isbn.type``)."""
    replaces: bool = False
    """This definition replaces the same-named field of the set it is merged into (a connector's own
    default or meaning of a shared property, e.g. SQL Server's ``snapshot.fetch.size``)."""

    def __post_init__(self) -> None:
        if self.type is FieldType.ENUM:
            if not self.allowed:
                raise ValueError(f"ENUM field {self.name!r} needs allowed values")
            if any(a != a.lower() for a in self.allowed):
                raise ValueError(f"ENUM field {self.name!r}: allowed values must be lower-case")
            for alias, target in self.aliases.items():
                if target not in self.allowed:
                    raise ValueError(f"{self.name!r}: alias {alias!r} maps to unknown value {target!r}")
            if self.default is not None and self.default not in self.allowed:
                raise ValueError(f"{self.name!r}: default {self.default!r} is not an allowed value")
        if not isinstance(self.aliases, MappingProxyType):
            object.__setattr__(self, "aliases", MappingProxyType(dict(self.aliases)))
        if not isinstance(self.unsupported, MappingProxyType):
            object.__setattr__(self, "unsupported", MappingProxyType(dict(self.unsupported)))
        if self.names_prefixes and self.type is not FieldType.LIST:
            raise ValueError(f"{self.name!r}: names_prefixes needs a LIST field")

    @property
    def sensitive(self) -> bool:
        return self.type is FieldType.PASSWORD or is_sensitive_key(self.name)


@dataclass(frozen=True)
class DynamicField:
    """A family of properties sharing a prefix (``column.mask.with.<length>.chars``).

    A key is claimed when it starts with ``prefix`` and ``matches`` (if given) accepts it. A
    claimed key is then checked with ``key_validator`` (the whole key), converted to ``type``
    and checked with ``validator`` (the converted value). ``ignored_reason`` makes the family
    accepted-but-ignored (one warning per key).
    """

    prefix: str
    pattern: str
    doc: str = ""
    type: FieldType = FieldType.STRING
    validator: Validator | None = None
    key_validator: Callable[[str], str | None] | None = None
    matches: Callable[[str], bool] | None = None
    group: str = "connector"
    ignored_reason: str | None = None

    def claims(self, key: str) -> bool:
        if not key.startswith(self.prefix) or key == self.prefix.rstrip("."):
            return False
        return self.matches is None or self.matches(key)


class Report:
    """Collects problems and warnings from cross-field checks."""

    def __init__(self, failed: Iterable[str] = ()) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self._failed = set(failed)

    def error(self, message: str) -> None:
        self.errors.append(message)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def valid(self, *names: str) -> bool:
        """True when none of ``names`` failed conversion or validation (checks skip those)."""
        return not any(n in self._failed for n in names)


Check = Callable[["Configuration", Report], None]
"""A cross-field check: reads the built Configuration, reports errors/warnings."""


class FieldSet:
    """An ordered collection of fields, plus dynamic-prefix families and cross-field checks."""

    def __init__(
        self,
        *fields: Field,
        dynamic: Iterable[DynamicField] = (),
        checks: Iterable[Check] = (),
    ) -> None:
        self._fields: dict[str, Field] = {}
        self._by_old_name: dict[str, Field] = {}
        for f in fields:
            self._add(f)
        self.dynamic: tuple[DynamicField, ...] = tuple(dynamic)
        self.checks: tuple[Check, ...] = tuple(checks)

    def _add(self, f: Field) -> None:
        if f.name in self._fields or f.name in self._by_old_name:
            raise ValueError(f"duplicate field {f.name!r}")
        for old in f.deprecated_names:
            if old in self._fields or old in self._by_old_name:
                raise ValueError(f"deprecated name {old!r} of {f.name!r} is already defined")
            self._by_old_name[old] = f
        self._fields[f.name] = f

    def merge(self, other: FieldSet) -> FieldSet:
        """A new FieldSet with this set's fields followed by ``other``'s (duplicates are an error,
        except that a field of ``other`` marked ``replaces`` takes the place of this set's field)."""
        replacing = {f.name: f for f in other if f.replaces and f.name in self._fields}
        return FieldSet(
            *(replacing.get(f.name, f) for f in self._fields.values()),
            *(f for f in other._fields.values() if f.name not in replacing),
            dynamic=(*self.dynamic, *other.dynamic),
            checks=(*self.checks, *other.checks),
        )

    def get(self, name: str) -> Field | None:
        return self._fields.get(name)

    def by_deprecated_name(self, name: str) -> Field | None:
        return self._by_old_name.get(name)

    def dynamic_for(self, key: str) -> DynamicField | None:
        for d in self.dynamic:
            if d.claims(key):
                return d
        return None

    def names(self) -> list[str]:
        return list(self._fields)

    def __iter__(self) -> Iterator[Field]:
        return iter(self._fields.values())

    def __contains__(self, name: object) -> bool:
        return name in self._fields

    def __len__(self) -> int:
        return len(self._fields)

    def __getitem__(self, name: str) -> Field:
        return self._fields[name]

    def __repr__(self) -> str:
        return f"FieldSet({len(self._fields)} fields, {len(self.dynamic)} dynamic)"


# --------------------------------------------------------------------------------------------
# helpers shared by parsing and validators

_SENSITIVE_MARKERS = ("password", "secret", "sasl.jaas.config")
MASK = "********"


def is_sensitive_key(key: str) -> bool:
    """Keys whose values must never be shown (any key containing "password", "secret", ...)."""
    k = key.lower()
    return any(m in k for m in _SENSITIVE_MARKERS)


def split_list(value: str) -> list[str]:
    """Split a comma-separated list like Debezium: ``\\,`` escapes a comma; items trimmed; empties dropped."""
    items: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value) and value[i + 1] == ",":
            cur.append(",")
            i += 2
            continue
        if ch == ",":
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    items.append("".join(cur))
    return [s.strip() for s in items if s.strip()]


def join_list(items: Iterable[str]) -> str:
    """Inverse of :func:`split_list` (escapes commas inside items)."""
    return ",".join(str(i).replace(",", "\\,") for i in items)


# --------------------------------------------------------------------------------------------
# common validators


def positive_int(value: Any) -> str | None:
    return None if value >= 1 else "must be >= 1"


def non_negative(value: Any) -> str | None:
    return None if value >= 0 else "must be >= 0"


def at_least(minimum: int) -> Validator:
    def check(value: Any) -> str | None:
        return None if value >= minimum else f"must be >= {minimum}"

    return check


def in_range(lo: int, hi: int) -> Validator:
    def check(value: Any) -> str | None:
        return None if lo <= value <= hi else f"must be between {lo} and {hi}"

    return check


def regex_list_valid(value: Any) -> str | None:
    """Each item must compile as a regular expression (matching is anchored, applied later)."""
    bad = []
    for item in value:
        try:
            re.compile(item)
        except re.error as e:
            bad.append(f"{item!r} ({e})")
    if bad:
        return "not a valid regular expression: " + "; ".join(bad)
    return None


def non_empty(value: Any) -> str | None:
    return None if str(value).strip() else "must not be empty"


def all_of(*validators: Validator) -> Validator:
    def check(value: Any) -> str | None:
        for v in validators:
            msg = v(value)
            if msg:
                return msg
        return None

    return check


def list_items_in(allowed: Iterable[str], *, exclusive: str | None = None) -> Validator:
    """Each item of a LIST must be one of ``allowed`` (case-insensitive); ``exclusive`` may not be combined."""
    allowed_t = tuple(allowed)

    def check(value: Any) -> str | None:
        bad = [i for i in value if i.lower() not in allowed_t]
        if bad:
            return f"unknown item(s) {', '.join(bad)}; allowed items are {', '.join(allowed_t)}"
        if exclusive and len(value) > 1 and any(i.lower() == exclusive for i in value):
            return f"'{exclusive}' cannot be combined with other items"
        return None

    return check
