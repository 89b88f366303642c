"""The vectorised path of an `optimize` sweep: the scenarios of a chunk that share a system and a
workload (they differ only in instance counts and link bandwidth) are planned together by
`optimize_fixed_hardware_batch`, and their plan and both baselines evaluated by one call of
`rates` each; the columns are those of `optimize`'s JSON for the three deployments.

Not covered (left to the per-scenario path): the mode comparison, the unloaded TTFT and the
input description, so a fast-path dataset has the plan/baseline columns only.
"""

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.capacity import binding_terms, rates
from prfaas_plan.choices import Mode
from prfaas_plan.commands.plan import check_threshold
from prfaas_plan.inputs.scenario import Problem, Scenario
from prfaas_plan.solve.threshold import optimize_fixed_hardware_batch

# the fields a group's scenarios may differ in: everything else decides system and workload
BATCHED_FIELDS = (
    ("prfaas_cluster", "instances"),
    ("pd_cluster", "instances"),
    ("link", "bandwidth_gbps"),
)

Columns = dict[str, list[Any]]

# scenarios planned by one array pass. The optimiser's arrays hold scenarios x PD splits x 65
# grid thresholds values: a whole chunk of 5,000 scenarios of up to 20 instances is 6.5 million
# per array (52 MB), above the 32 MB up to which glibc reuses freed heap, so each of the hundreds
# of arrays was a fresh mmap, page-faulted and zeroed, and streamed from main memory. 1,000 keep
# them near 10 MB (heap reused, within the shared cache) and cost little Python per array.
BLOCK = 1000


def group_key(point: dict[str, Any], parameters: dict[str, Any]) -> tuple[Any, ...]:
    """Scenarios of one sweep (one base scenario) share system and workload when their axis
    values outside BATCHED_FIELDS and their parameters agree."""
    batched = {f"{section}.{field}" for section, field in BATCHED_FIELDS}
    fixed = tuple(sorted((k, v) for k, v in point.items() if k not in batched))
    return fixed, tuple(sorted(parameters.items()))


def _finite(values: np.ndarray) -> list[float | None]:
    as_list: list[float | None] = np.asarray(values, float).tolist()
    if np.isfinite(values).all():
        return as_list
    return [v if v is not None and math.isfinite(v) else None for v in as_list]


def _evaluations(
    prefix: str,
    problem: Problem,
    configuration: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    link: np.ndarray,
    mode: Mode,
) -> tuple[Columns, np.ndarray]:
    """The `_deployment_json` columns of many configurations (prfaas, N_p, N_d, t), and Λ."""
    prfaas, n_p, n_d, t = configuration
    s = problem.scenario
    r = rates(problem.system, problem.workload, t, prfaas, n_p, n_d, mode, link)
    limits = r.limits_rps
    system_rps = limits.min(axis=0)
    bounds_text = [
        ",".join(binding_terms(limits[:, i], float(system_rps[i]))) for i in range(system_rps.size)
    ]
    p = r.offload_fraction
    with np.errstate(invalid="ignore"):
        egress = np.where(
            (p > 0) & np.isfinite(system_rps), system_rps * p * r.long_kv_cache_bytes, 0.0
        )
    columns: dict[str, Any] = {
        "prfaas_gpus": prfaas * s.prfaas_cluster.gpus_per_instance,
        "pd_gpus": (n_p + n_d) * s.pd_cluster.gpus_per_instance,
        "mode": [str(mode)] * system_rps.size,
        "prfaas_instances": prfaas,
        "pd_prefill_instances": n_p,
        "pd_decode_instances": n_d,
        "threshold_tokens": _finite(t),
        "offload_fraction": _finite(p),
        "long_mean_tokens": _finite(r.long_mean_tokens),
        "short_mean_tokens": _finite(r.short_mean_tokens),
        "prfaas_service_time_s": _finite(r.prfaas_service_time_s),
        "pd_prefill_service_time_s": _finite(r.pd_prefill_service_time_s),
        "throughput_rps.prfaas": _finite(r.prfaas_rps),
        "throughput_rps.prfaas_compute": _finite(r.prfaas_compute_rps),
        "throughput_rps.prfaas_link": _finite(r.prfaas_link_rps),
        "throughput_rps.pd_prefill": _finite(r.pd_prefill_rps),
        "throughput_rps.pd_decode": _finite(r.pd_decode_rps),
        "throughput_rps.system": _finite(system_rps),
        "bounds": bounds_text,
        "kv_egress_bytes_per_s": _finite(egress),
        "link_bandwidth_bytes_per_s": _finite(link),
        "link_utilization": _finite(egress / link),
    }
    out = {
        f"{prefix}.{name}": values.tolist() if isinstance(values, np.ndarray) else values
        for name, values in columns.items()
    }
    return out, system_rps


def _ratio(plan: np.ndarray, baseline: np.ndarray) -> list[float | None]:
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(baseline > 0, plan / baseline, np.where(plan > 0, np.inf, np.nan))
    return _finite(ratio)


def optimize_group(
    problem: Problem, scenarios: list[Scenario], parameters: dict[str, Any]
) -> Columns:
    """`optimize`'s plan and baseline columns for scenarios that share `problem`'s system and
    workload (see `group_key`), one list entry per scenario: planned BLOCK scenarios at a time."""
    out: Columns = {}
    for start in range(0, len(scenarios), BLOCK):
        block = scenarios[start : start + BLOCK]
        for name, values in optimize_block(problem, block[0], Batch.of(block), parameters).items():
            out.setdefault(name, []).extend(values)
    return out


@dataclass
class Batch:
    """What the scenarios of a group differ in (BATCHED_FIELDS), one entry per scenario: all a
    block needs besides the group's first scenario, so a pending block holds no Scenario."""

    prfaas_instances: list[int] = field(default_factory=list)
    pd_instances: list[int] = field(default_factory=list)
    link_bandwidth_gbps: list[float] = field(default_factory=list)

    def add(self, scenario: Scenario) -> None:
        self.prfaas_instances.append(scenario.prfaas_cluster.instances)
        self.pd_instances.append(scenario.pd_cluster.instances)
        self.link_bandwidth_gbps.append(scenario.link.bandwidth_gbps)

    def __len__(self) -> int:
        return len(self.pd_instances)

    @classmethod
    def of(cls, scenarios: list[Scenario]) -> "Batch":
        batch = cls()
        for scenario in scenarios:
            batch.add(scenario)
        return batch


def optimize_block(
    problem: Problem, first: Scenario, batch: Batch, parameters: dict[str, Any]
) -> Columns:
    """`optimize`'s columns for one block of a group: `first` is any of the group's scenarios
    (they share everything outside BATCHED_FIELDS), `batch` what each scenario sets there."""
    mode = Mode(parameters.get("mode") or Mode.PAPER)
    threshold = parameters.get("threshold_tokens")
    check_threshold(threshold)
    prfaas = np.array(batch.prfaas_instances)
    pd = np.array(batch.pd_instances)
    link = np.array([units.gbps_to_bytes_per_s(g) for g in batch.link_bandwidth_gbps])
    system, workload = problem.system, problem.workload
    with np.errstate(over="raise", invalid="raise"):
        t, n_p, n_d = optimize_fixed_hardware_batch(
            system, workload, prfaas, pd, link, threshold, mode
        )
        plan, plan_rps = _evaluations("plan", problem, (prfaas, n_p, n_d, t), link, mode)
        gpi = first
        total = (
            prfaas * gpi.prfaas_cluster.gpus_per_instance + pd * gpi.pd_cluster.gpus_per_instance
        )
        pd_h = total // gpi.pd_cluster.gpus_per_instance
        none = np.zeros_like(prfaas)
        t_h, n_p_h, n_d_h = optimize_fixed_hardware_batch(
            system, workload, none, pd_h, link, np.inf, mode
        )
        homogeneous, homogeneous_rps = _evaluations(
            "baselines.homogeneous_pd", problem, (none, n_p_h, n_d_h, t_h), link, mode
        )
        naive, naive_rps = _evaluations(
            "baselines.naive_heterogeneous", problem, (prfaas, none, pd, np.zeros(pd.size)), link,
            mode,
        )  # fmt: skip
    return {
        "mode": [str(mode)] * pd.size,
        **plan,
        **homogeneous,
        **naive,
        "speedup_vs_homogeneous": _ratio(plan_rps, homogeneous_rps),
        "speedup_vs_naive_heterogeneous": _ratio(plan_rps, naive_rps),
    }
