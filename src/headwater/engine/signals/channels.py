"""The signal channels besides the signal table (`signal.enabled.channels`), and sending signals.

Debezium's SignalChannelReaders: `file` (FileSignalChannel: `signal.file`, one JSON object a line,
emptied after each read), `kafka` (KafkaSignalChannel: partition 0 of `signal.kafka.topic`, the
record key must be `topic.prefix`) and `in-process` (InProcessSignalChannel: an application that
runs the engine hands signals over in memory). `source`, the signal table, is the change stream
itself (headwater.engine.signals.stage); `jmx` has no effect here (the configuration warns).

The engine opens the channels with :func:`open_channels`, calls `start()` once, `read()` every
`signal.poll.interval.ms` from one thread (a read never waits longer than its poll timeout) and
`close()` at the end. A signal that cannot be parsed is logged with the reason and skipped; the
channel goes on. :func:`send_signal` writes a signal where a configured channel reads it (what
`headwater signal` does).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from headwater.config.common import SIGNAL_CHANNELS
from headwater.engine.signals.signal import Signal, SignalError

if TYPE_CHECKING:
    from headwater.config.configuration import Configuration

log = logging.getLogger("headwater.signals")

SOURCE = "source"
FILE = "file"
KAFKA = "kafka"
IN_PROCESS = "in-process"
JMX = "jmx"

#: how long `headwater signal --channel kafka` waits for the broker to acknowledge its record
SEND_TIMEOUT_S = 30.0
#: how long starting the kafka channel waits for the end of the signal topic
WATERMARK_TIMEOUT_S = 10.0
#: signals one read of the kafka channel takes at most (the rest come with the next read)
KAFKA_BATCH = 500


class SignalChannelError(Exception):
    """A channel that cannot start, or a signal that cannot be sent: the message says why."""


class SignalChannel(ABC):
    """A source of signals other than the change stream (Debezium's SignalChannelReader)."""

    name: str

    def start(self) -> None:  # noqa: B027 - optional hook
        """Before the first read: open what the channel reads from."""

    @abstractmethod
    def read(self) -> list[Signal]:
        """The signals that arrived since the last call, in order (never blocks longer than the
        channel's poll timeout; invalid ones are logged and left out)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """After the last read (from the thread that read)."""


def new_signal(signal_type: str, data: str | Mapping[str, Any] | None = None, signal_id: str | None = None,
               channel: str = IN_PROCESS) -> Signal:
    """A signal from its parts: `data` as JSON text or a mapping (serialized), `signal_id` a new UUID
    when not given."""
    if not isinstance(signal_type, str) or not signal_type.strip():
        raise SignalError("a signal needs a type (execute-snapshot, stop-snapshot, log, ...)")
    if data is not None and not isinstance(data, str):
        data = orjson.dumps(dict(data)).decode()
    return Signal(signal_id if signal_id is not None else str(uuid.uuid4()), signal_type.strip(), data, channel)


def parse_signal(text: str, channel: str, *, default_id: str | None = None) -> Signal:
    """A signal from its JSON form {"id", "type", "data"} (a line of the signal file, a Kafka
    record's value). `data` may be an object (kept as its JSON text), JSON text (as the signal
    table's data column holds it) or null/absent. `default_id` stands in for a missing id (a Kafka
    record's offset); without it the id is required. SignalError says what is wrong."""
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise SignalError(f"not valid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise SignalError(f"not a JSON object but {_json_kind(document)}")
    signal_id = document.get("id")
    if signal_id is None:
        if default_id is None:
            raise SignalError("no 'id'")
        signal_id = default_id
    elif isinstance(signal_id, bool) or not isinstance(signal_id, str | int):
        raise SignalError(f"'id' must be a string, not {_json_kind(signal_id)}")
    signal_type = document.get("type")
    if not isinstance(signal_type, str) or not signal_type.strip():
        raise SignalError("no 'type'" if signal_type is None else f"'type' must be a non-empty string, not "
                          f"{orjson.dumps(signal_type).decode()}")
    data = document.get("data")
    if isinstance(data, dict):
        data = orjson.dumps(data).decode()
    elif data is not None and not isinstance(data, str):
        raise SignalError(f"'data' must be a JSON object, not {_json_kind(data)}")
    return Signal(str(signal_id), signal_type.strip(), data, channel)


def _json_kind(value: Any) -> str:
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
             dict: "an object", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


# ------------------------------------------------------------------------------------------ file


class FileChannel(SignalChannel):
    """Debezium's FileSignalChannel: every read takes all the lines of `path` and empties the file
    (a missing file or a directory: no signals). Blank lines are skipped silently, invalid ones
    with a warning. Readers and `headwater signal` lock the file (flock) while they read and empty
    it or append to it, so a signal they append is never lost; another writer should append whole
    lines (`>>`), as for Debezium."""

    name = FILE

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._failure: str | None = None

    def start(self) -> None:
        log.info("file signal channel: reading signals from '%s'", self.path.absolute())

    def read(self) -> list[Signal]:
        content = self._take()
        if not content:
            return []
        signals: list[Signal] = []
        for number, raw in enumerate(content.split(b"\n"), 1):
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
                signal = parse_signal(line, FILE)
            except (UnicodeDecodeError, SignalError) as exc:
                log.warning("file signal channel: skipped line %d of '%s': %s: %s", number, self.path, exc,
                            _shorten(raw.decode("utf-8", "replace").strip()))
                continue
            log.info("file signal channel: received %s", signal)
            signals.append(signal)
        return signals

    def _take(self) -> bytes:
        """The file's content, the file emptied (under its lock)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)  # a FIFO there must not block the poller
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            self._failure = None
            return b""
        except OSError as exc:
            self._failed(f"cannot open '{self.path}': {exc.strerror or exc}")
            return b""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            content = b"".join(chunks)
            if content:
                os.ftruncate(fd, 0)
        except OSError as exc:
            self._failed(f"cannot read and empty '{self.path}': {exc.strerror or exc}")
            return b""
        finally:
            os.close(fd)  # releases the lock
        self._failure = None
        return content

    def _failed(self, message: str) -> None:
        # the channel goes on (the file may become readable); the same failure is logged once
        if message != self._failure:
            log.error("file signal channel: %s; its signals are not read until that is fixed", message)
            self._failure = message


def append_signal_line(path: str | os.PathLike[str], signal: Signal) -> None:
    """Append `signal` to a signal file as one JSON line, under the lock FileChannel reads with."""
    document: dict[str, Any] = {"id": signal.id, "type": signal.type}
    if signal.data is not None:
        try:  # an object stays an object in the file, as Debezium's documentation writes it
            document["data"] = orjson.loads(signal.data)
        except orjson.JSONDecodeError:
            document["data"] = signal.data
    line = orjson.dumps(document) + b"\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise SignalChannelError(f"cannot open the signal file '{path}': {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
    except OSError as exc:
        raise SignalChannelError(f"cannot append to the signal file '{path}': {exc.strerror or exc}") from None
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------- kafka

# settings of the consumer (Debezium's KafkaSignalChannel defaults) that `signal.consumer.*` may override
_CONSUMER_DEFAULTS = {
    "fetch.min.bytes": "1",
    "session.timeout.ms": "10000",
    "auto.offset.reset": "earliest",
    # offsets are committed by the channel once the signals were handed over (when enabled)
    "enable.auto.commit": "false",
}
# consumer-only librdkafka settings, not given to `headwater signal`'s producer
_CONSUMER_ONLY = frozenset({
    "group.id", "group.instance.id", "auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms",
    "enable.auto.offset.store", "session.timeout.ms", "heartbeat.interval.ms", "fetch.min.bytes",
    "fetch.max.bytes", "fetch.wait.max.ms", "max.poll.interval.ms", "isolation.level", "partition.assignment.strategy",
    "group.protocol", "group.remote.assignor", "enable.partition.eof", "check.crcs", "queued.min.messages",
    "queued.max.messages.kbytes", "max.partition.fetch.bytes", "fetch.queue.backoff.ms", "fetch.error.backoff.ms",
    "coordinator.query.interval.ms",
})


def kafka_topic(config: Configuration, topic_prefix: str | None = None) -> str:
    """`signal.kafka.topic`, by default `<topic.prefix>-signal` (as Debezium)."""
    return config.get("signal.kafka.topic") or f"{topic_prefix or config.get('topic.prefix')}-signal"


def _bootstrap_servers(config: Configuration) -> str:
    servers = (config.get("signal.kafka.bootstrap.servers") or "").strip()
    if not servers:
        raise SignalChannelError("missing required property 'signal.kafka.bootstrap.servers': the kafka "
                                 "signal channel needs the Kafka cluster its topic is on")
    return servers


class KafkaChannel(SignalChannel):
    """Debezium's KafkaSignalChannel, on librdkafka (confluent-kafka): reads partition 0 of `topic`
    (the topic must have one partition, to keep signals in order); a record whose key is not
    `connector_name` (topic.prefix) is skipped, its value is {"id", "type", "data"}. Debezium
    passes a missing id on as null; here the record's offset stands in for it.

    With `commit` (kafka.consumer.offset.commit.enabled) the consumer starts at the group's
    committed offset (without one: `auto.offset.reset`, default earliest, as Debezium) and
    commits the signals of a read when the next read (or close) comes, that is once they were
    handed over and acted on. Without it, it starts at the end of the topic as it is at start (at
    its beginning when the topic does not exist yet, so that the first signals, which create it,
    are read) and commits nothing."""

    name = KAFKA

    def __init__(self, *, topic: str, connector_name: str, settings: Mapping[str, str], poll_timeout_ms: int,
                 commit: bool) -> None:
        self.topic = topic
        self.connector_name = connector_name
        self.settings = dict(settings)
        self.poll_timeout_s = poll_timeout_ms / 1000.0
        self.commit = commit
        self._consumer: Any = None
        self._handed_over: int | None = None  # the offset after the last signal read returned
        self._last_error: str | None = None

    @classmethod
    def from_config(cls, config: Configuration, topic_prefix: str | None = None) -> KafkaChannel:
        prefix = topic_prefix or config.get("topic.prefix")
        settings = {
            "bootstrap.servers": _bootstrap_servers(config),
            "group.id": config.get("signal.kafka.groupId"),
            "client.id": str(uuid.uuid4()),
            **_CONSUMER_DEFAULTS,
            **config.with_prefix("signal.consumer."),
        }
        return cls(topic=kafka_topic(config, prefix), connector_name=prefix, settings=settings,
                   poll_timeout_ms=config.get("signal.kafka.poll.timeout.ms"),
                   commit=config.get("kafka.consumer.offset.commit.enabled"))

    def start(self) -> None:
        from confluent_kafka import (
            OFFSET_BEGINNING,
            OFFSET_END,
            OFFSET_STORED,
            Consumer,
            KafkaException,
            TopicPartition,
        )

        try:
            self._consumer = Consumer(self.settings, logger=logging.getLogger("headwater.signals.kafka"))
        except (KafkaException, ValueError, TypeError) as exc:
            raise SignalChannelError(f"kafka signal channel: the consumer settings (signal.kafka.*, "
                                     f"signal.consumer.*) are not valid: {exc}") from None
        offset = OFFSET_STORED if self.commit else self._end_offset()
        self._consumer.assign([TopicPartition(self.topic, 0, offset)])
        where = {OFFSET_STORED: "the group's committed offset", OFFSET_BEGINNING: "its beginning (it does not "
                 "exist yet)", OFFSET_END: "its end"}.get(offset, f"its end, offset {offset}")
        log.info("kafka signal channel: reading partition 0 of topic '%s' (group '%s') from %s", self.topic,
                 self.settings.get("group.id"), where)

    def _end_offset(self) -> int:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

        try:
            metadata = self._consumer.list_topics(self.topic, timeout=WATERMARK_TIMEOUT_S)
            topic = metadata.topics.get(self.topic)
            if topic is None or (topic.error is not None
                                 and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                return OFFSET_BEGINNING
            if len(topic.partitions) > 1:
                log.warning("kafka signal channel: topic '%s' has %d partitions; only partition 0 is read (a "
                            "signal topic must have one partition, to keep signals in order)", self.topic,
                            len(topic.partitions))
            _low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, 0),
                                                              timeout=WATERMARK_TIMEOUT_S, cached=False)
            return high
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return OFFSET_BEGINNING
            log.warning("kafka signal channel: the end of topic '%s' could not be read (%s); reading from the end "
                        "once the broker answers", self.topic, exc)
            return OFFSET_END

    def read(self) -> list[Signal]:
        if self._consumer is None:
            raise SignalChannelError("kafka signal channel: read before start")
        self._commit_handed_over()
        signals: list[Signal] = []
        last: int | None = None
        for message in self._consumer.consume(num_messages=KAFKA_BATCH, timeout=self.poll_timeout_s):
            error = message.error()
            if error is not None:
                self._report(error)
                continue
            last = message.offset()
            signal = self._signal(message)
            if signal is not None:
                log.info("kafka signal channel: received %s (offset %d)", signal, last)
                signals.append(signal)
        if last is not None:
            self._last_error = None
            self._handed_over = last + 1
        return signals

    def _signal(self, message: Any) -> Signal | None:
        offset = message.offset()
        key = message.key()
        key = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
        if key != self.connector_name:
            log.info("kafka signal channel: skipped the record at offset %d: its key %r is not the connector's "
                     "name %r (topic.prefix)", offset, key, self.connector_name)
            return None
        value = message.value()
        if not value:
            log.debug("kafka signal channel: skipped the empty record at offset %d", offset)
            return None
        try:
            return parse_signal(value.decode("utf-8"), KAFKA, default_id=str(offset))
        except (UnicodeDecodeError, SignalError) as exc:
            log.warning("kafka signal channel: skipped the record at offset %d of topic '%s': %s: %s", offset,
                        self.topic, exc, _shorten(value.decode("utf-8", "replace")))
            return None

    def _report(self, error: Any) -> None:
        text = str(error)
        # librdkafka repeats a condition (an unknown topic, a broker down) at every poll: once is enough
        if text != self._last_error:
            log.warning("kafka signal channel: topic '%s': %s", self.topic, text)
            self._last_error = text

    def _commit_handed_over(self) -> None:
        if not self.commit or self._handed_over is None:
            return
        from confluent_kafka import KafkaException, TopicPartition

        offset, self._handed_over = self._handed_over, None
        try:
            self._consumer.commit(offsets=[TopicPartition(self.topic, 0, offset)], asynchronous=False)
        except KafkaException as exc:
            # the signals were acted on; a failed commit means they may be read again after a restart
            log.warning("kafka signal channel: committing offset %d of topic '%s' failed: %s", offset, self.topic,
                        exc)

    def close(self) -> None:
        if self._consumer is None:
            return
        try:
            self._commit_handed_over()
        finally:
            consumer, self._consumer = self._consumer, None
            consumer.close()


def _producer_settings(config: Configuration) -> dict[str, str]:
    settings = {k: v for k, v in config.with_prefix("signal.consumer.").items() if k not in _CONSUMER_ONLY}
    settings.setdefault("bootstrap.servers", _bootstrap_servers(config))
    return settings


def produce_signal(config: Configuration, signal: Signal, topic_prefix: str | None = None) -> str:
    """Write `signal` to partition 0 of the signal topic, keyed by topic.prefix; the topic."""
    from confluent_kafka import KafkaException, Producer

    prefix = topic_prefix or config.get("topic.prefix")
    topic = kafka_topic(config, prefix)
    value: dict[str, Any] = {"id": signal.id, "type": signal.type}
    if signal.data is not None:
        try:  # the channel (Debezium's too) wants the data as an object
            value["data"] = orjson.loads(signal.data)
        except orjson.JSONDecodeError:
            raise SignalChannelError(f"{signal}: its data is not valid JSON") from None
    outcome: list[Any] = []
    try:
        producer = Producer(_producer_settings(config), logger=logging.getLogger("headwater.signals.kafka"))
        producer.produce(topic, key=prefix.encode(), value=orjson.dumps(value), partition=0,
                         on_delivery=lambda error, _message: outcome.append(error))
        producer.flush(SEND_TIMEOUT_S)
    except (KafkaException, BufferError, ValueError, TypeError) as exc:
        raise SignalChannelError(f"sending {signal} to topic '{topic}' failed: {exc}") from None
    if not outcome:
        raise SignalChannelError(f"sending {signal} to topic '{topic}' failed: no answer from the Kafka cluster "
                                 f"within {SEND_TIMEOUT_S:.0f} s (signal.kafka.bootstrap.servers)")
    if outcome[0] is not None:
        raise SignalChannelError(f"sending {signal} to topic '{topic}' failed: {outcome[0]}")
    return topic


# ------------------------------------------------------------------------------------ in-process

_running: dict[str, InProcessChannel] = {}
_running_lock = threading.Lock()


class InProcessChannel(SignalChannel):
    """Debezium's InProcessSignalChannel: an application that runs the engine in its own process
    sends signals through :meth:`send` (any thread) or :func:`send_in_process`. Started, the channel
    is registered under the connector's name (topic.prefix), for :func:`in_process_channel`; a
    read takes every signal sent since the last one. Closing it drops what was not read."""

    name = IN_PROCESS

    def __init__(self, connector_name: str) -> None:
        self.connector_name = connector_name
        self._lock = threading.Lock()
        self._pending: list[Signal] = []
        self._open = False

    def start(self) -> None:
        with self._lock:
            self._open = True
        with _running_lock:
            replaced = _running.get(self.connector_name)
            _running[self.connector_name] = self
        if replaced is not None and replaced is not self:
            log.warning("in-process signal channel: another running engine of connector %r was registered; "
                        "signals sent by name now go to the one started last", self.connector_name)
        log.info("in-process signal channel: open for connector %r", self.connector_name)

    def send(self, signal: Signal) -> None:
        with self._lock:
            if not self._open:
                raise SignalChannelError(f"the in-process signal channel of connector {self.connector_name!r} "
                                         f"is not open (not started, or closed): {signal} is not sent")
            self._pending.append(signal)

    def read(self) -> list[Signal]:
        with self._lock:
            signals, self._pending = self._pending, []
        for signal in signals:
            log.info("in-process signal channel: received %s", signal)
        return signals

    def close(self) -> None:
        with self._lock:
            self._open = False
            dropped, self._pending = self._pending, []
        with _running_lock:
            if _running.get(self.connector_name) is self:
                del _running[self.connector_name]
        if dropped:
            log.warning("in-process signal channel: closed with %d signal(s) not acted on: %s", len(dropped),
                        ", ".join(str(s) for s in dropped))


def in_process_channel(connector_name: str) -> InProcessChannel:
    """The running in-process channel of connector `connector_name` (its topic.prefix)."""
    with _running_lock:
        channel = _running.get(connector_name)
    if channel is None:
        raise SignalChannelError(f"no engine of connector {connector_name!r} is running here with the in-process "
                                 f"signal channel (add in-process to signal.enabled.channels)")
    return channel


def send_in_process(connector_name: str, signal_type: str, data: str | Mapping[str, Any] | None = None,
                    signal_id: str | None = None) -> Signal:
    """Send a signal to the engine of connector `connector_name` running in this process (its
    in-process channel must be enabled); `data` is JSON text or a mapping, `signal_id` a new UUID
    when not given. The signal sent."""
    signal = new_signal(signal_type, data, signal_id, IN_PROCESS)
    in_process_channel(connector_name).send(signal)
    return signal


# ----------------------------------------------------------------------------------- the channels


def enabled_channels(config: Configuration) -> list[str]:
    """`signal.enabled.channels`, lower-cased, each once, in order."""
    names: list[str] = []
    for item in config.get("signal.enabled.channels"):
        name = item.strip().lower()
        if name not in names:
            names.append(name)
    return names


def open_channels(config: Configuration, topic_prefix: str | None = None) -> list[SignalChannel]:
    """The enabled channels the engine polls (not started): every name of
    `signal.enabled.channels` but `source` (the change stream) and `jmx` (no effect)."""
    prefix = topic_prefix or config.get("topic.prefix")
    channels: list[SignalChannel] = []
    for name in enabled_channels(config):
        if name in (SOURCE, JMX):
            continue
        if name == FILE:
            channels.append(FileChannel(config.get("signal.file")))
        elif name == KAFKA:
            channels.append(KafkaChannel.from_config(config, prefix))
        elif name == IN_PROCESS:
            channels.append(InProcessChannel(prefix))
        else:  # the configuration refuses these; a Configuration built without the common fields may not
            raise SignalChannelError(f"unknown signal channel {name!r} in signal.enabled.channels; Headwater's "
                                     f"channels are {', '.join(SIGNAL_CHANNELS)}")
    return channels


def send_signal(config: Configuration, channel: str, signal: Signal, *, source: Any = None) -> str:
    """Write `signal` where the configured channel `channel` reads it; what was done, for the user.

    `file`: a line appended to `signal.file`; `kafka`: a record on the signal topic; `source`: a
    row inserted into the signal table through `source`, the connector's IncrementalSource
    (headwater.engine.signals.connector), which the caller opens and closes (the engine does not
    import connectors)."""
    name = channel.strip().lower()
    enabled = enabled_channels(config)
    if name not in SIGNAL_CHANNELS:
        raise SignalChannelError(f"unknown signal channel {channel!r}; Headwater's channels are "
                                 f"{', '.join(SIGNAL_CHANNELS)}")
    if name in (IN_PROCESS, JMX):
        raise SignalChannelError(f"signals cannot be sent to the {name} channel from outside: "
                                 + ("an application that runs the engine calls "
                                    "headwater.engine.signals.channels.send_in_process" if name == IN_PROCESS
                                    else "Headwater has no JMX"))
    if name not in enabled:
        raise SignalChannelError(f"the {name} signal channel is not enabled (signal.enabled.channels="
                                 f"{','.join(enabled) or 'none'}): the connector would not read the signal")
    if name == FILE:
        path = Path(config.get("signal.file"))
        append_signal_line(path, signal)
        return f"appended to the signal file '{path.absolute()}'"
    if name == KAFKA:
        topic = produce_signal(config, signal)
        return f"sent to partition 0 of topic '{topic}' ({config.get('signal.kafka.bootstrap.servers')})"
    if source is None:
        raise SignalChannelError("the source channel needs the connector's incremental source (the signal table)")
    source.insert_signal(signal.id, signal.type, signal.data)
    return f"inserted into the signal table '{config.get('signal.data.collection')}'"


__all__ = [
    "FILE", "IN_PROCESS", "JMX", "KAFKA", "SOURCE", "FileChannel", "InProcessChannel", "KafkaChannel",
    "SignalChannel", "SignalChannelError", "append_signal_line", "enabled_channels", "in_process_channel",
    "new_signal", "open_channels", "parse_signal", "produce_signal", "send_in_process", "send_signal",
]
