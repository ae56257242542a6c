"""What the demo harness asks of a back-end: run the capture, say how it is doing, summarize it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from headwater.cli.demo.progress import CaptureProgress

TOPIC_PREFIX = "inventory"


def sample_topic(table: str) -> str:
    """The topic of one sample table's change events."""
    from headwater.embedded.sample import SCHEMA

    return f"{TOPIC_PREFIX}.{SCHEMA}.{table}"


class DemoBackend(ABC):
    """One way of capturing the sample database. The harness calls :meth:`start` once the database
    is loaded, :meth:`check` on every tick, :meth:`idle` while catching up with the generator,
    :meth:`stop` once caught up, then :meth:`summary` and :meth:`notes`; :meth:`close` always."""

    #: the capture the live view's header names
    title: str
    #: what this back-end writes under the work directory; removed before a run, since a new
    #: cluster's events and offsets do not continue an earlier one's
    outputs: tuple[str, ...]
    #: caught up: no new event for ``catch_up_quiet_s`` while :meth:`idle`, waited for at most
    #: ``catch_up_max_s`` after the generator stopped
    catch_up_quiet_s: float
    catch_up_max_s: float

    @abstractmethod
    def destination(self, workdir: Path) -> str:
        """Where the change events go (the live view's header)."""

    @abstractmethod
    def starting(self, workdir: Path) -> str:
        """What :meth:`start` is about to do (printed before it)."""

    @abstractmethod
    def start(self, cluster: Any, source: dict[str, str], progress: CaptureProgress, workdir: Path) -> None:
        """Start capturing ``source`` (the connector properties) from ``cluster``, counting into ``progress``."""

    @abstractmethod
    def check(self) -> None:
        """Raise when the capture failed or ended by itself."""

    def idle(self) -> bool:
        """Nothing in flight: no batch running and no data known to be waiting."""
        return True

    def busy_details(self) -> str:
        """What the capture looked like when it did not catch up in time (a warning's tail)."""
        return ""

    def stats(self) -> list[str]:
        """Figures of this back-end's own for the header and the progress lines."""
        return []

    def panels(self) -> list[Any]:
        """Rich renderables shown below the shared tables."""
        return []

    @abstractmethod
    def stop(self) -> None:
        """Stop capturing, once caught up; raise what went wrong."""

    @abstractmethod
    def close(self) -> None:
        """Release what is left, after a failure too; never raises."""

    @abstractmethod
    def summary(self, progress: CaptureProgress, elapsed: float) -> Any:
        """The summary table printed after a run (``elapsed``: seconds from start to stop)."""

    @abstractmethod
    def notes(self, workdir: Path) -> list[str]:
        """Lines after the summary: where the outputs are and how to look at them."""
