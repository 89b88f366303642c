"""Solver libraries that write to the process's standard output below Python's sys.stdout
(file descriptor 1): HiGHS' banner when its first instance is made, and a debug line of the
HiGHS MIP solver inside scipy (`HighsMipSolverData::transformNewIntegerFeasibleSolution ...`)
on some models. A command's stdout is its data (JSON, CSV), so solver calls run with
descriptor 1 pointed at /dev/null. The redirection is process-wide: one call at a time holds it
(a lock), so concurrent solves in a server do not restore each other's descriptor."""

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()


@contextmanager
def solver_output_silenced() -> Iterator[None]:
    """Run the body with file descriptor 1 on /dev/null (Python's own buffer flushed first)."""
    with _LOCK:
        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
