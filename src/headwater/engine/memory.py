"""Process-level memory settings for the capture hot path."""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_PR_SET_PDEATHSIG = 1


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name or "libc.so.6", use_errno=True)
    except OSError:
        return None


def tune_allocator(mmap_threshold: int = 32 << 20, trim_threshold: int = 128 << 20) -> bool:
    """Stop glibc from mapping and unmapping every multi-megabyte buffer.

    Serializing a batch builds buffers of several MB (the schema text of each event is ~3 KB).
    Above glibc's default 128 KB threshold each of them is a fresh mmap whose pages fault in one
    by one and are unmapped again on free, which costs the streaming path much of its event
    throughput (bench/README.md, "How Headwater gets there"). Serving them from the heap, and
    trimming it only past `trim_threshold`, keeps memory bounded (the batches are bounded) at a
    fraction of the cost. Returns False where glibc's mallopt is not available."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    ok = libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1
    return libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold) == 1 and ok


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to signal this process when its parent dies (Linux), so worker processes
    never outlive a runner that was killed with SIGKILL."""
    libc = _libc()
    if libc is None:
        return False
    return libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
