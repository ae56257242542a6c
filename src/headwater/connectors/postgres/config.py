"""PostgreSQL connector properties (spec/postgresql.md §11), registered as connector "postgresql".

:data:`POSTGRES_FIELDS` = the relational fields shared by all database connectors
(:data:`headwater.config.relational.RELATIONAL_FIELDS`) plus the PostgreSQL-only ones below. The
engine-level fields (:data:`headwater.config.common.COMMON_FIELDS`) are merged in by
:func:`headwater.config.load`.

Decisions (spec §14 ⚠ items):

- ``plugin.name`` defaults to ``pgoutput`` (Debezium: ``decoderbufs``); ``decoderbufs`` is rejected.
- ``database.*`` pass-through: libpq connection parameters are accepted (see :func:`libpq_options`);
  pgJDBC-only options are accepted with a warning; any other ``database.X`` is an unknown property.
- ``flush.lsn.source`` (documented in 2.7) and ``lsn.flush.mode`` (Debezium 3.x) both exist;
  :func:`lsn_flush_mode` resolves them as Debezium does (``lsn.flush.mode`` wins).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from headwater.config.fields import (
    DynamicField,
    Field,
    FieldSet,
    Report,
    in_range,
    non_empty,
    non_negative,
    positive_int,
    regex_list_valid,
)
from headwater.config.fields import FieldType as T
from headwater.config.registry import register_connector
from headwater.config.relational import RELATIONAL_FIELDS, mutually_exclusive, required_when
from headwater.connectors.postgres.replica_identity import parse_autoset

if TYPE_CHECKING:
    from headwater.config.configuration import Configuration

CONNECTOR_KEY = "postgresql"
CONNECTOR_CLASS = "io.debezium.connector.postgresql.PostgresConnector"
CONNECTOR_CLASS_ALIASES = {CONNECTOR_CLASS: CONNECTOR_KEY, "postgresql": CONNECTOR_KEY}

DECODERBUFS_ERROR = (
    "plugin.name=decoderbufs is not supported: Headwater reads pgoutput only (built into "
    "PostgreSQL 10+); set plugin.name=pgoutput"
)

# libpq connection parameters accepted as database.<name> (passed to the driver as is)
LIBPQ_PARAMETERS = frozenset(
    {
        "application_name",
        "connect_timeout",
        "options",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "target_session_attrs",
        "sslcrl",
        "sslcrldir",
        "sslsni",
        "sslcompression",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "sslcertmode",
        "gssencmode",
        "krbsrvname",
        "gsslib",
        "requirepeer",
        "channel_binding",
        "passfile",
        "service",
        "require_auth",
        "load_balance_hosts",
    }
)
# pgJDBC names with a libpq equivalent
PGJDBC_TO_LIBPQ = {"ApplicationName": "application_name", "connectTimeout": "connect_timeout"}
# pgJDBC-only options: accepted with a warning, not used
PGJDBC_ONLY = frozenset(
    {
        "autosave",
        "prepareThreshold",
        "preparedStatementCacheQueries",
        "preparedStatementCacheSizeMiB",
        "defaultRowFetchSize",
        "loggerLevel",
        "loggerFile",
        "socketTimeout",
        "loginTimeout",
        "cancelSignalTimeout",
        "sslhostnameverifier",
        "sslpasswordcallback",
        "ssl",
        "stringtype",
        "readOnly",
        "readOnlyMode",
        "assumeMinServerVersion",
        "currentSchema",
        "tcpNoDelay",
        "reWriteBatchedInserts",
        "binaryTransfer",
        "unknownLength",
        "logUnclosedConnections",
        "hostRecheckSeconds",
        "loadBalanceHosts",
        "targetServerType",
        "escapeSyntaxCallMode",
        "cleanupSavepoints",
        "receiveBufferSize",
        "sendBufferSize",
        "gssEncMode",
        "jaasLogin",
        "sspiServiceClass",
        "useSpnego",
        "replication",
        "protocolVersion",
        "logServerErrorDetail",
    }
)

_SLOT_RE = re.compile(r"[a-z0-9_]{1,63}")


def _slot_name_valid(value: Any) -> str | None:
    if _SLOT_RE.fullmatch(value):
        return None
    return "a replication slot name may contain only lower-case letters, digits and underscores, at most 63"


def _replica_identity_valid(value: Any) -> str | None:
    try:
        parse_autoset(value)
    except ValueError as exc:
        return str(exc)
    return None


def _stream_params_valid(value: Any) -> str | None:
    for item in value.split(";"):
        s = item.strip()
        if not s:
            continue
        key, sep, _ = s.partition("=")
        if not sep or not key.strip():
            return f"item '{s}' is not key=value (items are separated by ';')"
    return None


def parse_stream_params(value: str | None) -> dict[str, str]:
    """``slot.stream.params`` -> {key: value}."""
    out: dict[str, str] = {}
    for item in (value or "").split(";"):
        if item.strip():
            k, _, v = item.partition("=")
            out[k.strip()] = v.strip()
    return out


def _is_libpq(key: str) -> bool:
    suffix = key[len("database.") :]
    return suffix in LIBPQ_PARAMETERS or suffix in PGJDBC_TO_LIBPQ


def _is_pgjdbc_only(key: str) -> bool:
    return key[len("database.") :] in PGJDBC_ONLY


def libpq_options(cfg: Configuration) -> dict[str, str]:
    """libpq parameters passed through as ``database.<parameter>`` (pgJDBC aliases translated)."""
    out: dict[str, str] = {}
    for key in cfg.dynamic_keys():
        if key.startswith("database.") and _is_libpq(key):
            suffix = key[len("database.") :]
            out[PGJDBC_TO_LIBPQ.get(suffix, suffix)] = str(cfg.get(key))
    return out


def lsn_flush_mode(cfg: Configuration) -> str:
    """Effective LSN flush mode: lsn.flush.mode if set, else flush.lsn.source (true=connector, false=manual)."""
    mode = cfg.get("lsn.flush.mode")
    if mode:
        return str(mode)
    return "connector" if cfg.get("flush.lsn.source") else "manual"


def _check_flush_modes(cfg: Configuration, report: Report) -> None:
    if cfg.is_set("lsn.flush.mode") and cfg.is_set("flush.lsn.source"):
        report.warn("'flush.lsn.source' is ignored because 'lsn.flush.mode' is set")


_PG_ONLY = FieldSet(
    # --- connection
    Field(
        "database.port",
        T.INT,
        5432,
        group="connection",
        validator=in_range(1, 65535),
        doc="Port of the database server.",
    ),
    Field(
        "database.dbname",
        T.STRING,
        required=True,
        group="connection",
        doc="Name of the database to stream changes from.",
    ),
    Field(
        "database.sslmode",
        T.ENUM,
        "prefer",
        allowed=("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
        group="connection",
        doc="Encryption of the connection, as libpq's sslmode: disable, allow, prefer, require, "
        "verify-ca (also verify the server certificate) or verify-full (also verify the host name).",
    ),
    Field("database.sslcert", T.STRING, group="connection", doc="Path of the client SSL certificate."),
    Field("database.sslkey", T.STRING, group="connection", doc="Path of the client SSL private key."),
    Field(
        "database.sslpassword",
        T.PASSWORD,
        group="connection",
        doc="Password of the client private key in database.sslkey.",
    ),
    Field(
        "database.sslrootcert",
        T.STRING,
        group="connection",
        doc="Path of the root certificate(s) used to verify the server.",
    ),
    Field(
        "database.tcpKeepAlive",
        T.BOOLEAN,
        True,
        group="connection",
        doc="Enable TCP keep-alive probes on database connections (libpq keepalives=1; false sets 0). "
        "Tune them with database.keepalives_idle, database.keepalives_interval and database.keepalives_count.",
    ),
    Field(
        "database.sslfactory",
        T.CLASS,
        group="connection",
        ignored_reason="pgJDBC socket factory class; use database.sslmode and the certificate settings",
    ),
    # --- replication
    Field(
        "plugin.name",
        T.ENUM,
        "pgoutput",
        allowed=("pgoutput",),
        unsupported={"decoderbufs": DECODERBUFS_ERROR},
        group="replication",
        doc="Logical decoding output plug-in. Headwater reads pgoutput only (Debezium's default, "
        "decoderbufs, is not supported).",
    ),
    Field(
        "slot.name",
        T.STRING,
        "debezium",
        group="replication",
        validator=_slot_name_valid,
        doc="Name of the logical replication slot: lower-case letters, digits and underscores, at most "
        "63 characters. Use one slot per connector.",
    ),
    Field(
        "slot.drop.on.stop",
        T.BOOLEAN,
        False,
        group="replication",
        doc="Drop the replication slot on a graceful stop. For tests and development only.",
    ),
    Field(
        "publication.name",
        T.STRING,
        "dbz_publication",
        group="replication",
        validator=non_empty,
        doc="Publication streamed through pgoutput; created at start-up if missing, per publication.autocreate.mode.",
    ),
    Field(
        "publication.autocreate.mode",
        T.ENUM,
        "all_tables",
        allowed=("all_tables", "disabled", "filtered", "no_tables"),
        group="replication",
        doc="all_tables: create the publication FOR ALL TABLES if missing; disabled: never create it "
        "(fail if missing); filtered: create or update it for the tables captured by the filters; "
        "no_tables: create it without tables (Debezium 3.x).",
    ),
    Field(
        "publish.via.partition.root",
        T.BOOLEAN,
        False,
        group="replication",
        doc="Create the publication with publish_via_partition_root, so changes to partitions are "
        "published as the partitioned root table (Debezium 3.x).",
    ),
    Field(
        "replica.identity.autoset.values",
        T.STRING,
        group="replication",
        validator=_replica_identity_valid,
        doc="Replica identity set when streaming starts (after the snapshot, each time), as Debezium: "
        "comma-separated <schema>.<table regex>:<DEFAULT|FULL|NOTHING|INDEX index_name> entries, e.g. "
        "schema1.*:FULL,schema2.table2:NOTHING,schema2.table3:INDEX idx_name (identity in upper case). Only "
        "captured tables; a table matched by two entries is left alone; ALTER TABLE ... REPLICA IDENTITY "
        "needs the table's owner, and a failure is logged as an error for that table without stopping.",
    ),
    Field(
        "slot.stream.params",
        T.STRING,
        group="replication",
        validator=_stream_params_valid,
        doc="';'-separated key=value options passed to pgoutput in START_REPLICATION (e.g. origin=none on "
        "PostgreSQL 16). proto_version, publication_names and messages are set by the connector and override "
        "these, as in Debezium; an option pgoutput does not know stops the start with the server's error.",
    ),
    Field(
        "slot.max.retries",
        T.INT,
        6,
        group="replication",
        validator=non_negative,
        doc="How often to check again, slot.retry.delay.ms apart, while the replication slot is in use by "
        "another connection, before stopping with an error naming that connection's process.",
    ),
    Field(
        "slot.retry.delay.ms",
        T.LONG,
        10000,
        group="replication",
        validator=non_negative,
        doc="Delay between checks while the replication slot is in use (see slot.max.retries).",
    ),
    Field(
        "status.update.interval.ms",
        T.INT,
        10000,
        group="replication",
        validator=positive_int,
        doc="How often status updates are sent to the server on the replication connection; also "
        "the dead-connection detection interval.",
    ),
    Field(
        "xmin.fetch.interval.ms",
        T.LONG,
        0,
        group="replication",
        validator=non_negative,
        doc="How often the slot's xmin is read into source.xmin (0 = never).",
    ),
    Field(
        "streaming.in.progress.transactions",
        T.ENUM,
        "auto",
        allowed=("auto", "on", "off"),
        group="replication",
        doc="Headwater only: have the server send a transaction larger than its "
        "logical_decoding_work_mem while it is in progress (pgoutput protocol 2, streaming 'on', "
        "PostgreSQL 14+) instead of spilling it to disk on the server; Headwater spools it locally "
        "(streaming.spool.directory, streaming.spool.memory.bytes) and emits its events at commit, "
        "the same events as without streaming. auto: on with PostgreSQL 14+, off otherwise; on: "
        "fail on older servers; off: protocol 1, as Debezium.",
    ),
    Field(
        "streaming.spool.directory",
        T.STRING,
        group="replication",
        doc="Headwater only: directory for the spool files of streamed in-progress transactions "
        "(a subdirectory per slot is created there, emptied at start and removed at stop). Default: "
        "the system temporary directory. Needs free space for the largest open transactions.",
    ),
    Field(
        "streaming.spool.memory.bytes",
        T.LONG,
        16 * 1024 * 1024,
        group="replication",
        validator=non_negative,
        doc="Headwater only: memory the open streamed transactions may hold together before their "
        "messages are written to spool files.",
    ),
    Field(
        "flush.lsn.source",
        T.BOOLEAN,
        True,
        group="replication",
        doc="Acknowledge processed positions to the replication slot. With false you must do it, or "
        "the server keeps all WAL.",
    ),
    Field(
        "lsn.flush.mode",
        T.ENUM,
        None,
        allowed=("connector", "manual", "connector_and_driver"),
        group="replication",
        default_doc="connector (manual when flush.lsn.source=false)",
        doc="Debezium 3.x replacement of flush.lsn.source: connector (acknowledge after commit), manual "
        "(never acknowledge) or connector_and_driver (also acknowledge keepalive positions when idle).",
    ),
    # --- streaming / filters
    Field(
        "schema.refresh.mode",
        T.ENUM,
        "columns_diff",
        allowed=("columns_diff", "columns_diff_exclude_unchanged_toast"),
        group="streaming",
        doc="When the in-memory table schema is refreshed: columns_diff (on any difference) or "
        "columns_diff_exclude_unchanged_toast (unless unchanged TOAST columns explain it). No effect in "
        "Headwater (a warning at start when set): it refreshes a table's schema from pgoutput's Relation "
        "messages, which PostgreSQL sends before the first change after any schema change, never from a "
        "difference between a row and the cached columns; an unchanged TOAST value never triggers a "
        "refresh, as with columns_diff_exclude_unchanged_toast.",
        ignored_reason="Headwater refreshes a table's schema from pgoutput's Relation messages, never from a "
        "difference between a row's columns and the cached ones, so both modes behave alike",
    ),
    Field(
        "message.prefix.include.list",
        T.LIST,
        None,
        group="filters",
        validator=regex_list_valid,
        default_doc="all prefixes",
        doc="Anchored, case-insensitive regular expressions of logical decoding message prefixes to capture "
        "(transactional and not); mutually exclusive with message.prefix.exclude.list.",
    ),
    Field(
        "message.prefix.exclude.list",
        T.LIST,
        None,
        group="filters",
        validator=regex_list_valid,
        doc="Anchored, case-insensitive regular expressions of logical decoding message prefixes to drop "
        "('.*' drops all).",
    ),
    # --- data types
    Field(
        "time.precision.mode",
        T.ENUM,
        "adaptive",
        allowed=("adaptive", "adaptive_time_microseconds", "connect"),
        group="events",
        doc="How temporal values are emitted: adaptive, adaptive_time_microseconds or connect.",
    ),
    Field(
        "hstore.handling.mode",
        T.ENUM,
        "json",
        allowed=("json", "map"),
        group="events",
        doc="How HSTORE values are emitted: json (a JSON string) or map.",
    ),
    Field(
        "interval.handling.mode",
        T.ENUM,
        "numeric",
        allowed=("numeric", "string"),
        group="events",
        doc="How INTERVAL values are emitted: numeric (approximate microseconds) or string (ISO 8601).",
    ),
    Field(
        "include.unknown.datatypes",
        T.BOOLEAN,
        False,
        group="events",
        doc="Include columns of unknown types as opaque binary values (per binary.handling.mode) "
        "instead of leaving them out with a warning.",
    ),
    Field(
        "money.fraction.digits",
        T.INT,
        2,
        group="events",
        validator=in_range(0, 32767),
        doc="Scale of MONEY values when decimal.handling.mode=precise.",
    ),
    # --- snapshot
    Field(
        "snapshot.mode",
        T.ENUM,
        "initial",
        allowed=("always", "initial", "initial_only", "no_data", "when_needed", "configuration_based", "custom"),
        aliases={"never": "no_data"},
        group="snapshot",
        doc="When to snapshot at start-up: always, initial (only without stored offsets), initial_only "
        "(then stop), no_data (never), when_needed (also when the stored position is gone), "
        "configuration_based or custom.",
    ),
    Field(
        "snapshot.isolation.mode",
        T.ENUM,
        "serializable",
        allowed=("serializable", "repeatable_read", "read_committed", "read_uncommitted"),
        group="snapshot",
        doc="Debezium 3.x: transaction isolation of a snapshot taken while the slot already exists: "
        "serializable (SERIALIZABLE READ ONLY DEFERRABLE), repeatable_read, read_committed or "
        "read_uncommitted. A snapshot taken with a new slot reads the slot's exported snapshot in "
        "REPEATABLE READ, as Debezium does, whatever this says. The Spark source always reads one exported "
        "snapshot in REPEATABLE READ (a warning at start when this is set).",
    ),
    Field(
        "snapshot.locking.mode",
        T.ENUM,
        "none",
        allowed=("shared", "none", "custom"),
        group="snapshot",
        doc="Table locks during the snapshot: shared (LOCK TABLE ... IN ACCESS SHARE MODE on the "
        "snapshotted tables, waiting at most snapshot.lock.timeout.ms, held until the snapshot ends; in "
        "Spark, while the snapshot is planned on the driver) or "
        "none (no locks; do not change schemas during the snapshot). custom (a Java SnapshotLock) is refused.",
    ),
    Field(
        "snapshot.locking.mode.custom.name",
        T.STRING,
        group="snapshot",
        doc="Name of the custom snapshot lock plug-in when snapshot.locking.mode=custom.",
    ),
    # --- incremental snapshots (headwater.connectors.postgres.incremental)
    Field(
        "read.only",
        T.BOOLEAN,
        False,
        group="connection",
        doc="Run incremental snapshots without writing to the database (PostgreSQL 13+): a chunk's window "
        "is marked by pg_current_snapshot() taken before and after it is read, instead of rows written to "
        "the signal table; signals then come through the file or kafka channel. Turn heartbeats on "
        "(heartbeat.interval.ms) so that a quiet database does not hold a chunk back.",
    ),
    # --- not applicable to PostgreSQL
    Field(
        "include.schema.changes",
        T.BOOLEAN,
        group="kafka-connect",
        ignored_reason="the PostgreSQL connector emits no schema change events",
    ),
    Field(
        "schema.history.internal",
        T.CLASS,
        group="kafka-connect",
        ignored_reason="the PostgreSQL connector keeps no schema history",
    ),
    dynamic=(
        DynamicField(
            "schema.history.internal.",
            "schema.history.internal.<setting>",
            group="kafka-connect",
            ignored_reason="the PostgreSQL connector keeps no schema history",
        ),
        DynamicField(
            "database.",
            "database.<libpq parameter>",
            matches=_is_libpq,
            group="connection",
            doc="libpq connection parameters passed to the driver, e.g. "
            "database.application_name, database.connect_timeout, database.options.",
        ),
        DynamicField(
            "database.",
            "database.<pgJDBC option>",
            matches=_is_pgjdbc_only,
            group="kafka-connect",
            ignored_reason="pgJDBC-only driver option without a libpq equivalent",
        ),
    ),
    checks=(
        mutually_exclusive("message.prefix.include.list", "message.prefix.exclude.list"),
        required_when("snapshot.mode", "custom", "snapshot.mode.custom.name"),
        required_when("snapshot.locking.mode", "custom", "snapshot.locking.mode.custom.name"),
        _check_flush_modes,
    ),
)

POSTGRES_FIELDS: FieldSet = RELATIONAL_FIELDS.merge(_PG_ONLY)

register_connector(CONNECTOR_KEY, CONNECTOR_CLASS_ALIASES, POSTGRES_FIELDS,
                   factory="headwater.connectors.postgres.connector:PostgresConnector")
