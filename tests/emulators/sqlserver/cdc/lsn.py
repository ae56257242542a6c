"""Log sequence numbers as the emulator makes them (DESIGN.md, "CDC").

SQL Server's LSN is ``binary(10)``: VLF sequence number (4 bytes), log block offset (4 bytes), slot
(2 bytes), compared byte-wise. The emulator puts PostgreSQL's 64-bit WAL position in the first eight
bytes and a slot number in the last two: 0 for a commit, and for row changes the ordinal among the
changes that share one WAL record (a multi-insert record carries several rows). Byte order keeps
PostgreSQL's order, so ``bytea`` comparison in PostgreSQL orders LSNs as SQL Server does.
"""

from __future__ import annotations

ZERO = bytes(10)


def from_pg(position: int, slot: int = 0) -> bytes:
    """The 10-byte LSN of a PostgreSQL WAL position (an int, as psycopg2's replication API gives it)."""
    return position.to_bytes(8, "big") + slot.to_bytes(2, "big")


def parse_pg(text: str) -> int:
    """PostgreSQL's printed LSN ``'16/B374D848'`` as an int."""
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def to_pg(lsn: bytes) -> int:
    """The WAL position in the first eight bytes."""
    return int.from_bytes(lsn[:8], "big")


def to_string(lsn: bytes) -> str:
    """SQL Server's printed form, ``0000002a:00000d98:0001`` (8hex:8hex:4hex)."""
    hexed = lsn.hex()
    return f"{hexed[:8]}:{hexed[8:16]}:{hexed[16:20]}"


def parse(text: str) -> bytes:
    """The inverse of :func:`to_string`."""
    parts = text.split(":")
    if len(parts) != 3 or [len(p) for p in parts] != [8, 8, 4]:
        raise ValueError(f"not an LSN: {text!r}")
    return bytes.fromhex("".join(parts))
