"""Sweep files (YAML): a base scenario, a command with its parameters, axes over scenario fields
(dotted paths such as `link.bandwidth_gbps`) or command parameters, how to sample them (grid,
random, Latin hypercube, with a seed) and filters over the axes.

A point is a dict axis -> value; its scenario id is its index in the generated sequence (before
filters), so ids depend only on the sweep file and `--resume` can skip what is done. Filters are
comparisons parsed with `ast` and evaluated by a small interpreter (names, numbers, strings,
+ - * /, comparisons, and/or/not): never `eval`.
"""

import ast
import hashlib
import itertools
import json
import math
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from prfaas_plan import bounds
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import Strict, parse, read_yaml
from prfaas_plan.inputs.scenario import Scenario, check_scenario

Value = float | int | str


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
        if forms[1] and None in (self.start, self.stop, self.step):
            raise ValueError("a range needs start, stop and step")
        if forms[2] and (self.low is None or self.high is None or not self.high > self.low):
            raise ValueError(f"needs low < high, got low={self.low}, high={self.high}")
        if self.log and forms[2] and not (self.low or 0) > 0:
            raise ValueError(f"a log axis needs low > 0, got {self.low}")
        return self

    def grid(self) -> list[Value]:
        if self.values is not None:
            return list(self.values)
        if self.start is None or self.stop is None or self.step is None:
            raise ValueError("grid sampling needs values or start/stop/step, not low/high")
        count = math.floor((self.stop - self.start) / self.step * (1 + 1e-12)) + 1
        if count < 1 or count > bounds.MAX_SWEEP_SCENARIOS:
            raise ValueError(
                f"start/stop/step give {count} values; expected 1 to {bounds.MAX_SWEEP_SCENARIOS:,}"
            )
        points = [self.start + i * self.step for i in range(count)]
        return [self._typed(v) for v in points]

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
    parameters: dict[str, Value | None] = Field(default_factory=dict)
    sampling: Literal["grid", "random", "latin_hypercube"] = "grid"
    samples: int | None = Field(default=None, ge=1, le=bounds.MAX_SWEEP_SCENARIOS)
    seed: int = 0
    axes: dict[str, AxisSpec] = Field(min_length=1)
    filters: list[str] = Field(default_factory=list)
    chunk_size: int = Field(default=2000, ge=1, le=bounds.MAX_SWEEP_CHUNK)
    fast_path: bool = True  # vectorised evaluation of a whole chunk where the command allows


def get_path(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}  # fmt: skip
_ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}  # fmt: skip


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        parent = _dotted(node.value)
        return None if parent is None else f"{parent}.{node.attr}"
    return None


@dataclass(frozen=True)
class Filter:
    """A parsed filter expression; `names` are the dotted names it reads."""

    text: str
    tree: ast.Expression
    names: frozenset[str]

    @classmethod
    def parse(cls, text: str, where: str) -> "Filter":
        if len(text) > bounds.MAX_FILTER_CHARS:
            raise ConfigError(
                f"{where}: a filter must be at most {bounds.MAX_FILTER_CHARS} characters, "
                f"got {len(text)}"
            )
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError:
            raise ConfigError(f"{where}: not a comparison: {bounds.quoted(text)}") from None
        names: set[str] = set()
        cls._check(tree.body, names, where, text)
        return cls(text, tree, frozenset(names))

    @classmethod
    def _check(cls, node: ast.expr, names: set[str], where: str, text: str) -> None:
        dotted = _dotted(node)
        if dotted is not None:
            names.add(dotted)
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return
        children: list[ast.expr]
        if isinstance(node, ast.BoolOp):
            children = list(node.values)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
            children = [node.operand]
        elif isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
            children = [node.left, *node.comparators]
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            children = [node.left, node.right]
        else:
            raise ConfigError(
                f"{where}: {bounds.quoted(text)} uses {type(node).__name__}; filters take names, "
                "numbers, strings, + - * /, comparisons and and/or/not"
            )
        for child in children:
            cls._check(child, names, where, text)

    def __call__(self, values: dict[str, Any]) -> bool:
        return bool(self._value(self.tree.body, values))

    def _value(self, node: ast.expr, values: dict[str, Any]) -> Any:
        dotted = _dotted(node)
        if dotted is not None:
            return values[dotted]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BoolOp):
            parts = (self._value(v, values) for v in node.values)
            return all(parts) if isinstance(node.op, ast.And) else any(parts)
        if isinstance(node, ast.UnaryOp):
            inner = self._value(node.operand, values)
            return (not inner) if isinstance(node.op, ast.Not) else -inner
        if isinstance(node, ast.BinOp):
            left, right = self._value(node.left, values), self._value(node.right, values)
            if isinstance(node.op, ast.Div) and right == 0:
                return math.inf
            return _ARITHMETIC[type(node.op)](left, right)
        assert isinstance(node, ast.Compare)  # Filter._check admits nothing else
        left = self._value(node.left, values)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self._value(comparator, values)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True


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

    def points(self) -> Iterator[tuple[int, dict[str, Value]]]:
        """(scenario id, axis values) of every point the filters keep."""
        for scenario_id, point in enumerate(self._generated()):
            if all(f(self._lookup(point, f.names)) for f in self.filters):
                yield scenario_id, point

    def _lookup(self, point: dict[str, Value], names: frozenset[str]) -> dict[str, Any]:
        return {n: point[n] if n in point else get_path(self.base, n) for n in names}

    def _generated(self) -> Iterator[dict[str, Value]]:
        names = list(self.spec.axes)
        axes = list(self.spec.axes.values())
        if self.spec.sampling == "grid":
            for combination in itertools.product(*(a.grid() for a in axes)):
                yield dict(zip(names, combination, strict=True))
            return
        n = self.spec.samples or 0
        if self.spec.sampling == "random":
            u = np.random.default_rng(self.spec.seed).random((n, len(axes)))
        else:
            from scipy.stats import qmc

            u = qmc.LatinHypercube(d=len(axes), seed=self.spec.seed).random(n)
        columns = [axis.at(u[:, i]) for i, axis in enumerate(axes)]
        for i in range(n):
            yield {name: column[i] for name, column in zip(names, columns, strict=True)}

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

    def parameters(self, point: dict[str, Value]) -> dict[str, Value | None]:
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
    parameter_axes = set()
    for name, axis in spec.axes.items():
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
        if spec.sampling == "grid":
            try:
                axis.grid()
            except ValueError as exc:
                raise ConfigError(f"{where}: axes.{name}: {exc}") from None
    if spec.sampling != "grid" and spec.samples is None:
        raise ConfigError(f"{where}: samples: {spec.sampling} sampling needs a number of samples")
    filters = tuple(
        Filter.parse(text, f"{where}: filters[{i}]") for i, text in enumerate(spec.filters)
    )
    for i, f in enumerate(filters):
        for name in f.names:
            if name not in spec.axes:
                try:
                    get_path(base, name)
                except KeyError:
                    raise ConfigError(
                        f"{where}: filters[{i}]: {name!r} is neither an axis nor a field of the "
                        "base scenario"
                    ) from None
    size = math.prod(len(a.grid()) for a in spec.axes.values()) if spec.sampling == "grid" else 0
    if size > bounds.MAX_SWEEP_SCENARIOS:
        raise ConfigError(
            f"{where}: axes: the grid has {size:,} points; expected at most "
            f"{bounds.MAX_SWEEP_SCENARIOS:,} (sample it: sampling: latin_hypercube)"
        )
    return Sweep(spec, where, base_dir, base, filters, frozenset(parameter_axes))


def _base_scenario(spec: SweepFile, path: Path) -> tuple[dict[str, Any], str]:
    from prfaas_plan.inputs.resources import default_scenario_file

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
