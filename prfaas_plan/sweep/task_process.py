"""What a process holds while sweep tasks run in it (sweep/rows.py `chunk_table`): Python's
cyclic collector paused and glibc's malloc thresholds set for arrays, each set when the first
task begins and restored when the last ends (a Dask worker runs tasks on several threads).
"""

import gc
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any


class _WhileTasksRun:
    """A process-wide setting held while any task of the process runs: `start` when the first
    begins, `stop` (given what `start` answered) when the last ends. A Dask worker runs tasks
    on several threads at once: a setting saved and restored by each task alone would be
    restored by the first to end while another runs, or saved by a task while another held it
    and then kept for good (a review found the collector left disabled that way)."""

    def __init__(self, start: Callable[[], Any], stop: Callable[[Any], None]) -> None:
        self._start, self._stop = start, stop
        self._lock = threading.Lock()
        self._running = 0
        self._state: Any = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._running == 0:
                self._state = self._start()
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    self._stop(self._state)


def _pause_collector() -> bool:
    enabled = gc.isenabled()
    gc.disable()
    return enabled


def _resume_collector(enabled: bool) -> None:
    if enabled:
        gc.enable()


# Python's cyclic garbage collector paused while tasks run, as it was again afterwards
# (reference counting frees the tasks' objects as usual; only cycles wait for the next
# collection). A chunk makes millions of objects that live until its table is built (its
# problems, reports, documents and rows) and no cycles (none unreachable after a chunk of 4,000
# Latin-hypercube scenarios; tests/render/test_fields.py checks a block's columns), so the
# collector's passes over them were pure cost: in a chunk of 4,000, 645 passes took 277 ms of
# 3.7 s, four full ones 211 ms of that. A cycle would hold all it reaches until the next
# collection after the chunk (one did: a chunk's reports, +54 MiB peak RSS).
collector_paused = _WhileTasksRun(_pause_collector, _resume_collector)


# glibc's mallopt parameters (malloc.h) and its defaults on 64-bit Linux
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


_DEFAULT_THRESHOLD_BYTES = 128 * 1024


_TASK_MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # the most glibc's own adaptive threshold reaches


_TASK_TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024


_ENVIRONMENT_THRESHOLDS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")


def _task_allocator() -> "_Mallopt | None":
    """Array-friendly malloc thresholds while tasks run (glibc; elsewhere nothing).

    glibc adapts its mmap threshold to the arrays a process frees, from 128 KiB up to 32 MiB,
    so where it stands when a task's arrays are made depends on what came before, and on the
    order of the task's own. Below an array's size, the array is a fresh mmap, page-faulted and
    zeroed, and freed by munmap: a Latin-hypercube chunk planned at the threshold its searches
    left behind took 16 times the page faults (400,000) and ran ~10% slower. A Dask
    nanny starts its workers with MALLOC_TRIM_THRESHOLD_=65536 (to hand freed memory back to
    the OS), which freezes the mmap threshold at 128 KiB: the worker ran at half the speed of a
    local process. So while tasks run the thresholds are the most glibc adapts to (32 MiB,
    and twice that for trimming). When the last ends the freed memory is trimmed and, where the
    environment set them, its thresholds are restored, as the nanny intends; elsewhere the
    tasks' stay (glibc cannot be set back to adapting on its own), which is where its own
    adaptation ends in a process that makes arrays of that size."""
    mallopt = _mallopt()
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, _TASK_MMAP_THRESHOLD_BYTES)
        mallopt(_M_TRIM_THRESHOLD, _TASK_TRIM_THRESHOLD_BYTES)
    return mallopt


def _process_allocator(mallopt: "_Mallopt | None") -> None:
    """The thresholds the environment set, restored, and the freed memory trimmed."""
    if mallopt is None:
        return
    if any(name in os.environ for name in _ENVIRONMENT_THRESHOLDS):
        for parameter, name in zip(
            (_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD), _ENVIRONMENT_THRESHOLDS, strict=True
        ):
            try:
                value = int(os.environ.get(name, _DEFAULT_THRESHOLD_BYTES))
            except ValueError:
                value = _DEFAULT_THRESHOLD_BYTES
            mallopt(parameter, value)
    mallopt.trim()


array_allocator = _WhileTasksRun(_task_allocator, _process_allocator)


class _Mallopt:
    def __init__(self, libc: Any) -> None:
        self._libc = libc

    def __call__(self, parameter: int, value: int) -> None:
        self._libc.mallopt(parameter, value)

    def trim(self) -> None:
        self._libc.malloc_trim(0)


@cache
def _mallopt() -> _Mallopt | None:
    """glibc's mallopt and malloc_trim, or None (another C library or system)."""
    import ctypes
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return _Mallopt(libc) if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
