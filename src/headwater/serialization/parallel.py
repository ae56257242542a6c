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
import logging
import multiprocessing
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from headwater.engine.memory import die_with_parent, tune_allocator
from headwater.engine.records import EncodedBatch, OffsetMarker, SourceRecord
from headwater.serialization.json import EncodedLines, JsonConverter, RecordSerializer


@dataclass(frozen=True)
class SerializerSettings:
    key_schemas_enable: bool = True
    value_schemas_enable: bool = True
    header_schemas_enable: bool = True
    key_replace_null_with_default: bool = True
    value_replace_null_with_default: bool = True
    key_decimal_format: str = "base64"      # key/value.converter.decimal.format
    value_decimal_format: str = "base64"
    context_headers: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def create(self, *, in_place: bool = False) -> RecordSerializer:
        # key structs are shared with the key-change headers: converted in place they would reach
        # the header converter already rendered, which is only harmless when both render alike
        keys_in_place = in_place and self.key_decimal_format == "base64"
        return RecordSerializer(
            JsonConverter(self.key_schemas_enable, self.key_replace_null_with_default, in_place=keys_in_place,
                          decimal_format=self.key_decimal_format),
            JsonConverter(self.value_schemas_enable, self.value_replace_null_with_default, in_place=in_place,
                          decimal_format=self.value_decimal_format),
            JsonConverter(self.header_schemas_enable, True, in_place=keys_in_place),
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
        if type(item) is EncodedLines:  # rows a builder's fast path already rendered
            offset = item.offset()
            if item.topic != topic:
                if parts:
                    segments.append((topic, count, b"".join(parts)))  # type: ignore[arg-type]
                topic, parts, count = item.topic, [], 0
            parts += item.parts
            count += item.count
            continue
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


class PoolAborted(Exception):
    """The pool is shutting down after a failure; a worker waiting for its turn gives up."""


@dataclass
class _Worker:
    builder: Any
    serializer: RecordSerializer
    writer: Any            # appends encoded segments to the sink's files, or None
    turn: Any              # shared counter: the sequence number of the chunk that may write next
    cond: Any
    abort: Any


_worker: _Worker | None = None


def _init_worker(builder_settings: Any, serializer_settings: SerializerSettings, target: Any, turn: Any,
                 cond: Any, abort: Any, parent: int, log_level: int = logging.WARNING) -> None:
    global _worker
    die_with_parent()
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)
    # A process group of its own: Ctrl-C in a terminal and a stop that signals the whole group
    # (`kill -TERM -PGID`, systemd's default KillMode) reach the runner only, which drains through
    # its workers before it exits; the workers die with it (above).
    os.setpgrp()
    tune_allocator()
    # a spawned process starts without logging handlers: warnings of the builder (e.g. an event
    # skipped per event.processing.failure.handling.mode=warn) go to stderr like the runner's
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    builder = builder_settings.create_builder()
    serializer = serializer_settings.create(in_place=True)  # a worker's records live only to be serialized
    if hasattr(builder, "render_with"):
        builder.render_with(serializer)  # its output goes to this serializer only: it may render lines itself
    _worker = _Worker(
        builder=builder, serializer=serializer,
        writer=target.open_writer() if target is not None else None,
        turn=turn, cond=cond, abort=abort)


def _ready(_: int) -> int:
    return os.getpid()


def _encode(chunk: Any, seq: int) -> EncodedBatch:
    w = _worker
    assert w is not None
    if w.writer is None:
        return encode_items(w.builder.build(chunk), w.serializer)
    try:
        batch = encode_items(w.builder.build(chunk), w.serializer)
    except BaseException:
        _in_turn(w, seq, None)  # let later chunks write, then report the failure
        raise
    _in_turn(w, seq, batch)
    return batch


def _in_turn(w: _Worker, seq: int, batch: EncodedBatch | None) -> None:
    """Append this chunk's lines once every earlier chunk has appended its own, so the sink's
    files hold records in stream order although several processes write them."""
    with w.cond:
        while w.turn.value != seq:
            if w.abort.value:
                raise PoolAborted(f"pool shut down while chunk {seq} waited to be written")
            w.cond.wait(0.5)
        try:
            if batch is not None:
                w.writer.write_segments(batch.segments)
                batch.segments = [(topic, n, b"") for topic, n, _ in batch.segments]
                batch.written = True
        finally:
            w.turn.value = seq + 1
            w.cond.notify_all()


class EncodingPool:
    """Worker processes (spawned, so nothing of the reader's threads or connections is inherited).

    With a `target` (a file sink's `worker_target()`), workers also append their lines to the
    sink's files themselves, in submission order, and hand back only counts and the offset: the
    encoded bytes then never cross a pipe, which otherwise costs the reader process more CPU in
    copies than the workers save it. The engine still fsyncs and stores offsets in order."""

    def __init__(self, workers: int, serializer_settings: SerializerSettings, target: Any = None) -> None:
        self.workers = workers
        self.serializer_settings = serializer_settings
        self.target = target
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None
        self._abort: Any = None
        self._seq = 0
        self._closed = threading.Event()
        self._keeper: threading.Thread | None = None

    def start(self, builder_settings: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        turn, cond, self._abort = ctx.Value("q", 0, lock=False), ctx.Condition(), ctx.Value("b", 0, lock=False)
        self._seq = 0
        executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=self.workers, mp_context=ctx, initializer=_init_worker,
            initargs=(builder_settings, self.serializer_settings, self.target, turn, cond, self._abort, os.getpid(),
                      logging.getLogger().getEffectiveLevel()))
        self._executor = executor
        # Workers ask to die with their parent, and the kernel means the parent *thread* (the one
        # that spawned them). They are spawned here, all at once (fail fast, and pay the start-up
        # before streaming begins), by a thread that lives as long as the pool — not by the
        # caller, the connector's reader thread, which ends when a lost connection is retried
        # while records of its chunks are still being written.
        self._closed = threading.Event()
        spawned: list[BaseException | None] = []

        def keep() -> None:
            try:
                list(executor.map(_ready, range(self.workers)))
                spawned.append(None)
            except BaseException as exc:
                spawned.append(exc)
                return
            self._closed.wait()

        self._keeper = threading.Thread(target=keep, name="headwater-pool", daemon=True)
        self._keeper.start()
        while not spawned and self._keeper.is_alive():
            self._keeper.join(0.05)
        if spawned and spawned[0] is not None:
            raise spawned[0]

    def submit(self, chunk: Any) -> concurrent.futures.Future[EncodedBatch]:
        assert self._executor is not None, "EncodingPool.start() was not called"
        seq, self._seq = self._seq, self._seq + 1
        return self._executor.submit(_encode, chunk, seq)

    def close(self) -> None:
        if self._executor is not None:
            self._abort.value = 1  # workers waiting for a turn that will never come give up
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
            self._closed.set()


__all__ = ["EncodingPool", "OffsetMarker", "SerializerSettings", "encode_items"]
