"""Running a sweep: its points cut into chunks (a task each), every chunk run by `run_chunk`
(in this process, a process pool, or on a Dask cluster), and each finished chunk written as one
Parquet file of the results directory, so an interrupted study loses only chunks in flight.

One row per scenario: `scenario_id`, the axis values (`axis.<name>`), `error_class` and
`error_message` (null when it ran), then every output of the command's JSON flattened with dots
(`plan.throughput_rps.system`; lists of names joined by commas, other lists as JSON). A failure
is a row, never the end of the study. `_sweep.json` beside the chunks records the sweep's
fingerprint so that `--resume` continues only the same sweep, skipping the chunks on disk.
"""

import json
import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.cached_catalog import CachedCatalog
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import Problem, Scenario, build_problem
from prfaas_plan.study import fast
from prfaas_plan.study.commands import command
from prfaas_plan.study.spec import Sweep, Value, scenario_of

if TYPE_CHECKING:
    import pyarrow as pa

Columns = dict[str, list[Any]]
Chunk = list[tuple[int, dict[str, Value]]]
MANIFEST = "_sweep.json"


@cache
def _catalog(data_dir: str | None) -> Catalog:
    return CachedCatalog.open(Path(data_dir) if data_dir else None)


def flatten(document: Any, prefix: str = "") -> dict[str, Any]:
    """A JSON document as one level of dotted keys; non-finite numbers become null."""
    out: dict[str, Any] = {}
    if isinstance(document, dict):
        for key, value in document.items():
            out.update(flatten(value, f"{prefix}{key}."))
        if not document and prefix:
            out[prefix[:-1]] = None
        return out
    name = prefix[:-1]
    if isinstance(document, list):
        strings = all(isinstance(v, str) for v in document)
        out[name] = ",".join(document) if strings else json.dumps(document)
    elif isinstance(document, float) and not math.isfinite(document):
        out[name] = None
    else:
        out[name] = document
    return out


def _error_row(exc: BaseException) -> dict[str, Any]:
    return {"error_class": type(exc).__name__, "error_message": str(exc).splitlines()[0][:500]}


def _problem(sweep: Sweep, scenario: Scenario, data_dir: str | None) -> Problem:
    return build_problem(
        scenario, Path(sweep.base_dir) / Path(sweep.source).name, _catalog(data_dir)
    )


def _one(
    sweep: Sweep, scenario: Scenario, parameters: dict[str, Any], data_dir: str | None
) -> dict[str, Any]:
    try:
        problem = _problem(sweep, scenario, data_dir)
        document = command(sweep.spec.command).run(problem, parameters, _catalog(data_dir))
        return {"error_class": None, "error_message": None, **flatten(document)}
    except Exception as exc:
        return _error_row(exc)


def run_chunk(sweep: Sweep, chunk: Chunk, data_dir: str | None = None) -> Columns:
    """The rows of one chunk as columns (the function a worker runs)."""
    position = {scenario_id: i for i, (scenario_id, _) in enumerate(chunk)}
    rows: dict[int, dict[str, Any]] = {}  # per-scenario results and failures
    blocks: list[tuple[list[int], Columns]] = []  # fast-path results: scenario ids, columns
    batches: dict[Any, list[tuple[int, Scenario, dict[str, Any]]]] = {}
    entry = command(sweep.spec.command)
    for scenario_id, point in chunk:
        parameters = sweep.parameters(point)
        try:
            scenario = scenario_of(sweep, point, scenario_id)
        except Exception as exc:
            rows[scenario_id] = _error_row(exc)
            continue
        if sweep.spec.fast_path and entry.vectorised(parameters):
            key = fast.group_key(point, parameters)
            batches.setdefault(key, []).append((scenario_id, scenario, parameters))
        else:
            rows[scenario_id] = _one(sweep, scenario, parameters, data_dir)
    for members in batches.values():
        scenarios = [scenario for _, scenario, _ in members]
        try:
            columns = fast.optimize_group(
                _problem(sweep, scenarios[0], data_dir), scenarios, members[0][2]
            )
        except Exception:
            for scenario_id, scenario, p in members:
                rows[scenario_id] = _one(sweep, scenario, p, data_dir)
            continue
        ids = [scenario_id for scenario_id, _, _ in members]
        none: list[Any] = [None] * len(ids)
        blocks.append((ids, {"error_class": none, "error_message": none, **columns}))
    names: dict[str, None] = dict.fromkeys(["scenario_id", *(f"axis.{a}" for a in sweep.spec.axes)])
    names.update(dict.fromkeys(["error_class", "error_message"]))
    for _, columns in blocks:
        names.update(dict.fromkeys(columns))
    for row in rows.values():
        names.update(dict.fromkeys(row))
    out: Columns = {name: [None] * len(chunk) for name in names}
    out["scenario_id"] = [scenario_id for scenario_id, _ in chunk]
    for axis in sweep.spec.axes:
        out[f"axis.{axis}"] = [point[axis] for _, point in chunk]
    for ids, columns in blocks:
        places = [position[i] for i in ids]
        for name, values in columns.items():
            column = out[name]
            for place, value in zip(places, values, strict=True):
                column[place] = value
    for scenario_id, row in rows.items():
        place = position[scenario_id]
        for name, value in row.items():
            out[name][place] = value
    return out


# glibc's mallopt parameters (malloc.h) and its defaults on 64-bit Linux
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_DEFAULT_THRESHOLD_BYTES = 128 * 1024
_TASK_MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # the most glibc's own adaptive threshold reaches
_TASK_TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024
_ENVIRONMENT_THRESHOLDS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")


@contextmanager
def _array_allocator() -> Iterator[None]:
    """Array-friendly malloc thresholds for one task where the environment fixed them.

    A Dask nanny starts its workers with MALLOC_TRIM_THRESHOLD_=65536 (to hand freed memory back
    to the OS). Setting it also freezes glibc's mmap threshold at 128 KiB, so every numpy array
    of the fast path above that is a fresh mmap, page-faulted and zeroed, and freed by munmap:
    the worker ran at half the speed of a local process. During the task the thresholds are
    those glibc adapts to on its own; afterwards the environment's are restored and the freed
    memory is trimmed, as the nanny intends. Elsewhere (not glibc, no such variable): nothing."""
    mallopt = _mallopt()
    if mallopt is None or not any(name in os.environ for name in _ENVIRONMENT_THRESHOLDS):
        yield
        return
    mallopt(_M_MMAP_THRESHOLD, _TASK_MMAP_THRESHOLD_BYTES)
    mallopt(_M_TRIM_THRESHOLD, _TASK_TRIM_THRESHOLD_BYTES)
    try:
        yield
    finally:
        for parameter, name in zip(
            (_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD), _ENVIRONMENT_THRESHOLDS, strict=True
        ):
            try:
                value = int(os.environ.get(name, _DEFAULT_THRESHOLD_BYTES))
            except ValueError:
                value = _DEFAULT_THRESHOLD_BYTES
            mallopt(parameter, value)
        mallopt.trim()


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


def chunk_table(sweep: Sweep, chunk: Chunk, data_dir: str | None = None) -> "pa.Table":
    """`run_chunk` as an Arrow table: the task a worker runs (an Arrow table crosses processes
    as a few buffers, not as one Python object per cell)."""
    import pyarrow as pa

    with _array_allocator():
        return pa.table(run_chunk(sweep, chunk, data_dir))


def chunks(sweep: Sweep) -> list[Chunk]:
    points = list(sweep.points())
    size = sweep.spec.chunk_size
    return [points[i : i + size] for i in range(0, len(points), size)]


def chunk_file(results: Path, index: int) -> Path:
    return results / f"chunk-{index:06d}.parquet"


@dataclass(frozen=True)
class Plan:
    """What a run will do: every chunk and those already on disk (resumed)."""

    chunks: list[Chunk]
    done: frozenset[int]

    @property
    def scenarios(self) -> int:
        return sum(len(c) for c in self.chunks)

    @property
    def todo(self) -> list[int]:
        return [i for i in range(len(self.chunks)) if i not in self.done]


def prepare(sweep: Sweep, results: Path, resume: bool) -> Plan:
    """Check the results directory (new, or the same sweep's with `resume`) and list the work."""
    manifest = results / MANIFEST
    all_chunks = chunks(sweep)
    record = {
        "sweep": sweep.spec.name, "source": sweep.source, "fingerprint": sweep.fingerprint,
        "command": sweep.spec.command, "axes": list(sweep.spec.axes),
        "chunks": len(all_chunks), "scenarios": sum(len(c) for c in all_chunks),
    }  # fmt: skip
    if results.exists() and not results.is_dir():
        raise ConfigError(f"results: {results} exists and is not a directory")
    if results.is_dir() and any(results.iterdir()):
        if not resume:
            raise ConfigError(
                f"results: {results} is not empty; pass --resume to continue its study, or "
                "name a new directory"
            )
        if not manifest.is_file():
            raise ConfigError(f"results: {results} holds no {MANIFEST}; not a sweep's results")
        found = json.loads(manifest.read_text())
        if found.get("fingerprint") != sweep.fingerprint:
            raise ConfigError(
                f"results: {results} holds another sweep ({found.get('sweep')!r}, fingerprint "
                f"{found.get('fingerprint')}); --resume continues only the same sweep file"
            )
    results.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps(record, indent=2) + "\n")
    done = frozenset(i for i in range(len(all_chunks)) if chunk_file(results, i).is_file())
    return Plan(all_chunks, done)


def write_chunk(results: Path, index: int, table: "pa.Table") -> None:
    """One chunk's rows as Parquet, atomically (a dot-file renamed into place: readers and
    --resume never see half a chunk)."""
    import pyarrow.parquet as pq

    tmp = results / f".chunk-{index:06d}.parquet.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, chunk_file(results, index))


def execute(
    sweep: Sweep,
    plan: Plan,
    results: Path,
    *,
    workers: int,
    scheduler: str | None = None,
    data_dir: str | None = None,
    progress: Callable[[int], None] = lambda _: None,
) -> None:
    """Run every chunk not done; each is written as it finishes and reported to `progress`
    (its number of scenarios)."""
    todo = plan.todo
    if scheduler is not None:
        finished = _on_dask(sweep, plan, todo, scheduler, data_dir)
    elif workers == 1 or len(todo) <= 1:
        finished = ((i, chunk_table(sweep, plan.chunks[i], data_dir)) for i in todo)
    else:
        finished = _on_processes(sweep, plan, todo, workers, data_dir)
    for index, table in finished:
        write_chunk(results, index, table)
        progress(len(plan.chunks[index]))


def _on_processes(
    sweep: Sweep, plan: Plan, todo: list[int], workers: int, data_dir: str | None
) -> Iterator[tuple[int, "pa.Table"]]:
    import multiprocessing

    # spawned, not forked: the parent may hold threads (the progress bar)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending = {pool.submit(chunk_table, sweep, plan.chunks[i], data_dir): i for i in todo}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield pending.pop(future), future.result()


def _on_dask(
    sweep: Sweep, plan: Plan, todo: list[int], scheduler: str, data_dir: str | None
) -> Iterator[tuple[int, "pa.Table"]]:
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise ConfigError(
            "dask_scheduler: dask.distributed is not installed (pip install 'dask[distributed]')",
            parameter="dask_scheduler",
        ) from None
    try:
        client = Client(scheduler, timeout=10)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as exc:
        raise ConfigError(
            f"dask_scheduler: cannot reach the Dask scheduler at {scheduler}: {exc}",
            parameter="dask_scheduler",
        ) from None
    with client:
        shared = client.scatter(sweep, broadcast=True)  # type: ignore[no-untyped-call]
        futures = {
            client.submit(
                chunk_table,
                shared,
                plan.chunks[i],
                data_dir,
                pure=False,
                key=f"chunk-{sweep.fingerprint}-{i}",
            ): i
            for i in todo
        }
        finished = as_completed(futures, with_results=True)  # type: ignore[no-untyped-call]
        for future, columns in finished:
            yield futures[future], columns


def read_results(results: Path) -> "pa.Table":
    """Every chunk of a results directory as one table, sorted by scenario id (columns missing
    from a chunk are null; types unified)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(results.glob("chunk-*.parquet"))
    if not results.is_dir() or not files:
        raise ConfigError(f"results: {results} holds no chunk-*.parquet files")
    tables = [pq.read_table(f) for f in files]
    table = pa.concat_tables(tables, promote_options="permissive")
    return table.sort_by("scenario_id")
