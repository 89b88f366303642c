"""`prfaas-plan check`: the CI regression check on a data directory.

1. Every file is loaded and validated (schema, units in headers, sortedness, monotonicity,
   physical fit), and every table is checked against physics:
   - prefill cannot beat the speed of light: T(l) >= 2 · active_params · l / (peak FP8 FLOP/s)
     (refused when the table is loaded, see analytic/prefill_physics.py);
   - prefill cannot be absurdly slow either: the FLOPs it implies must reach MFU_FLOOR of the
     GPUs' BF16 peak (a latency column entered in ms fails this by 1000x; refused when the
     table is loaded, see analytic/prefill_physics.py);
   - a KV table must agree with the model's architecture within KV_TOLERANCE (derived tables
     within DERIVED_TOLERANCE), and a derived prefill table with T = S_kv / Φ_kv.
   Models whose active parameters are not published use total_params / 100 as a lower bound
   (every MoE in the catalog activates more than 3%).
2. Golden scenarios (the shipped examples) are re-planned and their key outputs compared with
   the committed expectations file `<data>/golden/expectations.yaml` under stated tolerances;
   `update=True` rewrites that file instead.
Units: SI inside; the report converts.
"""

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict

from prfaas_plan import units
from prfaas_plan.analytic.architecture import DTYPE_BYTES, kv_footprint
from prfaas_plan.analytic.derive import (
    DecodeRoofline,
    calibrate_decode_roofline,
    prefill_latency_from_kv_throughput,
)
from prfaas_plan.analytic.prefill_physics import active_params_lower_bound
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError, PlanError, ProfileError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.files import write_atomically
from prfaas_plan.inputs.files import write_text as _write_text
from prfaas_plan.inputs.reading import parse, read_csv_columns, read_yaml
from prfaas_plan.inputs.resources import resource_root

KV_TOLERANCE = 0.05  # measured KV table vs an (inferred) architecture
DERIVED_TOLERANCE = 1e-4  # tables we derived ourselves must match their derivation
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
class Finding:
    where: str  # file (and row) the problem is in
    message: str
    # the check it failed: a table's file or folder (as shown), a golden scenario's file name,
    # or "" for the expectations file itself (one JUnit test case each, render/junit.py)
    case: str = ""


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


def _gpu_key(key: str, where: Path) -> tuple[str, int]:
    """'h200-x8' -> ('h200', 8), or a ProfileError naming the folder."""
    gpu, _, per_instance = key.rpartition("-x")
    if not gpu or not per_instance.isdigit() or int(per_instance) < 1:
        raise ProfileError(
            f"{where}: folder name must be <gpu>-x<gpus per instance>, e.g. h200-x8, got {key!r}"
        )
    return gpu, int(per_instance)


def _check_prefill(catalog: Catalog, model: str, key: str, findings: list[Finding]) -> None:
    folder = catalog.data_dir / "profiles" / model / "prefill" / key
    gpu_name, gpus = _gpu_key(key, folder)
    curve = catalog.prefill_latency(model, gpu_name, gpus)
    spec = catalog.model(model)
    tokens, latency_s = read_csv_columns(
        folder / "prefill_latency.csv", ("input_tokens", "prefill_latency_s")
    )
    # a table beating the speed of light or below the MFU floor (prefill_physics) is refused
    # by catalog.prefill_latency above
    derivation = folder / "kv_throughput.csv"
    if curve.provenance == "derived" and not derivation.is_file():
        findings.append(
            Finding(
                str(derivation), "a derived prefill table needs the Φ_kv table it was derived from"
            )
        )
    elif derivation.is_file():
        d_tokens, gbps = read_csv_columns(derivation, ("input_tokens", "kv_throughput_gbps"))
        if d_tokens.shape != tokens.shape or np.any(d_tokens != tokens):
            findings.append(Finding(curve.source, (
                f"rows ({tokens.tolist()}) differ from its derivation {derivation.name} "
                f"({d_tokens.tolist()}); re-run scripts/derive_table3_profiles.py"
            )))  # fmt: skip
            return
        footprint = kv_footprint(spec.layer_groups(), "bf16", "fp32")
        want = prefill_latency_from_kv_throughput(footprint, d_tokens, gbps)
        worst = np.max(np.abs(latency_s / want - 1))
        if worst > DERIVED_TOLERANCE:
            findings.append(Finding(curve.source, (
                f"derived table disagrees with its derivation T = S_kv/Φ_kv ({derivation.name}, "
                f"models.yaml) by up to {worst:.2%}; re-run scripts/derive_table3_profiles.py"
            )))  # fmt: skip


DECODE_CALIBRATION = "decode_calibration.csv"
# bytes read per active weight per decode step: FP8 weights (the case-study model's active
# parameters are not published, so prefill_physics' lower bound stands in for them)
DECODE_WEIGHT_BYTES_PER_PARAM = 1.0


def decode_roofline(
    catalog: Catalog,
    model: str,
    gpu: str,
    gpus_per_instance: int,
    *,
    batch_size: float,
    context_tokens: float,
    step_s: float,
) -> DecodeRoofline:
    """The decode roofline of `model` on `gpus_per_instance` x `gpu` (models.yaml, bf16 KV and
    fp32 state, the GPU file's HBM bandwidth), calibrated to one point."""
    spec, facts = catalog.model(model), catalog.gpu(gpu)
    weights = active_params_lower_bound(spec.total_params, spec.active_params)
    hbm = units.tbytes_per_s_to_bytes_per_s(facts.hbm_bandwidth_tbytes_per_s) * gpus_per_instance
    return calibrate_decode_roofline(
        weights * DECODE_WEIGHT_BYTES_PER_PARAM,
        kv_footprint(spec.layer_groups(), "bf16", "fp32"),
        hbm,
        batch_size=batch_size,
        context_tokens=context_tokens,
        step_s=step_s,
    )


def _check_decode(catalog: Catalog, model: str, key: str, findings: list[Finding]) -> None:
    folder = catalog.data_dir / "profiles" / model / "decode" / key
    gpu, gpus = _gpu_key(key, folder)
    table = catalog.decode_table(model, gpu, gpus)
    derivation = folder / DECODE_CALIBRATION
    if table.meta.provenance == "derived" and not derivation.is_file():
        findings.append(
            Finding(str(derivation), "a derived decode table needs its calibration point")
        )
        return
    if not derivation.is_file():
        return
    batch, context, step_s = read_csv_columns(
        derivation, ("batch_size", "context_tokens", "decode_step_latency_s")
    )
    if batch.size != 1 or table.context_tokens is None:
        findings.append(Finding(str(derivation), (
            "expected one calibration row and a decode table with a context_tokens column; "
            "re-run scripts/derive_h20_decode.py"
        )))  # fmt: skip
        return
    roofline = decode_roofline(
        catalog, model, gpu, gpus,
        batch_size=batch[0], context_tokens=context[0], step_s=step_s[0],
    )  # fmt: skip
    want = roofline.step_s(table.batch_sizes, table.context_tokens)
    worst = float(np.max(np.abs(table.step_latencies_s / want - 1)))
    if worst > DERIVED_TOLERANCE:
        findings.append(Finding(table.source, (
            f"derived decode table disagrees with its roofline ({derivation.name}, models.yaml, "
            f"data/gpus/{gpu}.yaml) by up to {worst:.2%}; re-run scripts/derive_h20_decode.py"
        )))  # fmt: skip


def _check_kv(catalog: Catalog, model: str, kv_dtype: str, findings: list[Finding]) -> None:
    folder = catalog.data_dir / "profiles" / model / "kv" / kv_dtype
    if kv_dtype not in DTYPE_BYTES:
        raise ProfileError(
            f"{folder}: unknown KV dtype {kv_dtype!r}; known: {', '.join(DTYPE_BYTES)}"
        )
    curve = catalog.kv_cache_size(model, kv_dtype)
    meta = read_yaml(folder / "meta.yaml", "profile metadata")
    state_dtype = meta.get("recurrent_state_dtype") or "fp32"
    tokens, size_mib = read_csv_columns(
        folder / "kv_cache_size.csv", ("input_tokens", "kv_cache_mib")
    )
    footprint = kv_footprint(catalog.model(model).layer_groups(), kv_dtype, state_dtype)
    estimate = footprint.size_bytes(tokens)
    deviation = units.mib_to_bytes(size_mib) / estimate - 1
    tolerance = DERIVED_TOLERANCE if curve.provenance == "derived" else KV_TOLERANCE
    worst = int(np.argmax(np.abs(deviation)))
    if abs(deviation[worst]) > tolerance:
        findings.append(Finding(curve.source, (
            f"S_kv at {tokens[worst]:g} tokens is {size_mib[worst]:g} MiB, {deviation[worst]:+.1%} "
            f"from the architecture estimate {units.bytes_to_mib(estimate[worst]):.1f} MiB "
            f"(models.yaml, {kv_dtype} KV, {state_dtype} state); tolerance {tolerance:.2%}: "
            "a unit, dtype or architecture mistake?"
        )))  # fmt: skip


def check_tables(catalog: Catalog) -> tuple[list[str], list[Finding]]:
    """Load and physically check every GPU, model and profile table; (the files and table
    folders checked, as shown, and the findings, each with its `case`)."""
    findings: list[Finding] = []
    checked: list[str] = []

    def attempt(where: str, check: Callable[..., object], *args: object) -> None:
        checked.append(where)
        start = len(findings)
        try:
            check(*args)
        except PlanError as exc:  # its message already names the file
            findings.append(
                Finding("", f"{exc} (checking {where})" if where not in str(exc) else str(exc))
            )
        findings[start:] = [replace(f, case=where) for f in findings[start:]]

    for path in sorted((catalog.data_dir / "gpus").glob("*.yaml")):
        attempt(catalog.shown(path), catalog.gpu, path.stem)
    for path in sorted((catalog.data_dir / "links").glob("*.yaml")):
        attempt(catalog.shown(path), catalog.link_offering, path.stem)
    attempt(catalog.shown(catalog.models_file), catalog.models)
    for folder in sorted((catalog.data_dir / "profiles").glob("*/*/*")):
        model, kind, key = folder.relative_to(catalog.data_dir / "profiles").parts
        where = catalog.shown(folder)
        if kind == "prefill":
            attempt(where, _check_prefill, catalog, model, key, findings)
        elif kind == "kv":
            attempt(where, _check_kv, catalog, model, key, findings)
        elif kind == "decode":
            attempt(where, _check_decode, catalog, model, key, findings)
        else:
            checked.append(where)
            findings.append(Finding(
                where, f"unknown profile kind {kind!r}; expected prefill, decode or kv", where
            ))  # fmt: skip
    return checked, findings


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
        except PlanError as exc:
            findings.append(Finding(
                scenario.name, f"golden scenario no longer plans: {exc}", scenario.name
            ))  # fmt: skip
    drifts: list[Drift] = []
    changed_inputs: dict[str, tuple[str, ...]] = {}
    previous = None
    if expectations_file.is_file():
        try:
            previous = _read_expectations(expectations_file)
        except PlanError as exc:
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
                "no expectations file; run `prfaas-plan check --update`",
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
