"""A decoder for PostgreSQL's ``pgoutput`` logical replication messages, protocol version 1
(PostgreSQL docs, "Logical Replication Message Formats"). Column values arrive in text format.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

UNCHANGED_TOAST = object()  # 'u': an unchanged TOASTed value the new tuple does not carry

# microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01 UTC)
PG_EPOCH_US = 946_684_800_000_000


@dataclass(frozen=True, slots=True)
class Begin:
    final_lsn: int       # LSN of the commit record
    commit_ts: int       # microseconds since 2000-01-01 UTC
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    commit_lsn: int
    end_lsn: int
    commit_ts: int


@dataclass(frozen=True, slots=True)
class RelationColumn:
    key: bool
    name: str
    type_oid: int
    typmod: int


@dataclass(frozen=True, slots=True)
class Relation:
    relid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[RelationColumn, ...]


@dataclass(frozen=True, slots=True)
class Insert:
    relid: int
    new: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Update:
    relid: int
    old: tuple[object, ...] | None   # with REPLICA IDENTITY FULL: the whole old row
    new: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Delete:
    relid: int
    old: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Truncate:
    relids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Other:
    """Type, Origin and logical-decoding messages: nothing the capture job uses."""

    kind: str


Message = Begin | Commit | Relation | Insert | Update | Delete | Truncate | Other


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def byte(self) -> str:
        value = chr(self.data[self.pos])
        self.pos += 1
        return value

    def string(self) -> str:
        end = self.data.index(b"\0", self.pos)
        value = self.data[self.pos:end].decode()
        self.pos = end + 1
        return value

    def tuple(self) -> tuple[object, ...]:
        values: list[object] = []
        for _ in range(self.take("!h")):
            kind = self.byte()
            if kind == "n":
                values.append(None)
            elif kind == "u":
                values.append(UNCHANGED_TOAST)
            elif kind in ("t", "b"):
                length = self.take("!i")
                raw = self.data[self.pos:self.pos + length]
                self.pos += length
                values.append(raw.decode() if kind == "t" else raw)
            else:
                raise ValueError(f"pgoutput: unknown tuple column kind {kind!r}")
        return tuple(values)


def decode(data: bytes) -> Message:
    """One message (the payload of one XLogData)."""
    r = _Reader(data)
    kind = r.byte()
    if kind == "B":
        return Begin(r.take("!Q"), r.take("!q"), r.take("!I"))
    if kind == "C":
        r.take("!b")  # flags, unused
        return Commit(r.take("!Q"), r.take("!Q"), r.take("!q"))
    if kind == "R":
        relid, namespace, name, ident = r.take("!I"), r.string(), r.string(), r.byte()
        columns = []
        for _ in range(r.take("!h")):
            flags = r.take("!b")
            columns.append(RelationColumn(bool(flags & 1), r.string(), r.take("!I"), r.take("!i")))
        return Relation(relid, namespace, name, ident, tuple(columns))
    if kind == "I":
        relid = r.take("!I")
        if r.byte() != "N":
            raise ValueError("pgoutput: Insert without a new tuple")
        return Insert(relid, r.tuple())
    if kind == "U":
        relid = r.take("!I")
        marker = r.byte()
        old = None
        if marker in ("K", "O"):
            old = r.tuple()
            marker = r.byte()
        if marker != "N":
            raise ValueError("pgoutput: Update without a new tuple")
        return Update(relid, old, r.tuple())
    if kind == "D":
        relid = r.take("!I")
        if r.byte() not in ("K", "O"):
            raise ValueError("pgoutput: Delete without an old tuple")
        return Delete(relid, r.tuple())
    if kind == "T":
        count = r.take("!I")
        r.take("!b")  # options (CASCADE / RESTART IDENTITY)
        return Truncate(tuple(r.take("!I") for _ in range(count)))
    if kind in ("Y", "O", "M"):
        return Other(kind)
    raise ValueError(f"pgoutput: unknown message type {kind!r}")
