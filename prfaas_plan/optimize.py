"""Choose the routing threshold and the PD prefill/decode split for fixed hardware, and the
two baselines (homogeneous PD, naive heterogeneous) computed by the same model.

For a fixed split, the PrfaaS term Θ_prfaas/p rises with t and the PD-P term Θ_pd-p/(1 − p)
falls, so Λ_max peaks where they cross (threshold balance, reference eq. 7). We evaluate a
coarse geometric grid of thresholds for every split at once, then solve the balance condition
by regula falsi (Illinois) inside the bracket around the best grid point: the result is the
exact crossing (relative 1e-12), not a grid point. Discrete length distributions (observed lengths) have
piecewise-constant Λ, so there every distinct length is evaluated exactly instead.

`exhaustive_grid_search` is the paper's method (fixed step × every split), kept as the
brute-force oracle for tests and benchmarks.
"""

from dataclasses import dataclass

import numpy as np

from prfaas_plan.capacity import (
    Configuration,
    Evaluation,
    Mode,
    ServingSystem,
    evaluate,
    rates,
)
from prfaas_plan.errors import ConfigError
from prfaas_plan.workload import LengthDistribution

COARSE_GRID_POINTS = 65
ROOT_MAX_STEPS = 60
ROOT_RTOL = 1e-12
TIE_RTOL = 1e-9


@dataclass(frozen=True)
class SearchSpace:
    """What the optimiser may choose: the split of `pd_instances` and (unless fixed) t."""

    prfaas_instances: int
    pd_instances: int
    threshold_tokens: float | None = None  # fixed threshold, or None to optimise it

    def __post_init__(self):
        if self.pd_instances < 1:
            raise ConfigError(
                f"pd_cluster.instances must be >= 1 (decode runs only in the PD cluster), "
                f"got {self.pd_instances}"
            )
        if self.prfaas_instances < 0:
            raise ConfigError(f"prfaas_cluster.instances must be >= 0, got {self.prfaas_instances}")

    def splits(self) -> tuple[np.ndarray, np.ndarray]:
        """All (N_p, N_d) with N_p + N_d = pd_instances and N_d >= 1."""
        n_p = np.arange(self.pd_instances)
        return n_p, self.pd_instances - n_p


def _limits(system, workload, t, space, n_p, n_d, mode):
    """Λ and the two prefill terms for thresholds `t` broadcast against splits."""
    r = rates(system, workload, t, space.prfaas_instances, n_p, n_d, mode)
    prfaas_term = r.limits_rps[:2].min(axis=0)
    return r.system_rps, prfaas_term, r.limits_rps[2]


def _threshold_grid(workload: LengthDistribution) -> np.ndarray:
    """Candidate thresholds covering 'offload everything' to 'offload nothing'."""
    candidates = workload.threshold_candidates()
    if candidates is not None:
        return np.concatenate([[candidates[0] - 1.0], candidates])
    return np.geomspace(workload.min_tokens, workload.max_tokens, COARSE_GRID_POINTS)


def _refine(system, workload, space, n_p, n_d, mode, grid, best_index):
    """Solve Θ_prfaas/p = Θ_pd-p/(1−p) inside the bracket around each split's best grid point
    (Illinois regula falsi, vectorised over splits); returns thresholds and their Λ, or
    (nan, -inf) for splits whose bracket holds no crossing."""
    last = grid.size - 1
    a = grid[np.clip(best_index - 1, 0, last)]
    b = grid[np.clip(best_index + 1, 0, last)]
    _, f, g = _limits(system, workload, a, space, n_p, n_d, mode)
    ga = f - g
    _, f, g = _limits(system, workload, b, space, n_p, n_d, mode)
    gb = f - g
    crosses = (ga < 0) & (gb > 0) & np.isfinite(ga) & np.isfinite(gb)
    if not crosses.any():
        return np.full(a.shape, np.nan), np.full(a.shape, -np.inf)
    # splits without a crossing get a dummy, already-converged bracket
    a, b = np.where(crosses, a, 1.0), np.where(crosses, b, 1.0)
    ga, gb = np.where(crosses, ga, -1.0), np.where(crosses, gb, 1.0)
    last_side = np.zeros(a.shape)
    for _ in range(ROOT_MAX_STEPS):
        c = (a * gb - b * ga) / (gb - ga)  # gb > 0 > ga keeps this finite and inside [a, b]
        _, f, g = _limits(system, workload, c, space, n_p, n_d, mode)
        gc = f - g
        move_a = crosses & (gc < 0)  # the crossing is right of c
        move_b = crosses & ~(gc < 0)
        # Illinois: when the same end moves twice, halve the stale end's value
        gb = np.where(move_a & (last_side == -1), gb / 2, gb)
        ga = np.where(move_b & (last_side == 1), ga / 2, ga)
        a, ga = np.where(move_a, c, a), np.where(move_a, gc, ga)
        b, gb = np.where(move_b, c, b), np.where(move_b, gc, gb)
        last_side = np.where(move_a, -1, np.where(move_b, 1, 0))
        if np.all((b - a <= ROOT_RTOL * b) | (gc == 0) | ~crosses):
            break
    t = np.where(np.abs(ga) < np.abs(gb), a, b)
    lam, _, _ = _limits(system, workload, t, space, n_p, n_d, mode)
    return np.where(crosses, t, np.nan), np.where(crosses, lam, -np.inf)


def _pick(n_p, thresholds, lam, headroom):
    """Index of the best split: highest Λ; among ties (decode-bound plateaus), the most
    prefill headroom."""
    best = lam.max()
    tied = np.flatnonzero(lam >= best * (1 - TIE_RTOL))
    return int(tied[np.argmax(headroom[tied])])


def optimize_fixed_hardware(
    system: ServingSystem,
    workload: LengthDistribution,
    space: SearchSpace,
    mode: Mode = Mode.PAPER,
) -> Evaluation:
    """Maximise Λ_max over t and the integer split N_p/N_d for fixed instance counts."""
    n_p, n_d = space.splits()
    if space.threshold_tokens is not None:
        grid = np.array([float(space.threshold_tokens)])
    elif space.prfaas_instances == 0:
        grid = np.array([np.inf])  # nothing can be offloaded
    else:
        grid = _threshold_grid(workload)
    lam, f, g = _limits(system, workload, grid[None, :], space, n_p[:, None], n_d[:, None], mode)
    best_index = lam.argmax(axis=1)
    rows = np.arange(n_p.size)
    thresholds = grid[best_index]
    best_lam = lam[rows, best_index]
    headroom = np.minimum(f, g)[rows, best_index]
    if grid.size > 1 and workload.threshold_candidates() is None:
        refined_t, refined_lam = _refine(system, workload, space, n_p, n_d, mode, grid, best_index)
        better = refined_lam > best_lam
        thresholds = np.where(better, refined_t, thresholds)
        best_lam = np.where(better, refined_lam, best_lam)
    i = _pick(n_p, thresholds, best_lam, headroom)
    configuration = Configuration(
        prfaas_instances=space.prfaas_instances,
        pd_prefill_instances=int(n_p[i]),
        pd_decode_instances=int(n_d[i]),
        threshold_tokens=float(thresholds[i]),
    )
    return evaluate(system, workload, configuration, mode)


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
    space = SearchSpace(prfaas_instances=0, pd_instances=pd_instances, threshold_tokens=np.inf)
    return optimize_fixed_hardware(system, workload, space, mode)


def naive_heterogeneous(
    system: ServingSystem,
    workload: LengthDistribution,
    prfaas_instances: int,
    pd_instances: int,
    mode: Mode = Mode.PAPER,
) -> Evaluation:
    """Every request prefilled on PrfaaS (t = 0), every PD instance decodes."""
    configuration = Configuration(prfaas_instances, 0, pd_instances, threshold_tokens=0.0)
    return evaluate(system, workload, configuration, mode)
