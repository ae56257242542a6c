"""Connector-independent (engine-level) properties, with Debezium's names and defaults.

Sources: spec/postgresql.md §10, §11.1-§11.4 (CommonConnectorConfig and the embedded engine) and
§16 (Kafka-Connect-only properties, accepted with a warning).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from headwater.config.fields import (
    DynamicField,
    Field,
    FieldSet,
    Report,
    at_least,
    list_items_in,
    non_empty,
    non_negative,
    positive_int,
)
from headwater.config.fields import FieldType as T

if TYPE_CHECKING:
    from headwater.config.configuration import Configuration

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
FILE_OFFSET_STORE = "org.apache.kafka.connect.storage.FileOffsetBackingStore"
MEMORY_OFFSET_STORE = "org.apache.kafka.connect.storage.MemoryOffsetBackingStore"

_TOPIC_PREFIX_RE = re.compile(r"[A-Za-z0-9._-]+")
_METRIC_TAG_RE = re.compile(r"[^=,\s][^=,]*=[^=,]*")


def _topic_prefix_valid(value: Any) -> str | None:
    if not value:
        return "must not be empty"
    if not _TOPIC_PREFIX_RE.fullmatch(value):
        return "may contain only letters, digits, '-', '.' and '_'"
    return None


def _topic_name_part_valid(value: Any) -> str | None:
    """Debezium validates topic.delimiter, topic.transaction and topic.heartbeat.prefix as topic names."""
    return _topic_prefix_valid(value)


def _naming_strategy_valid(value: Any) -> str | None:
    from headwater.relational.topic_naming import NamingError, resolve_strategy

    try:
        resolve_strategy(value)
    except NamingError as exc:
        return str(exc).split(" is not supported; ", 1)[1]
    return None


def _json_converter_only(value: Any) -> str | None:
    if value in (JSON_CONVERTER, "json"):
        return None
    return f"only {JSON_CONVERTER} is supported (Headwater emits Debezium's JSON)"


def _offset_store_valid(value: Any) -> str | None:
    if value in (FILE_OFFSET_STORE, MEMORY_OFFSET_STORE):
        return None
    return f"supported offset stores are {FILE_OFFSET_STORE} and {MEMORY_OFFSET_STORE}"


def _metric_tags_valid(value: Any) -> str | None:
    items = [p.strip() for p in value.split(",") if p.strip()]
    if all(_METRIC_TAG_RE.fullmatch(p) for p in items):
        return None
    return "expected comma-separated key=value pairs, e.g. k1=v1,k2=v2"


def _ignored(name: str, reason: str, ftype: T = T.STRING, group: str = "kafka-connect", doc: str = "") -> Field:
    return Field(name, ftype, doc=doc, group=group, ignored_reason=reason)


_SMT = "Kafka Connect single message transforms are not run; transform events downstream (e.g. in Spark)"
_CONNECT_ERRORS = (
    "Kafka Connect error handling for converters and transforms; Headwater uses "
    "event.processing.failure.handling.mode and errors.max.retries"
)
_CONNECT_OFFSETS = "Kafka-based offset storage is not used; Headwater keeps offsets in a file or the Spark checkpoint"
_NO_REGISTRY = "no schema registry is used: Headwater's converter is Debezium's JSON"
_EOS = "Kafka Connect exactly-once source support; Headwater delivers at-least-once to idempotent sinks"
_NOTIFICATION_CHANNELS = ("sink", "log", "jmx")


def _notification_channels_valid(value: Any) -> str | None:
    # Debezium matches channel names exactly and skips unknown ones silently; Headwater refuses them
    # (a custom channel class cannot be loaded here).
    bad = [item for item in value if item not in _NOTIFICATION_CHANNELS]
    if bad:
        return (f"unknown notification channel(s) {', '.join(bad)}; the channels are sink and log (jmx is "
                "accepted and has no effect)")
    return None


# -------------------------------------------------------------------------------------------
# cross-field checks


def _check_queue(cfg: Configuration, report: Report) -> None:
    if not report.valid("max.queue.size", "max.batch.size"):
        return
    queue, batch = cfg.get("max.queue.size"), cfg.get("max.batch.size")
    if queue <= batch:
        report.error(
            f"invalid value '{queue}' for property 'max.queue.size': must be greater than max.batch.size ({batch})"
        )


def _check_converters(cfg: Configuration, report: Report) -> None:
    from headwater.relational.converters import CONVERTER_METHODS
    from headwater.relational.plugins import PluginError, load_class

    for name in cfg.get("converters") or []:
        spec = cfg.get(f"{name}.type", None)
        if not spec:
            report.error(
                f"missing required property '{name}.type': the implementation of custom converter "
                f"'{name}' (listed in 'converters')"
            )
            continue
        try:  # the class must import and look like a converter (headwater.relational.converters)
            load_class(spec, f"{name}.type", "custom converter", CONVERTER_METHODS)
        except PluginError as exc:
            report.error(str(exc))


def _check_retry_delays(cfg: Configuration, report: Report) -> None:
    if not report.valid("errors.retry.delay.initial.ms", "errors.retry.delay.max.ms"):
        return
    lo, hi = cfg.get("errors.retry.delay.initial.ms"), cfg.get("errors.retry.delay.max.ms")
    if hi < lo:
        report.error(
            f"invalid value '{hi}' for property 'errors.retry.delay.max.ms': must be >= "
            f"errors.retry.delay.initial.ms ({lo})"
        )


# the channels headwater.engine.signals.channels knows; custom channels (Java classes) are not supported
SIGNAL_CHANNELS = ("source", "file", "kafka", "in-process", "jmx")
# properties that only the named channel reads (warned about when it is not enabled)
_CHANNEL_PROPERTIES = {
    "file": ("signal.file",),
    "kafka": ("signal.kafka.topic", "signal.kafka.groupId", "signal.kafka.bootstrap.servers",
              "signal.kafka.poll.timeout.ms", "kafka.consumer.offset.commit.enabled"),
}


def _signal_channels_valid(value: Any) -> str | None:
    unknown = [item for item in value if item.lower() not in SIGNAL_CHANNELS]
    if unknown:
        return (f"unknown signal channel(s) {', '.join(unknown)}; Headwater's channels are "
                f"{', '.join(SIGNAL_CHANNELS)} (custom channel classes are not supported)")
    return None


def _check_signal_channels(cfg: Configuration, report: Report) -> None:
    if not report.valid("signal.enabled.channels"):
        return
    enabled = {item.lower() for item in cfg.get("signal.enabled.channels")}
    if "jmx" in enabled:
        report.warn("signal channel 'jmx' (signal.enabled.channels) has no effect: Headwater has no JMX; send "
                    "signals with `headwater signal` (source, file or kafka channel) or the in-process API")
    if "kafka" in enabled and not (cfg.get("signal.kafka.bootstrap.servers") or "").strip():
        report.error("missing required property 'signal.kafka.bootstrap.servers': the kafka signal channel is "
                     "enabled (signal.enabled.channels)")
    for channel, names in _CHANNEL_PROPERTIES.items():
        if channel in enabled:
            continue
        keys = [n for n in names if cfg.is_set(n)]
        if channel == "kafka":
            keys += [k for k in cfg.dynamic_keys() if k.startswith("signal.consumer.")]
        for key in keys:
            report.warn(f"property '{key}' is ignored: the {channel} signal channel is not enabled "
                        "(signal.enabled.channels)")


def _check_notifications(cfg: Configuration, report: Report) -> None:
    if not report.valid("notification.enabled.channels", "notification.sink.topic.name"):
        return
    channels = cfg.get("notification.enabled.channels")
    # Debezium's SinkNotificationChannel.validateNotificationTopicName
    if "sink" in channels and not (cfg.get("notification.sink.topic.name") or "").strip():
        report.error("missing required property 'notification.sink.topic.name': the topic for the notifications "
                     "must be provided when the sink notification channel is enabled (notification.enabled.channels)")
    if "jmx" in channels:
        report.warn("notification channel 'jmx' (notification.enabled.channels) has no effect: Headwater has no "
                    "JMX; use the sink or log channel")
    if "sink" not in channels and cfg.is_set("notification.sink.topic.name"):
        report.warn("property 'notification.sink.topic.name' is ignored: the sink notification channel is not "
                    "enabled (notification.enabled.channels)")


# -------------------------------------------------------------------------------------------

COMMON_FIELDS = FieldSet(
    # --- identity / engine
    Field(
        "name",
        T.STRING,
        "headwater",
        group="engine",
        validator=non_empty,
        doc="Unique name of this connector instance. It keys the offset store and appears in the "
        "record headers. Kafka Connect requires it; Headwater defaults it.",
    ),
    Field(
        "connector.class",
        T.CLASS,
        required=True,
        group="engine",
        doc="The connector to run, e.g. io.debezium.connector.postgresql.PostgresConnector "
        "(or its short key, postgresql).",
    ),
    Field(
        "tasks.max",
        T.INT,
        1,
        group="engine",
        validator=positive_int,
        doc="Maximum number of tasks. The PostgreSQL connector always uses one task.",
        ignored_reason="Headwater runs one ordered reader per connector, as Debezium's PostgreSQL connector does",
    ),
    # --- topics
    Field(
        "topic.prefix",
        T.STRING,
        required=True,
        group="topics",
        validator=_topic_prefix_valid,
        deprecated_names=("database.server.name",),
        doc="Namespace for all topics and schema names; must be unique across connectors. Only "
        "letters, digits, '-', '.' and '_'. Do not change it: a restarted connector would write to new topics.",
    ),
    Field(
        "topic.delimiter",
        T.STRING,
        ".",
        group="topics",
        validator=_topic_name_part_valid,
        doc="Delimiter between the parts of a topic name.",
    ),
    Field(
        "topic.transaction",
        T.STRING,
        "transaction",
        group="topics",
        validator=_topic_name_part_valid,
        doc="Suffix of the transaction metadata topic: <topic.prefix>.<topic.transaction>.",
    ),
    Field(
        "topic.heartbeat.prefix",
        T.STRING,
        "__debezium-heartbeat",
        group="topics",
        validator=_topic_name_part_valid,
        doc="Prefix of the heartbeat topic: <topic.heartbeat.prefix>.<topic.prefix>.",
    ),
    Field(
        "topic.naming.strategy",
        T.CLASS,
        "io.debezium.schema.SchemaTopicNamingStrategy",
        group="topics",
        validator=_naming_strategy_valid,
        doc="Strategy that names the data, transaction and heartbeat topics: "
        "io.debezium.schema.SchemaTopicNamingStrategy (<prefix>.<schema>.<table>), DefaultTopicNamingStrategy "
        "(<prefix>.<table>), SchemaUnicodeTopicNamingStrategy or DefaultUnicodeTopicNamingStrategy (invalid "
        "characters and '_' become _uXXXX).",
    ),
    Field(
        "topic.cache.size",
        T.INT,
        10000,
        group="topics",
        validator=positive_int,
        doc="Size of the bounded table-to-topic-name cache.",
        ignored_reason="Headwater names each table's topic once per table version; there is no cache to size",
    ),
    # --- events
    Field(
        "provide.transaction.metadata",
        T.BOOLEAN,
        False,
        group="events",
        doc="Emit BEGIN/END transaction events and add the 'transaction' block to data events. As Debezium, a "
        "transaction whose changes are all filtered out still gets BEGIN and an END counting 0 events.",
    ),
    Field(
        "tombstones.on.delete",
        T.BOOLEAN,
        True,
        group="events",
        doc="Emit a tombstone (null value) after each delete event.",
    ),
    Field(
        "skipped.operations",
        T.LIST,
        ["t"],
        group="events",
        validator=list_items_in(("c", "u", "d", "t", "none"), exclusive="none"),
        doc="Operations not emitted during streaming: c (inserts), u (updates), d (deletes), "
        "t (truncates), or none. The default skips truncates.",
    ),
    Field(
        "schema.name.adjustment.mode",
        T.ENUM,
        "none",
        allowed=("none", "avro", "avro_unicode"),
        group="events",
        doc="How schema names are adjusted: none, avro (replace characters invalid in Avro names "
        "with _), or avro_unicode (replace _ and invalid characters with _uxxxx).",
    ),
    Field(
        "field.name.adjustment.mode",
        T.ENUM,
        "none",
        allowed=("none", "avro", "avro_unicode"),
        group="events",
        doc="How field names are adjusted: none, avro or avro_unicode (as schema.name.adjustment.mode).",
    ),
    Field(
        "converters",
        T.LIST,
        [],
        group="events",
        names_prefixes=True,
        default_doc="none",
        doc="Symbolic names of custom converters (Debezium's CustomConverter SPI, in Python). Each needs "
        "<name>.type, the converter class as package.module:Class (a Java class name is refused), and may "
        "take <name>.<param> settings, given to its configure() with the '<name>.' prefix stripped. For "
        "each captured column the converters are asked in order; the first that registers a schema and a "
        "value function for it decides the column's schema and values, in keys and values, in the snapshot "
        "and in streaming. See docs/converters.md.",
    ),
    # --- converters
    Field(
        "key.converter",
        T.CLASS,
        JSON_CONVERTER,
        group="converter",
        validator=_json_converter_only,
        doc="Converter of record keys; only the JSON converter is supported.",
    ),
    Field(
        "value.converter",
        T.CLASS,
        JSON_CONVERTER,
        group="converter",
        validator=_json_converter_only,
        doc="Converter of record values; only the JSON converter is supported.",
    ),
    Field(
        "header.converter",
        T.CLASS,
        JSON_CONVERTER,
        group="converter",
        validator=_json_converter_only,
        doc="Converter of record headers; only the JSON converter is supported.",
    ),
    Field(
        "key.converter.schemas.enable",
        T.BOOLEAN,
        True,
        group="converter",
        doc='Include the schema with each key ({"schema":…, "payload":…}).',
    ),
    Field(
        "value.converter.schemas.enable",
        T.BOOLEAN,
        True,
        group="converter",
        doc='Include the schema with each value ({"schema":…, "payload":…}).',
    ),
    Field(
        "header.converter.schemas.enable",
        T.BOOLEAN,
        True,
        group="converter",
        doc="Include the schema with each header value.",
    ),
    Field(
        "key.converter.replace.null.with.default",
        T.BOOLEAN,
        True,
        group="converter",
        doc="Write a field's schema default instead of null when the key field is null.",
    ),
    Field(
        "value.converter.replace.null.with.default",
        T.BOOLEAN,
        True,
        group="converter",
        doc="Write a field's schema default instead of null when the value field is null.",
    ),
    Field(
        "key.converter.decimal.format",
        T.ENUM,
        "base64",
        allowed=("base64", "numeric"),
        group="converter",
        doc="JSON rendering of Decimal values in keys: base64 (bytes) or numeric.",
    ),
    Field(
        "value.converter.decimal.format",
        T.ENUM,
        "base64",
        allowed=("base64", "numeric"),
        group="converter",
        doc="JSON rendering of Decimal values in values: base64 (bytes) or numeric.",
    ),
    # --- queue
    Field(
        "encoding.workers",
        T.INT,
        -1,
        group="queue",
        validator=lambda v: None if v >= -1 else "must be -1 (automatic), 0 or a positive number",
        doc="Headwater only: worker processes that build and serialize streamed events, so capture "
        "uses more than one core. -1 picks min(2, number of cores) when the sink takes serialized records "
        "and transaction metadata is off; 0 builds events on the reader thread, as does a PostgreSQL "
        "connector with signal.data.collection set (incremental-snapshot windows must see every event).",
    ),
    Field(
        "max.batch.size",
        T.INT,
        2048,
        group="queue",
        validator=positive_int,
        doc="Maximum number of events in one processed batch.",
    ),
    Field(
        "max.queue.size",
        T.INT,
        8192,
        group="queue",
        validator=positive_int,
        doc="Maximum number of records in the blocking queue between reader and consumer; must be "
        "greater than max.batch.size.",
    ),
    Field(
        "max.queue.size.in.bytes",
        T.LONG,
        0,
        group="queue",
        validator=non_negative,
        doc="Maximum queue volume in bytes (0 = no limit); whichever queue limit is hit first blocks the reader.",
    ),
    Field(
        "poll.interval.ms",
        T.LONG,
        500,
        group="queue",
        validator=positive_int,
        doc="How long to wait for new events before processing a batch. Headwater hands events on as soon "
        "as any are queued and waits this long only while none are (Debezium holds events until this long "
        "has passed since its last batch or its queue is full).",
    ),
    # --- offsets
    Field(
        "offset.storage",
        T.CLASS,
        FILE_OFFSET_STORE,
        group="offsets",
        validator=_offset_store_valid,
        doc="Where the standalone runner keeps offsets: FileOffsetBackingStore (in "
        "offset.storage.file.filename) or MemoryOffsetBackingStore (in memory only: a restart begins again as "
        "snapshot.mode says for a connector without offsets). The Spark source keeps them in its checkpoint.",
    ),
    Field(
        "offset.storage.file.filename",
        T.STRING,
        group="offsets",
        default_doc="chosen by the runner",
        doc="File that stores the connector offsets (FileOffsetBackingStore).",
    ),
    Field(
        "offset.flush.interval.ms",
        T.LONG,
        60000,
        group="offsets",
        validator=non_negative,
        doc="How often offsets are flushed (and the position acknowledged to the database).",
    ),
    Field(
        "offset.flush.timeout.ms",
        T.LONG,
        5000,
        group="offsets",
        validator=positive_int,
        doc="Maximum time to wait for an offset flush before cancelling it.",
        ignored_reason="offsets are written synchronously (fsync, then rename); there is no flush to time out",
    ),
    # --- error handling
    Field(
        "event.processing.failure.handling.mode",
        T.ENUM,
        "fail",
        allowed=("fail", "warn", "skip"),
        aliases={"ignore": "skip"},
        group="errors",
        doc="What to do with a change event that cannot be built (e.g. a value its column type cannot "
        "represent): fail (stop, naming table, LSN and column), warn (log that and skip the event) or "
        "skip (skip it silently). Applies to snapshot and streaming events.",
    ),
    Field(
        "errors.max.retries",
        T.INT,
        -1,
        group="errors",
        validator=at_least(-1),
        doc="Retries after a lost connection (a server restart, a terminated backend) once the connector "
        "has started: -1 without limit, 0 none (stop with the error), N at most N consecutive failed "
        "attempts. Each retry resumes from the stored offset, so nothing is lost. A failure to connect at "
        "start-up is not retried. `headwater pipeline` (Spark) restarts its query from the checkpoint by "
        "the same rule, also after a Kafka sink's broker did not answer.",
    ),
    Field(
        "errors.retry.delay.initial.ms",
        T.LONG,
        300,
        group="errors",
        validator=positive_int,
        doc="Delay before the first retry after a lost connection; doubles with each consecutive failure up "
        "to errors.retry.delay.max.ms (never shorter than retriable.restart.connector.wait.ms).",
    ),
    Field(
        "errors.retry.delay.max.ms",
        T.LONG,
        10000,
        group="errors",
        validator=positive_int,
        doc="Maximum delay between retries after a lost connection.",
    ),
    Field(
        "retriable.restart.connector.wait.ms",
        T.LONG,
        10000,
        group="errors",
        validator=non_negative,
        doc="Minimum wait before the connector is restarted after a lost connection (see errors.max.retries).",
    ),
    # --- heartbeats
    Field(
        "heartbeat.interval.ms",
        T.INT,
        0,
        group="heartbeat",
        validator=non_negative,
        doc="Heartbeat period (0 = none). Heartbeats let the position advance on low-traffic captures.",
    ),
    # --- snapshot
    Field(
        "snapshot.delay.ms",
        T.LONG,
        0,
        group="snapshot",
        validator=non_negative,
        doc="Delay before a snapshot starts (before its replication slot is created).",
    ),
    Field(
        "snapshot.fetch.size",
        T.INT,
        10240,
        group="snapshot",
        validator=positive_int,
        doc="No effect (a warning at start when set): Headwater reads each table with COPY, which the "
        "server streams in 64 KiB pieces, so memory does not depend on a fetch size.",
        ignored_reason="Headwater reads each snapshot table with COPY, which the server streams in 64 KiB "
        "pieces: memory does not depend on a fetch size",
    ),
    Field(
        "snapshot.chunk.rows",
        T.INT,
        100_000,
        group="snapshot",
        validator=non_negative,
        doc="Headwater only (standalone runner): rows per chunk of the initial snapshot. Tables larger than "
        "this are read in key ranges of about this many rows, and each snapshot record's offset records the "
        "chunks completed, so that a snapshot interrupted by a crash resumes at its next chunk instead of "
        "starting over (see docs/compat.md, \"Resumable initial snapshot\"). 0 reads each table whole (a "
        "crash then re-reads the table it interrupted). The Spark source uses its snapshotChunkRows option.",
    ),
    Field(
        "snapshot.max.threads",
        T.INT,
        1,
        group="snapshot",
        validator=positive_int,
        doc="No effect (a warning at start when set): the standalone runner reads the tables one after "
        "another with COPY in one transaction; the Spark source reads chunks in parallel (its "
        "snapshotParallelism option).",
        ignored_reason="the standalone runner reads the tables one after another with COPY in one "
        "transaction; the Spark source reads them in parallel by its snapshotParallelism option",
    ),
    # --- signals and notifications
    Field(
        "signal.enabled.channels",
        T.LIST,
        ["source"],
        group="signals",
        validator=_signal_channels_valid,
        doc="Enabled signal channels: source (the signaling table signal.data.collection, read through the "
        "change stream), file (signal.file), kafka (signal.kafka.*), in-process (the API of an application "
        "that runs the engine). jmx is accepted with a warning at start: Headwater has no JMX. Send a signal "
        "with `headwater signal`.",
    ),
    Field(
        "signal.data.collection",
        T.STRING,
        group="signals",
        doc="Fully-qualified name of the signaling table (PostgreSQL <schemaName>.<tableName>, SQL Server "
        "<databaseName>.<schemaName>.<tableName>) with three columns in this order: id, type, data (any names). "
        "Its inserted rows are read as signals from the change stream, and incremental snapshots write their "
        "window marks to it, so it is captured (and added to a filtered publication) even when the include "
        "lists leave it out; its rows are not snapshotted. Needed for the source channel and incremental "
        "snapshots.",
    ),
    Field(
        "signal.file",
        T.STRING,
        "file-signals.txt",
        group="signals",
        validator=non_empty,
        doc="File the file signal channel reads: one JSON object {\"id\", \"type\", \"data\"} a line; the "
        "file is emptied after each read. A relative path is relative to the working directory.",
    ),
    Field(
        "signal.poll.interval.ms",
        T.LONG,
        5000,
        group="signals",
        validator=positive_int,
        doc="How often the file, kafka and in-process signal channels are read (the source channel's "
        "signals arrive with the stream).",
    ),
    Field(
        "signal.kafka.topic",
        T.STRING,
        group="signals",
        default_doc="<topic.prefix>-signal",
        validator=non_empty,
        doc="Kafka topic watched for signals. It must have a single partition: only partition 0 is read. A "
        "record's key must be topic.prefix (others are skipped), its value {\"id\", \"type\", \"data\"}.",
    ),
    Field(
        "signal.kafka.groupId",
        T.STRING,
        "kafka-signal",
        group="signals",
        validator=non_empty,
        doc="Consumer group id of the Kafka signal consumer (its committed offsets, with "
        "kafka.consumer.offset.commit.enabled).",
    ),
    Field(
        "signal.kafka.bootstrap.servers",
        T.STRING,
        group="signals",
        doc="Kafka bootstrap servers of the signal consumer; required when signal.enabled.channels includes "
        "kafka.",
    ),
    Field(
        "signal.kafka.poll.timeout.ms",
        T.LONG,
        100,
        group="signals",
        validator=non_negative,
        doc="Maximum time to wait when polling the signal topic.",
    ),
    Field(
        "kafka.consumer.offset.commit.enabled",
        T.BOOLEAN,
        False,
        group="signals",
        doc="Commit the signal consumer's offsets (in group signal.kafka.groupId) once the signals read were "
        "handed over, and start from the committed offset (at-least-once signals; without one, "
        "signal.consumer.auto.offset.reset, default earliest). Otherwise the consumer starts at the end of the "
        "topic and commits nothing: signals sent while it is down are lost.",
    ),
    Field(
        "notification.enabled.channels",
        T.LIST,
        [],
        group="signals",
        default_doc="none",
        validator=_notification_channels_valid,
        doc="Enabled notification channels (Debezium's snapshot notifications): sink (a record per "
        "notification on notification.sink.topic.name), log (an INFO line each); jmx is accepted and has no "
        "effect (a warning at start). Names are case-sensitive, as in Debezium.",
    ),
    Field(
        "notification.sink.topic.name",
        T.STRING,
        group="signals",
        doc="Topic receiving notifications; required when notification.enabled.channels includes sink.",
    ),
    # --- monitoring
    Field(
        "custom.metric.tags",
        T.STRING,
        group="metrics",
        validator=_metric_tags_valid,
        doc="k1=v1,k2=v2 tags added to the connector's metrics.",
        ignored_reason="Headwater exposes no JMX metrics to tag",
    ),
    # --- Kafka Connect only (accepted, warned about)
    _ignored("transforms", _SMT, T.LIST),
    _ignored("predicates", _SMT, T.LIST),
    _ignored("config.providers", "Kafka Connect config providers are not supported; pass resolved values", T.LIST),
    _ignored("errors.tolerance", _CONNECT_ERRORS),
    _ignored("errors.log.enable", _CONNECT_ERRORS),
    _ignored("errors.log.include.messages", _CONNECT_ERRORS),
    _ignored("key.converter.schema.registry.url", _NO_REGISTRY),
    _ignored("value.converter.schema.registry.url", _NO_REGISTRY),
    _ignored("key.converter.schemas.cache.size", "Headwater caches converted schemas itself"),
    _ignored("value.converter.schemas.cache.size", "Headwater caches converted schemas itself"),
    _ignored("offset.storage.topic", _CONNECT_OFFSETS),
    _ignored("offset.storage.partitions", _CONNECT_OFFSETS),
    _ignored("offset.storage.replication.factor", _CONNECT_OFFSETS),
    _ignored("offsets.storage.topic", _CONNECT_OFFSETS),
    _ignored("offset.commit.policy", "offsets are flushed every offset.flush.interval.ms"),
    _ignored("exactly.once.support", _EOS),
    _ignored("transaction.boundary", _EOS),
    _ignored("transaction.boundary.interval.ms", _EOS),
    dynamic=(
        DynamicField(
            "signal.consumer.",
            "signal.consumer.<kafka consumer setting>",
            group="signals",
            doc="Kafka consumer settings of the signal consumer, prefix stripped "
            "(e.g. signal.consumer.security.protocol=SSL), given to librdkafka (confluent-kafka) as they are; "
            "`headwater signal --channel kafka` gives them to its producer too.",
        ),
        DynamicField("transforms.", "transforms.<name>.<setting>", ignored_reason=_SMT, group="kafka-connect"),
        DynamicField("predicates.", "predicates.<name>.<setting>", ignored_reason=_SMT, group="kafka-connect"),
        DynamicField(
            "config.providers.",
            "config.providers.<name>.<setting>",
            group="kafka-connect",
            ignored_reason="Kafka Connect config providers are not supported; pass resolved values",
        ),
        DynamicField(
            "errors.deadletterqueue.",
            "errors.deadletterqueue.<setting>",
            group="kafka-connect",
            ignored_reason=_CONNECT_ERRORS,
        ),
        DynamicField(
            "topic.creation.",
            "topic.creation.<setting>",
            group="kafka-connect",
            ignored_reason="Kafka topic auto-creation is configured on the Kafka sink, not the connector",
        ),
        DynamicField(
            "producer.override.",
            "producer.override.<setting>",
            group="kafka-connect",
            ignored_reason="Kafka Connect client overrides; Headwater's Kafka sink has its own settings",
        ),
        DynamicField(
            "consumer.override.",
            "consumer.override.<setting>",
            group="kafka-connect",
            ignored_reason="Kafka Connect client overrides; Headwater's Kafka sink has its own settings",
        ),
        DynamicField(
            "admin.override.",
            "admin.override.<setting>",
            group="kafka-connect",
            ignored_reason="Kafka Connect client overrides; Headwater's Kafka sink has its own settings",
        ),
    ),
    checks=(_check_queue, _check_converters, _check_retry_delays, _check_signal_channels,
            _check_notifications),
)
