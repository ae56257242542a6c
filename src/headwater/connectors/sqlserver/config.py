"""SQL Server connector properties (spec/sqlserver.md §5, Debezium 3.6 names), registered as "sqlserver".

:data:`SQLSERVER_FIELDS` = the relational fields shared by the database connectors
(:data:`headwater.config.relational.RELATIONAL_FIELDS`, the SQL Server meaning of a few of them
redefined here) plus the SQL Server-only ones below. The engine-level fields
(:data:`headwater.config.common.COMMON_FIELDS`) are merged in by :func:`headwater.config.load`;
the fields below marked ``replaces=True`` take the place of a common field whose default or
meaning differs for SQL Server (``snapshot.fetch.size`` is 2000 and is used, ``tasks.max`` ...).

Decisions:

- Debezium 3.6 defaults where they differ from the 2.1 documentation: ``max.iteration.transactions``
  500, ``query.fetch.size`` 10000, ``data.query.mode`` direct; ``snapshot.mode`` takes 3.6's names and
  ``schema_only`` as a deprecated alias of ``no_data`` (refused by 3.6, accepted by 2.x).
- ``custom`` snapshot and locking modes load Java code: refused at load time.
- ``schema.history.internal`` defaults to the file history (Debezium: Kafka); the Kafka history is
  refused (see :data:`KAFKA_HISTORY_ERROR`).
- The driver is ODBC (mssql-python), not mssql-jdbc: ``driver.<option>`` and ``database.<option>``
  pass-through accept the mssql-jdbc options that have an ODBC equivalent (and the ODBC keywords
  themselves), warn about mssql-jdbc-only ones and refuse those that would override a connector
  property (:func:`driver_options` builds the ODBC keywords).
- Incremental snapshots: ``incremental.snapshot.option.recompile`` is honoured;
  ``incremental.snapshot.allow.schema.changes=true`` is refused (see its validator).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.config.fields import (
    DynamicField,
    Field,
    FieldSet,
    Report,
    at_least,
    in_range,
    non_negative,
    positive_int,
    regex_list_valid,
)
from headwater.config.fields import FieldType as T
from headwater.config.registry import register_connector
from headwater.config.relational import RELATIONAL_FIELDS

if TYPE_CHECKING:
    from headwater.config.configuration import Configuration

CONNECTOR_KEY = "sqlserver"
CONNECTOR_CLASS = "io.debezium.connector.sqlserver.SqlServerConnector"
CONNECTOR_CLASS_ALIASES = {CONNECTOR_CLASS: CONNECTOR_KEY, "sqlserver": CONNECTOR_KEY}

FILE_HISTORY = "io.debezium.storage.file.history.FileSchemaHistory"
MEMORY_HISTORY = "io.debezium.relational.history.MemorySchemaHistory"
KAFKA_HISTORY = "io.debezium.storage.kafka.history.KafkaSchemaHistory"
KAFKA_HISTORY_ERROR = (
    f"schema.history.internal={KAFKA_HISTORY} is not supported: Headwater keeps the schema history in a "
    f"file ({FILE_HISTORY}, the default, with schema.history.internal.file.filename) or in memory "
    f"({MEMORY_HISTORY}, for tests: a restart cannot recover it)"
)
CUSTOM_SNAPSHOT_ERROR = (
    "snapshot.mode=custom is not supported: it loads a Java Snapshotter implementation "
    "(snapshot.mode.custom.name), which Headwater cannot run; use one of always, initial, initial_only, "
    "no_data, recovery, when_needed or configuration_based"
)
WHEN_NEEDED_NO_DATA_ERROR = (
    "snapshot.mode=when_needed_no_data (new in Debezium 3.6) is not supported yet; use when_needed (which "
    "also snapshots the data when the stored position is gone) or no_data"
)
CUSTOM_LOCK_ERROR = (
    "snapshot.locking.mode=custom is not supported: it loads a Java SnapshotLock implementation "
    "(snapshot.locking.mode.custom.name), which Headwater cannot run; use exclusive or none"
)
_OTHER_TIME_MODES = (
    "is not supported for SQL Server: Headwater implements the modes Debezium documents for it, adaptive "
    "and connect"
)



def _schema_changes_refused(value: Any) -> str | None:
    if value:
        return ("incremental.snapshot.allow.schema.changes=true is not supported by Headwater's SQL Server connector: "
                "an incremental snapshot reads each chunk with the table's structure as the stream knows it (its "
                "newest capture instance's columns) and does not re-verify it between windows; leave it false")
    return None

_KAFKA_HISTORY_ONLY = f"used only by the Kafka schema history ({KAFKA_HISTORY}), which Headwater does not support"

# -------------------------------------------------------------------------------------------
# driver pass-through: mssql-jdbc (Debezium's driver) option names -> ODBC keywords (mssql-python)

# lower-case mssql-jdbc name (or ODBC keyword) -> (ODBC keyword, value kind)
# kinds: "bool" (true/false -> yes/no), "encrypt" (true/false/strict), "int", "text"
ODBC_EQUIVALENTS: dict[str, tuple[str, str]] = {
    "encrypt": ("Encrypt", "encrypt"),
    "trustservercertificate": ("TrustServerCertificate", "bool"),
    "hostnameincertificate": ("HostnameInCertificate", "text"),
    "servercertificate": ("ServerCertificate", "text"),
    "serverspn": ("ServerSPN", "text"),
    "multisubnetfailover": ("MultiSubnetFailover", "bool"),
    "applicationintent": ("ApplicationIntent", "intent"),
    "connectretrycount": ("ConnectRetryCount", "int"),
    "connectretryinterval": ("ConnectRetryInterval", "int"),
    "packetsize": ("PacketSize", "int"),
    "authentication": ("Authentication", "text"),
    "integratedsecurity": ("Trusted_Connection", "bool"),
    "trusted_connection": ("Trusted_Connection", "bool"),
    "ipaddresspreference": ("IpAddressPreference", "text"),
    "keepalive": ("KeepAlive", "int"),
    "keepaliveinterval": ("KeepAliveInterval", "int"),
}
# the login timeout is a connect() argument of mssql-python, not a connection-string keyword
LOGIN_TIMEOUT = "logintimeout"
# options that would override a connector property: refused, naming the property to use
CONNECTOR_OWNED: dict[str, str] = {
    "user": "database.user",
    "uid": "database.user",
    "password": "database.password",
    "pwd": "database.password",
    "servername": "database.hostname",
    "server": "database.hostname",
    "portnumber": "database.port",
    "port": "database.port",
    "instancename": "database.instance",
    "databasename": "database.names",
    "database": "database.names",
    "driver": "nothing (mssql-python chooses its ODBC driver)",
    "app": "nothing (mssql-python sets the application name)",
    "applicationname": "nothing (mssql-python sets the application name)",
}
# mssql-jdbc options without an ODBC equivalent mssql-python accepts: accepted with a warning
JDBC_ONLY = frozenset(
    s.lower()
    for s in (
        "responseBuffering", "selectMethod", "sendStringParametersAsUnicode", "sendTimeAsDatetime",
        "sendTemporalDataTypesAsStringForBulkCopy", "fetchSize", "socketTimeout", "queryTimeout",
        "cancelQueryTimeout", "lockTimeout", "trustStore", "trustStorePassword", "trustStoreType",
        "trustManagerClass", "trustManagerConstructorArg", "keyStoreAuthentication", "keyStoreLocation",
        "keyStoreSecret", "keyStorePrincipalId", "keyStoreProvider", "clientCertificate", "clientKey",
        "clientKeyPassword", "columnEncryptionSetting", "enclaveAttestationUrl", "enclaveAttestationProtocol",
        "disableStatementPooling", "statementPoolingCacheSize", "enablePrepareOnFirstPreparedStatementCall",
        "serverPreparedStatementDiscardThreshold", "prepareMethod", "useBulkCopyForBatchInsert", "xopenStates",
        "lastUpdateCount", "workstationID", "jaasConfigurationName", "realm", "gsscredential",
        "useDefaultGSSCredential", "useFmtOnly", "maxResultBuffer", "calcBigDecimalPrecision", "sslProtocol",
        "transparentNetworkIPResolution", "msiClientId", "aadSecurePrincipalId", "aadSecurePrincipalSecret",
        "accessToken", "accessTokenCallbackClass", "domain", "failoverPartner", "delayLoadingLobs",
        "replication", "datetimeParameterType", "quotedIdentifier", "concatNullYieldsNull",
        "useFlexibleCallableStatements",
        "serverNameAsACE", "authenticationScheme", "keyVaultProviderClientId", "keyVaultProviderClientKey",
    )
)
_JDBC_ONLY_REASON = (
    "mssql-jdbc option without an equivalent in the ODBC driver Headwater uses (mssql-python); "
    "see docs/sqlserver.md for the options that are passed on"
)
# database.<option> keys that are connector properties or Debezium's own (never driver options)
_PASS_THROUGH_PREFIXES = ("driver.", "database.")


def _option(key: str) -> str:
    """``driver.encrypt`` / ``database.encrypt`` -> ``encrypt`` (lower case: driver options ignore case)."""
    for prefix in _PASS_THROUGH_PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):].lower()
    return key.lower()


def _is_passed_on(key: str) -> bool:
    option = _option(key)
    return option in ODBC_EQUIVALENTS or option == LOGIN_TIMEOUT


def _is_jdbc_only(key: str) -> bool:
    return _option(key) in JDBC_ONLY


def _is_connector_owned(key: str) -> bool:
    return key.startswith("driver.") and _option(key) in CONNECTOR_OWNED


def _owned_key_invalid(key: str) -> str | None:
    return f"the connector sets this option itself; use {CONNECTOR_OWNED[_option(key)]}"


_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def _odbc_value(kind: str, text: str) -> str:
    """A pass-through value as the ODBC driver takes it; ValueError with the reason when invalid."""
    value = text.strip()
    low = value.lower()
    if kind == "bool":
        if low in _TRUE:
            return "yes"
        if low in _FALSE:
            return "no"
        raise ValueError("expected true or false")
    if kind == "encrypt":
        if low == "strict":
            return "strict"
        if low in _TRUE or low == "mandatory":
            return "yes"
        if low in _FALSE or low == "optional":
            return "no"
        raise ValueError("expected true, false or strict")
    if kind == "intent":
        if low == "readonly":
            return "ReadOnly"
        if low == "readwrite":
            return "ReadWrite"
        raise ValueError("expected ReadWrite or ReadOnly")
    if kind == "int":
        if not value.isdigit():
            raise ValueError("expected a non-negative integer")
        return str(int(value))
    if not value:
        raise ValueError("must not be empty")
    return value


def _passed_on_keys(cfg: Configuration) -> list[str]:
    """Set ``database.<option>`` keys first, then ``driver.<option>`` (Debezium 3.x: driver.* wins)."""
    keys = [k for k in cfg.dynamic_keys() if k.startswith(_PASS_THROUGH_PREFIXES) and _is_passed_on(k)]
    return sorted(keys, key=lambda k: (k.startswith("driver."), k))


def application_intent(cfg: Configuration) -> str:
    """``ReadOnly`` or ``ReadWrite``: driver.applicationIntent wins over database.applicationIntent
    (Debezium 3.6); the explicit field otherwise."""
    intent = "ReadOnly" if cfg.get("database.applicationIntent") == "readonly" else "ReadWrite"
    for key in _passed_on_keys(cfg):  # in precedence order: the last one wins
        if _option(key) == "applicationintent":
            intent = _odbc_value("intent", str(cfg.get(key)))
    return intent


def snapshot_isolation_mode(cfg: Configuration) -> str:
    """The isolation the snapshot uses: ``snapshot`` on a read-only (Always On replica) connection,
    whatever snapshot.isolation.mode says (Debezium, spec MS-29); the property otherwise."""
    if application_intent(cfg) == "ReadOnly":
        return "snapshot"
    return str(cfg.get("snapshot.isolation.mode"))


def driver_options(cfg: Configuration) -> dict[str, str]:
    """The ODBC connection-string keywords (mssql-python) from database.encrypt,
    database.trustServerCertificate, database.applicationIntent and the ``database.<option>`` /
    ``driver.<option>`` pass-through (driver.* wins). Without server, credentials and database,
    which the connection builds from database.hostname/instance/port/user/password/names."""
    out: dict[str, str] = {
        "Encrypt": _odbc_value("encrypt", str(cfg.get("database.encrypt"))),
        "TrustServerCertificate": "yes" if cfg.get("database.trustServerCertificate") else "no",
        "ApplicationIntent": application_intent(cfg),
    }
    for key in _passed_on_keys(cfg):
        option = _option(key)
        if option == LOGIN_TIMEOUT:
            continue
        keyword, kind = ODBC_EQUIVALENTS[option]
        out[keyword] = _odbc_value(kind, str(cfg.get(key)))
    return out


def login_timeout(cfg: Configuration) -> int | None:
    """Seconds to wait for a login (driver.loginTimeout / database.loginTimeout), None when unset."""
    seconds: int | None = None
    for key in _passed_on_keys(cfg):
        if _option(key) == LOGIN_TIMEOUT:
            seconds = int(_odbc_value("int", str(cfg.get(key))))
    return seconds


def schema_history(cfg: Configuration, offsets_in_memory: bool) -> tuple[str, str | None]:
    """(``"file"``, path or None for the runner's default) or (``"memory"``, None).

    Without schema.history.internal the history follows the offsets: in memory when the offsets are
    (a file history would outlive offsets that a restart no longer has), else in a file."""
    kind = cfg.get("schema.history.internal")
    if kind == MEMORY_HISTORY or (not cfg.is_set("schema.history.internal") and offsets_in_memory):
        return "memory", None
    return "file", cfg.get("schema.history.internal.file.filename")


# -------------------------------------------------------------------------------------------
# validators and cross-field checks


def _database_names_valid(value: Any) -> str | None:
    if not value:
        return "Cannot be empty"
    seen: dict[str, str] = {}
    for name in value:
        if len(name) > 128:
            return f"'{name}' is longer than 128 characters, the limit of a SQL Server database name"
        if name.lower() in seen:  # SQL Server's default collation compares database names without case
            return f"'{name}' is listed twice (as '{seen[name.lower()]}'); list each database once"
        seen[name.lower()] = name
    return None


def _history_class_valid(value: Any) -> str | None:
    if value in (FILE_HISTORY, MEMORY_HISTORY):
        return None
    if value == KAFKA_HISTORY:
        return KAFKA_HISTORY_ERROR.split(": ", 1)[1]
    return f"supported schema histories are {FILE_HISTORY} and {MEMORY_HISTORY}"


def _check_history(cfg: Configuration, report: Report) -> None:
    if not report.valid("schema.history.internal"):
        return
    if cfg.get("schema.history.internal") == MEMORY_HISTORY and cfg.is_set("schema.history.internal.file.filename"):
        report.warn(
            "'schema.history.internal.file.filename' has no effect: schema.history.internal is the memory history"
        )


def _check_pass_through(cfg: Configuration, report: Report) -> None:
    """Values of the options passed to the driver; the same option given twice."""
    given: dict[str, tuple[str, str]] = {}
    for key in _passed_on_keys(cfg):
        option = _option(key)
        kind = "int" if option == LOGIN_TIMEOUT else ODBC_EQUIVALENTS[option][1]
        text = str(cfg.get(key))
        try:
            value = _odbc_value(kind, text)
        except ValueError as exc:
            report.error(f"invalid value '{text}' for property '{key}': {exc}")
            continue
        keyword = ODBC_EQUIVALENTS[option][0] if option in ODBC_EQUIVALENTS else LOGIN_TIMEOUT
        if keyword in given and given[keyword][1] != value:
            report.warn(f"'{given[keyword][0]}' is ignored: '{key}' sets the same driver option")
        given[keyword] = (key, value)
    for field_name, keyword in (("database.encrypt", "Encrypt"),
                                ("database.trustServerCertificate", "TrustServerCertificate"),
                                ("database.applicationIntent", "ApplicationIntent")):
        if cfg.is_set(field_name) and keyword in given and given[keyword][0].startswith("driver."):
            report.warn(f"'{field_name}' is ignored: '{given[keyword][0]}' is set")


def _check_read_only(cfg: Configuration, report: Report) -> None:
    try:
        intent = application_intent(cfg)
    except ValueError:
        return  # reported by _check_pass_through
    mode = cfg.get("snapshot.isolation.mode")
    if intent == "ReadOnly" and cfg.is_set("snapshot.isolation.mode") and mode != "snapshot":
        report.warn(
            f"snapshot.isolation.mode={mode} is replaced by snapshot: a read-only connection "
            "(applicationIntent=ReadOnly, an Always On replica) supports only SNAPSHOT isolation, as in Debezium"
        )


def _check_custom_snapshotter_name(cfg: Configuration, report: Report) -> None:
    if cfg.is_set("snapshot.mode.custom.name"):
        report.warn("'snapshot.mode.custom.name' has no effect: snapshot.mode=custom is not supported")


# -------------------------------------------------------------------------------------------
# relational fields with a SQL Server meaning (same names; replace the shared definitions)

_RELATIONAL_REDEFINED = (
    Field(
        "database.user",
        T.STRING,
        group="connection",
        doc="Database user (a SQL Server login) to connect as. May be omitted when the driver authenticates "
        "otherwise (driver.authentication, driver.integratedSecurity for Kerberos), as in Debezium.",
    ),
    Field(
        "database.query.timeout.ms",
        T.INT,
        600000,
        group="connection",
        validator=non_negative,
        doc="How long a statement may run before it is cancelled (0 = no limit), on every connection; "
        "the driver counts whole seconds (rounded up). For a snapshot table read it limits the wait for "
        "the first rows, not the whole read.",
    ),
    Field(
        "database.initial.statements",
        T.STRING,
        group="connection",
        doc="T-SQL statements separated by ';' (write ';;' for a literal semicolon), run on every new "
        "connection; for session settings only (SET ...).",
    ),
    Field(
        "skip.messages.without.change",
        T.BOOLEAN,
        False,
        group="filters",
        doc="Skip an update whose before and after values (the columns column.include.list / "
        "column.exclude.list capture) are equal. The change tables always hold the before image, so every "
        "update can be compared.",
    ),
    Field(
        "unavailable.value.placeholder",
        T.STRING,
        "__debezium_unavailable_value",
        group="events",
        validator=RELATIONAL_FIELDS["unavailable.value.placeholder"].validator,
        doc="Value of a varchar(max), nvarchar(max) or varbinary(max) column that an update did not change "
        "(the change table holds NULL for it; __$update_mask tells it apart from a real NULL), as Debezium "
        "3.6; a 'hex:' prefix means the rest is hex-encoded bytes.",
    ),
    Field(
        "snapshot.mode.configuration.based.snapshot.schema",
        T.BOOLEAN,
        False,
        group="snapshot",
        doc="With snapshot.mode=configuration_based: snapshot the table schemas (into the schema history "
        "and, with include.schema.changes, the schema change topic).",
    ),
    Field(
        "snapshot.mode.configuration.based.snapshot.on.schema.error",
        T.BOOLEAN,
        False,
        group="snapshot",
        doc="With snapshot.mode=configuration_based: snapshot the schemas when the schema history is "
        "missing although offsets exist, instead of stopping with an error.",
    ),
    Field(
        "snapshot.include.collection.list",
        T.LIST,
        None,
        group="snapshot",
        validator=regex_list_valid,
        default_doc="all tables captured by table.include.list",
        doc="Anchored regular expressions over databaseName.schemaName.tableName of the tables included in "
        "a snapshot (they must be captured by the table filters); no effect with snapshot.mode=no_data or "
        "on incremental snapshots.",
    ),
    Field(
        "snapshot.lock.timeout.ms",
        T.LONG,
        10000,
        group="snapshot",
        validator=at_least(-1),
        doc="Maximum time to wait for the table locks of a snapshot (SET LOCK_TIMEOUT; snapshot.isolation.mode "
        "repeatable_read or exclusive with snapshot.locking.mode=exclusive): the snapshot fails when they "
        "are not granted in time. 0 fails at once, -1 waits without limit.",
    ),
    Field(
        "query.fetch.size",
        T.INT,
        10000,
        group="streaming",
        validator=non_negative,
        doc="Rows fetched per round trip by the queries that read the change tables (0 = the driver's "
        "default). Debezium 3.6's default is 10000.",
    ),
)

# common (engine-level) fields with a SQL Server meaning: they replace the common definitions
_COMMON_REDEFINED = (
    Field(
        "tasks.max",
        T.INT,
        1,
        group="engine",
        validator=positive_int,
        replaces=True,
        doc="Maximum number of tasks. Debezium may start up to one task per database of database.names.",
        ignored_reason="one Headwater process captures every database of database.names, in one ordered "
        "stream (Debezium may start up to one task per database)",
    ),
    Field(
        "poll.interval.ms",
        T.LONG,
        500,
        group="streaming",
        validator=positive_int,
        replaces=True,
        doc="How long the streaming loop waits before it looks at the change tables again when no database "
        "had new changes; also the longest the queue waits for new events before a batch is processed "
        "(events already queued are handed on at once).",
    ),
    Field(
        "snapshot.delay.ms",
        T.LONG,
        0,
        group="snapshot",
        validator=non_negative,
        replaces=True,
        doc="Delay before a snapshot starts.",
    ),
    Field(
        "snapshot.fetch.size",
        T.INT,
        2000,
        group="snapshot",
        validator=positive_int,
        replaces=True,
        doc="Rows read per round trip from each table during a snapshot (Debezium's default for SQL Server: 2000).",
    ),
    Field(
        "snapshot.max.threads",
        T.INT,
        1,
        group="snapshot",
        validator=positive_int,
        replaces=True,
        doc="No effect (a warning at start when set): the standalone runner reads the tables one after "
        "another in one transaction, which is what makes snapshot and exclusive isolation consistent; the "
        "Spark source reads chunks in parallel (its snapshotParallelism option).",
        ignored_reason="the standalone runner reads the tables one after another in one transaction, which "
        "keeps the snapshot consistent; the Spark source reads them in parallel by its snapshotParallelism "
        "option",
    ),
)

_SQLSERVER_ONLY = FieldSet(
    *_COMMON_REDEFINED,
    # --- connection
    Field(
        "database.port",
        T.INT,
        1433,
        group="connection",
        validator=in_range(1, 65535),
        doc="Port of the SQL Server instance.",
    ),
    Field(
        "database.instance",
        T.STRING,
        group="connection",
        doc="Name of a SQL Server named instance: the server is addressed as <hostname>\\<instance> (the "
        "SQL Server Browser finds its port unless database.port is set).",
    ),
    Field(
        "database.names",
        T.LIST,
        required=True,
        group="connection",
        validator=_database_names_valid,
        doc="Comma-separated names of the databases to capture, each with CDC enabled. One connector "
        "captures all of them: topics, schema history and offsets carry the database name.",
    ),
    Field(
        "database.encrypt",
        T.ENUM,
        "true",
        allowed=("true", "false", "strict"),
        group="connection",
        doc="Encryption of the connection (the driver's encrypt option): true (TLS, the default of the "
        "drivers), false (no TLS unless the server requires it) or strict (TDS 8.0, TLS before the login).",
    ),
    Field(
        "database.trustServerCertificate",
        T.BOOLEAN,
        False,
        group="connection",
        doc="Accept the server's TLS certificate without verifying it (only for tests and development).",
    ),
    Field(
        "database.applicationIntent",
        T.ENUM,
        "readwrite",
        allowed=("readwrite", "readonly"),
        group="connection",
        doc="ReadWrite, or ReadOnly to read an Always On readable secondary (case-insensitive): the snapshot "
        "then uses SNAPSHOT isolation whatever snapshot.isolation.mode says, and streaming starts a new "
        "transaction in each iteration, as Debezium does. driver.applicationIntent wins when both are set.",
    ),
    Field(
        "database.ssl.truststore",
        T.STRING,
        group="connection",
        ignored_reason="a Java KeyStore of mssql-jdbc; the ODBC driver verifies the server certificate "
        "against the system's trusted certificates (add your CA there, or pin it with "
        "driver.serverCertificate)",
    ),
    Field(
        "database.ssl.truststore.password",
        T.PASSWORD,
        group="connection",
        ignored_reason="the password of a Java KeyStore of mssql-jdbc (see database.ssl.truststore)",
    ),
    Field(
        "database.sqlserver.agent.status.query",
        T.STRING,
        group="streaming",
        default_doc="SELECT CASE WHEN dss.[status]=4 THEN 1 ELSE 0 END AS isRunning FROM [#db].sys.dm_server_services "
        "dss WHERE dss.[servicename] LIKE N'SQL Server Agent (%';",
        doc="Query that answers 1 (or true) when the SQL Server Agent runs; [#db] stands for the database "
        "name. Asked when a database has no maximum LSN, to tell a stopped Agent (an error in the log) "
        "from a database without changes yet. The default needs VIEW SERVER STATE.",
    ),
    # --- snapshot
    Field(
        "snapshot.mode",
        T.ENUM,
        "initial",
        allowed=(
            "always",
            "initial",
            "initial_only",
            "no_data",
            "recovery",
            "when_needed",
            "configuration_based",
        ),
        aliases={"schema_only": "no_data"},
        unsupported={"custom": CUSTOM_SNAPSHOT_ERROR, "when_needed_no_data": WHEN_NEEDED_NO_DATA_ERROR},
        group="snapshot",
        doc="When to snapshot at start-up: always (at every start), initial (the schema and data when no "
        "offsets are stored), initial_only (then stop), no_data (the schema only), recovery (rebuild the "
        "schema history from the current table schemas, then stream from the stored offsets), when_needed "
        "(also when the stored position is no longer in the change tables) or configuration_based (the "
        "snapshot.mode.configuration.based.* properties). custom (a Java Snapshotter) and Debezium 3.6's "
        "when_needed_no_data are refused.",
    ),
    Field(
        "snapshot.isolation.mode",
        T.ENUM,
        "repeatable_read",
        allowed=("exclusive", "snapshot", "repeatable_read", "read_committed", "read_uncommitted"),
        group="snapshot",
        doc="Isolation and locking of the snapshot transaction: exclusive (REPEATABLE READ with the captured "
        "tables locked exclusively until the snapshot ends; consistent), snapshot (SNAPSHOT isolation, no "
        "locks; consistent; needs ALLOW_SNAPSHOT_ISOLATION ON), repeatable_read (exclusive locks only "
        "while the schemas are read; a row may appear twice), read_committed (no locks; a row may appear "
        "twice) or read_uncommitted (no guarantee).",
    ),
    Field(
        "snapshot.locking.mode",
        T.ENUM,
        "exclusive",
        allowed=("exclusive", "none"),
        unsupported={"custom": CUSTOM_LOCK_ERROR},
        group="snapshot",
        doc="With snapshot.isolation.mode repeatable_read or exclusive: exclusive (lock the captured tables "
        "with TABLOCKX while their schemas are read, or for the whole snapshot with exclusive isolation) or "
        "none (no table locks; only safe when no schema changes happen during the snapshot). custom is refused.",
    ),
    Field(
        "snapshot.locking.mode.custom.name",
        T.STRING,
        group="snapshot",
        ignored_reason="snapshot.locking.mode=custom (a Java SnapshotLock) is not supported",
    ),
    # --- streaming
    Field(
        "data.query.mode",
        T.ENUM,
        "direct",
        allowed=("direct", "function"),
        group="streaming",
        doc="How changes are read: direct (SELECT from the change tables cdc.<capture instance>_CT, Debezium "
        "3.6's default) or function (through cdc.fn_cdc_get_all_changes_<capture instance>).",
    ),
    Field(
        "max.iteration.transactions",
        T.INT,
        500,
        group="streaming",
        validator=non_negative,
        doc="Transactions read per database in one streaming iteration (bounds memory when many tables "
        "change): the iteration ends at the LSN of the n-th transaction; 0 reads up to the current maximum "
        "LSN. Debezium 3.6's default is 500.",
    ),
    Field(
        "streaming.fetch.size",
        T.INT,
        0,
        group="streaming",
        validator=non_negative,
        doc="Rows read from each capture instance per query while streaming; the rest of the iteration's "
        "range is read by further queries (0 = no limit, one query per capture instance and iteration).",
    ),
    Field(
        "table.ignore.builtin",
        T.BOOLEAN,
        True,
        group="filters",
        doc="Leave out the system tables (schemas cdc and sys, tables named systranschemas) whatever the "
        "table filters say.",
    ),
    # --- schema changes and history
    Field(
        "include.schema.changes",
        T.BOOLEAN,
        True,
        group="history",
        doc="Emit schema change events to the topic named <topic.prefix>, keyed by database name: a CREATE "
        "per table in the snapshot, and one when a table appears or a new capture instance changes its "
        "columns while streaming.",
    ),
    Field(
        "include.schema.comments",
        T.BOOLEAN,
        False,
        group="history",
        ignored_reason="SQL Server reports no column comments through the driver (Debezium's are always null)",
    ),
    Field(
        "schema.history.internal",
        T.CLASS,
        FILE_HISTORY,
        group="history",
        validator=_history_class_valid,
        doc=f"Where the schema history is kept: {FILE_HISTORY} (a file, Debezium's format) or "
        f"{MEMORY_HISTORY} (memory only: a restart cannot recover it). Debezium's default, the Kafka "
        "history, is refused. Headwater's default is the file history, or memory when the offsets are in "
        "memory and this is not set.",
    ),
    Field(
        "schema.history.internal.file.filename",
        T.STRING,
        group="history",
        default_doc="chosen by the runner, beside the offsets",
        doc="File of the file schema history (one JSON record per line, as Debezium's "
        "FileSchemaHistory writes it).",
    ),
    Field(
        "schema.history.internal.store.only.captured.tables.ddl",
        T.BOOLEAN,
        False,
        group="history",
        doc="Record only the captured tables in the schema history and the schema change events (false: "
        "every table of the databases, so a table added to table.include.list later has its schema).",
    ),
    Field(
        "schema.history.internal.store.only.captured.databases.ddl",
        T.BOOLEAN,
        False,
        group="history",
        doc="Record only the tables of the captured schemas (schema.include.list / schema.exclude.list) "
        "in the schema history and the schema change events.",
    ),
    Field(
        "schema.history.internal.skip.unparseable.ddl",
        T.BOOLEAN,
        False,
        group="history",
        doc="At recovery, skip a history record whose table changes cannot be applied (e.g. one that "
        "carries only a DDL statement), with a warning, instead of stopping with an error that names it; "
        "the tables it changed may then be wrong.",
    ),
    Field("schema.history.internal.kafka.topic", T.STRING, group="history", ignored_reason=_KAFKA_HISTORY_ONLY),
    Field(
        "schema.history.internal.kafka.bootstrap.servers",
        T.STRING,
        group="history",
        ignored_reason=_KAFKA_HISTORY_ONLY,
    ),
    Field(
        "schema.history.internal.kafka.recovery.poll.interval.ms",
        T.INT,
        100,
        group="history",
        ignored_reason=_KAFKA_HISTORY_ONLY,
    ),
    Field(
        "schema.history.internal.kafka.query.timeout.ms",
        T.LONG,
        3000,
        group="history",
        ignored_reason=_KAFKA_HISTORY_ONLY,
    ),
    Field(
        "schema.history.internal.kafka.create.timeout.ms",
        T.LONG,
        30000,
        group="history",
        ignored_reason=_KAFKA_HISTORY_ONLY,
    ),
    Field(
        "schema.history.internal.kafka.recovery.attempts",
        T.INT,
        100,
        group="history",
        ignored_reason=_KAFKA_HISTORY_ONLY,
    ),
    # --- data types
    Field(
        "time.precision.mode",
        T.ENUM,
        "adaptive",
        allowed=("adaptive", "connect"),
        unsupported={
            m: f"time.precision.mode={m} {_OTHER_TIME_MODES}"
            for m in ("adaptive_time_microseconds", "isostring", "microseconds", "nanoseconds")
        },
        group="events",
        doc="How temporal values are emitted: adaptive (milli-, micro- or nanoseconds as the column's "
        "precision needs) or connect (Kafka Connect's Date, Time and Timestamp, milliseconds).",
    ),
    # --- incremental snapshots (headwater.connectors.sqlserver.incremental)
    Field(
        "incremental.snapshot.allow.schema.changes",
        T.BOOLEAN,
        False,
        group="snapshot",
        validator=_schema_changes_refused,
        doc="Detect schema changes during an incremental snapshot and read the current chunk again. Not "
        "supported: true is refused (a chunk is read with the table as the stream knows it, its capture "
        "instance's columns).",
    ),
    Field(
        "incremental.snapshot.option.recompile",
        T.BOOLEAN,
        False,
        group="snapshot",
        doc="Add OPTION(RECOMPILE) to the incremental snapshot's SELECTs (its chunk and maximum-key queries).",
    ),
    dynamic=(
        DynamicField(
            "driver.",
            "driver.<option>",
            matches=_is_passed_on,
            group="connection",
            doc="A driver option, by its mssql-jdbc name (case-insensitive) or ODBC keyword, passed to the "
            "ODBC driver: authentication, encrypt, trustServerCertificate, hostNameInCertificate, "
            "serverCertificate, serverSpn, multiSubnetFailover, applicationIntent, connectRetryCount, "
            "connectRetryInterval, packetSize, integratedSecurity (Trusted_Connection), ipAddressPreference, "
            "KeepAlive, KeepAliveInterval and loginTimeout (seconds). Wins over database.<option>.",
        ),
        DynamicField(
            "database.",
            "database.<option>",
            matches=_is_passed_on,
            group="connection",
            doc="The same driver options as driver.<option>, in Debezium's older database.* form.",
        ),
        DynamicField(
            "driver.",
            "driver.<connection property>",
            matches=_is_connector_owned,
            key_validator=_owned_key_invalid,
            group="connection",
            doc="user, password, serverName, portNumber, instanceName and databaseName are refused: the "
            "connector sets them from its database.* properties.",
        ),
        DynamicField(
            "driver.",
            "driver.<mssql-jdbc-only option>",
            matches=_is_jdbc_only,
            group="kafka-connect",
            ignored_reason=_JDBC_ONLY_REASON,
        ),
        DynamicField(
            "database.",
            "database.<mssql-jdbc-only option>",
            matches=_is_jdbc_only,
            group="kafka-connect",
            ignored_reason=_JDBC_ONLY_REASON,
        ),
        DynamicField(
            "schema.history.internal.producer.",
            "schema.history.internal.producer.<kafka setting>",
            group="history",
            ignored_reason=_KAFKA_HISTORY_ONLY,
        ),
        DynamicField(
            "schema.history.internal.consumer.",
            "schema.history.internal.consumer.<kafka setting>",
            group="history",
            ignored_reason=_KAFKA_HISTORY_ONLY,
        ),
    ),
    checks=(_check_history, _check_pass_through, _check_read_only, _check_custom_snapshotter_name),
)


def _sqlserver_fields() -> FieldSet:
    """RELATIONAL_FIELDS with the SQL Server definitions in place of the redefined ones, then the
    SQL Server-only fields (which carry the replacements of common fields)."""
    redefined = {f.name: f for f in _RELATIONAL_REDEFINED}
    relational = FieldSet(
        *(redefined.get(f.name, f) for f in RELATIONAL_FIELDS),
        dynamic=RELATIONAL_FIELDS.dynamic,
        checks=RELATIONAL_FIELDS.checks,
    )
    return relational.merge(_SQLSERVER_ONLY)


SQLSERVER_FIELDS: FieldSet = _sqlserver_fields()

register_connector(CONNECTOR_KEY, CONNECTOR_CLASS_ALIASES, SQLSERVER_FIELDS,
                   factory="headwater.connectors.sqlserver.connector:SqlServerConnector")
