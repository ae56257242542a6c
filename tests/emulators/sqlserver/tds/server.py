"""The socket side: accept connections, run PRELOGIN/LOGIN7, then serve requests.

One thread per connection runs the requests; a second thread per connection reads the socket so
that an attention (cancel) packet is seen while a long result is still being written. The reader
calls ``session.cancel()`` at once and queues the attention; the request thread stops at the
next row, ends the response with DONE(ERROR) and then sends the acknowledgement, a DONE with the
ATTN bit, as a message of its own (MS-TDS 2.2.1.7, 3.2.5.7). An attention arriving after the
response was complete is acknowledged the same way.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
from typing import Any

from ..results import EnvChange, Message, SqlServerError
from . import login7, prelogin, requests, tokens
from .packets import (
    DEFAULT_PACKET_SIZE,
    STATUS_RESET_CONNECTION,
    STATUS_RESET_CONNECTION_SKIP_TRAN,
    MessageAssembler,
    PacketType,
    PacketWriter,
    ProtocolError,
)
from .packets import Message as TdsMessage
from .packets import read_packet as _read_packet
from .render import ATTENTION, Renderer, envchange
from .typeinfo import COLLATION

log = logging.getLogger(__name__)
# every request's text as the client sent it (batches, RPC names and parameters, transaction manager
# requests), at DEBUG: what a client such as Debezium sends is read from here (serve.py --trace-statements)
trace = logging.getLogger(__name__ + ".statements")

DEFAULT_LANGUAGE = "us_english"
UNSUPPORTED = 50000  # error number for requests the emulator refuses (there is no SQL Server one)


class TdsServer:
    """``TdsServer(engine).start()`` → (host, port); ``stop()`` closes everything it opened."""

    def __init__(self, engine: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine = engine
        self._host, self._port = host, port
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[_Connection] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    @property
    def address(self) -> tuple[str, int]:
        if self._listener is None:
            raise RuntimeError("server not started")
        host, port = self._listener.getsockname()[:2]
        return host, port

    def start(self) -> tuple[str, int]:
        listener = socket.create_server((self._host, self._port), reuse_port=False)
        listener.settimeout(0.5)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept_loop, name="tds-accept", daemon=True)
        self._thread.start()
        log.info("TDS server listening on %s:%d", *self.address)
        return self.address

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.abort()
        for conn in connections:
            conn.join(timeout=5)

    def __enter__(self) -> TdsServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if not self._stopping.is_set():
                    log.exception("accept failed")
                break
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(self, sock, peer)
            with self._lock:
                self._connections.add(conn)
            conn.start()

    def _forget(self, conn: _Connection) -> None:
        with self._lock:
            self._connections.discard(conn)


class _Connection:
    def __init__(self, server: TdsServer, sock: socket.socket, peer: Any) -> None:
        self.server = server
        self.sock = sock
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.session: Any = None
        self.writer = PacketWriter(self._send)
        self.assembler = MessageAssembler()
        self.requests: queue.Queue[TdsMessage | None] = queue.Queue()
        self._attention = False  # set by the reader, cleared when acknowledged
        self._attention_lock = threading.Lock()
        self._ack_after_response = False
        self._closed = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"tds-{self.peer}", daemon=True)
        self.reader: threading.Thread | None = None

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    def abort(self) -> None:
        self._closed.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- socket I/O

    def _send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exactly(self, n: int) -> bytes:
        parts, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                raise EOFError
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def _recv_exactly_checked(self, n: int) -> bytes:
        data = self._recv_exactly(n)
        # a TLS record (handshake 0x16, version 3.x) where a packet header should be: TDS 8.0 strict
        if n == 8 and data[0] == 0x16 and data[1] == 0x03:
            raise ProtocolError("the client starts with TLS (TDS 8.0 strict encryption); the emulator "
                                "speaks TDS 7.4 without encryption only")
        return data

    def _read_message(self) -> TdsMessage:
        while True:
            header, body = _read_packet(self._recv_exactly_checked)
            message = self.assembler.add(header, body)
            if message is not None:
                return message

    # -- lifecycle

    def _run(self) -> None:
        user = "?"
        try:
            login = self._handshake()
            if login is None:
                return
            user = login.user
            self.reader = threading.Thread(target=self._read_loop, name=f"tds-read-{self.peer}", daemon=True)
            self.reader.start()
            self._serve()
        except (EOFError, ConnectionError, OSError) as exc:
            if not self._closed.is_set():
                log.debug("connection %s (%s) dropped: %s", self.peer, user, exc)
        except ProtocolError as exc:
            log.warning("connection %s (%s): protocol error: %s", self.peer, user, exc)
        except Exception:
            log.exception("connection %s (%s) failed", self.peer, user)
        finally:
            self._closed.set()
            if self.session is not None:
                try:
                    self.session.close()
                except Exception:
                    log.exception("closing the session of %s failed", self.peer)
            try:
                self.sock.close()
            except OSError:
                pass
            self.server._forget(self)
            log.info("connection %s (%s) closed", self.peer, user)

    def _handshake(self) -> login7.Login7 | None:
        first = self._read_message()
        if first.type != PacketType.PRELOGIN:
            raise ProtocolError(f"expected PRELOGIN, got packet type {first.type}")
        prelogin.parse(first.payload)
        self.writer.write(prelogin.build_response())
        self.writer.end_message()

        message = self._read_message()
        if message.type == PacketType.PRELOGIN:
            raise ProtocolError("the client attempts a TLS handshake although the server does not support "
                                "encryption (ENCRYPT_NOT_SUP)")
        if message.type != PacketType.LOGIN7:
            raise ProtocolError(f"expected LOGIN7, got packet type {message.type}")
        record = login7.parse(message.payload)
        if record.option_flags2 & login7.F_INT_SECURITY:
            return self._refuse(record, Message(18452, "Login failed. The login is from an untrusted domain and "
                                                "cannot be used with Integrated authentication.", 14, 1))
        info = record.to_login_info()
        try:
            self.server.engine.authenticate(info)
            self.session = self.server.engine.open_session(info)
        except SqlServerError as exc:
            return self._refuse(record, exc.message)
        log.info("connection %s: login user=%s database=%s app=%s host=%s packet_size=%d spid=%s",
                 self.peer, record.user, record.database or "(default)", record.app_name, record.host_name,
                 info.packet_size, getattr(self.session, "spid", "?"))
        self.writer.spid = getattr(self.session, "spid", 0)
        self._write_login_ack(record, info.packet_size)
        self.writer.packet_size = info.packet_size
        return record

    def _refuse(self, record: login7.Login7, message: Message) -> None:
        log.info("connection %s: login refused for user %s: %s", self.peer, record.user, message.text)
        self.writer.write(tokens.message(message))
        self.writer.write(tokens.done(tokens.DONE_ERROR))
        self.writer.end_message()
        return None

    def _write_login_ack(self, record: login7.Login7, packet_size: int) -> None:
        database = getattr(self.session, "database", "") or "master"
        language = record.language or DEFAULT_LANGUAGE
        w = self.writer.write
        w(tokens.env_text(tokens.ENV_DATABASE, database, "master"))
        w(tokens.message(Message(5701, f"Changed database context to '{database}'.", 0, 2)))
        w(tokens.env_bytes(tokens.ENV_COLLATION, COLLATION, b""))
        w(tokens.env_text(tokens.ENV_LANGUAGE, language, ""))
        w(tokens.message(Message(5703, f"Changed language setting to {language}.", 0, 1)))
        w(tokens.loginack())
        if record.requests_extension:
            w(tokens.featureextack({}))  # no feature acknowledged: the client treats each as unsupported
        w(tokens.env_text(tokens.ENV_PACKET_SIZE, str(packet_size), str(DEFAULT_PACKET_SIZE)))
        w(tokens.done(tokens.DONE_FINAL))
        self.writer.end_message()

    # -- requests

    def _read_loop(self) -> None:
        try:
            while not self._closed.is_set():
                message = self._read_message()
                if message.type == PacketType.ATTENTION:
                    with self._attention_lock:
                        self._attention = True
                    try:
                        self.session.cancel()
                    except Exception:
                        log.exception("session.cancel() failed")
                self.requests.put(message)
        except (EOFError, OSError):
            pass
        except ProtocolError as exc:
            log.warning("connection %s: protocol error: %s", self.peer, exc)
        finally:
            self.requests.put(None)

    def _attention_pending(self) -> bool:
        return self._attention

    def _serve(self) -> None:
        while True:
            message = self.requests.get()
            if message is None:
                return
            if message.type == PacketType.ATTENTION:
                # a cancel that arrived when no request was running (or after it ended) is
                # still acknowledged, as the client waits for it
                if self._attention:
                    self._acknowledge_attention()
                continue
            self._handle(message)

    def _acknowledge_attention(self) -> None:
        with self._attention_lock:
            self._attention = False
        self.writer.write(tokens.done(tokens.DONE_ATTN))
        self.writer.end_message()

    def _in_transaction(self) -> bool:
        descriptor = getattr(self.session, "transaction_descriptor", b"\0" * 8)
        return bool(descriptor) and any(descriptor)

    def _handle(self, message: TdsMessage) -> None:
        renderer = Renderer(self.writer.write, in_transaction=self._in_transaction,
                            attention=self._attention_pending)
        if message.status & (STATUS_RESET_CONNECTION | STATUS_RESET_CONNECTION_SKIP_TRAN):
            self.session.reset()
            renderer.write(envchange(EnvChange("reset_connection", b"")))
        outcome = "ok"
        try:
            if message.type == PacketType.SQL_BATCH:
                batch = requests.parse_sql_batch(message.payload)
                self._check_descriptor(batch.headers)
                if trace.isEnabledFor(logging.DEBUG):
                    trace.debug("%s batch: %s", self.peer, batch.sql)
                outcome = renderer.render(lambda: self.session.execute_batch(batch.sql))
                self._finish(renderer, outcome, tokens.DONE)
            elif message.type == PacketType.RPC:
                rpc = requests.parse_rpc(message.payload)
                self._check_descriptor(rpc.headers)
                if trace.isEnabledFor(logging.DEBUG):
                    for call in rpc.calls:
                        trace.debug("%s rpc %s: %s", self.peer, call.name, _describe_params(call.params))
                self._rpc(renderer, rpc)
            elif message.type == PacketType.TRANSACTION_MANAGER:
                request = requests.parse_transaction(message.payload)
                if trace.isEnabledFor(logging.DEBUG):
                    trace.debug("%s transaction manager: %s%s", self.peer, request.kind,
                                " (begin after)" if request.begin_after else "")
                self._transaction(renderer, request)
            elif message.type == PacketType.BULK_LOAD:
                self._unsupported(renderer, "Bulk load (TDS BULK LOAD / INSERT BULK data) is not supported by the "
                                  "emulator; use INSERT statements.")
            else:
                raise ProtocolError(f"unexpected packet type {message.type} after login")
        except (ProtocolError, requests.UnsupportedRequest) as exc:
            if isinstance(exc, ProtocolError) and message.type not in (PacketType.RPC, PacketType.SQL_BATCH,
                                                                       PacketType.TRANSACTION_MANAGER):
                raise
            # the request was framed correctly, only its content is refused: the connection lives on
            log.warning("connection %s: request refused: %s", self.peer, exc)
            renderer.drop_pending()
            self._unsupported(renderer, str(exc))
        self.writer.end_message()
        if self._ack_after_response:
            self._ack_after_response = False
            self._acknowledge_attention()

    def _check_descriptor(self, headers: requests.Headers) -> None:
        # SQL Server checks the transaction descriptor a request carries; clients are not always
        # exact about it (ODBC sends the last one it saw), so a mismatch is only noted
        descriptor = getattr(self.session, "transaction_descriptor", None)
        if headers.transaction_descriptor is not None and descriptor is not None \
                and headers.transaction_descriptor != descriptor:
            log.debug("connection %s: request carries transaction descriptor %s, session has %s", self.peer,
                      headers.transaction_descriptor.hex(), bytes(descriptor).hex())

    def _finish(self, renderer: Renderer, outcome: str, token: int) -> None:
        if outcome == ATTENTION:
            # as SQL Server does: the interrupted response ends with a DONE(ERROR), and the
            # acknowledgement follows as a message of its own (mssql-jdbc reads exactly one more
            # message after the response when it has sent an attention)
            renderer.write_done(tokens.DONE, tokens.DONE_ERROR)
            self._ack_after_response = True
            return
        if not renderer.flush_pending(more=False):
            renderer.write_done(token, tokens.DONE_ERROR if renderer.had_error else tokens.DONE_FINAL)

    def _unsupported(self, renderer: Renderer, text: str) -> None:
        renderer.write(tokens.message(Message(UNSUPPORTED, text, 16, 1)))
        renderer.write_done(tokens.DONE, tokens.DONE_ERROR)

    def _rpc(self, renderer: Renderer, request: requests.RpcRequest) -> None:
        for index, call in enumerate(request.calls):
            last = index == len(request.calls) - 1
            renderer.had_error = False
            outcome = renderer.render(lambda call=call: self.session.execute_rpc(call.name, call.params),
                                      done_token=tokens.DONEINPROC, no_metadata=call.no_metadata)
            if outcome == ATTENTION:
                self._finish(renderer, outcome, tokens.DONE)
                return
            renderer.flush_pending(more=True)
            status = tokens.DONE_ERROR if renderer.had_error else tokens.DONE_FINAL
            renderer.write_done(tokens.DONEPROC, status | (0 if last else tokens.DONE_MORE))

    def _transaction(self, renderer: Renderer, request: requests.TransactionRequest) -> None:
        statements = []
        if request.kind == "begin":
            statements += _begin_statements(request.isolation_level, request.name)
        elif request.kind == "save":
            statements.append(f"SAVE TRANSACTION {_quote(request.name)}")
        else:
            verb = "COMMIT" if request.kind == "commit" else "ROLLBACK"
            statements.append(f"{verb} TRANSACTION" + (f" {_quote(request.name)}" if request.name else ""))
            if request.begin_after:
                statements += _begin_statements(request.isolation_level, request.begin_name)
        outcome = "ok"
        for sql in statements:
            outcome = renderer.render(lambda sql=sql: self.session.execute_batch(sql))
            if outcome != "ok":
                break
        self._finish(renderer, outcome, tokens.DONE)


def _describe_params(params: list[Any]) -> str:
    """``name type = value`` per parameter (values by repr: the text of a statement stays readable)."""
    return "; ".join(f"{p.name or '?'} {getattr(p.type, 'name', p.type)} = {p.value!r}" for p in params)


def _begin_statements(isolation_level: int, name: str) -> list[str]:
    statements = []
    if isolation_level:
        if isolation_level not in requests.ISOLATION_LEVELS:
            raise requests.UnsupportedRequest(f"isolation level {isolation_level} in a transaction manager request")
        statements.append(f"SET TRANSACTION ISOLATION LEVEL {requests.ISOLATION_LEVELS[isolation_level]}")
    statements.append("BEGIN TRANSACTION" + (f" {_quote(name)}" if name else ""))
    return statements


def _quote(name: str) -> str:
    return "[" + name.replace("]", "]]") + "]"


__all__ = ["TdsServer"]
