"""Sweep files (YAML): a base scenario, a command with its parameters, axes over scenario fields
(dotted paths such as `link.bandwidth_gbps`) or command parameters, how to sample them (grid,
random, Latin hypercube, with a seed) and filters over the axes.

A point is a dict axis -> value; its scenario id is its index in the generated sequence (before
filters), so ids depend only on the sweep file and `--resume` can skip what is done. The points
are generated block by block (sweep/sampling.py), never held all at once. Filters are typed and
bounded expressions over the axes (sweep/filters.py), never `eval`ed.
"""

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import Strict, parse, read_yaml
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import check_scenario
from prfaas_plan.inputs.scenario_schema import Scenario
from prfaas_plan.sweep import sampling
from prfaas_plan.sweep.filters import Filter, Kind, kind_of_range, kind_of_values

Value = float | int | str
# a command parameter: a value, true/false (simulate's `sustainable`), or a list (simulate's
# `load`) or mapping of numbers (`gpu_prices_usd_per_gpu_hour`); the command's request checks
# it (use_cases/requests.py)
Parameter = bool | Value | list[float] | dict[str, float]


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _parameter_shape(value: object) -> object:
    """A parameter of one of Parameter's shapes, else one message (not one per union member)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list) and all(_is_number(v) for v in value):
        return value
    if isinstance(value, dict) and all(
        isinstance(k, str) and _is_number(v) for k, v in value.items()
    ):
        return value
    raise PydanticCustomError(
        "parameter",
        "expected a number, text, true/false, a list of numbers or a mapping of names to numbers",
    )


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class AxisSpec(Strict):
    """One axis: explicit `values`, a grid `start`..`stop` (inclusive) by `step`, or a `low`..`high`
    interval for random and Latin-hypercube sampling (log-uniform with `log`, rounded with
    `integer`)."""

    values: list[Value] | None = Field(default=None, min_length=1)
    start: float | None = None
    stop: float | None = None
    step: float | None = Field(default=None, gt=0)
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False

    @model_validator(mode="after")
    def _one_form(self) -> "AxisSpec":
        forms = [
            self.values is not None,
            any(v is not None for v in (self.start, self.stop, self.step)),
            any(v is not None for v in (self.low, self.high)),
        ]
        if sum(forms) != 1:
            raise ValueError("give exactly one of values, start/stop/step or low/high")
        if self.values is not None:
            strings = [isinstance(v, str) for v in self.values]
            if any(strings) and not all(strings):
                raise ValueError(
                    "values mixes numbers and strings; an axis is one column of the results: "
                    "all numbers or all strings"
                )
            big = [
                v for v in self.values if isinstance(v, int) and not _INT64_MIN <= v <= _INT64_MAX
            ]
            if big:
                raise ValueError(
                    f"an integer value must fit in 64 bits (a Parquet int64), got {plausible.quoted(big[0])}"
                )
        if forms[1] and None in (self.start, self.stop, self.step):
            raise ValueError("a range needs start, stop and step")
        if forms[2] and (self.low is None or self.high is None or not self.high > self.low):
            raise ValueError(f"needs low < high, got low={self.low}, high={self.high}")
        if self.log and forms[2] and not (self.low or 0) > 0:
            raise ValueError(f"a log axis needs low > 0, got {self.low}")
        if self.log and forms[1] and not (self.start or 0) > 0:
            raise ValueError(f"a log axis needs start > 0, got {self.start}")
        return self

    def count(self) -> int:
        """The number of values of a grid axis (ValueError for a low/high interval, or a range
        of no value or more than the largest sweep)."""
        if self.values is not None:
            return len(self.values)
        if self.start is None or self.stop is None or self.step is None:
            raise ValueError("grid sampling needs values or start/stop/step, not low/high")
        steps = (self.stop - self.start) / self.step * (1 + 1e-12)
        if not steps < plausible.MAX_SWEEP_SCENARIOS:  # also an infinite quotient
            raise ValueError(
                f"start/stop/step give more than {plausible.MAX_SWEEP_SCENARIOS:,} values "
                f"({plausible.quoted(steps)} steps)"
            )
        count = math.floor(steps) + 1
        if count < 1:
            raise ValueError(
                f"start/stop/step give no value (stop {self.stop} < start {self.start})"
            )
        return count

    def grid_values(self, index: np.ndarray) -> list[Value]:
        """The grid axis's values at `index` (the same arithmetic, start + i * step, as a list
        of every value would use)."""
        if self.values is not None:
            values = self.values
            return [values[i] for i in index.tolist()]
        start, step = self.start, self.step
        assert start is not None and step is not None  # count() refused a grid without them
        return [self._typed(start + i * step) for i in index.tolist()]

    def kind(self) -> Kind:
        """What a filter may read from this axis (sweep/filters.py)."""
        if self.values is not None:
            return kind_of_values(list(self.values))
        low = self.low if self.low is not None else self.start
        high = self.high if self.high is not None else self.stop
        assert low is not None and high is not None  # the validator: one form is complete
        return kind_of_range(low, high, self.integer)

    def at(self, u: np.ndarray) -> list[Value]:
        """The axis values at uniform quantiles `u` in [0, 1)."""
        if self.values is not None:
            index = np.minimum((u * len(self.values)).astype(int), len(self.values) - 1)
            return [self.values[i] for i in index]
        lo = self.low if self.low is not None else self.start
        hi = self.high if self.high is not None else self.stop
        assert lo is not None and hi is not None  # the validator: one form is complete
        span = np.log(hi) - np.log(lo) if self.log else hi - lo
        x = np.exp(np.log(lo) + u * span) if self.log else lo + u * span
        return [self._typed(float(v)) for v in x]

    def _typed(self, value: float) -> Value:
        return round(value) if self.integer else float(value)


class SweepFile(Strict):
    name: str
    description: str = ""
    scenario: str | dict[str, Any] = "case_study"  # a path (relative to the sweep file) or inline
    command: str
    parameters: dict[str, Annotated[Parameter | None, BeforeValidator(_parameter_shape)]] = Field(
        default_factory=dict
    )
    sampling: Literal["grid", "random", "latin_hypercube"] = "grid"
    samples: int | None = Field(default=None, ge=1, le=plausible.MAX_SWEEP_SCENARIOS)
    seed: int = Field(default=0, ge=0, le=plausible.MAX_SEED)
    axes: dict[str, AxisSpec] = Field(min_length=1)
    filters: list[str] = Field(default_factory=list)
    chunk_size: int = Field(default=2000, ge=1, le=plausible.MAX_SWEEP_CHUNK)
    fast_path: bool = True  # vectorised evaluation of a whole chunk where the command allows


def get_path(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: the file's settings, the base scenario as data, its parsed filters."""

    spec: SweepFile
    source: str  # the sweep file, for messages and the scenario column
    base_dir: str  # where relative paths in the base scenario are resolved
    base: dict[str, Any]
    filters: tuple[Filter, ...]
    parameter_axes: frozenset[str]  # axes that are command parameters, not scenario fields

    @property
    def fingerprint(self) -> str:
        """A hash of everything that decides the points and their results."""
        text = json.dumps([self.spec.model_dump(mode="json"), self.base], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def generated(self) -> int:
        """How many points the sweep generates before its filters (scenario ids 0 .. this - 1)."""
        if self.spec.sampling == "grid":
            return math.prod(axis.count() for axis in self.spec.axes.values())
        return self.spec.samples or 0

    def points(self) -> Iterator[tuple[int, dict[str, Value]]]:
        """(scenario id, axis values) of every point the filters keep, in id order, generated
        a block at a time (sweep/sampling.py): memory does not grow with the sweep."""
        names = list(self.spec.axes)
        first = 0
        for columns in self._blocks():
            for offset, values in enumerate(zip(*columns, strict=True)):
                point = dict(zip(names, values, strict=True))
                if all(f(self._lookup(point, f.names)) for f in self.filters):
                    yield first + offset, point
            first += len(columns[0])

    def _lookup(self, point: dict[str, Value], names: frozenset[str]) -> dict[str, Any]:
        return {n: point[n] if n in point else get_path(self.base, n) for n in names}

    def _blocks(self) -> Iterator[sampling.Columns]:
        axes = list(self.spec.axes.values())
        if self.spec.sampling == "grid":
            return sampling.grid_blocks(axes)
        n = self.spec.samples or 0
        if self.spec.sampling == "random":
            return sampling.random_blocks(axes, n, self.spec.seed)
        return sampling.latin_hypercube_blocks(axes, n, self.spec.seed)

    def scenario_data(self, point: dict[str, Value]) -> dict[str, Any]:
        """The base scenario with the point's fields set; only the mappings on the way to a set
        field are copied (the rest is shared with the base, which nothing modifies)."""
        data = dict(self.base)
        for name, value in point.items():
            if name not in self.parameter_axes:
                *parents, last = name.split(".")
                node = data
                for part in parents:
                    node[part] = dict(node[part])
                    node = node[part]
                node[last] = value
        return data

    def parameters(self, point: dict[str, Value]) -> dict[str, Parameter | None]:
        out = dict(self.spec.parameters)
        out.update({n: v for n, v in point.items() if n in self.parameter_axes})
        return out


def scenario_of(sweep: Sweep, point: dict[str, Value], scenario_id: int) -> Scenario:
    """The point's scenario, validated as a scenario file is (ConfigError otherwise)."""
    return check_scenario(
        parse(Scenario, sweep.scenario_data(point), f"{sweep.source}: scenario {scenario_id}"),
        f"{sweep.source}: scenario {scenario_id}",
    )


def load_sweep(path: Path, parameter_names: Callable[[str], frozenset[str]]) -> Sweep:
    """Read and validate a sweep file; `parameter_names(command)` are the command's parameters
    (ConfigError for an unknown command)."""
    where = str(path)
    spec = parse(SweepFile, read_yaml(path, "sweep"), where)
    known = parameter_names(spec.command)
    for name in spec.parameters:
        if name not in known:
            raise ConfigError(
                f"{where}: parameters.{name}: not a parameter of {spec.command}; "
                f"known: {', '.join(sorted(known))}"
            )
    base, base_dir = _base_scenario(spec, path)
    for name in spec.axes:  # a field and a field inside it: which value would stand?
        inner = next((other for other in spec.axes if other.startswith(name + ".")), None)
        if inner is not None:
            raise ConfigError(
                f"{where}: axes.{inner}: inside axes.{name}, which sets the whole of it; sweep "
                "one or the other (a distribution's parameters, or whole distributions)"
            )
    parameter_axes = set()
    for name in spec.axes:
        if name in known:
            parameter_axes.add(name)
            continue
        try:
            get_path(base, name)
        except KeyError:
            raise ConfigError(
                f"{where}: axes.{name}: neither a field of the base scenario nor a parameter of "
                f"{spec.command} ({', '.join(sorted(known))})"
            ) from None
    _size(spec, where)
    filters = tuple(
        Filter.parse(text, f"{where}: filters[{i}]") for i, text in enumerate(spec.filters)
    )
    for i, f in enumerate(filters):
        f.check(_filter_kinds(spec, base, f.names, f"{where}: filters[{i}]"))
    return Sweep(spec, where, base_dir, base, filters, frozenset(parameter_axes))


def _size(spec: SweepFile, where: str) -> int:
    """The number of points the sweep generates, refused above the bounds before any is."""
    if spec.sampling != "grid":
        if spec.samples is None:
            raise ConfigError(
                f"{where}: samples: {spec.sampling} sampling needs a number of samples"
            )
        cells = spec.samples * len(spec.axes)
        if spec.sampling == "latin_hypercube" and cells > plausible.MAX_LATIN_HYPERCUBE_CELLS:
            per_cell = sampling.LATIN_HYPERCUBE_BYTES_PER_CELL
            raise ConfigError(
                f"{where}: samples: a Latin hypercube holds one permutation of its samples per "
                f"axis ({per_cell} bytes a sample and axis): {spec.samples:,} samples x "
                f"{len(spec.axes)} axes = {cells * per_cell / 2**20:,.0f} MiB, over the "
                f"{plausible.MAX_LATIN_HYPERCUBE_CELLS * per_cell / 2**20:,.0f} MiB bound; use "
                "fewer samples or axes, or sampling: random (nothing held)"
            )
        return spec.samples
    size = 1
    for name, axis in spec.axes.items():
        try:
            size *= axis.count()
        except ValueError as exc:
            raise ConfigError(f"{where}: axes.{name}: {exc}") from None
        if size > plausible.MAX_SWEEP_SCENARIOS:  # before the next axis multiplies it further
            raise ConfigError(
                f"{where}: axes: the grid has more than {plausible.MAX_SWEEP_SCENARIOS:,} points "
                f"(up to axes.{name}: {size:,}); sample it: sampling: latin_hypercube"
            )
    return size


def _filter_kinds(
    spec: SweepFile, base: dict[str, Any], names: frozenset[str], where: str
) -> dict[str, Kind]:
    """What each name a filter reads may be: its axis's values, else the base scenario's."""
    kinds = {}
    for name in names:
        if name in spec.axes:
            kinds[name] = spec.axes[name].kind()
            continue
        try:
            value = get_path(base, name)
        except KeyError:
            raise ConfigError(
                f"{where}: {name!r} is neither an axis nor a field of the base scenario"
            ) from None
        if not isinstance(value, int | float | str):
            fields = (
                f"; name one of its fields: {', '.join(f'{name}.{k}' for k in list(value)[:4])}"
                if isinstance(value, dict) and value
                else ""
            )
            raise ConfigError(
                f"{where}: {name} is {_described(value)} in the base scenario; a filter reads "
                f"numbers and strings{fields}"
            )
        kinds[name] = kind_of_values([value])
    return kinds


def _described(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else f"a {type(value).__name__}"


def _base_scenario(spec: SweepFile, path: Path) -> tuple[dict[str, Any], str]:

    if isinstance(spec.scenario, dict):
        base, base_dir = spec.scenario, path.parent
    else:
        file = default_scenario_file() if spec.scenario == "case_study" else None
        file = file or (path.parent / spec.scenario)
        base, base_dir = read_yaml(file, "scenario"), file.parent
        if not isinstance(base, dict):
            raise ConfigError(f"{file}: expected a mapping of fields, found {type(base).__name__}")
    # the base itself must be a valid scenario (each point is validated again)
    check_scenario(parse(Scenario, base, f"{path}: scenario"), f"{path}: scenario")
    return base, str(base_dir.resolve())
