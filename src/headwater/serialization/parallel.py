"""Building and serializing records in worker processes.

A connector's reader thread keeps only the cheap part of streaming (receiving messages and
tracking the position) and hands runs of raw messages (`chunks`) to a pool of processes. Each
worker turns a chunk into records with the connector's builder and serializes them with the
JSON converter; the engine receives the encoded lines in submission order. Python threads share
one interpreter lock, so this is how one connector uses more than one core.

The connector supplies a picklable builder settings object with `create_builder()`, whose result
has `build(chunk) -> list[SourceRecord | OffsetMarker]`.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from dataclasses import dataclass, field
from typing import Any

from headwater.engine.records import EncodedBatch, OffsetMarker, SourceRecord
from headwater.serialization.json import JsonConverter, RecordSerializer


@dataclass(frozen=True)
class SerializerSettings:
    key_schemas_enable: bool = True
    value_schemas_enable: bool = True
    header_schemas_enable: bool = True
    key_replace_null_with_default: bool = True
    value_replace_null_with_default: bool = True
    context_headers: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def create(self, *, in_place: bool = False) -> RecordSerializer:
        return RecordSerializer(
            JsonConverter(self.key_schemas_enable, self.key_replace_null_with_default, in_place=in_place),
            JsonConverter(self.value_schemas_enable, self.value_replace_null_with_default, in_place=in_place),
            JsonConverter(self.header_schemas_enable, True, in_place=in_place),
            list(self.context_headers),
        )


def encode_items(items: list[Any], serializer: RecordSerializer) -> EncodedBatch:
    """Serialize records into per-topic runs of lines, in order; keep the last offset."""
    segments: list[tuple[str, int, bytes]] = []
    offset = None
    topic = None
    parts: list[bytes] = []
    count = 0
    append_line = serializer.append_line
    for item in items:
        offset = item.offset
        if not isinstance(item, SourceRecord):
            continue
        if item.topic != topic:
            if parts:
                segments.append((topic, count, b"".join(parts)))  # type: ignore[arg-type]
            topic, parts, count = item.topic, [], 0
        append_line(parts, item)
        count += 1
    if parts:
        segments.append((topic, count, b"".join(parts)))  # type: ignore[arg-type]
    return EncodedBatch(segments, offset)


_builder: Any = None
_serializer: RecordSerializer | None = None


def _init_worker(builder_settings: Any, serializer_settings: SerializerSettings) -> None:
    global _builder, _serializer
    _builder = builder_settings.create_builder()
    _serializer = serializer_settings.create(in_place=True)  # a worker's records live only to be serialized


def _ready(_: int) -> int:
    return os.getpid()


def _encode(chunk: Any) -> EncodedBatch:
    assert _builder is not None and _serializer is not None
    return encode_items(_builder.build(chunk), _serializer)


class EncodingPool:
    """Worker processes (spawned, so nothing of the reader's threads or connections is inherited)."""

    def __init__(self, workers: int, serializer_settings: SerializerSettings) -> None:
        self.workers = workers
        self.serializer_settings = serializer_settings
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None

    def start(self, builder_settings: Any) -> None:
        self._executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker, initargs=(builder_settings, self.serializer_settings))
        # fail fast (and pay the start-up) before streaming begins
        list(self._executor.map(_ready, range(self.workers)))

    def submit(self, chunk: Any) -> concurrent.futures.Future[EncodedBatch]:
        assert self._executor is not None, "EncodingPool.start() was not called"
        return self._executor.submit(_encode, chunk)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


__all__ = ["EncodingPool", "OffsetMarker", "SerializerSettings", "encode_items"]
