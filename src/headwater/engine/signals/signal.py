"""A signal, as every channel delivers it: Debezium's SignalRecord (id, type, data)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


class SignalError(Exception):
    """A signal that cannot be acted on: the message says why (it is logged, the stream goes on)."""


@dataclass(frozen=True)
class Signal:
    """`id`: the sender's (used in logs and as the incremental snapshot's correlation id);
    `type`: the action (`execute-snapshot`, `stop-snapshot`, `log`, ...); `data`: the JSON text
    of its parameters, or None; `channel`: where it came from (source, file, kafka, ...)."""

    id: str
    type: str
    data: str | None
    channel: str = "source"

    def payload(self) -> dict[str, Any]:
        """`data` parsed ({} when empty); SignalError when it is not a JSON object."""
        if self.data is None or not self.data.strip():
            return {}
        try:
            parsed = orjson.loads(self.data)
        except orjson.JSONDecodeError as exc:
            raise SignalError(f"signal {self.id!r} ({self.type}): its data is not valid JSON ({exc})") from None
        if not isinstance(parsed, dict):
            raise SignalError(f"signal {self.id!r} ({self.type}): its data must be a JSON object, "
                              f"not {type(parsed).__name__}")
        return parsed

    def __str__(self) -> str:
        return f"signal {self.id!r} of type {self.type!r} from the {self.channel} channel"


def signal_from_row(values: list[Any], channel: str = "source") -> Signal:
    """A signal-table row: its first three columns are id, type and data, whatever their names
    (Debezium reads them by position)."""
    if len(values) < 3:
        raise SignalError(f"the signal table has {len(values)} columns; it needs three: id, type, data")
    sid, stype, data = values[0], values[1], values[2]
    if sid is None or stype is None:
        raise SignalError("a signal row without id or type")
    return Signal(str(sid), str(stype), None if data is None else str(data), channel)
