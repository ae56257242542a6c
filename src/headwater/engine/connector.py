"""The interface between the engine and a database connector."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from headwater.engine.registry import SourceDescription

Emit = Callable[[list[Any]], None]


class ConnectorError(Exception):
    """The connector cannot go on. The message is one line naming the cause and, where there is
    one, what to change; it never contains a password. `retriable` marks a transient cause (a
    lost connection) that the engine retries per `errors.max.retries`."""

    def __init__(self, message: str, *, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable

    def __reduce__(self) -> Any:  # keep `retriable` when sent back from a worker process
        return (_rebuild_connector_error, (type(self), str(self), self.retriable))


def _rebuild_connector_error(cls: type[ConnectorError], message: str, retriable: bool) -> ConnectorError:
    return cls(message, retriable=retriable)


class RetriableConnectorError(ConnectorError):
    """A ConnectorError with a transient cause. A class of its own so that the cause stays known
    where only an error's text travels: a Spark query that fails in its Python source reports
    the traceback's text, and `headwater pipeline` restarts the query on this name."""

    def __init__(self, message: str, *, retriable: bool = True) -> None:
        super().__init__(message, retriable=retriable)


def connector_error(message: str, *, retriable: bool) -> ConnectorError:
    """A ConnectorError, of the retriable class when its cause is transient."""
    return RetriableConnectorError(message) if retriable else ConnectorError(message)


class SourceConnector(ABC):
    """A database connector: its configuration, checks and plug-ins, and a factory of the
    per-run parts the engine drives — the :class:`~headwater.engine.source.CaptureSource`
    (driver side: positions, snapshot and streaming sources) and, for distributed runs, a
    picklable work decoder. The engine's coordinator (`headwater.engine.capture`) decides what to
    snapshot and when to stream; the connector never does."""

    #: the name Debezium gives the connector in `source.connector` and headers
    connector_name: str = ""
    #: what consumers may know about the connector's events (see headwater.engine.registry)
    description: SourceDescription = SourceDescription("")
    config: Any
    #: `snapshot.query.mode=custom`'s plug-in (None: every table's rows, as selected)
    snapshot_query: Any = None
    #: `column.include.list` / `column.exclude.list` (what a custom snapshot query is told)
    column_filter: Any = None
    #: the connector keeps a schema history (SQL Server): a first start snapshots the structure even
    #: without data (Debezium's historized schema), which its notifications report
    keeps_schema_history: bool = False

    @abstractmethod
    def partition(self) -> dict[str, Any]:
        """The source partition offsets are stored under (Debezium: {"server": topic.prefix})."""

    @abstractmethod
    def validate(self) -> None:
        """Connect and check the database is usable; raise ConnectorError otherwise."""

    @abstractmethod
    def capture_source(self, *, parallel: bool) -> Any:
        """A new :class:`~headwater.engine.source.CaptureSource` for one run; `parallel`: its
        snapshot is read by other processes (Spark's executors)."""

    def work_decoder(self) -> Any:
        """The picklable decoder of the work units a parallel capture source plans."""
        raise ConnectorError(f"connector {self.connector_name!r} cannot run as a Spark source yet")

    def spark_no_effect(self, runner: dict[str, str]) -> dict[str, str]:
        """The properties that have no effect in the Spark source, with the reason (a warning at
        start names each one set): `runner` are the standalone runner's
        (engine.feed.NO_EFFECT_IN_SPARK); a connector adds its own or drops those it applies."""
        return runner

    def use_encoding_pool(self, pool: Any) -> bool:
        """Offer worker processes that build and serialize records (see
        headwater.serialization.parallel); return True if the connector will use them."""
        return False

    def is_retriable(self, error: BaseException) -> bool:
        """Whether `error` (raised by a run) is transient, so the engine may run the connector
        again from the stored offset (`errors.max.retries`)."""
        return isinstance(error, ConnectorError) and error.retriable

    def close(self) -> None:  # noqa: B027 - optional hook
        """After the last run: release what outlives runs (e.g. drop a slot on stop). Called once,
        from the consumer thread."""
