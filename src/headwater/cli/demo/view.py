"""The demo's live view (a terminal) and progress lines (a log), shared by both back-ends."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from headwater.cli.demo.backend import DemoBackend
from headwater.cli.demo.progress import OPS, CaptureProgress


def ops_table(title: str, ops: dict[str, Counter[str]]) -> Table:
    """Events per topic and op, with a row of totals."""
    table = Table(title=title, title_justify="left")
    table.add_column("topic")
    for op in OPS:
        table.add_column(op, justify="right", header_style="bold")
    table.add_column("total", justify="right")
    sums: Counter[str] = Counter()
    for topic in sorted(ops):
        counts = ops[topic]
        sums.update(counts)
        table.add_row(topic, *(str(counts.get(op, 0)) for op in OPS), str(sum(counts.values())))
    table.add_section()
    table.add_row(Text("all", style="bold"), *(str(sums.get(op, 0)) for op in OPS), str(sum(sums.values())))
    return table


def generated_line(generator: Any) -> str:
    """``Generated N transactions (…by kind).``"""
    counts = dict(generator.counts)
    done = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items() if k != "transactions" and v)
    return f"Generated {counts.get('transactions', 0)} transactions ({done or 'none'})."


class DemoView:
    """Renders the run: the phase, events per topic, the generator's transactions, the back-end's panels.

    The harness sets :attr:`generator` (and :attr:`generator_started`) once the snapshot is in, and
    :attr:`stopping` when it starts catching up."""

    def __init__(self, progress: CaptureProgress, backend: DemoBackend, cluster: Any, dbname: str,
                 workdir: Path, duration: float | None) -> None:
        self.progress = progress
        self.backend = backend
        self.source = f"{cluster.host}:{cluster.port}/{dbname}"
        self.workdir = workdir
        self.duration = duration
        self.started = time.monotonic()
        self.generator: Any = None
        self.generator_started: float | None = None
        self.stopping = False

    def phase(self) -> str:
        if self.stopping:
            return "catching up, then stopping"
        if self.generator is None:
            return "initial snapshot"
        return "streaming changes"

    def _figures(self, total: int) -> list[str]:
        rate = self.progress.events_per_second()
        return [f"{total} events", f"{rate:.1f} events/s", *self.backend.stats()]

    def render(self) -> Group:
        ops, total = self.progress.counts()
        # --duration counts from the end of the snapshot: how long the generator runs
        elapsed = time.monotonic() - (self.generator_started or self.started)
        limit = ""
        if self.duration is not None and self.generator is not None:
            elapsed = min(elapsed, self.duration)
            limit = f" of {self.duration:.0f}s"
        header = Text.assemble(
            (f"Headwater demo: {self.backend.title}", "bold cyan"),
            f"\n{self.source} → {self.backend.destination(self.workdir)}\n",
            (self.phase(), "bold"),
            "  ·  " + "  ·  ".join([f"{elapsed:.0f}s{limit}", *self._figures(total), "Ctrl-C to stop"]),
        )
        generated = Table(title="Generated transactions", title_justify="left")
        generated.add_column("kind")
        generated.add_column("count", justify="right")
        if self.generator is None:
            generated.add_row("(waiting for the snapshot)", "")
        else:
            for kind, count in dict(self.generator.counts).items():
                generated.add_row(kind.replace("_", " "), str(count))
        top = Table.grid(padding=(0, 2))
        top.add_row(ops_table("Change events per topic", ops), generated)
        return Group(Panel(header), top, *self.backend.panels())

    def plain_line(self) -> str:
        ops, total = self.progress.counts()
        sums: Counter[str] = Counter()
        for counts in ops.values():
            sums.update(counts)
        by_op = " ".join(f"{op}={sums.get(op, 0)}" for op in OPS)
        figures = self._figures(total)
        figures[0] += f" ({by_op})"
        if self.generator is not None:
            figures.append(f"generated {self.generator.counts.get('transactions', 0)} tx")
        return f"[{time.monotonic() - self.started:5.1f}s] {self.phase()}: " + ", ".join(figures)
