"""Choose the routing threshold and the PD prefill/decode split for fixed hardware (the
baselines it is measured against, and the paper's exhaustive grid search: baselines.py).

For a fixed split, the PrfaaS term Θ_prfaas/p rises with t and the PD-P term Θ_pd-p/(1 − p)
falls, so Λ_max peaks where they cross (threshold balance, reference eq. 7). We evaluate a
coarse geometric grid of thresholds for every split at once, then solve the balance condition
by regula falsi (Anderson–Björck) inside the grid bracket where it changes sign: the result is
the exact crossing (relative 1e-10 in t, i.e. ~1e-5 tokens), not a grid point. The best grid point stays a candidate, so a
profile for which the two terms are not monotone cannot make the optimiser worse than its grid. Discrete length distributions (observed lengths) have
piecewise-constant Λ, so there every distinct length is evaluated exactly instead.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, BoolArray, FloatArray, IntArray, distinct_sorted
from prfaas_plan.analytic.capacity import (
    Configuration,
    Evaluation,
    ServingSystem,
    evaluate,
    prefill_limits,
    prefill_limits_of_splits,
    row_modes,
)
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.analytic.log_normal_rows import LogNormalRows
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.solve.search import (
    COARSE_GRID_POINTS,
    GOLDEN_STEPS,
    TIE_RTOL,
    golden_section_max,
    threshold_grid,
)
from prfaas_plan.solve.splits import Splits

ROOT_MAX_STEPS = 60
ROOT_RTOL = 1e-10
# (deployment, PD split) rows searched in one pass: its arrays hold rows x COARSE_GRID_POINTS
# values (8.5 MB each, a few dozen alive at once), whatever the PD clusters' sizes; a batch of
# 1,000 scenarios of 8 PD instances in both modes is one pass
MAX_SPLIT_ROWS = 16384
# (row, threshold) pairs of a coarse grid from which its split-independent terms are computed
# once per deployment (`_grid_limits`): below, the few extra array operations cost more than
# they save (a single plan's grid, 2 modes x 8 splits x 65 points, measured: 1% more
# instructions a plan); the numbers are the same either way
PER_DEPLOYMENT_FROM = 4096


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


def _prefill_limits(
    system: ServingSystem, t: ArrayLike, rows: Splits
) -> tuple[FloatArray, FloatArray]:
    """The two prefill terms (`prefill_limits`) for thresholds `t` broadcast against splits."""
    return prefill_limits(
        system, rows.workload, t, rows.prfaas_instances, rows.n_p, rows.mode,
        rows.link_bytes_per_s,
    )  # fmt: skip


def _limits(
    system: ServingSystem, t: ArrayLike, rows: Splits
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Λ and the two prefill terms for thresholds `t` broadcast against splits (`rates`' Λ,
    the least of its four terms, from the two prefill terms and decode)."""
    f, g = _prefill_limits(system, t, rows)
    return _system_rps(rows, np.minimum(f, g)), f, g


def _grid_limits(
    system: ServingSystem, points: FloatArray, rows: Splits
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """`_limits` of every row at its row of `points` (one row for all, or a row per row, the
    same for a deployment's rows), with what does not depend on the PD split computed once per
    deployment (`prefill_limits_of_splits`): the same numbers."""
    width = rows.per_deployment
    firsts = rows.take(np.arange(0, rows.n_p.size, width)).column()
    f, g = prefill_limits_of_splits(
        system, firsts.workload, points if points.shape[0] == 1 else points[::width],
        firsts.prfaas_instances, rows.n_p[:, None], firsts.mode, firsts.link_bytes_per_s, width,
    )  # fmt: skip
    return _system_rps(rows.column(), np.minimum(f, g)), f, g


def _system_rps(rows: Splits, prefill_rps: FloatArray) -> FloatArray:
    """Λ from the prefill capacity (the least of the two prefill terms) and the rows' decode
    capacity."""
    lam: FloatArray = np.minimum(prefill_rps, rows.decode_rps)
    return lam


def _balance_point(
    system: ServingSystem,
    rows: Splits,
    grid: FloatArray,
    f: FloatArray,
    g: FloatArray,
    lower_bound: FloatArray,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Solve Θ_prfaas/p = Θ_pd-p/(1−p) for every split (Anderson–Björck regula falsi,
    vectorised), inside the first bracket [t_i, t_i+1] of its row of `grid` (rows x points)
    where f − g (the two terms on the grid) turns non-negative. Splits whose crossing cannot beat `lower_bound` (a Λ already reached by their
    deployment) are skipped: with f rising and g falling in the bracket, Λ there is at most
    min(f(t_i+1), g(t_i), Θ_pd-d).
    Returns thresholds, their Λ and the prefill capacity there (min of the two terms), or
    (nan, -inf, -inf) for splits without such a bracket. An infinite end (p = 0 or p = 1 there)
    is handled by bisecting until both ends are finite. Each deployment's splits stop moving
    once all of them have converged, so a deployment's answer does not depend on the others
    solved alongside it."""
    n_p = rows.n_p
    with np.errstate(invalid="ignore"):
        gap = f - g
    negative = gap < 0  # nan (no request on either side) counts as non-negative
    turns = negative[:, :-1] & ~negative[:, 1:]
    index = np.arange(n_p.size)
    first = turns.argmax(axis=1)
    ceiling = np.minimum(np.minimum(f[index, first + 1], g[index, first]), rows.decode_rps)
    # with N_p = 0 the "crossing" is the jump at the shortest length (PD-P term inf -> 0), not a
    # balance: the grid point t = min (everything offloaded) already covers that split
    crosses = turns.any(axis=1) & (ceiling >= lower_bound * (1 - TIE_RTOL)) & (n_p > 0)
    if not crosses.any():
        nothing = np.full(n_p.shape, -np.inf)
        return np.full(n_p.shape, np.nan), nothing, nothing
    a, b = grid[index, first], grid[index, first + 1]
    ga, gb = gap[index, first], gap[index, first + 1]
    # the prefill capacity min(f, g) at each end, kept with the end: Λ at the answer without
    # evaluating the model there again
    prefill_a = np.minimum(f[index, first], g[index, first])
    prefill_b = np.minimum(f[index, first + 1], g[index, first + 1])
    last_side = np.zeros(a.shape)  # -1: a moved last step, 1: b did
    idle = ~crosses
    moving = crosses  # splits of deployments still converging
    for _ in range(ROOT_MAX_STEPS):
        finite = np.isfinite(ga) & np.isfinite(gb)
        with np.errstate(invalid="ignore", divide="ignore"):
            falsi = (a * gb - b * ga) / (gb - ga)
        c = np.where(finite, falsi, 0.5 * (a + b))
        f, g = _prefill_limits(system, c, rows)
        gc = f - g
        right = gc < 0  # the crossing is right of c
        move_a = moving & right
        move_b = moving & ~right
        # Anderson–Björck: when the same end moves twice in a row, the end that stays has its
        # value scaled by 1 − g(c)/g(the previous c, which c replaces), or by 1/2 where that
        # is not positive (Illinois' factor), so the next secant moves it too; where the ends
        # alternate, plain regula falsi. A positive factor keeps the signs: still a bracket
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            kept_b = np.where(move_a & (last_side == -1) & finite, 1 - gc / ga, 1.0)
            kept_a = np.where(move_b & (last_side == 1) & finite, 1 - gc / gb, 1.0)
        gb = gb * np.where(kept_b > 0, kept_b, 0.5)
        ga = ga * np.where(kept_a > 0, kept_a, 0.5)
        a, ga = np.where(move_a, c, a), np.where(move_a, gc, ga)
        b, gb = np.where(move_b, c, b), np.where(move_b, gc, gb)
        prefill_c = np.minimum(f, g)
        prefill_a = np.where(move_a, prefill_c, prefill_a)
        prefill_b = np.where(move_b, prefill_c, prefill_b)
        last_side = np.where(move_a, -1, np.where(move_b, 1, 0))
        # converged: a bracket of relative width ROOT_RTOL, or a gap at rounding level
        done = (b - a <= ROOT_RTOL * b) | (np.abs(gc) <= 1e-13 * np.abs(f)) | idle
        moving = moving & ~rows.per_deployment_all(done)
        if not moving.any():
            break
    at_a = np.abs(ga) < np.abs(gb)
    t = np.where(at_a, a, b)
    prefill = np.where(at_a, prefill_a, prefill_b)
    lam = _system_rps(rows, prefill)
    return (
        np.where(crosses, t, np.nan),
        np.where(crosses, lam, -np.inf),
        np.where(crosses, prefill, -np.inf),
    )


def _pick(lam: FloatArray, headroom: FloatArray) -> IntArray:
    """Per deployment (a row of `lam`), the best split: highest Λ; among ties (decode-bound
    plateaus), the most prefill headroom (the first such split)."""
    best = lam.max(axis=1, keepdims=True)
    tied = lam >= best * (1 - TIE_RTOL)
    chosen: IntArray = np.argmax(np.where(tied, headroom, -np.inf), axis=1)
    # a nan headroom among the ties wins as it did with argmax over the ties alone
    nan_tied = tied & np.isnan(headroom)
    chosen = np.where(nan_tied.any(axis=1), nan_tied.argmax(axis=1), chosen)
    return chosen


def _optimize_splits(
    system: ServingSystem, grid: FloatArray, rows: Splits
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Best threshold, its Λ and prefill headroom for every split (row): the coarse grid (one
    shared by every row, or a row of `grid` per row: workloads of differing length ranges),
    then the balance point and, where Λ peaks away from it, a golden-section polish."""
    points = grid if grid.ndim == 2 else grid[None, :]
    if rows.per_deployment > 1 and rows.n_p.size * points.shape[1] >= PER_DEPLOYMENT_FROM:
        lam, f, g = _grid_limits(system, points, rows)
    else:
        lam, f, g = _limits(system, points, rows.column())
    best_index = lam.argmax(axis=1)
    index = np.arange(rows.n_p.size)
    at = np.broadcast_to(points, lam.shape)  # each row's grid
    thresholds = at[index, best_index]
    best_lam = np.where(rows.valid, lam[index, best_index], -np.inf)
    headroom = np.minimum(f, g)[index, best_index]
    discrete = (
        isinstance(rows.workload, LengthDistribution)
        and rows.workload.threshold_candidates() is not None
    )
    if points.shape[1] > 1 and not discrete:
        balance_t, balance_lam, balance_prefill = _balance_point(
            system, rows, at, f, g, rows.per_deployment_max(best_lam)
        )
        # where Λ peaks away from the balance point (a prefill term that is not monotone in t),
        # polish the best grid point too; not where decode already binds there (Λ cannot exceed
        # Θ_pd-d), nor where on the grid the PrfaaS term never falls and the PD-P term never
        # rises (then Λ peaks at the balance point or at an end of the range, both exact)
        decode_bound = best_lam >= rows.decode_rps * (1 - TIE_RTOL)
        with np.errstate(invalid="ignore"):
            monotone = np.all(~(np.diff(f, axis=1) < 0), axis=1) & np.all(
                ~(np.diff(g, axis=1) > 0), axis=1
            )
        position = np.searchsorted(grid, balance_t) if grid.ndim == 1 else _positions(at, balance_t)
        near_balance = np.abs(position - best_index) <= 1
        away = ~near_balance & ~decode_bound & ~monotone & rows.valid
        if away.any():
            last = points.shape[1] - 1
            lo = at[index, np.clip(best_index - 1, 0, last)][away]
            hi = at[index, np.clip(best_index + 1, 0, last)][away]
            polished = rows.take(away)
            t_polished, lam_polished = golden_section_max(
                lambda t: _limits(system, t, polished)[0], lo, hi, GOLDEN_STEPS
            )
            better = lam_polished > best_lam[away]
            thresholds[away] = np.where(better, t_polished, thresholds[away])
            best_lam[away] = np.where(better, lam_polished, best_lam[away])
        # the balance point wins ties: on a decode-bound plateau it is the t with most slack
        use = balance_lam >= best_lam * (1 - TIE_RTOL)
        thresholds = np.where(use, balance_t, thresholds)
        best_lam = np.where(use, balance_lam, best_lam)
        headroom = np.where(use, balance_prefill, headroom)
    return thresholds, best_lam, headroom


def _positions(grid: FloatArray, values: FloatArray) -> IntArray:
    """`np.searchsorted(grid[i], values[i])` for each row i of an ascending `grid`: how many of
    the row's points lie below its value (nan past the last, where searchsorted puts it)."""
    below = np.count_nonzero(grid < values[:, None], axis=1)
    positions: IntArray = np.where(np.isnan(values), grid.shape[1], below)
    return positions


def optimize_fixed_hardware_batch(
    system: ServingSystem,
    workload: LengthDistribution | Sequence[TruncatedLogNormal],
    prfaas_instances: IntArray,
    pd_instances: IntArray,
    link_bytes_per_s: FloatArray,
    threshold_tokens: float | None = None,
    mode: Mode | Sequence[Mode] = Mode.PAPER,
    decode_rps_per_instance: FloatArray | None = None,
) -> tuple[FloatArray, IntArray, IntArray]:
    """`optimize_fixed_hardware` for many deployments of one system at once, which differ in
    instance counts, link bandwidth, (`mode` a sequence, one per deployment) the service-time
    mode and (`workload` a sequence of truncated log-normals, one per deployment, with each
    one's `decode_rps_per_instance`: the decode point depends on the mean length) the
    workload: (t, N_p, N_d) per deployment, the same choice as one call each, in a handful of
    array operations over every deployment's splits."""
    prfaas = np.asarray(prfaas_instances, int)
    pd = np.asarray(pd_instances, int)
    link = np.asarray(link_bytes_per_s, float)
    if np.any(pd < 1) or np.any(prfaas < 0):
        raise ConfigError(
            "pd_cluster.instances must be >= 1 and prfaas_cluster.instances >= 0 in every "
            f"deployment, got {int(pd.min())} and {int(prfaas.min())}"
        )
    exact = None if isinstance(mode, Mode) else np.array([m is Mode.EXACT for m in mode])
    t_out = np.empty(pd.size)
    n_p_out = np.empty(pd.size, int)
    per_row = None if isinstance(workload, LengthDistribution) else LogNormalRows.of(workload)
    decode = (
        system.decode_rps_per_instance
        if decode_rps_per_instance is None
        else np.asarray(decode_rps_per_instance, float)
    )
    # deployments of similar PD size together (by powers of two): each is padded to its
    # bucket's largest split count, so at most half of the rows evaluated are padding
    bucket = np.ceil(np.log2(pd)).astype(int)
    groups = [
        (np.flatnonzero(chosen & (bucket == b)), grid)
        for chosen, grid in _grids(workload, prfaas, threshold_tokens)
        for b in distinct_sorted(bucket[chosen])
    ]
    passes = []
    for members, grid in groups:  # at most MAX_SPLIT_ROWS rows a pass: a deployment's answer
        step = max(1, MAX_SPLIT_ROWS // int(pd[members].max()))  # does not depend on the others
        passes += [(members[i : i + step], grid) for i in range(0, members.size, step)]
    for members, grid in passes:
        width = int(pd[members].max())
        n_p = np.tile(np.arange(width), members.size)
        n_d = np.repeat(pd[members], width) - n_p
        valid = n_d >= 1
        spread = np.repeat(members, width)  # each row's deployment
        rows = Splits(
            prfaas_instances=np.repeat(prfaas[members], width).astype(float),
            n_p=np.where(valid, n_p, 0), n_d=np.where(valid, n_d, 0),
            link_bytes_per_s=np.repeat(link[members], width), per_deployment=width,
            mode=_row_modes(mode, exact, members, width),
            workload=per_row.take(spread) if per_row is not None else _shared(workload),
            decode_rps_per_instance=decode if isinstance(decode, float) else decode[spread],
        )  # fmt: skip
        row_grid = grid if grid.ndim == 1 else grid[spread]  # a grid per deployment: per row
        thresholds, lam, headroom = _optimize_splits(system, row_grid, rows)
        chosen = _pick(lam.reshape(-1, width), headroom.reshape(-1, width))
        flat = np.arange(members.size) * width + chosen
        t_out[members] = thresholds[flat]
        n_p_out[members] = rows.n_p[flat]
    return t_out, n_p_out, pd - n_p_out


def _shared(workload: LengthDistribution | Sequence[TruncatedLogNormal]) -> LengthDistribution:
    assert isinstance(workload, LengthDistribution)  # per row otherwise
    return workload


def _grids(
    workload: LengthDistribution | Sequence[TruncatedLogNormal],
    prfaas: IntArray,
    threshold_tokens: float | None,
) -> list[tuple[BoolArray, FloatArray]]:
    """The deployments (a mask) that search each threshold grid: all of them a fixed
    threshold; without PrfaaS (nothing can be offloaded) infinity; the others the coarse grid
    of their workload: one shared grid, or, where the truncated log-normals' length ranges
    differ, a row per deployment (its own range's grid: shape deployments x points), so that
    differing ranges are still one search."""
    if threshold_tokens is not None:
        return [(np.ones(prfaas.size, bool), np.array([float(threshold_tokens)]))]
    grids = [(prfaas == 0, np.array([np.inf]))]
    if isinstance(workload, LengthDistribution):
        return [*grids, (prfaas > 0, threshold_grid(workload, COARSE_GRID_POINTS))]
    firsts: dict[tuple[float, float], TruncatedLogNormal] = {}  # each range's first workload
    for d in workload:
        firsts.setdefault((d.min_tokens, d.max_tokens), d)
    position = {key: i for i, key in enumerate(firsts)}
    which = [position[(d.min_tokens, d.max_tokens)] for d in workload]
    per_range = np.stack([threshold_grid(d, COARSE_GRID_POINTS) for d in firsts.values()])
    return [*grids, (prfaas > 0, per_range[0] if len(firsts) == 1 else per_range[which])]


def _row_modes(
    mode: Mode | Sequence[Mode], exact: BoolArray | None, members: IntArray, width: int
) -> Mode | BoolArray:
    """The Splits mode of `members`' rows: one Mode when they share it (the cheaper path)."""
    if isinstance(mode, Mode):
        return mode
    assert exact is not None
    return row_modes(np.repeat(exact[members], width))


def best_configurations(
    system: ServingSystem,
    workload: LengthDistribution,
    space: SearchSpace,
    modes: Sequence[Mode] = tuple(Mode),
) -> list[Configuration]:
    """`optimize_fixed_hardware`'s configuration in each of `modes` (a plan compares both),
    solved together: one pass of the optimiser over both modes' splits instead of one each;
    the same optima to the last bit (each mode's search moves as it would alone). The caller
    evaluates them, in one call with whatever else it evaluates."""
    count = len(modes)
    t, n_p, n_d = optimize_fixed_hardware_batch(
        system, workload, np.full(count, space.prfaas_instances), np.full(count, space.pd_instances),
        np.full(count, system.link_bandwidth_bytes_per_s), space.threshold_tokens, modes,
    )  # fmt: skip
    return [
        Configuration(space.prfaas_instances, int(n_p[i]), int(n_d[i]), float(t[i]))
        for i in range(count)
    ]


def optimize_fixed_hardware(
    system: ServingSystem,
    workload: LengthDistribution,
    space: SearchSpace,
    mode: Mode = Mode.PAPER,
) -> Evaluation:
    """Maximise Λ_max over t and the integer split N_p/N_d for fixed instance counts."""
    (configuration,) = best_configurations(system, workload, space, (mode,))
    return evaluate(system, workload, configuration, mode)
