"""`prfaas-plan check`: the CI regression check on a data directory.

1. Every file is loaded and validated, and every table is checked against physics
   (use_cases/table_checks.py).
2. Golden scenarios (the shipped examples) are re-planned and their key outputs compared with
   the committed expectations file `<data>/golden/expectations.yaml` under stated tolerances;
   `update=True` rewrites that file instead.
Units: SI inside; the report converts.
"""

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError, PrfaasPlanError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.files import write_atomically
from prfaas_plan.inputs.files import write_text as _write_text
from prfaas_plan.inputs.reading import parse, read_yaml
from prfaas_plan.inputs.resources import resource_root
from prfaas_plan.use_cases.table_checks import Finding, check_tables

EXPECTATIONS = Path("golden") / "expectations.yaml"
# what a golden comparison may drift by before it fails (absolute, relative)
TOLERANCES = {
    "threshold_tokens": (0.0, 0.01),
    "prfaas_instances": (0.0, 0.0),
    "pd_prefill_instances": (0.0, 0.0),
    "pd_decode_instances": (0.0, 0.0),
    "system_rps": (0.0, 0.005),
    "kv_egress_bytes_per_s": (0.0, 0.01),
}


@dataclass(frozen=True)
class Drift:
    scenario: str
    key: str  # e.g. plan.threshold_tokens
    expected: float | None
    found: float | None

    @property
    def change(self) -> float | None:
        if self.expected in (None, 0) or self.found is None:
            return None
        return self.found / self.expected - 1


@dataclass(frozen=True)
class CheckReport:
    data_dir: str  # as shown to the user (data/... for the shipped data)
    tables_checked: int
    tables: tuple[str, ...]  # each file or table folder checked, as shown, in order
    findings: tuple[Finding, ...]
    drifts: tuple[Drift, ...]
    scenarios: tuple[str, ...]
    planned: tuple[str, ...]  # the scenarios that still plan (the others have a finding)
    expectations_file: str
    expectations_present: bool
    updated: bool
    update_refused: bool  # --update asked for, but tables are broken: nothing written
    changed_inputs: dict[str, tuple[str, ...]]  # scenario -> input files changed since --update

    @property
    def ok(self) -> bool:
        return not self.findings and not self.drifts


class _Expectations(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scenarios: dict[str, dict[str, int | float | None]]  # int: instance counts
    inputs: dict[str, dict[str, str]] = {}  # scenario -> {input file: sha256}


@dataclass(frozen=True)
class _Golden:
    values: dict[str, float | None]
    inputs: dict[str, str]  # file (relative to the data directory) -> sha256


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _finite_or_none(x: float) -> float | None:
    """A golden value: the number, or None where it does not exist (nan, inf)."""
    x = float(x)
    return x if math.isfinite(x) else None


def golden_values(catalog: Catalog, scenario: Path) -> _Golden:
    """The key outputs of planning one scenario (paper mode), flat and in SI units, and the
    fingerprints of the tables they came from."""
    from prfaas_plan.inputs.scenario import build_problem, load_scenario
    from prfaas_plan.use_cases.plan import plan

    problem = build_problem(load_scenario(scenario), scenario, catalog)
    report = plan(problem, mode=Mode.PAPER)
    out: dict[str, float | None] = {}
    for name, deployment in (("plan", report.plan), ("homogeneous", report.homogeneous),
                             ("naive", report.naive)):  # fmt: skip
        e = deployment.evaluation
        c = e.configuration
        out[f"{name}.threshold_tokens"] = (
            _finite_or_none(c.threshold_tokens) if 0 < e.offload_fraction < 1 else None
        )
        out[f"{name}.prfaas_instances"] = c.prfaas_instances
        out[f"{name}.pd_prefill_instances"] = c.pd_prefill_instances
        out[f"{name}.pd_decode_instances"] = c.pd_decode_instances
        out[f"{name}.system_rps"] = _finite_or_none(e.system_throughput_rps)
        out[f"{name}.kv_egress_bytes_per_s"] = _finite_or_none(e.kv_egress_bytes_per_s)
    s = problem.system
    tables = [catalog.resolve(t) for t in (
        s.prfaas_prefill_latency.source, s.pd_prefill_latency.source, s.kv_cache_size.source, s.decode.source,
    )]  # fmt: skip
    inputs = {str(p.relative_to(catalog.data_dir)): _sha256(p) for p in tables}
    inputs["models.yaml"] = _sha256(catalog.models_file)
    inputs[f"scenario {scenario.name}"] = _sha256(scenario)
    return _Golden(out, inputs)


def _moved(key: str, expected: float | None, found: float | None) -> bool:
    if expected is None or found is None:
        return (expected is None) != (found is None)
    tolerance = TOLERANCES.get(key.split(".", 1)[-1])
    if tolerance is None:
        return True  # a key we do not produce any more
    absolute, relative = tolerance
    return bool(abs(found - expected) > absolute + relative * abs(expected))


def _read_expectations(path: Path) -> _Expectations:
    return parse(_Expectations, read_yaml(path, "expectations") or {}, str(path), ConfigError)


def golden_scenarios() -> list[Path]:
    """The shipped example scenarios, the default golden set."""
    return sorted((resource_root() / "examples").glob("*.yaml"))


def _write_expectations(
    path: Path, previous: _Expectations | None, found: dict[str, _Golden]
) -> None:
    """Rewrite the expectations with `found`; scenarios not re-planned keep their entries."""
    kept = previous or _Expectations(scenarios={})
    document = {
        # --scenario updates only the scenarios it names; the others stay as they were
        "scenarios": {**kept.scenarios, **{n: g.values for n, g in found.items()}},
        "inputs": {**kept.inputs, **{n: g.inputs for n, g in found.items()}},
    }
    text = (
        "# prfaas-plan check: golden plans of the shipped example scenarios (paper mode, SI\n"
        "# units) and fingerprints of the tables behind them. Written by\n"
        "# `prfaas-plan check --update`; review the diff before committing.\n"
        + yaml.safe_dump(document, sort_keys=True)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: _write_text(tmp, text), "update")


def _compare(
    previous: _Expectations, found: dict[str, _Golden], scenarios: list[Path]
) -> tuple[list[Drift], dict[str, tuple[str, ...]]]:
    """Golden outputs that moved beyond TOLERANCES, and per moved scenario the input files
    whose fingerprints changed since the expectations were written."""
    drifts: list[Drift] = []
    changed_inputs: dict[str, tuple[str, ...]] = {}
    shipped = {s.name for s in scenarios}
    for name in sorted(set(previous.scenarios) | set(found)):
        if name not in found:
            if name not in shipped:  # expected, but no longer among the golden scenarios
                drifts.append(Drift(name, "(scenario missing)", None, None))
            continue  # failed to plan: a finding says why
        expected = previous.scenarios.get(name)
        if expected is None:
            drifts.append(Drift(name, "(new scenario, not in expectations)", None, None))
            continue
        values = found[name].values
        moved = [
            k for k in sorted(set(expected) | set(values))
            if _moved(k, expected.get(k), values.get(k))
        ]  # fmt: skip
        drifts += [Drift(name, k, expected.get(k), values.get(k)) for k in moved]
        if moved:
            before = previous.inputs.get(name, {})
            changed_inputs[name] = tuple(
                sorted(f for f, digest in found[name].inputs.items() if before.get(f) != digest)
            )
    return drifts, changed_inputs


def check(
    catalog: Catalog, scenarios: Sequence[Path] | None = None, *, update: bool = False
) -> CheckReport:
    """Check every table of `catalog`, re-plan `scenarios` (default: `golden_scenarios()`) and
    compare with, or with `update` rewrite, the expectations file."""
    scenarios = list(scenarios) if scenarios is not None else golden_scenarios()
    tables, findings = check_tables(catalog)
    expectations_file = catalog.data_dir / EXPECTATIONS
    found: dict[str, _Golden] = {}
    for scenario in scenarios:
        try:
            found[scenario.name] = golden_values(catalog, scenario)
        except PrfaasPlanError as exc:
            findings.append(Finding(
                scenario.name, f"golden scenario no longer plans: {exc}", scenario.name
            ))  # fmt: skip
    drifts: list[Drift] = []
    changed_inputs: dict[str, tuple[str, ...]] = {}
    previous = None
    if expectations_file.is_file():
        try:
            previous = _read_expectations(expectations_file)
        except PrfaasPlanError as exc:
            findings.append(Finding("", str(exc)))
    update_refused = False
    if update:
        if findings:  # never bless a plan computed from broken tables
            update, update_refused = False, True
        else:
            _write_expectations(expectations_file, previous, found)
    elif previous is None and not expectations_file.is_file():
        findings.append(
            Finding(
                catalog.shown(expectations_file),
                "no expectations file; write it with a run of check with `update`",
            )
        )
    elif previous is not None:
        drifts, changed_inputs = _compare(previous, found, scenarios)
    return CheckReport(
        data_dir=catalog.shown(catalog.data_dir) if catalog.shipped else str(catalog.data_dir),
        tables_checked=len(tables),
        tables=tuple(tables),
        findings=tuple(findings),
        drifts=tuple(drifts),
        scenarios=tuple(s.name for s in scenarios),
        planned=tuple(found),
        expectations_file=catalog.shown(expectations_file),
        expectations_present=expectations_file.is_file(),
        updated=update,
        update_refused=update_refused,
        changed_inputs=changed_inputs,
    )
