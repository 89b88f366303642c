"""Running a sweep: its points cut into chunks (a task each), every chunk run by `chunk_table`
(in this process, a process pool, or on a Dask cluster), and each finished chunk written as one
Parquet file of the results directory, so an interrupted study loses only chunks in flight.

One row per scenario: `scenario_id`, the axis values (`axis.<name>`), `error_class` and
`error_message` (null when it ran), then every output of the command's JSON flattened with dots
(`plan.throughput_rps.system`; lists of names joined by commas, other lists as JSON). A failure
is a row, never the end of the study. `_sweep.json` beside the chunks records the sweep's
fingerprint so that `--resume` continues only the same sweep, keeping each chunk on disk that
reads back as that chunk's rows (`check_chunk`) and rerunning any other.

Chunks are generated as the workers take them, at most two per worker in flight, so memory
holds a few chunks whatever the size of the study. Every file is written atomically; a results
directory that cannot be created, listed or written, a damaged manifest or chunk, and a Dask
scheduler that is not one or cannot be reached are one-line errors.
"""

import contextlib
import itertools
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from prfaas_plan import bounds
from prfaas_plan.errors import ConfigError, PlanError, ResourceLimitError
from prfaas_plan.inputs.cached_catalog import CachedCatalog
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.files import shown, write_atomically, write_text
from prfaas_plan.inputs.reading import read_text
from prfaas_plan.inputs.scenario import Problem, Scenario, build_problem
from prfaas_plan.study import fast
from prfaas_plan.study.commands import command
from prfaas_plan.study.flat import flatten
from prfaas_plan.study.spec import Sweep, Value, scenario_of

if TYPE_CHECKING:
    import pyarrow as pa

Columns = dict[str, list[Any]]
Chunk = list[tuple[int, dict[str, Value]]]
MANIFEST = "_sweep.json"


@cache
def _catalog(data_dir: str | None) -> Catalog:
    return CachedCatalog.open(Path(data_dir) if data_dir else None)


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


# rows of a chunk turned into Arrow at once (fast.BLOCK for the fast path's blocks), and groups
# of the fast path pending at once: a task's memory is a few blocks of Python objects and its
# rows as Arrow (~550 bytes a row for optimize), whatever the chunk size (up to 10^5)
ROW_BLOCK = 1000
MAX_PENDING_GROUPS = 1000
# scenarios of the fast path waiting in their groups at once (~5 KB each): beyond, the group
# waiting longest is planned now
MAX_PENDING_SCENARIOS = 10_000


@dataclass
class _Group:
    """Fast-path scenarios of one group not yet planned: the parameters, the block's ids and
    scenarios (the first one's problem is built when the block is planned)."""

    parameters: dict[str, Any]
    ids: list[int]
    scenarios: list[Scenario]


class _ChunkRows:
    """The rows of one chunk, collected as Arrow tables of at most ROW_BLOCK rows each, with the
    chunk positions of their rows; `table()` puts them in chunk order. Column order is that of
    the fast path's columns, then of the per-scenario rows in the order they were made."""

    def __init__(self, sweep: Sweep, chunk: Chunk, data_dir: str | None) -> None:
        self.sweep, self.chunk, self.data_dir = sweep, chunk, data_dir
        self.position = {scenario_id: i for i, (scenario_id, _) in enumerate(chunk)}
        self.points = dict(chunk)
        self.parts: list[tuple[list[int], pa.Table]] = []
        self.block_names: dict[str, None] = {}
        self.row_names: dict[str, None] = {}
        self.fallback_names: dict[str, None] = {}
        self.rows: list[tuple[int, dict[str, Any]]] = []

    def add_row(self, scenario_id: int, row: dict[str, Any], fallback: bool = False) -> None:
        (self.fallback_names if fallback else self.row_names).update(dict.fromkeys(row))
        self.rows.append((scenario_id, row))
        if len(self.rows) >= ROW_BLOCK:
            self.flush_rows()

    def flush_rows(self) -> None:
        if not self.rows:
            return
        names: dict[str, None] = {}
        for _, row in self.rows:
            names.update(dict.fromkeys(row))
        columns = {n: [row.get(n) for _, row in self.rows] for n in names}
        self._part([scenario_id for scenario_id, _ in self.rows], columns)
        self.rows = []

    def plan(self, group: _Group) -> list[int]:
        """Plan a fast-path block; if it fails, each of its scenarios on its own. Its ids."""
        sweep, data_dir = self.sweep, self.data_dir
        try:
            first = _problem(sweep, group.scenarios[0], data_dir)
            columns = fast.optimize_block(
                fast.block_problems(first, group.scenarios), group.parameters, _catalog(data_dir)
            )
        except Exception:
            for scenario_id, scenario in zip(group.ids, group.scenarios, strict=True):
                self.add_row(
                    scenario_id, _one(sweep, scenario, group.parameters, data_dir), fallback=True
                )
            return group.ids
        none: list[Any] = [None] * len(group.ids)
        columns = {"error_class": none, "error_message": none, **columns}
        self.block_names.update(dict.fromkeys(columns))
        self._part(group.ids, columns)
        return group.ids

    def _part(self, ids: list[int], columns: Columns) -> None:
        import pyarrow as pa

        try:
            table = pa.table(columns)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            table = pa.table({name: _arrow_column(values) for name, values in columns.items()})
        self.parts.append(([self.position[i] for i in ids], table))

    def table(self) -> "pa.Table":
        import pyarrow as pa

        self.flush_rows()
        positions = np.concatenate([np.asarray(p, dtype=np.int64) for p, _ in self.parts])
        outputs = _concat([table for _, table in self.parts]).take(np.argsort(positions))
        sweep, chunk = self.sweep, self.chunk
        base = {"scenario_id": pa.array([scenario_id for scenario_id, _ in chunk])}
        for axis in sweep.spec.axes:
            base[f"axis.{axis}"] = _arrow_column([point[axis] for _, point in chunk])
        names = dict.fromkeys(["error_class", "error_message"])
        for more in (self.block_names, self.row_names, self.fallback_names):
            names.update(more)
        columns = {**base, **{n: outputs.column(n) for n in names if n not in base}}
        return pa.table(columns)


def _concat(tables: list["pa.Table"]) -> "pa.Table":
    """Tables of one chunk as one, types unified (an int and a float column: float); a column
    whose types cannot be unified (a number in one block, a string in another) becomes JSON
    text in every block, as `_arrow_column` makes it within one."""
    import pyarrow as pa

    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        kinds: dict[str, set[str]] = {}
        for table in tables:
            for f in table.schema:
                if not pa.types.is_null(f.type):
                    kinds.setdefault(f.name, set()).add(str(f.type))
        mixed = {name for name, types in kinds.items() if len(types) > 1}
        return pa.concat_tables(
            [_as_text(table, mixed) for table in tables], promote_options="permissive"
        )


def _as_text(table: "pa.Table", names: set[str]) -> "pa.Table":
    """`table` with its columns `names` as JSON text."""
    import pyarrow as pa

    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if name in names:
            values = column.to_pylist()
            column = pa.chunked_array(
                [pa.array([None if v is None else json.dumps(v) for v in values], pa.string())]
            )
        columns[name] = column
    return pa.table(columns)


def chunk_table(sweep: Sweep, chunk: Chunk, data_dir: str | None = None) -> "pa.Table":
    """The rows of one chunk as an Arrow table (the task a worker runs; a table crosses
    processes as a few buffers, not as one Python object per cell). Scenarios the fast path
    takes are planned a block (fast.BLOCK) of a group at a time; every other is run on its
    own; results become Arrow ROW_BLOCK rows at a time, so memory does not grow with the chunk
    beyond its Arrow rows."""
    with _array_allocator():
        rows = _ChunkRows(sweep, chunk, data_dir)
        groups: dict[Any, _Group] = {}
        pending = 0  # scenarios waiting in `groups`
        entry = command(sweep.spec.command)
        for scenario_id, point in chunk:
            parameters = sweep.parameters(point)
            try:
                scenario = scenario_of(sweep, point, scenario_id)
            except Exception as exc:
                rows.add_row(scenario_id, _error_row(exc))
                continue
            if not (sweep.spec.fast_path and entry.vectorised(parameters)):
                rows.add_row(scenario_id, _one(sweep, scenario, parameters, data_dir))
                continue
            key = fast.group_key(point, parameters)
            group = groups.get(key)
            if group is None:
                if len(groups) >= MAX_PENDING_GROUPS:  # the oldest planned now, as a block
                    pending -= len(rows.plan(groups.pop(next(iter(groups)))))
                group = groups[key] = _Group(parameters, [], [])
            group.ids.append(scenario_id)
            group.scenarios.append(scenario)
            pending += 1
            if len(group.ids) == fast.BLOCK:
                pending -= len(rows.plan(groups.pop(key)))
            elif pending > MAX_PENDING_SCENARIOS:
                pending -= len(rows.plan(groups.pop(next(iter(groups)))))
        for group in groups.values():
            rows.plan(group)
        return rows.table()


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


def _arrow_column(values: list[Any]) -> "pa.Array":
    """A column as Arrow infers it, or, where its rows disagree in type (a number in one, a
    string in another) or hold an integer beyond 64 bits, every value as JSON text: the study
    goes on and the value survives."""
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if v is None else json.dumps(v) for v in values], pa.string())


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


def chunk_file(results: Path, index: int) -> Path:
    return results / f"chunk-{index:06d}.parquet"


_CHUNK_NAME = re.compile(r"chunk-(\d{6,})\.parquet")


@dataclass(frozen=True)
class Found:
    """A results directory made ready for a run: the chunk files already in it (each checked
    when the run reaches it) and the directories this run created (removed if it fails before
    writing anything)."""

    directory: Path
    chunk_files: frozenset[int]


@dataclass(frozen=True)
class RunSummary:
    """What a run did: the study's size, and the chunks it kept (resumed), reran (found on disk
    but broken) and ran."""

    scenarios: int
    chunks: int
    chunks_resumed: int
    chunks_rerun: int
    scenarios_run: int


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _manifest_record(sweep: Sweep, summary: RunSummary | None) -> dict[str, Any]:
    return {
        "sweep": sweep.spec.name, "source": sweep.source, "fingerprint": sweep.fingerprint,
        "command": sweep.spec.command, "axes": list(sweep.spec.axes),
        "chunks": summary.chunks if summary else None,
        "scenarios": summary.scenarios if summary else None,
        "complete": summary is not None,
    }  # fmt: skip


def _write_manifest(results: Path, record: dict[str, Any]) -> None:
    text = json.dumps(record, indent=2) + "\n"
    write_atomically(results / MANIFEST, lambda tmp: write_text(tmp, text), "results")


def _check_manifest(results: Path, sweep: Sweep) -> None:
    """Refuse to resume a directory whose manifest is not this sweep's (or not a manifest)."""
    manifest = results / MANIFEST
    if not (manifest.exists() or manifest.is_symlink()):
        raise ConfigError(f"results: {shown(results)} holds no {MANIFEST}; not a sweep's results")
    text = read_text(manifest, "sweep manifest", limit_bytes=bounds.MAX_SWEEP_MANIFEST_BYTES)
    damaged = (
        f"results: {shown(manifest)} is not a sweep manifest ({{}}), so which sweep wrote "
        f"{shown(results)} is unknown; run the sweep into a new directory"
    )
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigError(damaged.format("not JSON")) from None
    if not isinstance(found, dict):
        raise ConfigError(damaged.format(f"a JSON {type(found).__name__}, expected an object"))
    if not isinstance(found.get("fingerprint"), str):
        raise ConfigError(damaged.format("no fingerprint"))
    if found["fingerprint"] != sweep.fingerprint:
        raise ConfigError(
            f"results: {shown(results)} holds another sweep ({bounds.quoted(found.get('sweep'))}, "
            f"fingerprint {bounds.quoted(found['fingerprint'])}); `resume` continues only the "
            "same sweep file",
            parameter="resume",
        )


def _make_directory(results: Path) -> list[Path]:
    """Create `results` and its missing parents; the directories created, outermost first."""
    missing = []
    for directory in (results, *results.parents):
        if directory.exists() or directory.is_symlink():
            break
        missing.append(directory)
    missing.reverse()
    for directory in missing:
        try:
            directory.mkdir()
        except OSError as exc:
            _remove(missing[: missing.index(directory)])
            raise ConfigError(
                f"results: cannot create directory {shown(directory)}: {_reason(exc)}",
                parameter="results",
            ) from None
    return missing


def _remove(created: list[Path]) -> None:
    for directory in reversed(created):
        with contextlib.suppress(OSError):
            directory.rmdir()


def prepare(sweep: Sweep, results: Path, resume: bool) -> Found:
    """Check the results directory (new or empty, or the same sweep's with `resume`), create
    it and write its manifest, or refuse in one line leaving the disk as it was."""
    try:
        if results.exists() and not results.is_dir():
            raise ConfigError(f"results: {shown(results)} exists and is not a directory")
        occupied = results.is_dir() and any(results.iterdir())
    except OSError as exc:  # no permission to list it, a name too long, ...
        raise ConfigError(
            f"results: cannot read {shown(results)}: {_reason(exc)}", parameter="results"
        ) from None
    if occupied:
        if not resume:
            raise ConfigError(
                f"results: {shown(results)} is not empty; pass `resume` to continue its study, "
                "or name a new directory",
                parameter="resume",
            )
        _check_manifest(results, sweep)
    created = _make_directory(results)
    try:
        _write_manifest(results, _manifest_record(sweep, None))
        files = frozenset(
            int(match.group(1))
            for name in os.listdir(results)
            if (match := _CHUNK_NAME.fullmatch(name)) is not None
        )
    except OSError as exc:
        _remove(created)
        raise ConfigError(
            f"results: cannot read {shown(results)}: {_reason(exc)}", parameter="results"
        ) from None
    except PlanError:
        _remove(created)
        raise
    return Found(results, files)


def check_chunk(path: Path, chunk: Chunk, axes: list[str]) -> str | None:
    """Why the chunk file at `path` is not `chunk`'s rows, or None: a regular file whose Parquet
    footer reads, of len(chunk) rows with the scenario ids of `chunk` in order and the axis and
    error columns, every page of which decodes (and matches its checksum, where written)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return "not a regular file"
        with pq.ParquetFile(path, page_checksum_verification=True) as file:
            rows = file.metadata.num_rows
            if rows != len(chunk):
                return f"{rows:,} rows, expected {len(chunk):,}"
            names = set(file.schema_arrow.names)
            for column in ("scenario_id", *(f"axis.{a}" for a in axes), "error_class"):
                if column not in names:
                    return f"no column {column}"
            table = file.read()
    except (OSError, ValueError, pa.ArrowException) as exc:
        return f"unreadable: {_arrow_reason(exc)}"
    ids = table.column("scenario_id").to_pylist()
    if ids != [scenario_id for scenario_id, _ in chunk]:
        return "its scenario ids are not this chunk's"
    return None


def _arrow_reason(exc: BaseException) -> str:
    """The gist of a pyarrow error, without the path it repeats."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = re.sub(r"^.*?source '[^']*': ", "", text)
    return text.split(". ")[0].rstrip(".")[:200]


def write_chunk(results: Path, index: int, table: "pa.Table") -> None:
    """One chunk's rows as Parquet with page checksums, atomically (a dot-file renamed into
    place: readers and --resume never see half a chunk; a failure names the file)."""
    import pyarrow.parquet as pq

    def write(tmp: Path) -> None:
        pq.write_table(table, tmp, write_page_checksum=True)

    write_atomically(chunk_file(results, index), write, "results")


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
    _write_manifest(results, _manifest_record(sweep, summary))
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
            f"got {bounds.quoted(address)}",
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
    where = f"dask_scheduler: {bounds.quoted(scheduler)}"
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
            chunk_table, shared, chunk, data_dir, pure=False,
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


def chunk_files(results: Path) -> list[Path]:
    """The chunk files of a results directory, in chunk order (one line if it holds none)."""
    try:
        names = sorted(
            (name for name in os.listdir(results) if _CHUNK_NAME.fullmatch(name) is not None),
            key=lambda name: int(name[6:-8]),  # chunk-<index>.parquet: 7 digits after 999,999
        )
    except OSError as exc:
        raise ConfigError(f"results: cannot read {shown(results)}: {_reason(exc)}") from None
    if not names:
        raise ConfigError(f"results: {shown(results)} holds no chunk-*.parquet files")
    return [results / name for name in names]


def read_chunk(path: Path, columns: list[str] | None = None) -> "pa.Table":
    """One chunk file (only those of `columns` it has, if given: [] reads its schema alone),
    or one line naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise ConfigError(f"results: {shown(path)}: not a regular file, expected a chunk")
        with pq.ParquetFile(path, page_checksum_verification=True) as file:
            schema = file.schema_arrow
            if "scenario_id" not in schema.names:
                raise ConfigError(f"results: {shown(path)}: not a sweep chunk (no scenario_id)")
            if columns == []:
                return schema.empty_table()
            present = set(schema.names)
            wanted = None if columns is None else [c for c in columns if c in present]
            return file.read(columns=wanted)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise ConfigError(
            f"results: {shown(path)}: not a readable Parquet chunk ({_arrow_reason(exc)}); "
            "running the sweep again with `resume` reruns it"
        ) from None


def read_results(results: Path) -> "pa.Table":
    """Every chunk of a results directory as one table, sorted by scenario id (columns missing
    from a chunk are null; types unified)."""
    import pyarrow as pa

    tables = [read_chunk(f) for f in chunk_files(results)]
    table = pa.concat_tables(tables, promote_options="permissive")
    return table.sort_by("scenario_id")
