"""Helpers for tests driving the Engine API directly (no TDS): run a batch, collect what it yields."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from headwater.embedded.postgres import ThrowawayPostgres

from ..results import EnvChange, LoginInfo, Message, Result, ResultSet, RowCount, RpcParam, SqlServerError
from ..sqltypes import SqlType

PASSWORD = "Sa!Passw0rd"


@dataclass
class Outcome:
    """Everything one batch produced, in order, plus the error that ended it (if any)."""

    items: list[Result] = field(default_factory=list)
    error: SqlServerError | None = None

    @property
    def result_sets(self) -> list[ResultSet]:
        return [r for r in self.items if isinstance(r, ResultSet)]

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        """Rows of the last result set."""
        return list(self.result_sets[-1].rows)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.result_sets[-1].columns]

    @property
    def types(self) -> list[str]:
        return [str(c.type) for c in self.result_sets[-1].columns]

    @property
    def counts(self) -> list[int]:
        return [r.count for r in self.items if isinstance(r, RowCount)]

    @property
    def errors(self) -> list[Message]:
        """Statement-level errors reported as messages, then the batch-ending error."""
        out = [m for m in self.items if isinstance(m, Message) and m.is_error]
        if self.error is not None:
            out.append(self.error.message)
        return out

    @property
    def env(self) -> list[EnvChange]:
        return [e for e in self.items if isinstance(e, EnvChange)]


def collect(results: Iterable[Result]) -> Outcome:
    out = Outcome()
    try:
        for r in results:
            if isinstance(r, ResultSet):
                r = ResultSet(r.columns, list(r.rows))
            out.items.append(r)
    except SqlServerError as err:
        out.error = err
    return out


def param(value: Any, spec: str = "nvarchar(4000)", name: str = "", output: bool = False) -> RpcParam:
    return RpcParam(name, SqlType.parse(spec), value, output)


@contextlib.contextmanager
def engine_with(*batches: str, **options: Any) -> Iterator[Any]:
    """A fresh backing PostgreSQL and EmulatorServer (sa / PASSWORD) after ``batches`` ran without
    error (``options`` go to EmulatorServer), stopped and removed afterwards."""
    from .server import EmulatorServer

    pg = ThrowawayPostgres().start()
    server = EmulatorServer(pg, PASSWORD, **options)
    try:
        session = server.open_session(LoginInfo("sa", PASSWORD))
        for batch in batches:
            out = collect(session.execute_batch(batch))
            assert not out.errors, out.errors
        session.close()
        yield server
    finally:
        server.close()
        pg.stop()


@contextlib.contextmanager
def session_in(server: Any, database: str) -> Iterator[Any]:
    """An sa session whose login names ``database``."""
    session = server.open_session(LoginInfo("sa", PASSWORD, database=database))
    try:
        yield session
    finally:
        session.close()
