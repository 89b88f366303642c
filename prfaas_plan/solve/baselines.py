"""The baselines the planner is measured against, computed by the same model: homogeneous PD
(no PrfaaS, the best prefill/decode split, memoised per process), naive heterogeneous (every
request offloaded), and the paper's exhaustive grid search (every split x a fixed threshold
step), the brute-force oracle for tests and benchmarks."""

from dataclasses import replace
from functools import lru_cache

import numpy as np

from prfaas_plan.analytic.capacity import Configuration, Evaluation, ServingSystem, evaluate
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.choices import Mode
from prfaas_plan.solve.threshold import SearchSpace, best_configurations


def exhaustive_grid_search(
    system: ServingSystem,
    workload: LengthDistribution,
    space: SearchSpace,
    mode: Mode = Mode.PAPER,
    step_tokens: float = 100.0,
) -> Evaluation:
    """The paper's search: every split × thresholds every `step_tokens`, one model evaluation
    per point (brute force, for tests and benchmarks)."""
    best: Evaluation | None = None
    thresholds = np.arange(workload.min_tokens, workload.max_tokens + step_tokens, step_tokens)
    for n_p in range(space.pd_instances):
        for t in thresholds:
            candidate = evaluate(
                system,
                workload,
                Configuration(space.prfaas_instances, n_p, space.pd_instances - n_p, float(t)),
                mode,
            )
            if best is None or candidate.system_throughput_rps > best.system_throughput_rps:
                best = candidate
    assert best is not None  # pd_instances >= 1 and the grid is non-empty
    return best


def homogeneous_baseline(
    system: ServingSystem, workload: LengthDistribution, pd_instances: int, mode: Mode = Mode.PAPER
) -> Evaluation:
    """Ordinary PD on `pd_instances` local instances (no PrfaaS), best prefill/decode split."""
    configuration = homogeneous_configuration(system, workload, pd_instances, mode)
    return evaluate(system, workload, configuration, mode)


def homogeneous_configuration(
    system: ServingSystem, workload: LengthDistribution, pd_instances: int, mode: Mode = Mode.PAPER
) -> Configuration:
    """The configuration `homogeneous_baseline` evaluates (memoised: see below)."""
    return _homogeneous_configuration(
        replace(system, link_bandwidth_bytes_per_s=UNUSED_LINK_BYTES_PER_S),
        workload, pd_instances, mode,
    )  # fmt: skip


UNUSED_LINK_BYTES_PER_S = 1.0  # the homogeneous split's memo key: no request crosses a link


@lru_cache(maxsize=4096)  # a sweep's equal-cost baselines span many instance counts
def _homogeneous_configuration(
    system: ServingSystem, workload: LengthDistribution, pd_instances: int, mode: Mode
) -> Configuration:
    """The split `homogeneous_baseline` evaluates, memoised per process on exact inputs (all
    frozen values): it does not depend on the link (nothing is offloaded: t = inf, no PrfaaS
    instance), so a server planning the same PD cluster and workload at many link bandwidths
    or PrfaaS sizes (the what-if page's sliders; a sweep over links) searches it once."""
    space = SearchSpace(prfaas_instances=0, pd_instances=pd_instances, threshold_tokens=np.inf)
    return best_configurations(system, workload, space, (mode,))[0]


def naive_configuration(prfaas_instances: int, pd_instances: int) -> Configuration:
    """The configuration `naive_heterogeneous` evaluates."""
    return Configuration(prfaas_instances, 0, pd_instances, threshold_tokens=0.0)
