"""Why a pipeline's streaming query failed, in one line, and whether a restart can help.

A query's failure reaches `headwater pipeline` as text: Spark wraps what failed in the source's
Python worker, in an executor or in a sink (a Python traceback inside a Java stack trace inside a
``StreamingQueryException``). The cause is in there: the last line of a Headwater error's
traceback, or the innermost ``Caused by:`` of a Java exception. This module finds it.

Transient causes are recognised by name: a lost database connection is a
:class:`~headwater.engine.connector.RetriableConnectorError`, and a sink that could not reach its
destination raises :class:`RetriableSinkError`. The pipeline restarts the query from its
checkpoint after those (``errors.max.retries``), as the standalone runner restarts its connector.
"""

from __future__ import annotations

import re

# Kafka's retriable exceptions (subclasses of org.apache.kafka.common.errors.RetriableException)
# that a producer gives up with: the broker unreachable, hung or without a leader for a partition.
# Anything else (authorization, a record too large, a serialization error) fails the same way again.
KAFKA_RETRIABLE = frozenset({
    "TimeoutException", "NetworkException", "DisconnectException", "NotLeaderOrFollowerException",
    "LeaderNotAvailableException", "NotEnoughReplicasException", "NotEnoughReplicasAfterAppendException",
    "KafkaStorageException", "UnknownTopicOrPartitionException", "UnknownLeaderEpochException",
    "FencedLeaderEpochException", "CoordinatorNotAvailableException",
})

_RETRIABLE_ERROR = re.compile(r"^\s*(?:[\w.]+\.)?(RetriableConnectorError|RetriableSinkError): (.*)$")
# the last line of a Headwater error's traceback: "headwater.<module>.<Class>: message"
_HEADWATER_ERROR = re.compile(r"^\s*(?:headwater\.[\w.]+\.\w*(?:Error|Exception)|ConnectorError|ConfigError): (.*)$")
_CAUSED_BY = re.compile(r"^\s*Caused by: ([\w.$]+)(?:: (.*))?$")


class SinkError(Exception):
    """A sink could not write a micro-batch. The message names the sink, the batch and the cause."""


class RetriableSinkError(SinkError):
    """A sink could not write a micro-batch for a transient cause (its destination unreachable):
    the pipeline restarts the query, which writes the batch again."""


def retriable_cause(text: str) -> str | None:
    """The message of the transient error that failed a query (from its failure's text), or None
    when the failure has another cause."""
    for line in text.splitlines():
        m = _RETRIABLE_ERROR.match(line)
        if m:
            return m.group(2).strip()
    return None


def java_cause(text: str) -> tuple[str, str] | None:
    """The innermost ``Caused by:`` of a Java stack trace: (the exception's class, its message)."""
    found = None
    for line in text.splitlines():
        m = _CAUSED_BY.match(line)
        if m:
            found = (m.group(1), (m.group(2) or "").strip())
    return found


def is_retriable_kafka(cls: str) -> bool:
    return cls.startswith("org.apache.kafka.common.errors.") and cls.rsplit(".", 1)[-1] in KAFKA_RETRIABLE


def failure_reason(exc: BaseException) -> str:
    """One line that says why a query failed: a Headwater error's message (the last one in the
    text, which is where the traceback ends), else the innermost Java cause, else the first line."""
    text = str(exc)
    headwater = [m for m in map(_HEADWATER_ERROR.match, text.splitlines()) if m]
    if headwater:
        return headwater[-1].group(1).strip()
    cause = java_cause(text)
    if cause is not None:
        cls, message = cause
        return f"{cls}: {message}" if message else cls
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first or type(exc).__name__
