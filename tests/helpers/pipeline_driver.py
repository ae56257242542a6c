"""`headwater pipeline FILE` as a subprocess that tests can SIGKILL like a dying driver machine."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from helpers.cli import HEADWATER
from helpers.processes import descendants, running


class PipelineDriver:
    """The pipeline in a process group of its own, so that SIGKILL takes the JVM and the Python
    workers with it. Each run logs to run<N>.log in `workdir`; `context` (a seed, say) is added to
    every failure message."""

    def __init__(self, workdir: Path, context: str = "") -> None:
        self.workdir = workdir
        self.checkpoint = workdir / "checkpoint"
        self.context = context
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.kills: list[str] = []  # what each kill interrupted

    def start(self, pipeline: Path) -> None:
        self.runs += 1
        with open(self.workdir / f"run{self.runs}.log", "wb") as out:
            self.proc = subprocess.Popen([str(HEADWATER), "pipeline", str(pipeline)], cwd=self.workdir,
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def logs(self, runs: int = 3) -> str:
        """The ends of the last `runs` runs' output."""
        return "\n".join(f"--- run {i} (last 4000 chars) ---\n"
                         + (self.workdir / f"run{i}.log").read_text(errors="replace")[-4000:]
                         for i in range(max(1, self.runs - runs + 1), self.runs + 1))

    def _failure(self, text: str) -> AssertionError:
        context = f" ({self.context})" if self.context else ""
        return AssertionError(f"{text}{context}\n{self.logs()}")

    def assert_alive(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise self._failure(f"run {self.runs} exited with {self.proc.returncode}")

    def batches(self, kind: str) -> list[int]:
        """The batch ids in the checkpoint's `offsets` or `commits` log."""
        directory = self.checkpoint / kind
        if not directory.is_dir():
            return []
        return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())

    def last(self, kind: str) -> int:
        ids = self.batches(kind)
        return ids[-1] if ids else -1

    def wait_for(self, condition: Callable[[], object], what: str, timeout: float = 300,
                 poll: float = 0.05) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            self.assert_alive()
            time.sleep(poll)
        raise self._failure(f"run {self.runs}: {what} did not happen within {timeout:.0f} s")

    def kill(self) -> str:
        """SIGKILL the process group and every descendant (PySpark's worker daemons put themselves
        in process groups of their own); returns, and records in `kills`, what was in progress."""
        assert self.proc is not None
        planned, committed = self.last("offsets"), self.last("commits")
        victims = [self.proc.pid, *descendants(self.proc.pid)]
        os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(30)
        deadline = time.monotonic() + 30
        while any(running(pid) for pid in victims):
            if time.monotonic() > deadline:
                raise AssertionError(f"processes {[p for p in victims if running(p)]} survived SIGKILL")
            time.sleep(0.05)
        state = (f"run {self.runs}: batch {planned} running" if planned > committed
                 else f"run {self.runs}: between batches (last committed {committed})")
        self.kills.append(state)
        return state

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
