"""Offset storage: where a connector's last durable position is kept between runs.

The file store writes atomically (temp file, fsync, rename, fsync of the folder) so that a
crash leaves either the old or the new offset, never a torn file. The format is JSON keyed by
the connector's partition, like Kafka Connect's offset map."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol


class OffsetStoreError(Exception):
    pass


class OffsetStore(Protocol):
    def load(self, partition: dict[str, Any]) -> dict[str, Any] | None: ...

    def save(self, partition: dict[str, Any], offset: dict[str, Any]) -> None: ...


def _partition_key(partition: dict[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


class FileOffsetStore:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def _read_all(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise OffsetStoreError(f"cannot read offsets file {self.path}: {exc.strerror}") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OffsetStoreError(
                f"offsets file {self.path} is corrupt (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                "expected the JSON written by Headwater. Move it away to start over "
                "(the connector then takes a new snapshot per snapshot.mode)"
            ) from exc
        if not isinstance(data, dict) or not isinstance(data.get("offsets", {}), dict):
            raise OffsetStoreError(
                f"offsets file {self.path} is corrupt: expected an object with an 'offsets' map")
        return data.get("offsets", {})

    def load(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        entry = self._read_all().get(_partition_key(partition))
        if entry is None:
            return None
        if not isinstance(entry, dict):
            raise OffsetStoreError(f"offsets file {self.path} is corrupt: the offset for {partition} "
                                   "is not an object")
        return entry

    def save(self, partition: dict[str, Any], offset: dict[str, Any]) -> None:
        offsets = self._read_all() if self.path.exists() else {}
        offsets[_partition_key(partition)] = offset
        data = json.dumps({"version": 1, "offsets": offsets}, indent=1, sort_keys=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class MemoryOffsetStore:
    """For embedding and tests."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[str, Any]] = {}

    def load(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        return self.offsets.get(_partition_key(partition))

    def save(self, partition: dict[str, Any], offset: dict[str, Any]) -> None:
        self.offsets[_partition_key(partition)] = dict(offset)
