"""Standalone sinks writing the conformance line format: one file, one file per topic, stdout."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import BinaryIO

import orjson

from headwater.engine.records import EncodedBatch, SourceRecord
from headwater.serialization.json import RecordSerializer


def repair_torn_tail(path: str | os.PathLike[str]) -> int:
    """Cut a partial last line left by a crash (a killed writer can leave half a line), so the
    next run's lines start on a line of their own. The cut part was never acknowledged — offsets
    are stored only after an fsync of complete batches — so the restart writes it again.
    Returns the number of bytes removed."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            block = os.pread(fd, end - start, start)
            i = block.rfind(b"\n")
            if i >= 0:
                end = start + i + 1
                break
            end = start
        if end != size:
            os.ftruncate(fd, end)
            os.fsync(fd)
        return size - end
    finally:
        os.close(fd)


class _AppendWriter:
    """Worker-process side of a file sink: appends encoded segments with O_APPEND writes."""

    def __init__(self, path: str | None, directory: str | None) -> None:
        self.path = path
        self.directory = directory
        self._fds: dict[str, int] = {}

    def _fd(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is None:
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._fds[name] = fd
        return fd

    def write_segments(self, segments: list[tuple[str, int, bytes]]) -> None:
        for topic, _, lines in segments:
            name = self.path if self.path is not None else os.path.join(self.directory or ".", topic_file_name(topic))
            fd = self._fd(name)
            view = memoryview(lines)
            while view:
                view = view[os.write(fd, view):]


class WorkerTarget:
    """Picklable description of a file sink, for worker processes that append to it directly."""

    def __init__(self, path: str | None = None, directory: str | None = None) -> None:
        self.path = path
        self.directory = directory

    def open_writer(self) -> _AppendWriter:
        return _AppendWriter(self.path, self.directory)


def topic_file_name(topic: str) -> str:
    return f"{_UNSAFE.sub('_', topic)}.jsonl"


class JsonlSink:
    """All records in one JSONL file, appended. Each batch is handed to the OS at once (readers
    tailing the file see it); `flush` fsyncs, before offsets are stored."""

    def __init__(self, path: str | os.PathLike[str], serializer: RecordSerializer, *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.serializer = serializer
        self.fsync = fsync
        repair_torn_tail(self.path)
        self._file: BinaryIO = open(self.path, "ab", buffering=1 << 20)

    def write(self, records: list[SourceRecord]) -> None:
        parts: list[bytes] = []
        append = self.serializer.append_line
        for r in records:
            append(parts, r)
        # one join per batch: far cheaper than a buffered write per piece
        self._file.write(b"".join(parts))
        self._file.flush()

    def write_encoded(self, batch: EncodedBatch) -> None:
        for _, _, lines in batch.segments:
            self._file.write(lines)
        self._file.flush()

    def worker_target(self) -> WorkerTarget:
        return WorkerTarget(path=str(self.path))

    def flush(self) -> None:
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())  # also flushes what worker processes appended

    def close(self) -> None:
        if not self._file.closed:
            self.flush()
            self._file.close()


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class FilesSink:
    """One `<topic>.jsonl` file per topic under a directory."""

    def __init__(self, directory: str | os.PathLike[str], serializer: RecordSerializer, *, fsync: bool = True) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(self.directory):
            if entry.name.endswith(".jsonl"):
                repair_torn_tail(entry.path)
        self.serializer = serializer
        self.fsync = fsync
        self._files: dict[str, BinaryIO] = {}

    def _file(self, topic: str) -> BinaryIO:
        f = self._files.get(topic)
        if f is None:
            f = open(self.directory / f"{_UNSAFE.sub('_', topic)}.jsonl", "ab", buffering=1 << 16)
            self._files[topic] = f
        return f

    def write(self, records: list[SourceRecord]) -> None:
        line = self.serializer.line
        touched = set()
        for r in records:
            f = self._file(r.topic)
            f.write(line(r))
            touched.add(f)
        for f in touched:
            f.flush()

    def write_encoded(self, batch: EncodedBatch) -> None:
        touched = set()
        for topic, _, lines in batch.segments:
            f = self._file(topic)
            f.write(lines)
            touched.add(f)
        for f in touched:
            f.flush()

    def worker_target(self) -> WorkerTarget:
        return WorkerTarget(directory=str(self.directory))

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        if self.fsync:
            # files that only worker processes appended to have no file object here
            own = {Path(f.name).name for f in self._files.values()}
            for entry in os.scandir(self.directory):
                if entry.name.endswith(".jsonl") and entry.name not in own:
                    fd = os.open(entry.path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)

    def close(self) -> None:
        self.flush()
        for f in self._files.values():
            f.close()
        self._files.clear()


class StdoutSink:
    """Records on standard output: one line each, or (``pretty``) indented for people to read."""

    def __init__(self, serializer: RecordSerializer, stream: BinaryIO | None = None, *, pretty: bool = False) -> None:
        self.serializer = serializer
        self.stream = stream or sys.stdout.buffer
        self.pretty = pretty

    def write(self, records: list[SourceRecord]) -> None:
        line = self.serializer.line
        for r in records:
            self._out(line(r))

    def write_encoded(self, batch: EncodedBatch) -> None:
        for _, _, lines in batch.segments:
            self._out(lines)

    def _out(self, lines: bytes) -> None:
        if not self.pretty:
            self.stream.write(lines)
            return
        # re-rendered by orjson: the same JSON values, though a double may be spelled differently
        # from Debezium's Java rendering (1.0E10 as 10000000000.0)
        for line in lines.splitlines():
            if line:
                self.stream.write(orjson.dumps(orjson.loads(line), option=orjson.OPT_INDENT_2) + b"\n")

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        self.flush()
