"""`prfaas-plan check`: the CI regression check on a data directory.

1. Every file is loaded and validated (schema, units in headers, sortedness, monotonicity,
   physical fit), and every table is checked against physics:
   - prefill cannot beat the speed of light: T(l) >= 2 · active_params · l / (peak FP8 FLOP/s);
   - prefill cannot be absurdly slow either: the FLOPs it implies must reach MFU_FLOOR of the
     GPUs' BF16 peak (a latency column entered in ms fails this by 1000x);
   - a KV table must agree with the model's architecture within KV_TOLERANCE (derived tables
     within DERIVED_TOLERANCE), and a derived prefill table with T = S_kv / Φ_kv.
   Models whose active parameters are not published use total_params / 100 as a lower bound
   (every MoE in the catalog activates more than 3%).
2. Golden scenarios (the shipped examples) are re-planned and their key outputs compared with
   the committed expectations file `<data>/golden/expectations.yaml` under stated tolerances;
   `update=True` rewrites that file instead.
Units: SI inside; the report converts.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from prfaas_plan import units
from prfaas_plan.architecture import kv_footprint
from prfaas_plan.catalog import Catalog, read_csv_columns, read_yaml
from prfaas_plan.choices import Mode
from prfaas_plan.derive import prefill_latency_from_kv_throughput
from prfaas_plan.errors import PlanError
from prfaas_plan.files import write_atomically

MFU_FLOOR = 5e-4  # 0.05% of BF16 peak: ~10x below the slowest real 1K-token prefill we know
KV_TOLERANCE = 0.05  # measured KV table vs an (inferred) architecture
DERIVED_TOLERANCE = 1e-4  # tables we derived ourselves must match their derivation
ACTIVE_FRACTION_FLOOR = 0.01
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
    findings: tuple[Finding, ...]
    drifts: tuple[Drift, ...]
    scenarios: tuple[str, ...]
    planned: tuple[str, ...]  # the scenarios that still plan (the others have a finding)
    expectations_file: str
    expectations_present: bool
    updated: bool

    @property
    def ok(self) -> bool:
        return not self.findings and not self.drifts


def _active_params(spec) -> float:
    return spec.active_params or spec.total_params * ACTIVE_FRACTION_FLOOR


def _check_prefill(catalog: Catalog, model: str, key: str, findings: list[Finding]) -> None:
    gpu_name, per_instance = key.rsplit("-x", 1)
    curve = catalog.prefill_latency(model, gpu_name, int(per_instance))
    gpu, spec = catalog.gpu(gpu_name), catalog.model(model)
    folder = catalog.data_dir / "profiles" / model / "prefill" / key
    tokens, latency_s = read_csv_columns(
        folder / "prefill_latency.csv", ("input_tokens", "prefill_latency_s")
    )
    flops = 2.0 * _active_params(spec) * tokens
    gpus = int(per_instance)
    fastest_s = flops / (units.tflops_to_flops(gpu.dense_fp8_tflops) * gpus)
    mfu = flops / (latency_s * units.tflops_to_flops(gpu.dense_bf16_tflops) * gpus)
    too_fast = np.flatnonzero(latency_s < fastest_s)
    too_slow = np.flatnonzero(mfu < MFU_FLOOR)
    if too_fast.size:
        i = too_fast[0]
        findings.append(Finding(curve.source, (
            f"{latency_s[i]:g} s at {tokens[i]:g} tokens ({too_fast.size} row(s) in all) beats the "
            f"speed of light {fastest_s[i]:.3g} s (2 x {_active_params(spec):.3g} active params "
            f"x tokens at {gpus} x {gpu.dense_fp8_tflops:g} TFLOP/s FP8); is the column in seconds?"
        )))  # fmt: skip
    if too_slow.size:
        i = too_slow[0]
        findings.append(Finding(curve.source, (
            f"{latency_s[i]:g} s at {tokens[i]:g} tokens ({too_slow.size} row(s) in all) uses only "
            f"{mfu[i]:.2g} of {gpus} x {gpu.name} BF16 peak (floor {MFU_FLOOR:g}), far too slow "
            "for a prefill: is the column in ms instead of s?"
        )))  # fmt: skip
    derivation = folder / "kv_throughput.csv"
    if derivation.is_file():
        d_tokens, gbps = read_csv_columns(derivation, ("input_tokens", "kv_throughput_gbps"))
        footprint = kv_footprint(spec.layer_groups(), "bf16", "fp32")
        want = prefill_latency_from_kv_throughput(footprint, d_tokens, gbps)
        got = np.interp(d_tokens, tokens, latency_s)
        worst = np.max(np.abs(got / want - 1))
        if worst > DERIVED_TOLERANCE:
            findings.append(Finding(curve.source, (
                f"derived table disagrees with its derivation T = S_kv/Φ_kv ({derivation.name}, "
                f"models.yaml) by up to {worst:.2%}; re-run scripts/derive_table3_profiles.py"
            )))  # fmt: skip


def _check_kv(catalog: Catalog, model: str, kv_dtype: str, findings: list[Finding]) -> None:
    curve = catalog.kv_cache_size(model, kv_dtype)
    folder = catalog.data_dir / "profiles" / model / "kv" / kv_dtype
    meta = read_yaml(folder / "meta.yaml", "profile metadata")
    state_dtype = meta.get("recurrent_state_dtype") or "fp32"
    tokens, size_mib = read_csv_columns(
        folder / "kv_cache_size.csv", ("input_tokens", "kv_cache_mib")
    )
    footprint = kv_footprint(catalog.model(model).layer_groups(), kv_dtype, state_dtype)
    estimate = footprint.size_bytes(tokens)
    deviation = units.mib_to_bytes(size_mib) / estimate - 1
    tolerance = DERIVED_TOLERANCE if meta.get("provenance") == "derived" else KV_TOLERANCE
    worst = int(np.argmax(np.abs(deviation)))
    if abs(deviation[worst]) > tolerance:
        findings.append(Finding(curve.source, (
            f"S_kv at {tokens[worst]:g} tokens is {size_mib[worst]:g} MiB, {deviation[worst]:+.1%} "
            f"from the architecture estimate {units.bytes_to_mib(estimate[worst]):.1f} MiB "
            f"(models.yaml, {kv_dtype} KV, {state_dtype} state); tolerance {tolerance:.2%}: "
            "a unit, dtype or architecture mistake?"
        )))  # fmt: skip


def check_tables(catalog: Catalog) -> tuple[int, list[Finding]]:
    """Load and physically check every GPU, model and profile table; (count, findings)."""
    findings: list[Finding] = []
    checked = 0

    def attempt(where: str, check, *args) -> None:
        nonlocal checked
        checked += 1
        try:
            check(*args)
        except PlanError as exc:  # its message already names the file
            findings.append(
                Finding("", f"{exc} (checking {where})" if where not in str(exc) else str(exc))
            )

    for path in sorted((catalog.data_dir / "gpus").glob("*.yaml")):
        attempt(catalog.shown(path), catalog.gpu, path.stem)
    attempt(str(catalog.models_file), catalog.models)
    for folder in sorted((catalog.data_dir / "profiles").glob("*/*/*")):
        model, kind, key = folder.relative_to(catalog.data_dir / "profiles").parts
        where = catalog.shown(folder)
        if kind == "prefill":
            attempt(where, _check_prefill, catalog, model, key, findings)
        elif kind == "kv":
            attempt(where, _check_kv, catalog, model, key, findings)
        elif kind == "decode":
            gpu, per_instance = key.rsplit("-x", 1)
            attempt(where, catalog.decode_table, model, gpu, int(per_instance))
        else:
            findings.append(
                Finding(where, f"unknown profile kind {kind!r}; expected prefill, decode or kv")
            )
    return checked, findings


def golden_values(catalog: Catalog, scenario: Path) -> dict[str, float | None]:
    """The key outputs of planning one scenario (paper mode), flat and in SI units."""
    from prfaas_plan.planner import plan
    from prfaas_plan.scenario import build_problem, load_scenario
    from prfaas_plan.views import number

    report = plan(build_problem(load_scenario(scenario), scenario, catalog), mode=Mode.PAPER)
    out: dict[str, float | None] = {}
    for name, deployment in (("plan", report.plan), ("homogeneous", report.homogeneous),
                             ("naive", report.naive)):  # fmt: skip
        e = deployment.evaluation
        c = e.configuration
        out[f"{name}.threshold_tokens"] = (
            number(c.threshold_tokens) if 0 < e.offload_fraction < 1 else None
        )
        out[f"{name}.prfaas_instances"] = c.prfaas_instances
        out[f"{name}.pd_prefill_instances"] = c.pd_prefill_instances
        out[f"{name}.pd_decode_instances"] = c.pd_decode_instances
        out[f"{name}.system_rps"] = number(e.system_throughput_rps)
        out[f"{name}.kv_egress_bytes_per_s"] = number(e.kv_egress_bytes_per_s)
    return out


def _moved(key: str, expected, found) -> bool:
    if expected is None or found is None:
        return (expected is None) != (found is None)
    absolute, relative = TOLERANCES[key.split(".", 1)[1]]
    return abs(found - expected) > absolute + relative * abs(expected)


def check(catalog: Catalog, scenarios: list[Path], *, update: bool = False) -> CheckReport:
    tables, findings = check_tables(catalog)
    expectations_file = catalog.data_dir / EXPECTATIONS
    found = {}
    for scenario in scenarios:
        try:
            found[scenario.name] = golden_values(catalog, scenario)
        except PlanError as exc:
            findings.append(Finding(scenario.name, f"golden scenario no longer plans: {exc}"))
    drifts: list[Drift] = []
    if update:
        if findings:  # never bless a plan computed from broken tables
            update = False
        else:
            text = (
                "# prfaas-plan check: golden plans of the shipped example scenarios (paper mode, SI\n"
                "# units). Written by `prfaas-plan check --update`; review the diff before committing.\n"
                + yaml.safe_dump({"scenarios": found}, sort_keys=True)
            )
            expectations_file.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(expectations_file, lambda tmp: tmp.write_text(text), "--update")
    elif not expectations_file.is_file():
        findings.append(
            Finding(
                catalog.shown(expectations_file),
                "no expectations file; run `prfaas-plan check --update`",
            )
        )
    else:
        expected_all = (read_yaml(expectations_file, "expectations") or {}).get("scenarios", {})
        for name in sorted(set(expected_all) | set(found)):
            if name not in found:  # failed to plan (a finding says why) or no longer shipped
                continue
            expected = expected_all.get(name)
            if expected is None:
                drifts.append(Drift(name, "(new scenario, not in expectations)", None, None))
                continue
            for key in sorted(set(expected) | set(found[name])):
                if _moved(key, expected.get(key), found[name].get(key)):
                    drifts.append(Drift(name, key, expected.get(key), found[name].get(key)))
    return CheckReport(
        data_dir=catalog.shown(catalog.data_dir) if catalog.shipped else str(catalog.data_dir),
        tables_checked=tables,
        findings=tuple(findings),
        drifts=tuple(drifts),
        scenarios=tuple(s.name for s in scenarios),
        planned=tuple(found),
        expectations_file=catalog.shown(expectations_file),
        expectations_present=expectations_file.is_file(),
        updated=update,
    )
