"""Wiring for the standalone runner (like Debezium Server): configuration -> connector, converters,
sink, offset store and engine."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from headwater.config import ConfigError, HeadwaterConfig
from headwater.engine.connector import SourceConnector
from headwater.engine.coordinator import Engine, EngineSettings, Sink
from headwater.engine.offsets import FileOffsetStore, MemoryOffsetStore, OffsetStore
from headwater.serialization.json import JsonConverter, RecordSerializer
from headwater.sinks.files import FilesSink, JsonlSink, StdoutSink


def build_connector(config: HeadwaterConfig) -> SourceConnector:
    if config.connector_key == "postgresql":
        from headwater.connectors.postgres.connector import PostgresConnector

        return PostgresConnector(config.connector)
    raise ConfigError([f"connector {config.connector_key!r} is not available in this build"])


def run_id() -> str:
    """Debezium's runId header is a time-ordered UUID (version 7)."""
    return str(uuid.uuid7()) if hasattr(uuid, "uuid7") else str(uuid.uuid4())


def build_serializer(config: HeadwaterConfig, connector: SourceConnector) -> RecordSerializer:
    c = config.connector
    key = JsonConverter(c.get("key.converter.schemas.enable"), c.get("key.converter.replace.null.with.default"))
    value = JsonConverter(c.get("value.converter.schemas.enable"),
                          c.get("value.converter.replace.null.with.default"))
    header = JsonConverter(c.get("header.converter.schemas.enable"), True)
    context = [
        ("__debezium.context.connectorLogicalName", c.get("topic.prefix")),
        ("__debezium.context.taskId", "0"),
        ("__debezium.context.connectorName", connector.connector_name),
        ("__debezium.context.runId", run_id()),
    ]
    return RecordSerializer(key, value, header, context)


def build_sink(config: HeadwaterConfig, serializer: RecordSerializer) -> Sink:
    kind = config.sink_type or "stdout"
    sink = config.sink
    if kind == "jsonl":
        return JsonlSink(sink.get("path"), serializer, fsync=sink.get("fsync"))
    if kind == "files":
        return FilesSink(sink.get("directory"), serializer, fsync=sink.get("fsync"))
    if kind == "stdout":
        return StdoutSink(serializer)
    raise ConfigError([f"unknown sink type {kind!r}: expected jsonl, files or stdout"])


def build_offset_store(config: HeadwaterConfig) -> OffsetStore:
    path = config.connector.get("offset.storage.file.filename")
    if path == ":memory:":
        return MemoryOffsetStore()
    if not path:
        path = str(Path(".headwater") / f"{config.connector.get('topic.prefix')}.offsets.json")
    return FileOffsetStore(path)


def engine_settings(config: HeadwaterConfig) -> EngineSettings:
    c = config.connector
    return EngineSettings(
        max_queue_size=c.get("max.queue.size"),
        max_queue_size_in_bytes=c.get("max.queue.size.in.bytes"),
        max_batch_size=c.get("max.batch.size"),
        poll_interval_ms=c.get("poll.interval.ms"),
        offset_flush_interval_ms=c.get("offset.flush.interval.ms"),
    )


def build_engine(config: HeadwaterConfig, *, sink: Sink | None = None, **kwargs: Any) -> Engine:
    connector = build_connector(config)
    serializer = build_serializer(config, connector)
    return Engine(connector, sink or build_sink(config, serializer), build_offset_store(config),
                  engine_settings(config), **kwargs)
