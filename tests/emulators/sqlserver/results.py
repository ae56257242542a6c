"""What executing a batch or an RPC produces, in order: the SQL layer yields these, the TDS layer
turns each into tokens (ResultSet → COLMETADATA + ROW… + DONE, RowCount → DONE with a count, …)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .sqltypes import SqlType


@dataclass(frozen=True, slots=True)
class Column:
    """A result-set column. ``name`` may be "" (an expression without alias, as SQL Server sends it)."""

    name: str
    type: SqlType
    nullable: bool = True
    identity: bool = False
    # where the column comes from, for clients that ask (TDS TableName / column flags)
    table: str | None = None
    writable: bool = False


@dataclass(slots=True)
class ResultSet:
    columns: list[Column]
    rows: Iterable[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class RowCount:
    """A statement that affected ``count`` rows (INSERT/UPDATE/DELETE, SELECT INTO…).

    ``command`` tells the TDS layer which CurCmd to put in the DONE token: "insert", "update",
    "delete", "merge", "select_into" (a count clients report), or "ddl" for CREATE/ALTER/DROP…
    (DONE without a count; mssql-jdbc then reports an update count of 0, as with SQL Server)."""

    count: int
    command: str = "insert"


@dataclass(frozen=True, slots=True)
class Message:
    """An informational message (TDS INFO, severity ≤ 10) or an error (TDS ERROR, severity ≥ 11)."""

    number: int
    text: str
    severity: int = 0
    state: int = 1
    procedure: str = ""
    line: int = 1

    @property
    def is_error(self) -> bool:
        return self.severity > 10


class SqlServerError(Exception):
    """An error SQL Server would raise: number, state, severity (class) and the message text.

    ``aborts_batch``: whether the rest of the batch is skipped (SQL Server aborts the batch on most
    errors of severity ≥ 16 raised outside TRY…CATCH for compile errors, conversion errors and
    deadlocks; statement-level errors such as a constraint violation only end the statement)."""

    def __init__(self, number: int, text: str, *, severity: int = 16, state: int = 1,
                 aborts_batch: bool = True, procedure: str = "", line: int = 1) -> None:
        super().__init__(f"Msg {number}, Level {severity}, State {state}: {text}")
        self.message = Message(number, text, severity, state, procedure, line)
        self.aborts_batch = aborts_batch


@dataclass(frozen=True, slots=True)
class EnvChange:
    """A session change clients track: ``kind`` is one of "database", "language", "packet_size",
    "begin_transaction", "commit_transaction", "rollback_transaction", "collation"; ``new``/``old``
    are the values (for transactions: the 8-byte transaction descriptor, or b"")."""

    kind: str
    new: Any
    old: Any = None


@dataclass(frozen=True, slots=True)
class ReturnStatus:
    """A stored procedure's return value (RPC and EXEC)."""

    value: int


@dataclass(frozen=True, slots=True)
class ReturnValue:
    """An OUTPUT parameter's value after an RPC (e.g. the handle ``sp_prepare`` hands back)."""

    name: str
    ordinal: int
    type: SqlType
    value: Any


@dataclass(frozen=True, slots=True)
class RpcParam:
    """A parameter of an RPC request as the client sent it (name may be "" when positional)."""

    name: str
    type: SqlType
    value: Any
    output: bool = False


Result = ResultSet | RowCount | Message | EnvChange | ReturnStatus | ReturnValue


@dataclass(slots=True)
class LoginInfo:
    """What the LOGIN7 record says, as far as the SQL layer cares."""

    user: str
    password: str
    database: str = ""
    app_name: str = ""
    host_name: str = ""
    language: str = ""
    packet_size: int = 4096
    options: dict[str, Any] = field(default_factory=dict)
