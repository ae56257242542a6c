"""The interface between the engine and a database connector."""

from __future__ import annotations

import threading
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
    """A database connector: snapshot, then stream, handing records (and offset markers) to
    `emit` in order. The engine stores offsets only after the destination has durably written
    everything before them, then calls `acknowledge` so the connector may release the
    database's retained log up to that point."""

    #: the name Debezium gives the connector in `source.connector` and headers
    connector_name: str = ""
    #: what consumers may know about the connector's events (see headwater.engine.registry)
    description: SourceDescription = SourceDescription("")

    @abstractmethod
    def partition(self) -> dict[str, Any]:
        """The source partition offsets are stored under (Debezium: {"server": topic.prefix})."""

    @abstractmethod
    def validate(self) -> None:
        """Connect and check the database is usable; raise ConnectorError otherwise."""

    @abstractmethod
    def run(self, offset: dict[str, Any] | None, emit: Emit, stop: threading.Event) -> None:
        """Capture until `stop` is set or capture is complete (e.g. snapshot.mode=initial_only).
        Runs on the engine's reader thread."""

    @abstractmethod
    def acknowledge(self, offset: dict[str, Any]) -> None:
        """Everything up to `offset` is durable downstream. Called from the consumer thread."""

    def use_encoding_pool(self, pool: Any) -> bool:
        """Offer worker processes that build and serialize records (see
        headwater.serialization.parallel); return True if the connector will use them."""
        return False

    def is_retriable(self, error: BaseException) -> bool:
        """Whether `error` (raised by `run`) is transient, so the engine may run the connector
        again from the stored offset (`errors.max.retries`)."""
        return isinstance(error, ConnectorError) and error.retriable

    def release(self) -> None:  # noqa: B027 - optional hook
        """Release connections after `run` failed with a retriable error, before `run` is called
        again. Unlike `close`, nothing that outlives the connector (a slot to drop on stop) is
        touched."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources after `run` returned. Called once, from the consumer thread."""
