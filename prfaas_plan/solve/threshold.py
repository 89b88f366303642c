"""Choose the routing threshold and the PD prefill/decode split for fixed hardware, and the
two baselines (homogeneous PD, naive heterogeneous) computed by the same model.

For a fixed split, the PrfaaS term Θ_prfaas/p rises with t and the PD-P term Θ_pd-p/(1 − p)
falls, so Λ_max peaks where they cross (threshold balance, reference eq. 7). We evaluate a
coarse geometric grid of thresholds for every split at once, then solve the balance condition
by regula falsi (Illinois) inside the grid bracket where it changes sign: the result is the
exact crossing (relative 1e-10 in t, i.e. ~1e-5 tokens), not a grid point. The best grid point stays a candidate, so a
profile for which the two terms are not monotone cannot make the optimiser worse than its grid. Discrete length distributions (observed lengths) have
piecewise-constant Λ, so there every distinct length is evaluated exactly instead.

`exhaustive_grid_search` is the paper's method (fixed step × every split), kept as the
brute-force oracle for tests and benchmarks.
"""

from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray, IntArray
from prfaas_plan.analytic.capacity import (
    Configuration,
    Evaluation,
    ServingSystem,
    evaluate,
    rates,
)
from prfaas_plan.analytic.distributions import LengthDistribution
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.solve.search import golden_section_max, threshold_grid

COARSE_GRID_POINTS = 65
ROOT_MAX_STEPS = 60
ROOT_RTOL = 1e-10
GOLDEN_STEPS = 45  # shrinks a grid bracket by 0.618^45 ~ 4e-10
TIE_RTOL = 1e-9


@dataclass(frozen=True)
class SearchSpace:
    """What the optimiser may choose: the split of `pd_instances` and (unless fixed) t."""

    prfaas_instances: int
    pd_instances: int
    threshold_tokens: float | None = None  # fixed threshold, or None to optimise it

    def __post_init__(self) -> None:
        if self.pd_instances < 1:
            raise ConfigError(
                f"pd_cluster.instances must be >= 1 (decode runs only in the PD cluster), "
                f"got {self.pd_instances}"
            )
        if self.prfaas_instances < 0:
            raise ConfigError(f"prfaas_cluster.instances must be >= 0, got {self.prfaas_instances}")

    def splits(self) -> tuple[IntArray, IntArray]:
        """All (N_p, N_d) with N_p + N_d = pd_instances and N_d >= 1."""
        n_p = np.arange(self.pd_instances)
        return n_p, self.pd_instances - n_p


def _limits(
    system: ServingSystem,
    workload: LengthDistribution,
    t: ArrayLike,
    space: SearchSpace,
    n_p: ArrayLike,
    n_d: ArrayLike,
    mode: Mode,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Λ and the two prefill terms for thresholds `t` broadcast against splits."""
    r = rates(system, workload, t, space.prfaas_instances, n_p, n_d, mode)
    prfaas_term = r.limits_rps[:2].min(axis=0)
    return r.system_rps, prfaas_term, r.limits_rps[2]


def _balance_point(
    system: ServingSystem,
    workload: LengthDistribution,
    space: SearchSpace,
    n_p: IntArray,
    n_d: IntArray,
    mode: Mode,
    grid: FloatArray,
    f: FloatArray,
    g: FloatArray,
    lower_bound: float,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Solve Θ_prfaas/p = Θ_pd-p/(1−p) for every split (Illinois regula falsi, vectorised),
    inside the first grid bracket [t_i, t_i+1] where f − g (the two terms on the grid) turns
    non-negative. Splits whose crossing cannot beat `lower_bound` (a Λ already reached) are
    skipped: with f rising and g falling in the bracket, Λ there is at most
    min(f(t_i+1), g(t_i), Θ_pd-d).
    Returns thresholds, their Λ and the prefill capacity there (min of the two terms), or
    (nan, -inf, -inf) for splits without such a bracket. An infinite end (p = 0 or p = 1 there)
    is handled by bisecting until both ends are finite."""
    with np.errstate(invalid="ignore"):
        gap = f - g
    negative = gap < 0  # nan (no request on either side) counts as non-negative
    turns = negative[:, :-1] & ~negative[:, 1:]
    rows = np.arange(n_p.size)
    first = turns.argmax(axis=1)
    ceiling = np.minimum(
        np.minimum(f[rows, first + 1], g[rows, first]), n_d * system.decode_rps_per_instance
    )
    # with N_p = 0 the "crossing" is the jump at the shortest length (PD-P term inf -> 0), not a
    # balance: the grid point t = min (everything offloaded) already covers that split
    crosses = turns.any(axis=1) & (ceiling >= lower_bound * (1 - TIE_RTOL)) & (n_p > 0)
    if not crosses.any():
        nothing = np.full(n_p.shape, -np.inf)
        return np.full(n_p.shape, np.nan), nothing, nothing
    a, b = grid[first], grid[first + 1]
    ga, gb = gap[rows, first], gap[rows, first + 1]
    last_side = np.zeros(a.shape)
    for _ in range(ROOT_MAX_STEPS):
        finite = np.isfinite(ga) & np.isfinite(gb)
        with np.errstate(invalid="ignore", divide="ignore"):
            falsi = (a * gb - b * ga) / (gb - ga)
        c = np.where(finite, falsi, 0.5 * (a + b))
        _, f, g = _limits(system, workload, c, space, n_p, n_d, mode)
        gc = f - g
        move_a = crosses & (gc < 0)  # the crossing is right of c
        move_b = crosses & ~(gc < 0)
        # Illinois: when the same end moves twice, halve the stale end's value
        gb = np.where(move_a & (last_side == -1) & finite, gb / 2, gb)
        ga = np.where(move_b & (last_side == 1) & finite, ga / 2, ga)
        a, ga = np.where(move_a, c, a), np.where(move_a, gc, ga)
        b, gb = np.where(move_b, c, b), np.where(move_b, gc, gb)
        last_side = np.where(move_a, -1, np.where(move_b, 1, 0))
        # converged: a bracket of relative width ROOT_RTOL, or a gap at rounding level
        if np.all((b - a <= ROOT_RTOL * b) | (np.abs(gc) <= 1e-13 * np.abs(f)) | ~crosses):
            break
    t = np.where(np.abs(ga) < np.abs(gb), a, b)
    lam, f, g = _limits(system, workload, t, space, n_p, n_d, mode)
    prefill = np.minimum(f, g)
    return (
        np.where(crosses, t, np.nan),
        np.where(crosses, lam, -np.inf),
        np.where(crosses, prefill, -np.inf),
    )


def _pick(lam: FloatArray, headroom: FloatArray) -> int:
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
        grid = threshold_grid(workload, COARSE_GRID_POINTS)
    lam, f, g = _limits(system, workload, grid[None, :], space, n_p[:, None], n_d[:, None], mode)
    best_index = lam.argmax(axis=1)
    rows = np.arange(n_p.size)
    thresholds = grid[best_index]
    best_lam = lam[rows, best_index]
    headroom = np.minimum(f, g)[rows, best_index]
    if grid.size > 1 and workload.threshold_candidates() is None:
        balance_t, balance_lam, balance_prefill = _balance_point(
            system, workload, space, n_p, n_d, mode, grid, f, g, best_lam.max()
        )
        # where Λ peaks away from the balance point (a prefill term that is not monotone in t),
        # polish the best grid point too; not where decode already binds there (Λ cannot exceed
        # Θ_pd-d), nor where on the grid the PrfaaS term never falls and the PD-P term never
        # rises (then Λ peaks at the balance point or at an end of the range, both exact)
        decode_bound = best_lam >= n_d * system.decode_rps_per_instance * (1 - TIE_RTOL)
        with np.errstate(invalid="ignore"):
            monotone = np.all(~(np.diff(f, axis=1) < 0), axis=1) & np.all(
                ~(np.diff(g, axis=1) > 0), axis=1
            )
        near_balance = np.abs(np.searchsorted(grid, balance_t) - best_index) <= 1
        away = ~near_balance & ~decode_bound & ~monotone
        if away.any():
            last = grid.size - 1
            lo = grid[np.clip(best_index - 1, 0, last)][away]
            hi = grid[np.clip(best_index + 1, 0, last)][away]
            t_polished, lam_polished = golden_section_max(
                lambda t: _limits(system, workload, t, space, n_p[away], n_d[away], mode)[0],
                lo,
                hi,
                GOLDEN_STEPS,
            )
            better = lam_polished > best_lam[away]
            thresholds[away] = np.where(better, t_polished, thresholds[away])
            best_lam[away] = np.where(better, lam_polished, best_lam[away])
        # the balance point wins ties: on a decode-bound plateau it is the t with most slack
        use = balance_lam >= best_lam * (1 - TIE_RTOL)
        thresholds = np.where(use, balance_t, thresholds)
        best_lam = np.where(use, balance_lam, best_lam)
        headroom = np.where(use, balance_prefill, headroom)
    i = _pick(best_lam, headroom)
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
