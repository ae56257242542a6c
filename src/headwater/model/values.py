"""Encodings of Connect logical values shared by schemas and converters."""

from __future__ import annotations

import decimal
import struct as stdstruct
from decimal import Context, Decimal
from typing import Any

# Wide enough that scaleb() is exact for any PostgreSQL numeric (up to 131072 digits before the
# point and 16383 after).
_EXACT = Context(prec=150_000, Emax=999_999, Emin=-999_999)


def unscaled_int(value: Decimal, scale: int) -> int:
    """value * 10**scale as an exact integer (no context rounding; digits past scale truncated)."""
    if not value.is_finite():
        raise ValueError(f"{value} has no decimal representation")
    return int(value.scaleb(scale, _EXACT))


def decimal_to_unscaled_bytes(value: Decimal, scale: int) -> bytes:
    """Connect's Decimal encoding: the big-endian two's-complement unscaled value."""
    unscaled = unscaled_int(value, scale)
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def decimal_json_number(value: Decimal, scale: int) -> bytes:
    """The value at the schema's scale as Jackson writes a BigDecimal (BigDecimal.toString: plain,
    or scientific when the exponent is small, e.g. 1E-10; Python's str() follows the same rule)."""
    return f"{Decimal(f'{unscaled_int(value, scale)}E{-scale}')}".encode("ascii")


def same_value(a: Any, b: Any) -> bool:
    """Equality of converted values as Java's equals of Connect values, which Debezium uses to
    compare an update's before and after (skip.messages.without.change): a double equals itself
    also when NaN but not its negative zero, a decimal's scale counts, bytes by content; lists,
    maps and structs element by element."""
    if a is None or b is None:
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return _DOUBLE.pack(a) == _DOUBLE.pack(b) or (a != a and b != b)
    if isinstance(a, decimal.Decimal):
        return a == b and a.as_tuple().exponent == b.as_tuple().exponent
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return bool(a == b)


_DOUBLE = stdstruct.Struct(">d")
