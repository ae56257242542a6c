"""Wiring for the standalone runner (like Debezium Server): configuration -> connector, converters,
sink, offset store and engine."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from headwater.config import ConfigError, HeadwaterConfig
from headwater.config.common import MEMORY_OFFSET_STORE
from headwater.engine import registry
from headwater.engine.connector import SourceConnector
from headwater.engine.coordinator import Engine, EngineSettings, Sink
from headwater.engine.offsets import FileOffsetStore, MemoryOffsetStore, OffsetStore
from headwater.serialization.json import RecordSerializer
from headwater.serialization.parallel import EncodingPool, SerializerSettings
from headwater.sinks.files import FilesSink, JsonlSink, StdoutSink


def build_connector(config: HeadwaterConfig) -> SourceConnector:
    return registry.build_connector(config.connector_key, config.connector)


def run_id() -> str:
    """Debezium's runId header is a time-ordered UUID (version 7)."""
    return str(uuid.uuid7()) if hasattr(uuid, "uuid7") else str(uuid.uuid4())


def serializer_settings(config: HeadwaterConfig, connector: SourceConnector) -> SerializerSettings:
    c = config.connector
    return SerializerSettings(
        key_schemas_enable=c.get("key.converter.schemas.enable"),
        value_schemas_enable=c.get("value.converter.schemas.enable"),
        header_schemas_enable=c.get("header.converter.schemas.enable"),
        key_replace_null_with_default=c.get("key.converter.replace.null.with.default"),
        value_replace_null_with_default=c.get("value.converter.replace.null.with.default"),
        key_decimal_format=c.get("key.converter.decimal.format"),
        value_decimal_format=c.get("value.converter.decimal.format"),
        context_headers=(
            ("__debezium.context.connectorLogicalName", c.get("topic.prefix")),
            ("__debezium.context.taskId", "0"),
            ("__debezium.context.connectorName", connector.connector_name),
            ("__debezium.context.runId", run_id()),
        ),
    )


def encoding_workers(config: HeadwaterConfig) -> int:
    configured = config.connector.get("encoding.workers")
    if configured >= 0:
        return configured
    return min(2, os.cpu_count() or 1) if (os.cpu_count() or 1) > 1 else 0


def build_sink(config: HeadwaterConfig, serializer: RecordSerializer) -> Sink:
    kind = config.sink_type or "stdout"
    sink = config.sink
    if kind == "jsonl":
        return JsonlSink(sink.get("path"), serializer, fsync=sink.get("fsync"))
    if kind == "files":
        return FilesSink(sink.get("directory"), serializer, fsync=sink.get("fsync"))
    if kind == "stdout":
        return StdoutSink(serializer, pretty=sink.get("pretty"))
    raise ConfigError([f"unknown sink type {kind!r}: expected jsonl, files or stdout"])


def build_offset_store(config: HeadwaterConfig) -> OffsetStore:
    path = config.connector.get("offset.storage.file.filename")
    if path == ":memory:" or config.connector.get("offset.storage") == MEMORY_OFFSET_STORE:
        return MemoryOffsetStore()
    if not path:
        path = str(Path(".headwater") / f"{config.connector.get('topic.prefix')}.offsets.json")
    return FileOffsetStore(path)


def engine_settings(config: HeadwaterConfig) -> EngineSettings:
    return EngineSettings.from_connector(config.connector)


def build_engine(config: HeadwaterConfig, *, sink: Sink | None = None, **kwargs: Any) -> Engine:
    connector = build_connector(config)
    settings = serializer_settings(config, connector)
    workers = encoding_workers(config)
    # Worker processes hand over serialized lines; a caller watching records (on_batch) or
    # bringing its own sink gets them built on the reader thread instead.
    own_sink = sink is None
    sink = sink or build_sink(config, settings.create())
    if workers > 0 and own_sink and kwargs.get("on_batch") is None:
        target = sink.worker_target() if hasattr(sink, "worker_target") else None
        connector.use_encoding_pool(EncodingPool(workers, settings, target))
    return Engine(connector, sink, build_offset_store(config), engine_settings(config), **kwargs)
