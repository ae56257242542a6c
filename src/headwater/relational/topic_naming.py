"""Topic names and Avro name adjustment, as Debezium computes them.

`TopicNaming` is Debezium's `topic.naming.strategy` (io.debezium.schema.*TopicNamingStrategy):
the data topic of a table, the transaction, heartbeat and logical-message topics. Debezium also
derives a table's Connect schema names from its data topic (`recordSchemaPrefix` is the topic),
so `build_table_schema` names `<topic>.Key/.Value/.Envelope` through it.

`NameAdjuster` is Debezium's `SchemaNameAdjuster` for `schema.name.adjustment.mode` and
`field.name.adjustment.mode` (none / avro / avro_unicode).

Both work on Java `char`s (UTF-16 code units), as Debezium does: a character outside the Basic
Multilingual Plane is two invalid characters, each replaced on its own.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Any

from headwater.relational.table import TableId

SCHEMA_STRATEGY = "io.debezium.schema.SchemaTopicNamingStrategy"
DEFAULT_STRATEGY = "io.debezium.schema.DefaultTopicNamingStrategy"
SCHEMA_UNICODE_STRATEGY = "io.debezium.schema.SchemaUnicodeTopicNamingStrategy"
DEFAULT_UNICODE_STRATEGY = "io.debezium.schema.DefaultUnicodeTopicNamingStrategy"

# class name -> (topic parts: "schema" = <schema>.<table>, "database" = <catalog>.<table>; unicode escapes)
STRATEGIES: dict[str, tuple[str, bool]] = {
    SCHEMA_STRATEGY: ("schema", False),
    DEFAULT_STRATEGY: ("database", False),
    SCHEMA_UNICODE_STRATEGY: ("schema", True),
    DEFAULT_UNICODE_STRATEGY: ("database", True),
}

MAX_TOPIC_LENGTH = 249  # Kafka's limit (TopicNamingStrategy.MAX_NAME_LENGTH)


class NamingError(ValueError):
    """An unsupported strategy, or two names that adjust to the same replacement."""


def resolve_strategy(name: str | None) -> str:
    """The Debezium class name for `topic.naming.strategy` (the simple class name is accepted too)."""
    if not name:
        return SCHEMA_STRATEGY
    for cls in STRATEGIES:
        if name == cls or name == cls.rsplit(".", 1)[1]:
            return cls
    supported = ", ".join(STRATEGIES)
    raise NamingError(f"topic.naming.strategy={name} is not supported; Headwater implements {supported} "
                      "(for other names use a topic routing step after capture)")


def _units(text: str) -> list[int]:
    """The UTF-16 code units of `text` (Java's `char`s)."""
    raw = text.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(raw[i:i + 2], "big") for i in range(0, len(raw), 2)]


def _unicode_escape(unit: int) -> str:
    """Debezium's UnicodeReplacementFunction: `_u` + Integer.toHexString, padded with "00" only when
    it has at most two digits (so U+0140 becomes `_u140`, a Debezium quirk reproduced as is)."""
    hexa = format(unit, "x")
    if len(hexa) <= 2:
        hexa = "00" + hexa
    return "_u" + hexa


def _is_java_digit(unit: int) -> bool:
    """Character.isDigit(char): Unicode category Nd (surrogates are not digits)."""
    return not 0xD800 <= unit <= 0xDFFF and unicodedata.category(chr(unit)) == "Nd"


def _ascii_letter(unit: int) -> bool:
    return 0x61 <= unit <= 0x7A or 0x41 <= unit <= 0x5A


def _ascii_digit(unit: int) -> bool:
    return 0x30 <= unit <= 0x39


_UNDERSCORE, _DOT, _DASH = ord("_"), ord("."), ord("-")


@dataclass(frozen=True)
class TopicNaming:
    """Debezium's topic naming strategies (picklable, for worker processes)."""

    prefix: str
    delimiter: str = "."
    transaction: str = "transaction"
    heartbeat_prefix: str = "__debezium-heartbeat"
    strategy: str = SCHEMA_STRATEGY

    @classmethod
    def from_config(cls, config: Any) -> TopicNaming:
        return cls(prefix=config.get("topic.prefix"), delimiter=config.get("topic.delimiter"),
                   transaction=config.get("topic.transaction"), heartbeat_prefix=config.get("topic.heartbeat.prefix"),
                   strategy=resolve_strategy(config.get("topic.naming.strategy")))

    def data_change_topic(self, table_id: TableId) -> str:
        """`<prefix>.<schema>.<table>` (Schema* strategies) or `<prefix>.<catalog>.<table>` (Default*:
        PostgreSQL table ids have no catalog, so `<prefix>.<table>`, tables of different schemas
        sharing a topic), blank parts left out, then invalid characters replaced."""
        parts_kind, _ = STRATEGIES[self.strategy]
        middle = [table_id.schema, table_id.table] if parts_kind == "schema" else [table_id.catalog, table_id.table]
        parts = [p for p in [self.prefix, *middle] if p is not None and p.strip()]
        return self.sanitize(self.delimiter.join(parts))

    def transaction_topic(self) -> str:
        """Not sanitized (as in Debezium)."""
        return f"{self.prefix}{self.delimiter}{self.transaction}"

    def heartbeat_topic(self) -> str:
        return f"{self.heartbeat_prefix}{self.delimiter}{self.prefix}"

    def message_topic(self) -> str:
        """PostgreSQL's logical decoding messages: Debezium hard-codes `<topic.prefix>.message`, with
        a dot whatever `topic.delimiter` and the strategy are."""
        return f"{self.prefix}.message"

    def sanitize(self, topic: str) -> str:
        """AbstractTopicNamingStrategy.sanitizedTopicName: characters other than [A-Za-z0-9._-]
        become `_` (unicode strategies: `_` is invalid too, and each becomes `_uXXXX`); names are
        cut to 249 characters; "." and ".." are replaced."""
        unicode = STRATEGIES[self.strategy][1]
        out: list[str] = []
        changed = False
        for unit in _units(topic):
            if _ascii_letter(unit) or _ascii_digit(unit) or unit in (_DOT, _DASH) or \
                    (unit == _UNDERSCORE and not unicode):
                out.append(chr(unit))
            else:
                out.append(_unicode_escape(unit) if unicode else "_")
                changed = True
        name = "".join(out)
        dot = _unicode_escape(_DOT) if unicode else "_"
        if len(name) > MAX_TOPIC_LENGTH:
            return name[:MAX_TOPIC_LENGTH]
        if name == ".":
            return dot
        if name == "..":
            return dot + dot
        return name if changed else topic


# -------------------------------------------------------------------------------------------
# schema.name.adjustment.mode / field.name.adjustment.mode

ADJUSTMENT_MODES = ("none", "avro", "avro_unicode")


@dataclass
class NameAdjuster:
    """Debezium's SchemaNameAdjuster for one of `none`, `avro`, `avro_unicode`, for schema names
    (`fields=False`: dots separate namespace parts) or field names (`fields=True`).

    - avro: the first character must be [A-Za-z_], the others [A-Za-z0-9_] (schema names: also
      `.`); each invalid character becomes `_`, and a leading digit is kept after it (`1st` ->
      `_1st`).
    - avro_unicode: `_` is the escape character, so it is invalid too; the first character must
      be [A-Za-z]; each invalid character becomes `_uXXXX` (a leading digit is not kept).

    Like Debezium it fails when two different names are adjusted to the same replacement (it
    remembers every replaced name; Debezium's adjusters are JVM-wide singletons, ours live as
    long as the connector's schema registry)."""

    mode: str = "none"
    fields: bool = False
    _replaced: dict[str, str] = field(default_factory=dict, repr=False)
    _originals: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in ADJUSTMENT_MODES:
            raise NamingError(f"unknown name adjustment mode {self.mode!r}; use one of {', '.join(ADJUSTMENT_MODES)}")

    def adjust(self, name: str) -> str:
        if self.mode == "none" or not name:
            return name
        done = self._replaced.get(name)
        if done is not None:
            return done
        unicode = self.mode == "avro_unicode"
        units = _units(name)
        out: list[str] = []
        changed = False
        for i, unit in enumerate(units):
            valid = _ascii_letter(unit) or (unit == _UNDERSCORE and not unicode)
            if i > 0:
                valid = valid or _ascii_digit(unit) or (unit == _DOT and not self.fields)
            if valid:
                out.append(chr(unit))
                continue
            changed = True
            out.append(_unicode_escape(unit) if unicode else "_")
            if i == 0 and not unicode and _is_java_digit(unit):
                out.append(chr(unit))  # Debezium keeps the digit: `1st` and `2nd` must not collide
        if not changed:
            return name
        result = "".join(out)
        previous = self._originals.setdefault(result, name)
        if previous != name:
            kind = "field" if self.fields else "schema"
            raise NamingError(f"the {kind} name {name!r} is not a valid Avro name and its replacement {result!r} "
                              f"conflicts with the {kind} name {previous!r} ({kind}.name.adjustment.mode={self.mode}); "
                              "rename one of them or use another adjustment mode")
        self._replaced[name] = result
        return result
