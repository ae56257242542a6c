"""The demo's run, whatever the back-end: a throwaway PostgreSQL with the sample database, the
back-end capturing it, the change generator once the initial snapshot is in, the live view, a
catch-up before stopping, and the summary."""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from headwater.cli.demo.backend import TOPIC_PREFIX, DemoBackend, sample_topic
from headwater.cli.demo.progress import CaptureProgress
from headwater.cli.demo.view import DemoView, generated_line

log = logging.getLogger("headwater.demo")

DEFAULT_WORKDIR = Path(".headwater") / "demo"
SLOT_NAME = "headwater_demo"
REFRESH_PER_SECOND = 4
PLAIN_EVERY_S = 5.0
POLL_S = 0.1
SNAPSHOT_MAX_S = 900.0  # the sample snapshot takes seconds; this only bounds a stuck capture


class _Signals:
    """SIGINT/SIGTERM set ``stop`` (a second one also sets ``hurry``); restored on ``restore``."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.hurry = threading.Event()
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.stop.is_set():
            self.hurry.set()
        self.stop.set()

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            with contextlib.suppress(Exception):
                signal.signal(sig, handler)
        self._previous.clear()


@contextlib.contextmanager
def _logging_through(stream: Any) -> Iterator[None]:
    """Point the root logger's console handlers at ``stream`` (rich's proxy) while Live is showing."""
    changed = []
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            if handler.stream in (sys.__stderr__, sys.__stdout__):
                changed.append((handler, handler.setStream(stream)))
    try:
        yield
    finally:
        for handler, previous in changed:
            handler.setStream(previous)


def _prepare_workdir(workdir: Path, outputs: tuple[str, ...]) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    for name in outputs:
        path = workdir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def source_properties(cluster: Any) -> dict[str, str]:
    """The demo's connector properties: the sample database's (from the embedded module) and the
    demo's topic prefix and replication slot."""
    from headwater.embedded.sample import sample_connector_properties

    return {**sample_connector_properties(cluster), "topic.prefix": TOPIC_PREFIX, "slot.name": SLOT_NAME}


class _Run:
    """One run's moving parts, so that the main loop, the catch-up and the clean-up share them."""

    def __init__(self, backend: DemoBackend, signals: _Signals, duration: float | None, rate: float) -> None:
        self.backend = backend
        self.signals = signals
        self.duration = duration
        self.rate = rate
        self.cluster: Any = None
        self.generator: Any = None
        self.deadline: float | None = None

    def tick(self, progress: CaptureProgress, view: DemoView, dbname: str) -> bool:
        """Start the generator once the snapshot is in; False when the demo should stop."""
        from headwater.embedded.sample import ChangeGenerator

        self.backend.check()
        if self.generator is None:
            if progress.snapshot_done.is_set():
                self.generator = ChangeGenerator(self.cluster.dsn(dbname), rate=self.rate).start()
                view.generator = self.generator
                view.generator_started = time.monotonic()
                self.deadline = None if self.duration is None else time.monotonic() + self.duration
            elif time.monotonic() - view.started > SNAPSHOT_MAX_S:
                raise RuntimeError(f"the initial snapshot did not complete within {SNAPSHOT_MAX_S:.0f} s")
        return not self.signals.stop.is_set() and (self.deadline is None or time.monotonic() < self.deadline)

    def catch_up(self, progress: CaptureProgress, view: DemoView) -> None:
        """Stop the generator, then wait until the back-end has every change it made: no new events
        for a while and nothing in flight (stopping mid-batch would leave the outputs a batch behind
        and the summary wrong). A second Ctrl-C cuts it short."""
        view.stopping = True
        if self.generator is not None:
            self.generator.stop()
        if not progress.snapshot_done.is_set():
            return
        backend = self.backend
        end = time.monotonic() + backend.catch_up_max_s
        busy = 0  # polls that found something in flight
        while time.monotonic() < end and not self.signals.hurry.is_set():
            backend.check()
            idle = backend.idle()
            busy += not idle
            if idle and progress.quiet_for() >= backend.catch_up_quiet_s:
                return
            self.signals.hurry.wait(POLL_S)
        if not self.signals.hurry.is_set():
            # logged with what the back-end looked like, so that a catch-up running into its bound can be diagnosed
            log.warning("catching up: the capture did not look idle within %.0f s (%d polls found something in "
                        "flight; last event %.1f s ago)%s", backend.catch_up_max_s, busy, progress.quiet_for(),
                        backend.busy_details())

    def close(self, err: Console) -> None:
        if self.generator is not None:
            with contextlib.suppress(Exception):
                self.generator.stop()
        self.backend.close()
        if self.cluster is not None:
            try:
                self.cluster.stop()
            except Exception as exc:
                err.print(f"headwater demo: could not stop the PostgreSQL cluster: {exc}", markup=False)
        self.signals.restore()


def run_demo(backend: DemoBackend, *, duration: float | None = None, rate: float = 20.0,
             workdir: str | Path | None = None) -> int:
    """Run the demo through ``backend``; ``duration``: seconds of generated changes after the initial
    snapshot (None: until Ctrl-C). Returns the exit code (0 ok, 1 failure)."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 120))  # CI logs: no wrapping of topic names
    err = Console(stderr=True, soft_wrap=True)
    if duration is not None and duration <= 0:
        err.print("headwater demo: --duration must be positive")
        return 1
    if rate <= 0:
        err.print("headwater demo: --rate must be positive")
        return 1
    workdir = (Path(workdir) if workdir is not None else DEFAULT_WORKDIR).resolve()
    signals = _Signals()
    signals.install()
    run = _Run(backend, signals, duration, rate)
    try:
        from headwater.embedded.postgres import PostgresNotFoundError, ThrowawayPostgres
        from headwater.embedded.sample import DATABASE, TABLES, load_sample_database

        _prepare_workdir(workdir, backend.outputs)
        console.print("Starting a throwaway PostgreSQL 15 cluster (wal_level=logical)…")
        try:
            run.cluster = ThrowawayPostgres()
        except PostgresNotFoundError as exc:
            err.print(f"headwater demo: {exc}", markup=False, highlight=False)
            return 1
        run.cluster.start()
        if signals.stop.is_set():
            raise KeyboardInterrupt
        load_sample_database(run.cluster, DATABASE)
        console.print(f"Created the sample database {DATABASE!r} on {run.cluster.host}:{run.cluster.port}; "
                      f"{backend.starting(workdir)}")
        progress = CaptureProgress(sample_topic(table) for table in TABLES)
        backend.start(run.cluster, source_properties(run.cluster), progress, workdir)
        view = DemoView(progress, backend, run.cluster, DATABASE, workdir, duration)

        if console.is_terminal:
            with Live(view.render(), console=console, refresh_per_second=REFRESH_PER_SECOND,
                      transient=True) as live, _logging_through(sys.stderr):
                while run.tick(progress, view, DATABASE):
                    live.update(view.render())
                    signals.stop.wait(1 / REFRESH_PER_SECOND)
                run.catch_up(progress, view)
                live.update(view.render())
        else:
            next_line = view.started
            while run.tick(progress, view, DATABASE):
                if time.monotonic() >= next_line:
                    print(view.plain_line(), flush=True)
                    next_line += PLAIN_EVERY_S
                signals.stop.wait(0.25)
            run.catch_up(progress, view)
            print(view.plain_line(), flush=True)

        elapsed = time.monotonic() - view.started
        backend.stop()
        if not progress.snapshot_done.is_set():
            raise RuntimeError("stopped before the initial snapshot completed")
        generator = run.generator
        if generator is not None and generator.last_error and not generator.counts.get("transactions"):
            raise RuntimeError(f"the change generator failed: {generator.last_error}")
        console.print(backend.summary(progress, elapsed))
        if generator is not None:
            console.print(generated_line(generator))
        for line in backend.notes(workdir):
            console.print(line, markup=False, highlight=False)
        return 0
    except KeyboardInterrupt:
        err.print("headwater demo: interrupted")
        return 1
    except Exception as exc:
        message = (str(exc).strip() or repr(exc)).splitlines()[0]
        err.print(f"headwater demo failed: {type(exc).__name__}: {message}", markup=False, highlight=False)
        log.debug("demo failure", exc_info=True)
        return 1
    finally:
        run.close(err)
