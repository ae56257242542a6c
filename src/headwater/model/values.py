"""Encodings of Connect logical values shared by schemas and converters."""

from __future__ import annotations

from decimal import Context, Decimal

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
