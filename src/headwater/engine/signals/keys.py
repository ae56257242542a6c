"""Chunk keys in offsets: an incremental snapshot's last key sent and its maximum key are stored
with the streaming position, so they must survive JSON. Debezium stores Java-serialized arrays;
Headwater stores JSON text of tagged values, which reads back to the same Python values (a
driver's ints, strings, decimals, dates and times, bytes, UUIDs)."""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import orjson

from headwater.engine.connector import ConnectorError


def _tag(value: Any) -> list[Any]:
    if value is None:
        return ["null", None]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", str(value)]  # beyond 64 bits too (numeric keys)
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, Decimal):
        return ["decimal", str(value)]
    if isinstance(value, dt.datetime):
        return ["datetime", value.isoformat()]
    if isinstance(value, dt.date):
        return ["date", value.isoformat()]
    if isinstance(value, dt.time):
        return ["time", value.isoformat()]
    if isinstance(value, dt.timedelta):
        return ["timedelta", [value.days, value.seconds, value.microseconds]]
    if isinstance(value, uuid.UUID):
        return ["uuid", str(value)]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ["bytes", base64.b64encode(bytes(value)).decode()]
    raise ConnectorError(f"an incremental snapshot cannot keep a key value of type {type(value).__name__} "
                         "in its offsets; use a surrogate-key column of another type")


_UNTAG = {
    "null": lambda v: None,
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "decimal": Decimal,
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "uuid": uuid.UUID,
    "bytes": base64.b64decode,
}


def encode_key(key: tuple[Any, ...] | None) -> str | None:
    return None if key is None else orjson.dumps([_tag(v) for v in key]).decode()


def decode_key(text: str | None, field: str) -> tuple[Any, ...] | None:
    if text is None:
        return None
    try:
        return tuple(_UNTAG[tag](value) for tag, value in orjson.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConnectorError(f"the stored offset's {field} is not a key Headwater wrote ({text!r}: {exc}); "
                             "remove the incremental_snapshot_* entries from the offsets to drop the "
                             "incremental snapshot") from None


def key_token(message_key: Any) -> bytes:
    """A hashable form of a record key (a dict of column values), to match streamed events to
    buffered rows."""
    return orjson.dumps(message_key, option=orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME,
                        default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (Decimal, uuid.UUID, dt.date, dt.time, dt.timedelta)):
        return str(value)
    raise TypeError(f"unsupported key value {type(value).__name__}")
