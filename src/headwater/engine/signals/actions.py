"""Debezium's signal actions and their parameters (ExecuteSnapshot, StopSnapshot, ...): what a
signal's `data` says, checked. A signal that cannot be acted on raises SignalError; the caller
logs it and goes on."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from headwater.engine.signals.signal import Signal, SignalError

EXECUTE_SNAPSHOT = "execute-snapshot"
STOP_SNAPSHOT = "stop-snapshot"
PAUSE_SNAPSHOT = "pause-snapshot"
RESUME_SNAPSHOT = "resume-snapshot"
LOG = "log"
SCHEMA_CHANGES = "schema-changes"

INCREMENTAL = "incremental"
BLOCKING = "blocking"


@dataclass(frozen=True)
class SnapshotRequest:
    """An `execute-snapshot` (or `stop-snapshot`) signal: `collections` are regular expressions
    (a stop without them stops the whole incremental snapshot); `conditions` maps a collection (as
    named in the signal) to its filter — a condition for an incremental snapshot, a whole SELECT
    for a blocking one."""

    kind: str
    collections: list[str]
    conditions: dict[str, str] = field(default_factory=dict)
    surrogate_key: str | None = None

    def to_text(self) -> str:
        """As JSON text (an offset's value: offsets stay flat and primitive)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_text(cls, text: str) -> SnapshotRequest:
        data = json.loads(text)
        return cls(str(data["kind"]), [str(c) for c in data["collections"]],
                   {str(k): str(v) for k, v in (data.get("conditions") or {}).items()}, data.get("surrogate_key"))


def _kind(signal: Signal, data: dict[str, Any]) -> str:
    value = data.get("type") or INCREMENTAL
    if not isinstance(value, str) or value.lower() not in (INCREMENTAL, BLOCKING):
        raise SignalError(f"{signal}: unexpected snapshot type {value!r} (incremental or blocking); "
                          "the signal is skipped")
    return value.lower()


def _collections(signal: Signal, data: dict[str, Any], required: bool) -> list[str]:
    value = data.get("data-collections")
    if value is None or value == []:
        if required:
            raise SignalError(f"{signal}: 'data-collections' is missing or empty; nothing to snapshot")
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SignalError(f"{signal}: 'data-collections' must be an array of strings, not {value!r}")
    return [v.strip() for v in value]


def execute_snapshot(signal: Signal) -> SnapshotRequest:
    data = signal.payload()
    collections = _collections(signal, data, required=True)
    kind = _kind(signal, data)
    conditions: dict[str, str] = {}
    legacy = data.get("additional-condition")
    if legacy is not None:
        if not isinstance(legacy, str):
            raise SignalError(f"{signal}: 'additional-condition' must be a string")
        # Debezium's deprecated single condition applies to every requested collection
        conditions.update({c: legacy for c in collections if legacy.strip()})
    entries = data.get("additional-conditions") or []
    if not isinstance(entries, list):
        raise SignalError(f"{signal}: 'additional-conditions' must be an array of "
                          '{"data-collection": ..., "filter": ...}')
    for entry in entries:
        if (not isinstance(entry, dict) or not isinstance(entry.get("data-collection"), str)
                or not isinstance(entry.get("filter"), str)):
            raise SignalError(f"{signal}: each additional condition needs a 'data-collection' and a 'filter' "
                              f"string, not {entry!r}")
        conditions[entry["data-collection"].strip()] = entry["filter"]
    surrogate = data.get("surrogate-key")
    if surrogate is not None and not isinstance(surrogate, str):
        raise SignalError(f"{signal}: 'surrogate-key' must be a column name")
    surrogate = surrogate.strip() if surrogate and surrogate.strip() else None
    return SnapshotRequest(kind, collections, conditions, surrogate)


def stop_snapshot(signal: Signal) -> SnapshotRequest:
    data = signal.payload()
    return SnapshotRequest(_kind(signal, data), _collections(signal, data, required=False))


def log_message(signal: Signal) -> str:
    message = signal.payload().get("message")
    if not isinstance(message, str):
        raise SignalError(f"{signal}: a log signal needs a 'message' string")
    return message
