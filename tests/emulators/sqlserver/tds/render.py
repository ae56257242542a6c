"""Turning the engine's results into a token stream.

Contract with the engine (``Session.execute_batch`` / ``execute_rpc`` return an iterable of
``results.Result``):

* The renderer pulls items one by one and writes them out as they come (rows are streamed, not
  collected):
  - ``ResultSet`` → COLMETADATA, ROW/NBCROW per row, DONE (DONEINPROC inside an RPC) with COUNT;
  - ``RowCount`` → DONE/DONEINPROC with COUNT and the CurCmd of ``RowCount.command``
    ("ddl": no COUNT bit, which mssql-jdbc reports as update count 0);
  - ``Message`` → INFO; an error ``Message`` (severity > 10) → ERROR followed by a DONE with the
    ERROR bit: it ends its statement, and the batch goes on with the next item;
  - ``EnvChange`` → ENVCHANGE; ``ReturnStatus`` → RETURNSTATUS; ``ReturnValue`` → RETURNVALUE
    (SQL Server's order in an RPC: results, RETURNSTATUS, then the RETURNVALUEs).
* Every DONE is written only once the next item (or the end) is known, so that its MORE bit is
  right; the last one of a batch is the final DONE (in an RPC: DONEINPROC…, then DONEPROC).
* A ``SqlServerError`` raised by the iterator (or by the call creating it) is written as ERROR
  followed by a DONE with the ERROR bit. If ``aborts_batch`` is true the batch (or RPC) ends
  there. If it is false the renderer calls ``next()`` on the *same* iterator again and renders
  whatever comes; a Python generator cannot resume after raising (its next ``next()`` is
  ``StopIteration``), so an engine written as generators should *yield* a statement-level error as
  ``Message(number, text, severity>=11, …)`` and carry on, and raise only what ends the batch.
  An error raised while a ResultSet's rows are being read ends that result set the same way.
* Any other exception is a bug: it is logged with its traceback and reported to the client as
  error 50000 "emulator internal error: …" (a value that does not fit its column names the
  column), ending the batch; the connection stays usable.
* Attention (cancel): the renderer checks ``attention()`` between items and between rows; once
  set it closes the iterator (``close()`` if it has one), drops the pending DONE and returns
  ``ATTENTION``; the caller ends the response with DONE(ERROR) and sends the acknowledgement
  DONE(ATTN) as a separate message. An error raised while attention is pending (the engine's own
  "query cancelled") is not shown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..results import (
    EnvChange,
    Message,
    Result,
    ResultSet,
    ReturnStatus,
    ReturnValue,
    RowCount,
    SqlServerError,
)
from . import tokens
from .typeinfo import COLLATION

log = logging.getLogger(__name__)

OK, ERROR, ATTENTION = "ok", "error", "attention"
INTERNAL_ERROR = 50000

_ENV_TEXT = {"database": tokens.ENV_DATABASE, "language": tokens.ENV_LANGUAGE,
             "packet_size": tokens.ENV_PACKET_SIZE}
_ENV_TRAN = {"begin_transaction": tokens.ENV_BEGIN_TRAN, "commit_transaction": tokens.ENV_COMMIT_TRAN,
             "rollback_transaction": tokens.ENV_ROLLBACK_TRAN}

# CurCmd per RowCount.command (mssql-jdbc reports update counts only for these commands)
_ROWCOUNT_CMD = {"insert": tokens.CMD_INSERT, "update": tokens.CMD_UPDATE, "delete": tokens.CMD_DELETE,
                 "merge": tokens.CMD_MERGE, "select_into": tokens.CMD_SELECT_INTO, "ddl": tokens.CMD_TABCREATE}


def internal_error(exc: BaseException) -> Message:
    return Message(INTERNAL_ERROR, f"emulator internal error: {type(exc).__name__}: {exc}", 16)


def envchange(change: EnvChange) -> bytes:
    if change.kind in _ENV_TEXT:
        return tokens.env_text(_ENV_TEXT[change.kind], str(change.new or ""), str(change.old or ""))
    if change.kind == "collation":
        return tokens.env_bytes(tokens.ENV_COLLATION, change.new or COLLATION, change.old or b"")
    if change.kind in _ENV_TRAN:
        descriptor = bytes(change.new or change.old or b"")
        if change.kind == "begin_transaction":
            return tokens.env_bytes(_ENV_TRAN[change.kind], descriptor, b"")
        return tokens.env_bytes(_ENV_TRAN[change.kind], b"", descriptor)
    if change.kind == "reset_connection":
        return tokens.env_bytes(tokens.ENV_RESET_ACK, b"", b"")
    raise ValueError(f"ENVCHANGE kind {change.kind!r} is unknown to the TDS layer")


class Renderer:
    """Writes one request's results. ``write`` takes token bytes (the packet writer),
    ``in_transaction`` feeds DONE's INXACT bit, ``attention`` says a cancel arrived."""

    def __init__(self, write: Callable[[bytes], None], *, in_transaction: Callable[[], bool],
                 attention: Callable[[], bool]) -> None:
        self._write = write
        self._in_transaction = in_transaction
        self._attention = attention
        self._pending: tuple[int, int, int, int] | None = None  # token, status, count, cmd
        self.had_error = False

    # -- DONE bookkeeping

    def _set_pending(self, token: int, status: int, count: int = 0, cmd: int = 0) -> None:
        self.flush_pending(more=True)
        self._pending = (token, status, count, cmd)

    def flush_pending(self, *, more: bool) -> bool:
        """Write the held-back DONE (with MORE if something follows); False if there was none."""
        if self._pending is None:
            return False
        token, status, count, cmd = self._pending
        self._pending = None
        if more:
            status |= tokens.DONE_MORE
        if self._in_transaction():
            status |= tokens.DONE_INXACT
        self._write(tokens.done(status, count, cmd, token))
        return True

    def drop_pending(self) -> None:
        self._pending = None

    def write_done(self, token: int, status: int, count: int = 0, cmd: int = 0) -> None:
        if self._in_transaction():
            status |= tokens.DONE_INXACT
        self._write(tokens.done(status, count, cmd, token))

    def write(self, data: bytes) -> None:
        self.flush_pending(more=True)
        self._write(data)

    # -- results

    def render(self, produce: Callable[[], Iterable[Result]], *, done_token: int = tokens.DONE,
               no_metadata: bool = False) -> str:
        """Render everything ``produce()`` yields; returns OK, ERROR (the batch was aborted by an
        error) or ATTENTION. The last DONE stays pending for the caller."""
        iterator: Iterator[Result] | None = None
        try:
            while True:
                if self._attention():
                    return self._stop(iterator)
                try:
                    if iterator is None:
                        iterator = iter(produce())
                    item = next(iterator)
                except StopIteration:
                    return OK
                except SqlServerError as exc:
                    if self._attention():
                        return self._stop(iterator)
                    self._error(exc.message, done_token)
                    if exc.aborts_batch or iterator is None:
                        return ERROR
                    continue
                if isinstance(item, ResultSet):
                    outcome = self._result_set(item, done_token, no_metadata)
                    if outcome == ATTENTION:
                        return self._stop(iterator)
                    if outcome is not None:
                        self._error(outcome.message, done_token)
                        if outcome.aborts_batch:
                            return ERROR
                elif isinstance(item, RowCount):
                    command = getattr(item, "command", "insert")
                    if command not in _ROWCOUNT_CMD:
                        raise ValueError(f"RowCount command {command!r} is unknown to the TDS layer")
                    status = 0 if command == "ddl" else tokens.DONE_COUNT
                    self._set_pending(done_token, status, item.count if status else 0, _ROWCOUNT_CMD[command])
                elif isinstance(item, Message):
                    if item.is_error:
                        self._error(item, done_token)
                    else:
                        self.write(tokens.message(item))
                elif isinstance(item, EnvChange):
                    self.write(envchange(item))
                elif isinstance(item, ReturnStatus):
                    self.write(tokens.returnstatus(item.value))
                elif isinstance(item, ReturnValue):
                    self.write(tokens.returnvalue(item))
                else:
                    raise TypeError(f"the engine yielded {type(item).__name__}, not a results.Result")
        except Exception as exc:  # a bug below us: report it, keep the connection
            log.exception("error while rendering results")
            if self._attention():
                return self._stop(iterator)
            self._error(internal_error(exc), done_token)
            _close(iterator)
            return ERROR

    def _error(self, message: Message, done_token: int) -> None:
        self.had_error = True
        if message.severity <= 10:  # an exception always renders as an error
            message = Message(message.number, message.text, 16, message.state, message.procedure, message.line)
        self.write(tokens.message(message))
        self._set_pending(done_token, tokens.DONE_ERROR)

    def _result_set(self, rs: ResultSet, done_token: int, no_metadata: bool) -> Any:
        """Stream one result set; returns None, ATTENTION, or the SqlServerError that ended it."""
        self.write(b"\x81\xff\xff" if no_metadata else tokens.colmetadata(rs.columns))
        encode = tokens.row_encoder([c.type for c in rs.columns], [c.name for c in rs.columns])
        count = 0
        write, attention = self._write, self._attention
        try:
            for row in rs.rows:
                data = encode(row)  # whole row first: a failing value leaves the stream consistent
                write(data)
                count += 1
                if attention():
                    _close(rs.rows)
                    return ATTENTION
        except SqlServerError as exc:
            if attention():
                return ATTENTION
            self._pending = None
            return exc
        self._set_pending(done_token, tokens.DONE_COUNT, count, tokens.CMD_SELECT)
        return None

    def _stop(self, iterator: Any) -> str:
        _close(iterator)
        self._pending = None
        return ATTENTION


def _close(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # closing after a cancel may complain; the request is over anyway
            log.debug("closing a result iterator failed", exc_info=True)
