"""JVM options for the JVMs the tests start.

Short-lived JVMs (a `headwater pipeline` subprocess, its local-cluster executors, the Kafka
broker) do better with C1 alone: C2's compiler threads would take a core of a 2-core machine for
code that runs for seconds (the local-cluster tests: 196 s → 147 s; the crash test 321 s → 285 s).
The Spark session each test worker keeps for the whole run is the opposite: its hot code runs for
half an hour and needs C2. So the tests put C1 in ``JAVA_TOOL_OPTIONS`` for every process they
start, and :func:`tiered_jvm` takes it out while the session's JVM launches."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

C1_ONLY = "-XX:TieredStopAtLevel=1"
_VAR = "JAVA_TOOL_OPTIONS"
_BEFORE = os.environ.get(_VAR)  # what the environment had before the tests added C1_ONLY


def short_lived_jvms() -> None:
    """C1 only for every JVM started from now on (by this process and its children)."""
    if C1_ONLY not in os.environ.get(_VAR, ""):
        os.environ[_VAR] = f"{os.environ.get(_VAR, '')} {C1_ONLY}".strip()


def _put(value: str | None) -> None:
    if value is None:
        os.environ.pop(_VAR, None)
    else:
        os.environ[_VAR] = value


@contextmanager
def tiered_jvm() -> Iterator[None]:
    """Launch a long-lived JVM inside this block: the environment as it was before the tests."""
    saved = os.environ.get(_VAR)
    _put(_BEFORE)
    try:
        yield
    finally:
        _put(saved)
