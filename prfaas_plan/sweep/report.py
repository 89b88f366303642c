"""`sweep-report`: a results directory summarised (how many ran and failed, the best plans per
group of an axis, where PrfaaS beats homogeneous PD and by how much) and one output over two
axes as a grid for a heat map or line plot. Read a chunk at a time, only the columns needed; a
chunk that does not read is one line naming it; an axis to group or draw by may take at most
plausible.MAX_REPORT_AXIS_VALUES values (a sampled axis has one per scenario)."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError
from prfaas_plan.sweep.run import chunk_files, read_chunk

SPEEDUP = "speedup_vs_homogeneous"
THROUGHPUT = "plan.throughput_rps.system"


@dataclass(frozen=True)
class SweepSummary:
    results: str
    scenarios: int
    failed: int
    errors: dict[str, int]  # error class -> count
    axes: list[str]
    group_axis: str | None
    best: list[dict[str, Any]]  # per group value: the row of the highest plan throughput
    beats: int | None  # scenarios where PrfaaS-PD beats homogeneous PD (speedup > 1)
    speedup_median: float | None
    speedup_max: float | None


def _order(value: Any) -> tuple[int, Any]:
    """A sort key over an axis's values, numbers before strings (a mixed axis sorts too)."""
    return (0, value) if isinstance(value, int | float) else (1, str(value))


def _name(name: str, columns: set[str]) -> str | None:
    """The column `name` stands for: itself, or the axis `axis.<name>`."""
    return next((c for c in (name, f"axis.{name}") if c in columns), None)


def _schemas(files: list[Path]) -> tuple[list[str], set[str]]:
    """The axes (in column order, over all chunks) and every column name."""
    axes: dict[str, None] = {}
    columns: set[str] = set()
    for file in files:
        names = read_chunk(file, []).column_names  # the schema alone
        columns.update(names)
        axes.update(dict.fromkeys(c.removeprefix("axis.") for c in names if c.startswith("axis.")))
    return list(axes), columns


def _missing(name: str, axes: list[str]) -> ConfigError:
    return ConfigError(f"no column {name!r} in the results; axes: " + ", ".join(axes))


def _values(table: Any, name: str | None) -> list[Any]:
    if name is None or name not in table.column_names:
        return [None] * table.num_rows
    return list(table.column(name).to_pylist())


def _floats(table: Any, name: str) -> np.ndarray:
    """A numeric column as floats without its nulls (a column of nulls: empty)."""
    import pyarrow as pa

    if name not in table.column_names:
        return np.empty(0)
    column = table.column(name)
    if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
        return np.array([v for v in column.to_pylist() if isinstance(v, int | float)], float)
    values = np.asarray(column.cast(pa.float64()).to_numpy(zero_copy_only=False), float)
    kept: np.ndarray = values[~np.isnan(values)]
    return kept


def summarize(results: Path, group: str | None = None) -> SweepSummary:
    """The summary of a results directory, read a chunk at a time and only the columns it
    needs, so its memory is a chunk's and 8 bytes per speed-up, whatever the study's size."""
    files = chunk_files(results)
    axes, columns = _schemas(files)
    if group is not None and _name(group, columns) is None:
        raise _missing(group, axes)
    # pass 1: counts, failures, speed-ups, and how many values each axis takes (capped)
    scenarios, ok = 0, 0
    errors: dict[str, int] = {}
    distinct: dict[str, set[Any]] = {a: set() for a in axes}
    speedups: list[np.ndarray] = []
    candidates = [group] if group is not None else axes
    for file in files:
        wanted = ["error_class", SPEEDUP, *(_name(a, columns) or a for a in candidates)]
        table = read_chunk(file, wanted)
        scenarios += table.num_rows
        for e in _values(table, "error_class"):
            if e is None:
                ok += 1
            else:
                errors[e] = errors.get(e, 0) + 1
        speedups.append(_floats(table, SPEEDUP))
        for a in candidates:
            seen = distinct.setdefault(a, set())
            if len(seen) <= plausible.MAX_REPORT_AXIS_VALUES:
                seen.update(_values(table, _name(a, columns)))
    few = [a for a in candidates if len(distinct[a]) <= plausible.MAX_REPORT_AXIS_VALUES]
    if group is not None and not few:
        raise ConfigError(
            f"group: {group!r} takes more than {plausible.MAX_REPORT_AXIS_VALUES:,} values (a "
            "sampled axis: one per scenario); group by an axis with fewer values",
            parameter="group",
        )
    group_axis = few[0] if few else None
    best = _best(files, columns, axes, group_axis) if THROUGHPUT in columns else []
    beats = median = top = None
    if SPEEDUP in columns:
        every = np.sort(np.concatenate(speedups))
        beats = int(np.count_nonzero(every > 1))
        if every.size:
            median, top = float(every[every.size // 2]), float(every[-1])
    return SweepSummary(
        str(results), scenarios, scenarios - ok, errors, axes, group_axis, best, beats, median,
        top,
    )  # fmt: skip


def _best(
    files: list[Path], columns: set[str], axes: list[str], group_axis: str | None
) -> list[dict[str, Any]]:
    """Per value of the group axis, the shown columns of the first row of the highest plan
    throughput among the rows that ran."""
    if group_axis is None:
        return []
    key_column = _name(group_axis, columns)
    shown = [f"axis.{a}" for a in axes] + [THROUGHPUT, SPEEDUP, "plan.threshold_tokens"]
    shown = [c for c in shown if c in columns]
    winners: dict[Any, tuple[float, dict[str, Any]]] = {}
    for file in files:
        table = read_chunk(file, [*dict.fromkeys([*shown, "error_class", key_column or ""])])
        errors, keys, rps = (
            _values(table, "error_class"), _values(table, key_column), _values(table, THROUGHPUT)
        )  # fmt: skip
        for i, (e, key, value) in enumerate(zip(errors, keys, rps, strict=True)):
            if e is None and value is not None and (key not in winners or value > winners[key][0]):
                winners[key] = (value, {c: table.column(c)[i].as_py() for c in shown})
    return [winners[key][1] for key in sorted(winners, key=_order)]


def grid(
    results: Path, x: str, y: str, value: str
) -> tuple[list[Any], list[Any], list[list[float]]]:
    """`value` over the x and y axes (mean over the other axes; nan where nothing ran), read a
    chunk at a time; each axis may take at most plausible.MAX_REPORT_AXIS_VALUES values."""
    files = chunk_files(results)
    axes, columns = _schemas(files)
    names = []
    for name in (x, y, value):
        column = _name(name, columns)
        if column is None:
            raise _missing(name, axes)
        names.append(column)
    import pyarrow.types as kinds

    for file in files:
        field = read_chunk(file, []).schema.field(names[2]) if names[2] else None
        if field is None or kinds.is_integer(field.type) or kinds.is_floating(field.type):
            continue
        what = "no value in any row" if kinds.is_null(field.type) else f"{field.type} values"
        raise ConfigError(
            f"value: {value!r} holds {what}, not numbers; draw a numeric output "
            "(e.g. speedup_vs_homogeneous, plan.throughput_rps.system)",
            parameter="value",
        )
    sums: dict[tuple[Any, Any], float] = {}
    counts: dict[tuple[Any, Any], int] = {}
    xs: set[Any] = set()
    ys: set[Any] = set()
    for file in files:
        table = read_chunk(file, names)
        for a, b, v in zip(*(_values(table, n) for n in names), strict=True):
            xs.add(a)
            ys.add(b)
            if (
                len(xs) > plausible.MAX_REPORT_AXIS_VALUES
                or len(ys) > plausible.MAX_REPORT_AXIS_VALUES
            ):
                flag, axis = ("x", x) if len(xs) > plausible.MAX_REPORT_AXIS_VALUES else ("y", y)
                raise ConfigError(
                    f"{flag}: {axis!r} takes more than {plausible.MAX_REPORT_AXIS_VALUES:,} values "
                    "(a sampled axis: one per scenario); draw over axes of a grid",
                    parameter=flag,
                )
            if isinstance(v, int | float) and v == v:
                sums[a, b] = sums.get((a, b), 0.0) + float(v)
                counts[a, b] = counts.get((a, b), 0) + 1
    x_values, y_values = sorted(xs, key=_order), sorted(ys, key=_order)
    cells = [
        [sums[a, b] / counts[a, b] if counts.get((a, b)) else float("nan") for a in x_values]
        for b in y_values
    ]
    return x_values, y_values, cells
