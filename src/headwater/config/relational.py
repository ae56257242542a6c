"""Properties shared by the relational connectors (PostgreSQL, SQL Server, Db2, Informix).

Debezium keeps these in ``RelationalDatabaseConnectorConfig``/``CommonConnectorConfig``; each
connector merges :data:`RELATIONAL_FIELDS` with its own fields (PostgreSQL adds ``database.port``
with its default, ``database.dbname``, ``snapshot.mode`` and so on). Also home of the small parsers
for structured values (column mask keys, ``message.key.columns``, initial statements).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.config.fields import (
    DynamicField,
    Field,
    FieldSet,
    Report,
    non_negative,
    positive_int,
    regex_list_valid,
    split_list,
)
from headwater.config.fields import FieldType as T

if TYPE_CHECKING:
    from headwater.config.configuration import Configuration

# -------------------------------------------------------------------------------------------
# structured values

_TRUNCATE_RE = re.compile(r"column\.truncate\.to\.(\d+)\.chars")
_MASK_RE = re.compile(r"column\.mask\.with\.(\d+)\.chars")
_HASH_RE = re.compile(r"column\.mask\.hash\.(?:(v2)\.)?([^.]+)\.with\.salt\.(.+)", re.DOTALL)

# Java MessageDigest names (case-insensitive) -> hashlib names
HASH_ALGORITHMS: dict[str, str] = {
    "MD5": "md5",
    "SHA": "sha1",
    "SHA1": "sha1",
    "SHA-1": "sha1",
    "SHA-224": "sha224",
    "SHA-256": "sha256",
    "SHA-384": "sha384",
    "SHA-512": "sha512",
    "SHA-512/224": "sha512_224",
    "SHA-512/256": "sha512_256",
    "SHA3-224": "sha3_224",
    "SHA3-256": "sha3_256",
    "SHA3-384": "sha3_384",
    "SHA3-512": "sha3_512",
}


@dataclass(frozen=True)
class MaskHashSpec:
    """Parsed ``column.mask.hash[.v2].<algorithm>.with.salt.<salt>`` property name."""

    version: int  # 1 or 2
    algorithm: str  # as written, e.g. "SHA-256"
    hashlib_name: str  # e.g. "sha256"
    salt: str


def parse_mask_hash_key(key: str) -> MaskHashSpec:
    """Parse a hash-mask property name; ValueError with a user-facing message when invalid."""
    m = _HASH_RE.fullmatch(key)
    if not m:
        raise ValueError(
            "expected column.mask.hash.<algorithm>.with.salt.<salt> or column.mask.hash.v2.<algorithm>.with.salt.<salt>"
        )
    v2, algorithm, salt = m.groups()
    name = HASH_ALGORITHMS.get(algorithm.upper())
    if name is None:
        raise ValueError(
            f"unsupported hash algorithm '{algorithm}'; supported are {', '.join(sorted(HASH_ALGORITHMS))}"
        )
    return MaskHashSpec(2 if v2 else 1, algorithm, name, salt)


def column_length_from_key(key: str) -> int:
    """N of ``column.truncate.to.N.chars`` / ``column.mask.with.N.chars`` (ValueError if malformed)."""
    m = _TRUNCATE_RE.fullmatch(key) or _MASK_RE.fullmatch(key)
    if not m:
        raise ValueError(key)
    return int(m.group(1))


def _truncate_key_valid(key: str) -> str | None:
    m = _TRUNCATE_RE.fullmatch(key)
    if not m:
        return "expected column.truncate.to.<length>.chars with a positive integer length"
    return None if int(m.group(1)) > 0 else "the length must be a positive integer"


def _mask_key_valid(key: str) -> str | None:
    if not _MASK_RE.fullmatch(key):
        return "expected column.mask.with.<length>.chars with a non-negative integer length"
    return None


def _hash_key_valid(key: str) -> str | None:
    try:
        parse_mask_hash_key(key)
    except ValueError as e:
        return str(e)
    return None


def split_statements(value: str) -> list[str]:
    """Split ``database.initial.statements``: ``;`` separates, ``;;`` is a literal semicolon."""
    out: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(value):
        if value[i] == ";":
            if value[i + 1 : i + 2] == ";":
                cur.append(";")
                i += 2
                continue
            out.append("".join(cur))
            cur = []
        else:
            cur.append(value[i])
        i += 1
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


# one `;`-separated entry of message.key.columns, as Debezium validates it (CustomKeyMapper)
_KEY_COLUMNS_ENTRY = re.compile(r"\s*([^:]+):([^:,]+(?:,[^:,]+)*)\s*")


def parse_message_key_columns(value: str) -> list[tuple[str, list[str]]]:
    """``<table regex>:<col>,<col>;...`` -> [(table regex, [columns])]; ValueError when malformed.

    Debezium's rules: entries are separated by ``;`` (trailing empty entries ignored, others
    refused), each is ``<table regex>:<column>[,<column>...]`` with no other ``:``. The matching
    (:class:`headwater.relational.key_mapper.KeyColumnMapper`) turns each column into the anchored,
    case-insensitive regex ``<table regex>.<column>`` over ``schema.table.column``."""
    result: list[tuple[str, list[str]]] = []
    entries = value.split(";")
    while entries and not entries[-1]:
        entries.pop()  # as Java's String.split (an empty value is taken as unset)
    for entry in entries:
        m = _KEY_COLUMNS_ENTRY.fullmatch(entry)
        if m is None:
            raise ValueError(f"entry '{entry}' is not <fully-qualified table regex>:<column>[,<column>...]")
        table = entry.split(":", 1)[0].lstrip()
        columns = [c.strip() for c in m.group(2).split(",")]
        for column in columns:
            try:
                re.compile(f"{table}.{column}")
            except re.error as e:
                raise ValueError(f"entry '{entry}': invalid regular expression ({e})") from None
        result.append((table, columns))
    return result


def _message_key_columns_valid(value: Any) -> str | None:
    try:
        parse_message_key_columns(value)
    except ValueError as e:
        return str(e)
    return None


def _placeholder_valid(value: Any) -> str | None:
    if value.startswith("hex:"):
        digits = value[4:]
        if len(digits) % 2 or not re.fullmatch(r"[0-9A-Fa-f]*", digits):
            return "after 'hex:' expected an even number of hexadecimal digits"
    return None


# -------------------------------------------------------------------------------------------
# cross-field checks (also used by connectors)


def mutually_exclusive(a: str, b: str) -> Callable[[Configuration, Report], None]:
    def check(cfg: Configuration, report: Report) -> None:
        if cfg.is_set(a) and cfg.is_set(b) and cfg.get(a) and cfg.get(b):
            report.error(f"'{a}' and '{b}' are mutually exclusive; set only one of them")

    check.__name__ = f"exclusive_{a}_{b}"
    return check


def required_when(mode_field: str, mode_value: str, required: str) -> Callable[[Configuration, Report], None]:
    def check(cfg: Configuration, report: Report) -> None:
        if cfg.get(mode_field) == mode_value and not cfg.get(required):
            report.error(f"missing required property '{required}': required when {mode_field}={mode_value}")

    check.__name__ = f"required_{required}"
    return check


_OVERRIDES = "snapshot.select.statement.overrides"


def _check_snapshot_query(cfg: Configuration, report: Report) -> None:
    spec = cfg.get("snapshot.query.mode.custom.name")
    if spec and cfg.get("snapshot.query.mode") != "custom":
        report.warn("snapshot.query.mode.custom.name has no effect: snapshot.query.mode is not custom")
    if cfg.get("snapshot.query.mode") != "custom" or not spec:
        return
    from headwater.relational.plugins import PluginError, load_class
    from headwater.relational.snapshot_query import NAME, QUERY_METHODS

    try:  # the class must import and define snapshot_query (headwater.relational.snapshot_query)
        load_class(spec, NAME, "snapshot query", QUERY_METHODS)
    except PluginError as exc:
        report.error(str(exc))


def _check_select_overrides(cfg: Configuration, report: Report) -> None:
    listed = cfg.get(_OVERRIDES) or []
    given = cfg.with_prefix(f"{_OVERRIDES}.")
    for table in listed:
        if table not in given:
            report.warn(
                f"'{_OVERRIDES}' lists '{table}' but '{_OVERRIDES}.{table}' is not set; "
                "the table is snapshotted with the default query"
            )
    for table in given:
        if table not in listed:
            report.warn(f"'{_OVERRIDES}.{table}' is ignored: '{table}' is not listed in '{_OVERRIDES}'")


# -------------------------------------------------------------------------------------------


def _regex_list(
    name: str, doc: str, *, group: str = "filters", old: tuple[str, ...] = (), default_doc: str | None = None
) -> Field:
    return Field(
        name,
        T.LIST,
        None,
        doc=doc,
        group=group,
        validator=regex_list_valid,
        deprecated_names=old,
        default_doc=default_doc,
    )


RELATIONAL_FIELDS = FieldSet(
    # --- connection
    Field(
        "database.hostname",
        T.STRING,
        required=True,
        group="connection",
        doc="IP address or host name of the database server.",
    ),
    Field("database.user", T.STRING, required=True, group="connection", doc="Database user to connect as."),
    Field("database.password", T.PASSWORD, group="connection", doc="Password of the database user."),
    Field(
        "database.query.timeout.ms",
        T.INT,
        600000,
        group="connection",
        validator=non_negative,
        doc="How long a query may run (0 = no limit), as statement_timeout on every non-replication "
        "connection. For a snapshot table read it limits the wait for the first rows, not the whole read.",
    ),
    Field(
        "database.initial.statements",
        T.STRING,
        group="connection",
        doc="SQL statements separated by ';' (write ';;' for a literal semicolon), run on every new "
        "non-replication connection; for session settings only.",
    ),
    # --- filters
    _regex_list(
        "schema.include.list",
        "Anchored regular expressions of schema names to capture; mutually exclusive with schema.exclude.list.",
        old=("schema.whitelist",),
        default_doc="all non-system schemas",
    ),
    _regex_list(
        "schema.exclude.list",
        "Anchored regular expressions of schema names not to capture (system schemas are always excluded).",
        old=("schema.blacklist",),
    ),
    _regex_list(
        "table.include.list",
        "Anchored regular expressions over schemaName.tableName of "
        "tables to capture; mutually exclusive with table.exclude.list.",
        old=("table.whitelist",),
        default_doc="all non-system tables",
    ),
    _regex_list(
        "table.exclude.list",
        "Anchored regular expressions over schemaName.tableName of tables not to capture.",
        old=("table.blacklist",),
    ),
    _regex_list(
        "column.include.list",
        "Anchored regular expressions over schemaName.tableName.columnName "
        "of columns to include in values (key columns are always in the key); mutually exclusive "
        "with column.exclude.list.",
        old=("column.whitelist",),
        default_doc="all columns",
    ),
    _regex_list(
        "column.exclude.list",
        "Anchored regular expressions over schemaName.tableName.columnName of columns to leave out of values.",
        old=("column.blacklist",),
    ),
    Field(
        "message.key.columns",
        T.STRING,
        group="filters",
        validator=_message_key_columns_valid,
        doc="Custom message keys: <table regex>:<column>,<column> entries separated by ';', "
        "e.g. inventory.customers:pk1,pk2;(.*).purchaseorders:pk3,pk4. Each column becomes the regular expression "
        "<table regex>.<column>, matched anchored and case-insensitively against schemaName.tableName.columnName; "
        "a table's key is every column any entry matches (entries in order), else its primary key; a column "
        "matched by two entries is an error.",
    ),
    Field(
        "skip.messages.without.change",
        T.BOOLEAN,
        False,
        group="filters",
        doc="Skip an update whose before and after values (the columns column.include.list / column.exclude.list "
        "capture) are equal. Needs an old tuple to compare: REPLICA IDENTITY FULL (under DEFAULT identity an update "
        "has no before, except a key change, and is emitted).",
    ),
    _regex_list(
        "column.propagate.source.type",
        "Regular expressions of columns whose schemas get the "
        "__debezium.source.column.type, .length and .scale parameters.",
        group="events",
    ),
    _regex_list(
        "datatype.propagate.source.type",
        "Regular expressions of data type names whose columns "
        "get the __debezium.source.column.type, .length and .scale parameters.",
        group="events",
    ),
    # --- data handling
    Field(
        "decimal.handling.mode",
        T.ENUM,
        "precise",
        allowed=("precise", "double", "string"),
        group="events",
        doc="How DECIMAL/NUMERIC values are emitted: precise (Connect Decimal bytes), double or string.",
    ),
    Field(
        "binary.handling.mode",
        T.ENUM,
        "bytes",
        allowed=("bytes", "base64", "base64-url-safe", "hex"),
        group="events",
        doc="How binary values are emitted: bytes, base64, base64-url-safe or hex.",
    ),
    Field(
        "unavailable.value.placeholder",
        T.STRING,
        "__debezium_unavailable_value",
        group="events",
        validator=_placeholder_valid,
        doc="Placeholder for unchanged TOAST values the database did not send; a 'hex:' prefix "
        "means the rest is hex-encoded bytes.",
    ),
    Field(
        "heartbeat.action.query",
        T.STRING,
        group="heartbeat",
        doc="SQL run on the source database at each heartbeat, e.g. an insert into a heartbeat table.",
    ),
    # --- snapshot
    Field(
        "snapshot.mode.configuration.based.snapshot.data",
        T.BOOLEAN,
        False,
        group="snapshot",
        doc="With snapshot.mode=configuration_based: snapshot table data.",
    ),
    Field(
        "snapshot.mode.configuration.based.snapshot.schema",
        T.BOOLEAN,
        False,
        group="snapshot",
        doc="With snapshot.mode=configuration_based: snapshot table schemas. No effect for PostgreSQL, "
        "which keeps no schema history (a warning at start when set).",
        ignored_reason="the PostgreSQL connector keeps no schema history, so there is no schema to snapshot",
    ),
    Field(
        "snapshot.mode.configuration.based.start.stream",
        T.BOOLEAN,
        False,
        group="snapshot",
        doc="With snapshot.mode=configuration_based: stream changes after the snapshot.",
    ),
    Field(
        "snapshot.mode.configuration.based.snapshot.on.schema.error",
        T.BOOLEAN,
        False,
        group="snapshot",
        doc="With snapshot.mode=configuration_based: snapshot the schema when the schema history is "
        "unavailable (no effect for PostgreSQL, which keeps no schema history; a warning at start when set).",
        ignored_reason="the PostgreSQL connector keeps no schema history",
    ),
    Field(
        "snapshot.mode.configuration.based.snapshot.on.data.error",
        T.BOOLEAN,
        False,
        group="snapshot",
        doc="With snapshot.mode=configuration_based: snapshot the data when the stored position is no "
        "longer available in the transaction log.",
    ),
    Field(
        "snapshot.mode.custom.name",
        T.STRING,
        group="snapshot",
        doc="Name of the custom snapshotter when snapshot.mode=custom.",
    ),
    Field(
        "snapshot.query.mode",
        T.ENUM,
        "select_all",
        allowed=("select_all", "custom"),
        group="snapshot",
        doc="How snapshot queries are built: select_all (every column), or custom: the Python class in "
        "snapshot.query.mode.custom.name builds each table's SELECT. A "
        "snapshot.select.statement.overrides entry wins over either. See docs/converters.md.",
    ),
    Field(
        "snapshot.query.mode.custom.name",
        T.STRING,
        group="snapshot",
        doc="With snapshot.query.mode=custom: the snapshot query class, as package.module:Class (a Java "
        "class name is refused). Its snapshot_query(table_id, columns) gets the double-quoted table and "
        "its double-quoted columns (after column.include/exclude.list) and returns the table's SELECT, or "
        "None to snapshot none of its rows; configure(props), if defined, gets the whole configuration. "
        "The result's columns are matched to the table's by name. See docs/converters.md.",
    ),
    _regex_list(
        "snapshot.include.collection.list",
        "Anchored regular expressions over "
        "schemaName.tableName of tables included in the initial snapshot (not in incremental "
        "snapshots).",
        group="snapshot",
        default_doc="all tables captured by table.include.list",
    ),
    Field(
        "snapshot.lock.timeout.ms",
        T.LONG,
        10000,
        group="snapshot",
        validator=non_negative,
        doc="Maximum time to wait for table locks during a snapshot (snapshot.locking.mode=shared); the "
        "snapshot fails on timeout.",
    ),
    Field(
        "snapshot.select.statement.overrides",
        T.LIST,
        None,
        group="snapshot",
        doc="schemaName.tableName list of tables whose snapshot uses the SELECT given in "
        "snapshot.select.statement.overrides.<schemaName>.<tableName>. Snapshots only. An override wins "
        "over snapshot.query.mode=custom; its result columns are matched to the table's by name (columns it "
        "does not return are NULL).",
    ),
    Field(
        "incremental.snapshot.chunk.size",
        T.INT,
        1024,
        group="snapshot",
        validator=positive_int,
        doc="Maximum rows read into memory per incremental-snapshot chunk (one window of the stream). "
        "Larger chunks mean fewer queries and window marks, and more memory.",
    ),
    Field(
        "incremental.snapshot.watermarking.strategy",
        T.ENUM,
        "insert_insert",
        allowed=("insert_insert", "insert_delete"),
        group="snapshot",
        doc="Incremental-snapshot window marks: insert_insert (an open and a close row in the signaling "
        "table per chunk) or insert_delete (an open row, deleted to close the window, so the table does "
        "not grow).",
    ),
    Field(
        "query.fetch.size",
        T.INT,
        0,
        group="streaming",
        validator=non_negative,
        doc="No effect (a warning at start when set): Headwater's non-snapshot queries (catalog reads) "
        "return few rows and are fetched at once. Not in the PostgreSQL documentation; present in "
        "Debezium's code.",
        ignored_reason="Headwater's non-snapshot queries (catalog reads) return few rows and are fetched at once",
    ),
    dynamic=(
        DynamicField(
            "column.truncate.to.",
            "column.truncate.to.<length>.chars",
            type=T.LIST,
            validator=regex_list_valid,
            key_validator=_truncate_key_valid,
            group="filters",
            doc="Anchored regular expressions over schemaName.tableName.columnName of character "
            "columns truncated to <length> characters.",
        ),
        DynamicField(
            "column.mask.with.",
            "column.mask.with.<length>.chars",
            type=T.LIST,
            validator=regex_list_valid,
            key_validator=_mask_key_valid,
            group="filters",
            doc="Anchored regular expressions of character columns whose values are replaced by "
            "<length> asterisks (0 gives an empty string).",
        ),
        DynamicField(
            "column.mask.hash.",
            "column.mask.hash.[v2.]<algorithm>.with.salt.<salt>",
            type=T.LIST,
            validator=regex_list_valid,
            key_validator=_hash_key_valid,
            group="filters",
            doc="Anchored regular expressions of character columns replaced by a salted hash "
            "(algorithm as in Java, e.g. SHA-256; v2 = hashing strategy v2).",
        ),
        DynamicField(
            f"{_OVERRIDES}.",
            f"{_OVERRIDES}.<schemaName>.<tableName>",
            group="snapshot",
            validator=lambda v: None if v.strip() else "must not be empty",
            doc="The SELECT statement used to snapshot that table.",
        ),
        DynamicField(
            "snapshot.mode.custom.",
            "snapshot.mode.custom.<setting>",
            group="snapshot",
            doc="Settings read by the custom snapshotter.",
        ),
        DynamicField(
            "snapshot.query.mode.custom.",
            "snapshot.query.mode.custom.<setting>",
            group="snapshot",
            doc="Settings for the custom snapshot query class (its configure() gets the whole configuration).",
        ),
    ),
    checks=(
        mutually_exclusive("schema.include.list", "schema.exclude.list"),
        mutually_exclusive("table.include.list", "table.exclude.list"),
        mutually_exclusive("column.include.list", "column.exclude.list"),
        required_when("snapshot.query.mode", "custom", "snapshot.query.mode.custom.name"),
        _check_snapshot_query,
        _check_select_overrides,
    ),
)


def column_transform_keys(cfg: Configuration) -> dict[str, list[str]]:
    """Every set column.truncate/mask/hash property -> its list of column regexes."""
    prefixes = ("column.truncate.to.", "column.mask.with.", "column.mask.hash.")
    return {k: cfg.get(k) for k in cfg.dynamic_keys() if k.startswith(prefixes)}


__all__ = [
    "HASH_ALGORITHMS",
    "RELATIONAL_FIELDS",
    "MaskHashSpec",
    "column_length_from_key",
    "column_transform_keys",
    "mutually_exclusive",
    "parse_mask_hash_key",
    "parse_message_key_columns",
    "required_when",
    "split_list",
    "split_statements",
]
