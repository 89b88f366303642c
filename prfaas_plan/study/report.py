"""`sweep-report`: a results directory summarised (how many ran and failed, the best plans per
group of an axis, where PrfaaS beats homogeneous PD and by how much) and one output over two
axes as a grid for a heat map or line plot."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prfaas_plan.errors import ConfigError
from prfaas_plan.study.run import read_results

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


def _column(table: Any, name: str) -> list[Any]:
    for candidate in (name, f"axis.{name}"):
        if candidate in table.column_names:
            return list(table.column(candidate).to_pylist())
    raise ConfigError(
        f"no column {name!r} in the results; axes: "
        + ", ".join(c.removeprefix("axis.") for c in table.column_names if c.startswith("axis."))
    )


def summarize(results: Path, group: str | None = None) -> SweepSummary:
    table = read_results(results)
    axes = [c.removeprefix("axis.") for c in table.column_names if c.startswith("axis.")]
    errors_col = _column(table, "error_class")
    errors: dict[str, int] = {}
    for e in errors_col:
        if e is not None:
            errors[e] = errors.get(e, 0) + 1
    ok = [i for i, e in enumerate(errors_col) if e is None]
    group_axis = group or (axes[0] if axes else None)
    best: list[dict[str, Any]] = []
    beats = median = top = None
    if THROUGHPUT in table.column_names and group_axis is not None:
        rps = _column(table, THROUGHPUT)
        keys = _column(table, group_axis)
        columns = {name: _column(table, name) for name in table.column_names}
        winners: dict[Any, int] = {}
        for i in ok:
            if rps[i] is not None and (keys[i] not in winners or rps[i] > rps[winners[keys[i]]]):
                winners[keys[i]] = i
        shown = [f"axis.{a}" for a in axes] + [THROUGHPUT, SPEEDUP, "plan.threshold_tokens"]
        for key in sorted(winners):
            best.append({name: columns[name][winners[key]] for name in shown if name in columns})
    if SPEEDUP in table.column_names:
        speedups = sorted(s for s in _column(table, SPEEDUP) if s is not None)
        beats = sum(1 for s in speedups if s > 1)
        if speedups:
            median, top = speedups[len(speedups) // 2], speedups[-1]
    return SweepSummary(
        str(results), table.num_rows, table.num_rows - len(ok), errors, axes, group_axis, best,
        beats, median, top,
    )  # fmt: skip


def grid(
    results: Path, x: str, y: str, value: str
) -> tuple[list[Any], list[Any], list[list[float]]]:
    """`value` over the x and y axes (mean over the other axes; nan where nothing ran)."""
    table = read_results(results)
    xs, ys, vs = _column(table, x), _column(table, y), _column(table, value)
    x_values, y_values = sorted(set(xs)), sorted(set(ys))
    sums = [[0.0] * len(x_values) for _ in y_values]
    counts = [[0] * len(x_values) for _ in y_values]
    xi = {v: i for i, v in enumerate(x_values)}
    yi = {v: i for i, v in enumerate(y_values)}
    for a, b, v in zip(xs, ys, vs, strict=True):
        if isinstance(v, int | float) and v == v:
            sums[yi[b]][xi[a]] += float(v)
            counts[yi[b]][xi[a]] += 1
    cells = [
        [s / c if c else float("nan") for s, c in zip(row, n, strict=True)]
        for row, n in zip(sums, counts, strict=True)
    ]
    return x_values, y_values, cells
