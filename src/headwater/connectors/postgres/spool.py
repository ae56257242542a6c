"""Local spool for in-progress transactions streamed by pgoutput (protocol 2, `streaming 'on'`).

With streaming on, the server sends a large transaction while it is still running, in segments
(Stream Start xid … Stream Stop) that interleave with other streamed transactions and with
ordinary BEGIN…COMMIT transactions, and ends it with Stream Commit or Stream Abort. Debezium
emits a transaction's events when it commits, so the messages of each open transaction wait
here: in a small memory buffer, spilled to a per-transaction file once the buffers of all open
transactions together pass the memory budget. Memory therefore stays bounded whatever the size
of a transaction; the disk holds about the transaction's size in pgoutput form.

Messages are stored and replayed in their protocol-1 form (the in-stream xid kept in the
record's header), so Stream Commit feeds the same builder, with the same messages, as the protocol-1
path. The xid a change carries is its (sub)transaction's: PostgreSQL sends one Stream Abort per aborted
subtransaction that had changes streamed (ROLLBACK TO SAVEPOINT sends one for the savepoint's
subtransaction and each of its streamed children), so a replay skips the data messages of every
aborted subxid. Relation and Type messages are always replayed: pgoutput sends a relation's
schema once per streamed transaction, possibly from a subtransaction that later aborts, and the
transaction's later changes still rely on it.

Nothing here is durable: after a restart the server sends every transaction that had not
committed before the acknowledged position again from its start, so the directory is emptied
when streaming starts and when it stops.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from struct import Struct
from typing import Any

log = logging.getLogger(__name__)

# record: protocol-1 payload length, message LSN, the in-stream (sub)transaction xid, then the
# protocol-1 payload (type byte and the rest, the xid taken out): a replay yields one slice per
# message and reads the xid only when a subtransaction aborted
_HEADER = Struct("!IQ4sc")
_LENGTH_LSN = Struct("!IQ")
_XID = Struct("!I")
_BODY = _LENGTH_LSN.size + _XID.size  # where the protocol-1 payload starts in a record
_READ_BLOCK = 1 << 20

# message types that carry the (sub)transaction xid right after the type byte inside a stream
_WITH_XID = frozenset(b"IUDTMRY")
# data messages: skipped at replay when their subtransaction aborted
_DATA = frozenset(b"IUDTM")
_ORIGIN = ord("O")


class SpoolError(Exception):
    """The spool directory cannot be used (created, written or read)."""


class TransactionSpool:
    """The messages of one streamed transaction, in arrival order."""

    __slots__ = ("_tail", "aborted", "buffer", "messages", "path", "spilled", "xid")

    def __init__(self, xid: int, path: Path) -> None:
        self.xid = xid
        self.path = path
        self.buffer = bytearray()
        self.spilled = 0               # bytes written to `path`
        self.aborted: set[int] = set()  # subtransactions whose changes are dropped
        self.messages = 0

    def check(self, payload: bytes) -> bool:
        """For an in-stream message without an xid: False (not stored) for a replication
        origin, an error for anything else."""
        if payload[0] == _ORIGIN:  # replication origin: nothing Debezium emits
            return False
        raise SpoolError(f"unexpected pgoutput message {chr(payload[0])!r} inside the stream of transaction "
                         f"{self.xid}")

    def spill(self) -> int:
        """Write the memory buffer to the file; returns the bytes released."""
        n = len(self.buffer)
        if not n:
            return 0
        try:
            with open(self.path, "ab") as f:
                f.write(self.buffer)
        except OSError as exc:
            raise SpoolError(f"cannot write the spool file {self.path} of streamed transaction {self.xid}: "
                             f"{exc.strerror or exc}") from None
        self.spilled += n
        self.buffer = bytearray()
        return n

    def replay(self) -> Iterator[tuple[bytes, int]]:
        """(protocol-1 payload, LSN) of every message, without aborted subtransactions' changes."""
        aborted = self.aborted
        unpack = _LENGTH_LSN.unpack_from
        xid_at = _XID.unpack_from
        for data in self._blocks():
            pos, end = 0, len(data)
            while pos + _BODY < end:
                n, lsn = unpack(data, pos)
                body = pos + _BODY
                stop = body + n
                if stop > end:
                    break
                if not (aborted and data[body] in _DATA and xid_at(data, pos + 12)[0] in aborted):
                    yield data[body:stop], lsn
                pos = stop
            if pos < end:
                self._tail = data[pos:]

    def _blocks(self) -> Iterator[bytes]:
        """The spooled records in blocks (a record split across file blocks is carried over in
        `_tail` by `replay`): the file's, then the memory buffer."""
        self._tail = b""
        if self.spilled:
            try:
                f = open(self.path, "rb")
            except OSError as exc:
                raise SpoolError(f"cannot read the spool file {self.path} of streamed transaction {self.xid}: "
                                 f"{exc.strerror or exc}") from None
            with f:
                while True:
                    block = f.read(_READ_BLOCK)
                    if not block:
                        break
                    rest, self._tail = self._tail, b""
                    yield rest + block if rest else block
        rest, self._tail = self._tail, b""
        yield rest + bytes(self.buffer) if rest else bytes(self.buffer)
        if self._tail:
            raise SpoolError(f"spool file {self.path} of streamed transaction {self.xid} ends with "
                             f"{len(self._tail)} bytes of a truncated record")

    def discard(self) -> None:
        self.buffer = bytearray()
        if self.spilled:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("could not remove the spool file %s: %s", self.path, exc)
            self.spilled = 0


class StreamSpools:
    """The open streamed transactions of one replication stream, and their shared memory budget."""

    def __init__(self, directory: Path, memory_budget: int) -> None:
        self.directory = directory
        self.memory_budget = max(memory_budget, 0)
        self.open: dict[int, TransactionSpool] = {}
        self.buffered = 0
        self.spilled_bytes = 0   # statistics: bytes ever written to disk
        self._prepared = False

    @staticmethod
    def default_directory(base: str | None, slot: str, identity: str) -> Path:
        """`<base or the system temp dir>/headwater-spool-<slot>-<hash>`: one directory per slot and
        server (a slot has one consumer at a time, so nothing else uses it while we stream)."""
        digest = hashlib.sha1(identity.encode()).hexdigest()[:10]
        return Path(base or tempfile.gettempdir()) / f"headwater-spool-{slot}-{digest}"

    def prepare(self) -> None:
        """Empty the directory: what a previous run left there is sent again by the server."""
        self._remove_directory()
        self._prepared = True

    def _ensure_directory(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpoolError(f"cannot create the spool directory {self.directory} for streamed transactions: "
                             f"{exc.strerror or exc} (set streaming.spool.directory)") from None

    def get(self, xid: int) -> TransactionSpool:
        spool = self.open.get(xid)
        if spool is None:
            spool = self.open[xid] = TransactionSpool(xid, self.directory / f"{xid}.spool")
        return spool

    def append(self, spool: TransactionSpool, payload: bytes, lsn: int, _pack: Any = _HEADER.pack,
               _size: int = _HEADER.size) -> None:
        """Store one in-stream message (the hot path of a large transaction: kept flat)."""
        if payload[0] not in _WITH_XID and not spool.check(payload):
            return
        buf = spool.buffer
        buf += _pack(len(payload) - 4, lsn, payload[1:5], payload[:1])
        buf += memoryview(payload)[5:]
        spool.messages += 1
        self.buffered += len(payload) + _size - 5  # the xid and type byte are in the header
        if self.buffered > self.memory_budget:
            self._spill_all()

    def _spill_all(self) -> None:
        self._ensure_directory()
        for spool in self.open.values():
            n = spool.spill()
            self.buffered -= n
            self.spilled_bytes += n
        self.buffered = max(self.buffered, 0)

    def abort(self, xid: int, subxid: int) -> None:
        """Stream Abort: the whole transaction (subxid == xid) or one subtransaction."""
        spool = self.open.get(xid)
        if spool is None:
            return  # nothing of it was received (or it was already dropped)
        if subxid == xid:
            self._drop(xid)
        else:
            spool.aborted.add(subxid)

    def take(self, xid: int) -> TransactionSpool | None:
        """Stream Commit: the transaction's spool, no longer counted as open (the caller replays it
        and then calls `discard`)."""
        spool = self.open.pop(xid, None)
        if spool is not None:
            self.buffered = max(self.buffered - len(spool.buffer), 0)
        return spool

    def _drop(self, xid: int) -> None:
        spool = self.open.pop(xid)
        self.buffered = max(self.buffered - len(spool.buffer), 0)
        spool.discard()

    def close(self) -> None:
        for xid in list(self.open):
            self._drop(xid)
        self.buffered = 0
        if self._prepared:
            self._remove_directory()

    def _remove_directory(self) -> None:
        if self.directory.exists():
            try:
                shutil.rmtree(self.directory)
            except OSError as exc:
                log.warning("could not remove the spool directory %s: %s", self.directory, exc)


def directory_identity(host: str, port: int, dbname: str, server: str) -> str:
    return f"{host}:{port}/{dbname}#{server}"
