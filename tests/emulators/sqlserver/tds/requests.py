"""Client requests: SQL batch (type 1), RPC (type 3) and transaction manager (type 14) messages
parsed into plain data (MS-TDS 2.2.6.6-2.2.6.9)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..results import RpcParam
from .packets import ProtocolError
from .typeinfo import read_type_info, read_value
from .wire import Reader

# well-known procedure ids (ProcIDSwitch = 0xFFFF) → names, as DESIGN.md lists them
PROC_NAMES = {
    1: "sp_cursor", 2: "sp_cursoropen", 3: "sp_cursorprepare", 4: "sp_cursorexecute",
    5: "sp_cursorprepexec", 6: "sp_cursorunprepare", 7: "sp_cursorfetch", 8: "sp_cursoroption",
    9: "sp_cursorclose", 10: "sp_executesql", 11: "sp_prepare", 12: "sp_execute", 13: "sp_prepexec",
    14: "sp_prepexecrpc", 15: "sp_unprepare",
}

HEADER_QUERY_NOTIFICATIONS = 1
HEADER_TRANSACTION_DESCRIPTOR = 2
HEADER_TRACE_ACTIVITY = 3

# RPC option flags
RPC_WITH_RECOMPILE = 0x01
RPC_NO_METADATA = 0x02
RPC_REUSE_METADATA = 0x04
# parameter status flags
PARAM_BYREF = 0x01
PARAM_DEFAULT = 0x02
PARAM_ENCRYPTED = 0x08
# between RPCs of one request: BatchFlag (0xFF in TDS 7.2+, 0x80 before), NoExecFlag 0xFE
_BATCH_FLAGS = (0xFF, 0x80)
_NO_EXEC_FLAG = 0xFE


@dataclass(slots=True)
class Headers:
    transaction_descriptor: bytes | None = None
    outstanding_requests: int = 1


@dataclass(slots=True)
class SqlBatch:
    headers: Headers
    sql: str


@dataclass(slots=True)
class RpcCall:
    name: str
    proc_id: int | None
    options: int
    params: list[RpcParam] = field(default_factory=list)
    # params sent with "default value" status: SQL Server uses the procedure's default for them
    defaulted: list[int] = field(default_factory=list)

    @property
    def no_metadata(self) -> bool:
        return bool(self.options & RPC_NO_METADATA)


@dataclass(slots=True)
class RpcRequest:
    headers: Headers
    calls: list[RpcCall]


@dataclass(slots=True)
class TransactionRequest:
    """A transaction manager request. ``kind`` is "begin", "commit", "rollback" or "save";
    commit/rollback may ``begin_after`` (start a new transaction, as ODBC does in manual commit)."""

    headers: Headers
    kind: str
    name: str = ""
    isolation_level: int = 0
    begin_after: bool = False
    begin_name: str = ""


TM_GET_DTC_ADDRESS, TM_PROPAGATE_XACT, TM_BEGIN_XACT, TM_PROMOTE_XACT = 0, 1, 5, 6
TM_COMMIT_XACT, TM_ROLLBACK_XACT, TM_SAVE_XACT = 7, 8, 9

ISOLATION_LEVELS = {1: "READ UNCOMMITTED", 2: "READ COMMITTED", 3: "REPEATABLE READ", 4: "SERIALIZABLE",
                    5: "SNAPSHOT"}


def read_all_headers(r: Reader) -> Headers:
    """ALL_HEADERS (required in TDS 7.2+ for batch, RPC and transaction manager requests)."""
    headers = Headers()
    start = r.pos
    total = r.u32()
    if total < 4 or start + total > len(r.data):
        raise ProtocolError(f"ALL_HEADERS length {total}")
    while r.pos < start + total:
        length = r.u32()
        if length < 6:
            raise ProtocolError(f"header length {length}")
        kind = r.u16()
        data = r.take(length - 6)
        if kind == HEADER_TRANSACTION_DESCRIPTOR and len(data) >= 12:
            headers.transaction_descriptor = data[:8]
            headers.outstanding_requests = int.from_bytes(data[8:12], "little")
        # query notification and trace activity headers are accepted and ignored
    r.pos = start + total
    return headers


def parse_sql_batch(payload: bytes) -> SqlBatch:
    r = Reader(payload)
    headers = read_all_headers(r)
    if (len(payload) - r.pos) % 2:
        raise ProtocolError("SQL batch text is not UTF-16")
    return SqlBatch(headers, payload[r.pos:].decode("utf-16-le"))


def parse_rpc(payload: bytes) -> RpcRequest:
    r = Reader(payload)
    headers = read_all_headers(r)
    calls = [_read_call(r)]
    while not r.at_end():
        flag = r.u8()
        if flag == _NO_EXEC_FLAG:
            raise ProtocolError("RPC NoExec flag is not supported by the emulator")
        if flag not in _BATCH_FLAGS:
            raise ProtocolError(f"unexpected byte 0x{flag:02X} after an RPC")
        if r.at_end():
            break
        calls.append(_read_call(r))
    return RpcRequest(headers, calls)


def _read_call(r: Reader) -> RpcCall:
    length = r.u16()
    if length == 0xFFFF:
        proc_id = r.u16()
        if proc_id not in PROC_NAMES:
            raise ProtocolError(f"unknown RPC procedure id {proc_id}")
        name = PROC_NAMES[proc_id]
    else:
        proc_id = None
        name = r.take(2 * length).decode("utf-16-le")
    call = RpcCall(name, proc_id, r.u16())
    while not r.at_end() and r.peek() not in (*_BATCH_FLAGS, _NO_EXEC_FLAG):
        param_name = r.b_varchar()
        status = r.u8()
        if status & PARAM_ENCRYPTED:
            raise ProtocolError("Always Encrypted parameters are not supported by the emulator")
        ti = read_type_info(r)
        value = read_value(r, ti)
        if status & PARAM_DEFAULT:
            call.defaulted.append(len(call.params))
        call.params.append(RpcParam(param_name, ti.sqltype, value, output=bool(status & PARAM_BYREF)))
    return call


def parse_transaction(payload: bytes) -> TransactionRequest:
    r = Reader(payload)
    headers = read_all_headers(r)
    kind = r.u16()
    if kind == TM_BEGIN_XACT:
        isolation = r.u8()
        return TransactionRequest(headers, "begin", r.b_varchar() if not r.at_end() else "", isolation)
    if kind in (TM_COMMIT_XACT, TM_ROLLBACK_XACT):
        name = r.b_varchar()
        flags = r.u8() if not r.at_end() else 0
        request = TransactionRequest(headers, "commit" if kind == TM_COMMIT_XACT else "rollback", name)
        if flags & 0x01:  # fBeginXact: start a new transaction right after
            request.begin_after = True
            request.isolation_level = r.u8()
            request.begin_name = r.b_varchar() if not r.at_end() else ""
        return request
    if kind == TM_SAVE_XACT:
        return TransactionRequest(headers, "save", r.b_varchar())
    names = {TM_GET_DTC_ADDRESS: "TM_GET_DTC_ADDRESS", TM_PROPAGATE_XACT: "TM_PROPAGATE_XACT",
             TM_PROMOTE_XACT: "TM_PROMOTE_XACT"}
    raise UnsupportedRequest(f"transaction manager request {names.get(kind, kind)} (distributed transactions) "
                             "is not supported by the emulator")


class UnsupportedRequest(Exception):
    """A well-formed request the emulator does not implement; answered with an error, the
    connection stays usable."""
