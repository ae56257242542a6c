"""Processes tests run and kill: a process's descendants, whether a process still runs, and waiting
for a condition while one does."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path


def descendants(root: int) -> list[int]:
    """Every process below `root` (by parent pid, whatever session or process group it moved to:
    PySpark's worker daemons and Headwater's encoding workers make their own)."""
    children: dict[int, list[int]] = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children[int(fields[1])].append(int(stat.parent.name))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed process may wait unreaped under a PID 1 that never reaps)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_while_running(done: Callable[[], bool], what: str, proc: subprocess.Popen, log: Path,
                       timeout: float = 60, poll: float = 0.1) -> None:
    """Wait until `done()` while `proc` runs; fail with its log when it exits first or time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) waiting for {what}:\n{log.read_text()}")
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}:\n{log.read_text()}")
