"""JVM options for the JVMs the tests start.

Short-lived JVMs (a `headwater pipeline` subprocess, its local-cluster executors, the Kafka
broker) do better with C1 alone: C2's compiler threads would take a core of a 2-core machine for
code that runs for seconds, and those tests finish sooner without them (bench/README.md,
"Measurements behind design choices").
The Spark session each test worker keeps for the whole run is the opposite: its hot code runs for
half an hour and needs C2. So the tests put C1 in ``JAVA_TOOL_OPTIONS`` for every process they
start, and :func:`tiered_jvm` takes it out while the session's JVM launches."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

C1_ONLY = "-XX:TieredStopAtLevel=1"
_VAR = "JAVA_TOOL_OPTIONS"
# What the environment had before the tests added C1_ONLY, kept in the environment too: pytest-xdist's
# workers inherit the controller's environment, C1_ONLY included, and must still know the original
# (without it every worker's Spark session ran on C1 alone, in a 48 MB code cache that a long test
# session filled: "Out of space in CodeCache for adapters").
_ORIGINAL = "HEADWATER_TESTS_JAVA_TOOL_OPTIONS"


def short_lived_jvms() -> None:
    """C1 only for every JVM started from now on (by this process and its children)."""
    current = os.environ.get(_VAR)
    os.environ.setdefault(_ORIGINAL, current or "")
    if C1_ONLY not in (current or ""):
        os.environ[_VAR] = f"{current or ''} {C1_ONLY}".strip()


def _original() -> str | None:
    return os.environ.get(_ORIGINAL) or None


def _put(value: str | None) -> None:
    if value is None:
        os.environ.pop(_VAR, None)
    else:
        os.environ[_VAR] = value


@contextmanager
def tiered_jvm() -> Iterator[None]:
    """Launch a long-lived JVM inside this block: the environment as it was before the tests."""
    saved = os.environ.get(_VAR)
    _put(_original())
    try:
        yield
    finally:
        _put(saved)
