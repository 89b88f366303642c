"""Running a sweep: its points cut into chunks (a task each), every chunk run by `chunk_table`
(in this process, a process pool, or on a Dask cluster), and each finished chunk written as one
Parquet file of the results directory, so an interrupted study loses only chunks in flight.

The rows of a chunk are sweep/rows.py's (one per scenario, a failure is a row, never the end
of the study); the results directory, its manifest and `--resume`, sweep/results.py's.

Chunks are generated as the workers take them, at most two per worker in flight, so memory
holds a few chunks whatever the size of the study. A Dask scheduler that is not one or cannot
be reached is a one-line error.
"""

import itertools
import pickle
import re
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError, ResourceLimitError
from prfaas_plan.inputs.files import shown
from prfaas_plan.sweep.results import (
    Found,
    RunSummary,
    check_chunk,
    chunk_file,
    unify_chunks,
    write_chunk,
    write_manifest,
)

# sweep/report.py reads the chunks through this module
from prfaas_plan.sweep.results import chunk_files as chunk_files
from prfaas_plan.sweep.results import read_chunk as read_chunk
from prfaas_plan.sweep.rows import Chunk, chunk_table
from prfaas_plan.sweep.spec import Sweep

if TYPE_CHECKING:
    import pyarrow as pa


def chunks(sweep: Sweep) -> Iterator[Chunk]:
    """The sweep's points cut into chunks of `chunk_size` (the last one shorter), generated as
    they are needed: chunk i holds the kept points i * chunk_size .. (i + 1) * chunk_size - 1."""
    size = sweep.spec.chunk_size
    chunk: Chunk = []
    for point in sweep.points():
        chunk.append(point)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


Runner = Callable[[Iterator[tuple[int, Chunk]]], Iterator[tuple[int, "pa.Table"]]]


def execute(
    sweep: Sweep,
    found: Found,
    runner: Runner,
    progress: Callable[[int, int], None] = lambda points, scenarios: None,
) -> RunSummary:
    """Run every chunk not already on disk, or on disk but broken (`check_chunk`: rerun), with
    `runner`, writing each as it finishes and reporting it to `progress` (points of the sweep it
    covers, filtered out ones included, and scenarios run). Chunks are generated as the runner
    asks for them, so memory holds only those in flight. The manifest records the study's size
    once every chunk is on disk."""
    results = found.directory
    axes = list(sweep.spec.axes)
    counts = {"scenarios": 0, "chunks": 0, "resumed": 0, "rerun": 0, "run": 0}
    spans: dict[int, int] = {}  # in flight: chunk index -> points it covers
    last = -1  # the last scenario id of the chunks generated so far

    def tasks() -> Iterator[tuple[int, Chunk]]:
        nonlocal last
        for index, chunk in enumerate(chunks(sweep)):
            counts["chunks"] += 1
            counts["scenarios"] += len(chunk)
            span, last = chunk[-1][0] - last, chunk[-1][0]
            if index in found.chunk_files:
                if check_chunk(chunk_file(results, index), chunk, axes) is None:
                    counts["resumed"] += 1
                    progress(span, 0)
                    continue
                counts["rerun"] += 1
            spans[index] = span
            yield index, chunk

    for index, table in runner(tasks()):
        write_chunk(results, index, table)
        counts["run"] += table.num_rows
        progress(spans.pop(index), table.num_rows)
    progress(sweep.generated - 1 - last, 0)  # the points after the last chunk, filtered out
    summary = RunSummary(
        counts["scenarios"], counts["chunks"], counts["resumed"], counts["rerun"], counts["run"]
    )
    unify_chunks(results, summary.chunks)  # one schema for every chunk, before the manifest
    write_manifest(results, sweep, summary)
    strays = sorted(i for i in found.chunk_files if i >= summary.chunks)
    if strays:
        raise ConfigError(
            f"results: {shown(results)} holds chunk files this sweep does not write (it has "
            f"{summary.chunks:,} chunks): {', '.join(chunk_file(results, i).name for i in strays[:3])}"
            f"{', ...' if len(strays) > 3 else ''}; move them out of the results directory"
        )
    return summary


def in_process(sweep: Sweep, data_dir: str | None) -> Runner:
    """Every chunk in this process, one after the other."""

    def run(tasks: Iterator[tuple[int, Chunk]]) -> Iterator[tuple[int, "pa.Table"]]:
        for index, chunk in tasks:
            yield index, chunk_table(sweep, chunk, data_dir)

    return run


def on_processes(sweep: Sweep, workers: int, data_dir: str | None) -> Runner:
    """The chunks on `workers` local processes (spawned when there are two chunks or more),
    at most two per worker in flight: the parent holds only those."""

    def run(tasks: Iterator[tuple[int, Chunk]]) -> Iterator[tuple[int, "pa.Table"]]:
        import multiprocessing
        from concurrent.futures.process import BrokenProcessPool

        first = list(itertools.islice(tasks, 2))
        if len(first) < 2:
            yield from in_process(sweep, data_dir)(iter(first))
            return
        # spawned, not forked: the parent may hold threads (the progress bar)
        context = multiprocessing.get_context("spawn")
        pending: dict[Future[pa.Table], int] = {}
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            try:
                for index, chunk in itertools.chain(first, tasks):
                    while len(pending) >= 2 * workers:
                        yield from _finished(pending)
                    pending[pool.submit(chunk_table, sweep, chunk, data_dir)] = index
                while pending:
                    yield from _finished(pending)
            except BrokenProcessPool:
                raise ResourceLimitError(
                    "workers: a worker process died (killed, or out of memory) while running "
                    "a chunk; the chunks written so far are kept: run again with `resume`, "
                    "with fewer workers or a smaller chunk_size",
                    parameter="workers",
                ) from None
            finally:  # a failure here or in the caller: what has not started never will
                pool.shutdown(wait=False, cancel_futures=True)

    return run


def _finished(pending: "dict[Future[pa.Table], int]") -> Iterator[tuple[int, "pa.Table"]]:
    done, _ = wait(pending, return_when=FIRST_COMPLETED)
    for future in done:
        yield pending.pop(future), future.result()


_DASK_ADDRESS = re.compile(
    r"(?:tcp://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})"
)
DASK_CONNECT_TIMEOUT_S = 10


def check_dask_address(address: str) -> None:
    """Refuse, before any connection, an address that is not tcp://HOST:PORT."""
    match = _DASK_ADDRESS.fullmatch(address)
    if match is None or not 1 <= int(match.group("port")) <= 65535:
        raise ConfigError(
            f"dask_scheduler: expected a scheduler address tcp://HOST:PORT (port 1 to 65535), "
            f"got {plausible.quoted(address)}",
            parameter="dask_scheduler",
        )


@contextmanager
def on_dask(sweep: Sweep, scheduler: str, data_dir: str | None) -> Iterator[Runner]:
    """Connected to the Dask scheduler at `scheduler` (or one line saying why not, within
    DASK_CONNECT_TIMEOUT_S), a runner sending the chunks to its workers, at most two per worker
    thread in flight."""
    check_dask_address(scheduler)
    try:
        from dask.distributed import Client
    except ImportError:
        raise ConfigError(
            "dask_scheduler: dask.distributed is not installed (pip install 'dask[distributed]')",
            parameter="dask_scheduler",
        ) from None
    where = f"dask_scheduler: {plausible.quoted(scheduler)}"
    try:
        with _quiet_dask():
            client = Client(scheduler, timeout=DASK_CONNECT_TIMEOUT_S)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as exc:
        raise ConfigError(
            f"{where}: cannot reach the Dask scheduler: {str(exc)[:200]}",
            parameter="dask_scheduler",
        ) from None
    except (ValueError, TypeError, MemoryError) as exc:
        # the address was checked: what fails now is the conversation (a service that is not
        # Dask: its first bytes read as a frame of exabytes)
        raise ConfigError(
            f"{where}: did not answer as a Dask scheduler ({type(exc).__name__}: {str(exc)[:200]})",
            parameter="dask_scheduler",
        ) from None
    with client:
        shared = client.scatter(sweep, broadcast=True)  # type: ignore[no-untyped-call]
        threads = sum(client.nthreads().values())  # type: ignore[no-untyped-call]
        yield lambda tasks: _dask_chunks(client, shared, sweep, data_dir, tasks, threads)


def _dask_chunks(
    client: Any,
    shared: Any,
    sweep: Sweep,
    data_dir: str | None,
    tasks: Iterator[tuple[int, Chunk]],
    threads: int,
) -> Iterator[tuple[int, "pa.Table"]]:
    from dask.distributed import as_completed
    from distributed import KilledWorker

    window = max(4, 2 * threads)
    indices: dict[Any, int] = {}

    def submit() -> bool:
        task = next(tasks, None)
        if task is None:
            return False
        index, chunk = task
        future = client.submit(
            sealed_chunk_table, shared, seal(chunk), data_dir, pure=False,
            key=f"chunk-{sweep.fingerprint}-{index}",
        )  # fmt: skip
        indices[future] = index
        finished.add(future)  # type: ignore[no-untyped-call]
        return True

    finished = as_completed(with_results=True)  # type: ignore[no-untyped-call]
    while len(indices) < window and submit():
        pass
    try:
        for future, table in finished:
            yield indices.pop(future), table
            submit()
    except KilledWorker:
        raise ResourceLimitError(
            "dask_scheduler: a Dask worker died (killed, or out of memory) running a chunk; "
            "the chunks written so far are kept: run again with `resume`",
            parameter="dask_scheduler",
        ) from None
    except (OSError, TimeoutError) as exc:
        raise ConfigError(
            f"dask_scheduler: lost the Dask scheduler ({str(exc)[:200]}); the chunks written so "
            "far are kept: run again with `resume`",
            parameter="dask_scheduler",
        ) from None


def seal(chunk: Chunk) -> bytes:
    """A chunk as one pickle, made by the client: Dask's `submit` walks a task's lists, tuples
    and dicts for futures (a chunk of 4,000 scenarios is ~32,000 calls; the client's CPU fell
    by ~22 ms a chunk without them), and the scheduler unpickles a task's arguments and pickles
    them again for the worker; bytes pass through both as they are. On a cluster whose client
    shares the workers' cores (a LocalCluster), that CPU was taken from the workers."""
    return pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)


def sealed_chunk_table(sweep: Sweep, sealed: bytes, data_dir: str | None) -> "pa.Table":
    """`chunk_table` of a chunk `seal`ed by this package's client."""
    chunk: Chunk = pickle.loads(sealed)  # the client's own pickle of the chunk
    return chunk_table(sweep, chunk, data_dir)


@contextmanager
def _quiet_dask() -> Iterator[None]:
    """distributed logs each failed connection attempt on stderr; the one error line says it."""
    import logging

    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
