"""A chunk's rows: each scenario of the chunk run by its command (`chunk_table`), the fast path's
groups planned together, the rows flattened and turned into one Arrow table, a few blocks of rows
in memory at a time whatever the chunk's size, in the process settings tasks run under
(sweep/task_process.py).

One row per scenario: `scenario_id`, the axis values (`axis.<name>`), `error_class` and
`error_message` (null when it ran), then every output of the command's JSON flattened with dots
(`plan.throughput_rps.system`; lists of names joined by commas, other lists as JSON). A failure
is a row, never the end of the study.
"""

import contextlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from prfaas_plan.inputs.cached_catalog import CachedCatalog
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import Problem, build_problem
from prfaas_plan.inputs.scenario_schema import Scenario
from prfaas_plan.sweep import fast
from prfaas_plan.sweep.commands import command
from prfaas_plan.sweep.flat import flatten
from prfaas_plan.sweep.spec import Sweep, Value, scenario_of
from prfaas_plan.sweep.task_process import array_allocator, collector_paused

if TYPE_CHECKING:
    import pyarrow as pa


Columns = dict[str, list[Any]]
Chunk = list[tuple[int, dict[str, Value]]]


@cache
def _catalog(data_dir: str | None) -> Catalog:
    return CachedCatalog.open(Path(data_dir) if data_dir else None)


def _error_row(exc: BaseException) -> dict[str, Any]:
    """A refused scenario's row: the error's class and the first line of its message (the
    class again where it has none: a bare MemoryError)."""
    first = (str(exc).splitlines() or [type(exc).__name__])[0]
    return {"error_class": type(exc).__name__, "error_message": first[:500]}


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
# a refused fast-path batch of at least this many scenarios is planned as two halves, a smaller
# one a scenario at a time (`_ChunkRows._halves`)
SPLIT_FROM = 8
# a block's scenarios whose problems were built: (scenario id, scenario, problem)
Built = list[tuple[int, Scenario, Problem]]


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
        """Plan a fast-path block: the scenarios whose problems build, in one batch (a refused
        batch without its scenarios whose own prices are refused, then halved: `_halves`); a
        scenario whose problem does not build goes the per-scenario path, whose error row it
        gets. Its ids."""
        from prfaas_plan.inputs.scenario import prepare_like, problem_like

        sweep, data_dir, catalog = self.sweep, self.data_dir, _catalog(self.data_dir)
        # their log-normals' constants in one pass: a speed-up only (a scenario whose own fail
        # to compute fails where its problem is built, and gets its error row)
        with contextlib.suppress(Exception):
            fast.prepare_workloads(group.scenarios)
        built: Built = []
        for scenario_id, scenario in zip(group.ids, group.scenarios, strict=True):
            try:
                problem = (
                    problem_like(built[0][2], scenario, catalog)
                    if built
                    else _problem(sweep, scenario, data_dir)
                )
            except Exception:
                self._alone(scenario_id, scenario, group.parameters)
                continue
            if not built:  # the others' decode points in one pass, likewise a speed-up only
                with contextlib.suppress(Exception):
                    prepare_like(problem, group.scenarios, catalog)
            built.append((scenario_id, scenario, problem))
        # a batch is refused for one of its scenarios (`plan_many`): those whose own prices are
        # refused planned alone, the rest as a batch again, and a batch still refused halved
        if built and not self._batch(built, group.parameters, catalog):
            rest = self._priced_apart(built, group.parameters, catalog)
            if rest and (
                len(rest) == len(built) or not self._batch(rest, group.parameters, catalog)
            ):
                self._halves(rest, group.parameters, catalog)
        return group.ids

    def _priced_apart(self, built: Built, parameters: dict[str, Any], catalog: Catalog) -> Built:
        """`built` but its scenarios whose own prices are refused (fast.refused_prices), each
        planned alone for its error row."""
        refused = set(fast.refused_prices([p for _, _, p in built], parameters, catalog))
        for j in sorted(refused):
            scenario_id, scenario, _ = built[j]
            self._alone(scenario_id, scenario, parameters)
        return [b for j, b in enumerate(built) if j not in refused]

    def _halves(self, built: Built, parameters: dict[str, Any], catalog: Catalog) -> None:
        """`built`, refused as one batch: its halves each in a batch, and the refused half
        halved again (one out-of-range scenario among 1,000 costs a few refused batches, not
        999 single plans); a refused part below SPLIT_FROM scenarios, or both halves refused
        (more than one scenario refused), one scenario at a time, where each refused one gets
        its error row. So the halving costs at most about one batch of `built` more than
        planning it one at a time."""
        if len(built) >= SPLIT_FROM:
            half = len(built) // 2
            refused = [
                part
                for part in (built[:half], built[half:])
                if not self._batch(part, parameters, catalog)
            ]
            if len(refused) < 2:
                if refused:
                    self._halves(refused[0], parameters, catalog)
                return
        for scenario_id, scenario, _ in built:
            self._alone(scenario_id, scenario, parameters)

    def _alone(self, scenario_id: int, scenario: Scenario, parameters: dict[str, Any]) -> None:
        """One scenario of a block planned on its own (the per-scenario path): its row, or its
        error row."""
        self.add_row(scenario_id, _one(self.sweep, scenario, parameters, self.data_dir), True)

    def _batch(self, built: Built, parameters: dict[str, Any], catalog: Catalog) -> bool:
        """Plan `built` in one batch and keep its rows; False if the batch is refused (its
        error and the arrays it held freed on return, before anything else is tried)."""
        try:
            columns = fast.optimize_block([p for _, _, p in built], parameters, catalog)
        except Exception:
            return False
        none: list[Any] = [None] * len(built)
        columns = {"error_class": none, "error_message": none, **columns}
        self.block_names.update(dict.fromkeys(columns))
        self._part([scenario_id for scenario_id, _, _ in built], columns)
        return True

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
        outputs = _concat([table for _, table in self.parts])
        if not np.array_equal(positions, np.arange(positions.size)):  # else in order already
            outputs = outputs.take(np.argsort(positions))
        sweep, chunk = self.sweep, self.chunk
        base = {"scenario_id": pa.array([scenario_id for scenario_id, _ in chunk])}
        for axis in sweep.spec.axes:
            base[f"axis.{axis}"] = _arrow_column([point[axis] for _, point in chunk])
        names = dict.fromkeys(["error_class", "error_message"])
        for more in (self.block_names, self.row_names, self.fallback_names):
            names.update(more)
        columns = {**base, **{n: outputs.column(n) for n in names if n not in base}}
        for name in ("error_class", "error_message"):  # text, even in a chunk without an error
            columns[name] = columns[name].cast(pa.string())
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
    with array_allocator(), collector_paused():
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


def _arrow_column(values: list[Any]) -> "pa.Array":
    """A column as Arrow infers it, or, where its rows disagree in type (a number in one, a
    string in another) or hold an integer beyond 64 bits, every value as JSON text: the study
    goes on and the value survives."""
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if v is None else json.dumps(v) for v in values], pa.string())
