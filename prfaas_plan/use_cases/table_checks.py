"""The table half of `prfaas-plan check`: every GPU, link, model and profile file of a data
directory loaded and validated (schema, units in headers, sortedness, monotonicity, physical
fit), and every table checked against physics.

- prefill cannot beat the speed of light: T(l) >= 2 · active_params · l / (peak FP8 FLOP/s)
  (refused when the table is loaded, see analytic/prefill_physics.py);
- prefill cannot be absurdly slow either: the FLOPs it implies must reach MFU_FLOOR of the
  GPUs' BF16 peak (a latency column entered in ms fails this by 1000x; refused when the
  table is loaded, see analytic/prefill_physics.py);
- a KV table must agree with the model's architecture within KV_TOLERANCE (derived tables
  within DERIVED_TOLERANCE), and a derived prefill table with T = S_kv / Φ_kv; a derived
  decode table with the roofline calibrated to its one measured point.
Models whose active parameters are not published use total_params / 100 as a lower bound
(every MoE in the catalog activates more than 3%). Units: SI inside; messages convert.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.architecture import DTYPE_BYTES, kv_footprint
from prfaas_plan.analytic.derive import (
    DecodeRoofline,
    calibrate_decode_roofline,
    prefill_latency_from_kv_throughput,
)
from prfaas_plan.analytic.prefill_physics import active_params_lower_bound
from prfaas_plan.errors import PrfaasPlanError, ProfileError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.reading import read_csv_columns, read_yaml

KV_TOLERANCE = 0.05  # measured KV table vs an (inferred) architecture
DERIVED_TOLERANCE = 1e-4  # tables we derived ourselves must match their derivation


@dataclass(frozen=True)
class Finding:
    where: str  # file (and row) the problem is in
    message: str
    # the check it failed: a table's file or folder (as shown), a golden scenario's file name,
    # or "" for the expectations file itself (one JUnit test case each, render/junit.py)
    case: str = ""


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
        except PrfaasPlanError as exc:  # its message already names the file
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
