"""Encodings of Connect logical values shared by schemas and converters."""

from __future__ import annotations

from decimal import Decimal


def unscaled_int(value: Decimal, scale: int) -> int:
    """value * 10**scale as an exact integer (no context rounding; digits past scale truncated)."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"{value} has no decimal representation")
    n = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    n = n * 10 ** shift if shift >= 0 else n // 10 ** (-shift)
    return -n if sign else n


def decimal_to_unscaled_bytes(value: Decimal, scale: int) -> bytes:
    """Connect's Decimal encoding: the big-endian two's-complement unscaled value."""
    unscaled = unscaled_int(value, scale)
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)
