"""SQL Server's log sequence numbers (Debezium's `Lsn`): 10 bytes, ordered as unsigned bytes.

The text form is Debezium's, lower case `0000002b:00000f28:0003` (4 + 4 + 2 bytes as hex). A
NULL LSN (`None` here) sorts before every LSN and renders as `NULL` in logs only (offsets and
`source` blocks carry null).
"""

from __future__ import annotations

LSN_BYTES = 10
ZERO = bytes(LSN_BYTES)


def lsn_to_str(lsn: bytes | None) -> str | None:
    if lsn is None:
        return None
    h = lsn.hex()
    return f"{h[0:8]}:{h[8:16]}:{h[16:20]}"


def lsn_from_str(text: str | None) -> bytes | None:
    """The LSN of Debezium's text form (also accepts the driver's upper case hex without colons
    and the `NULL` spelling Debezium writes for a missing LSN)."""
    if text is None or text == "NULL":
        return None
    digits = text.replace(":", "").strip()
    if digits.lower().startswith("0x"):
        digits = digits[2:]
    raw = bytes.fromhex(digits)
    if len(raw) != LSN_BYTES:
        raise ValueError(f"an LSN has {LSN_BYTES} bytes, got {text!r}")
    return raw


def describe(lsn: bytes | None) -> str:
    return lsn_to_str(lsn) or "NULL"


def increment(lsn: bytes) -> bytes:
    """The next LSN (`sys.fn_cdc_increment_lsn` on SQL Server: the 10-byte value + 1). Used only
    where no connection is at hand (e.g. an executor's range); the streaming loop asks the server,
    as Debezium does."""
    return (int.from_bytes(lsn, "big") + 1).to_bytes(LSN_BYTES, "big")


def position_key(commit: bytes | None, change: bytes | None, serial: int) -> str:
    """A record's position inside one database: commit LSN, change LSN (20 hex digits each; a NULL
    LSN as zeros, below every real one) and event serial number (8 hex digits)."""
    return f"{(commit or ZERO).hex()}{(change or ZERO).hex()}{serial:08x}"
