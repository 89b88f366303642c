"""An independent brute-force oracle for `procure`, with a continuous routing threshold.

Test-only code. It shares nothing with solve/procure_milp.py (no threshold grid, no MILP, no
tie rule, no assumption that a cost or a capacity is monotone in a count or in t); it uses the
project's closed-form model (`rates`, `LengthDistribution.split`), which is not what it tests.
Units: req/s, $/h, bytes, tokens.

The model (procure's semantics). Sites j = 1..J, each with its own serving system (PrfaaS
prefill curve, link bandwidth), P_j $/instance-hour, F_j the link's fixed $/h (paid iff the
site has an instance), π_j $/GB (1e9 bytes) of link volume and at most U_j instances; a PD
cluster of at most N instances at P_pd $/instance-hour. At a threshold t in [0, ∞]
(0 = offload everything, ∞ = nothing), from `workload.split(t)` and `rates(system, workload, t,
1, 1, 1, mode)`: p(t) the offloaded share, s(t) the local share (the distribution's, not 1 − p),
a_j(t) site j's compute req/s per instance, b_j(t) its link's req/s, c(t) PD prefill req/s per
instance, S_j(t) the KV bytes of an offloaded request, θ the decode req/s per instance. A
deployment: integers 0 <= n_j <= U_j, n_p >= 0, n_d >= 1, n_p + n_d <= N, a threshold t, a rate
Λ and offloaded rates r_j >= 0 with Σ_j r_j = p Λ, r_j <= min(a_j n_j, b_j) (0 if n_j = 0),
s Λ <= c n_p, Λ <= θ n_d. Its cost ($/h) is
    P_pd (n_p + n_d) + Σ_j (P_j n_j + F_j [n_j > 0]) + Σ_j w_j r_j,   w_j = 3600 π_j S_j / 1e9,
the volume billed at the served Λ; given t and Λ the cheapest r fills the sites cheapest w_j
first, each up to its cap. `cheapest_for_target`: the least cost serving Λ = X. `most_within_budget`:
the largest Λ with cost <= B, then among the deployments reaching it (relative TIE_RTOL) the
cheapest.

The method. Every count vector is enumerated (numpy over vectors and thresholds). For a
discrete distribution (`threshold_candidates()`) every quantity is constant between two
distinct lengths, so evaluating at each distinct length, 0 and ∞ is exact. Otherwise t is
scanned at `scan_points` points spaced geometrically over [min_tokens, max_tokens] (plus 0 and
∞, which the model treats as min and max), and every place where the optimum of a count vector
can lie between two scan points is refined, in ln t:
- target mode, for each (site vector, n_p) (n_d only adds θ n_d >= X and its price): the edges
  of the feasible set {t: min(c n_p / s, Σ_j min(a_j n_j, b_j) / p) >= X} where feasibility
  changes between neighbours (bisection to adjacent doubles, the feasible end kept); the local
  minima of the volume cost among feasible points (golden section, infeasible = +inf); and
  feasible islands between two infeasible points (golden-section maximum of the capacity where
  it has a local maximum below X, then its edges by bisection and the cheapest point inside);
- budget mode, for each count vector: Λ*(t) = min(θ n_d, c n_p / s, Σ_j min(a_j n_j, b_j) / p,
  A(t) / p), A the offloaded rate the money left after the instances buys (cheapest volume
  first); every change of the binding term between neighbours is refined by bisection on which
  term binds (the crossing of a rising and a falling curve, each one found, not assumed
  unique), and every local maximum of Λ* by golden section (a crossing, a kink of one term or
  a smooth maximum). The tie rule is then the target mode at X = Λ_max (1 − TIE_RTOL).
Work is skipped only on bounds, never on an assumed shape of the optimum: a (site vector,
n_p) whose instance prices alone reach the best cost found (volume >= 0), a count vector whose
θ n_d cannot exceed the best Λ found (Λ <= θ n_d) or whose instances exceed the budget, and a
bracket between two scan points whose bounds cannot beat the best found. The bracket bounds
(`_bracket_terms`) take each per-threshold term (p, s, c, a_j, b_j, w_j) at the worse of the
bracket's two ends, valid because each term is monotone in t; that is checked on the scan
(up to rounding), and without it nothing is pruned. A test checks that pruning changes nothing.

Accuracy claim: the optimal value (cost, or Λ) to <= 1e-10 relative, provided no two local
extrema (or feasibility edges) of one count vector's curves in t lie within two scan spacings of
each other (0.34% of t at the default 2049 points over the case study's three decades): the
model's curves are smooth and low-order in t. Measured (tests/oracles/test_procure_brute_force.py):
<= 3e-13 against closed forms on a uniform workload (the target's edge sits at the feasibility
rtol), 0 (the same doubles) against a 4x denser scan and with pruning off, and never beaten by
a grid of 60,001 thresholds. Feasibility is capacity >= X (1 − rtol), rtol = FEASIBILITY_RTOL.

Cost, measured on a 2-core machine under load (CPU s): 2 sites, U_j <= 3, N <= 6 (<= 336 count
vectors) <= 0.2 s a mode; 3 sites, U_j = 5, N = 10 (11,880 count vectors) 0.1-0.5 s a target,
0.6-1.9 s a budget (it runs the target mode again for its tie rule).

Spaces for tests (end of the module): `oracle_space` (the case study's sites as procure builds
them), `grid_space` (an OracleSpace as procure's ProcureSpace on a threshold grid) and
`random_space` (small random spaces from the shipped case study), with `random_target` and
`random_budget`.
"""

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.arrays import BoolArray, FloatArray, IntArray
from prfaas_plan.analytic.capacity import ServingSystem, rates
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.log_normal import truncated_log_normal
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.pricing import Pricing
from prfaas_plan.inputs.scenario import Problem, open_problem
from prfaas_plan.solve.procure_space import ProcureSpace, SiteRates
from prfaas_plan.solve.search import milp_threshold_grid
from prfaas_plan.use_cases.procure_sites import procure_candidates

DEFAULT_SCAN_POINTS = 2049  # geometric points over [min_tokens, max_tokens], plus 0 and ∞
FEASIBILITY_RTOL = 1e-12  # a rate X is served when the capacity is >= X (1 − this)
TIE_RTOL = 1e-9  # budget mode: deployments within this of the largest Λ tie, the cheapest wins
_BISECTIONS = 64  # halvings of a ln t bracket of <= 0.7%: far below one double's spacing
_GOLDEN_STEPS = 90  # golden-section steps: 0.618^90 ~ 1e-19 of the bracket
_INVPHI = (math.sqrt(5.0) - 1.0) / 2.0
_CHUNK_ELEMENTS = 1 << 21
_BOUND_RTOL = 1e-9  # bracket bounds are widened by this before they prune (rounding)
_MONOTONE_RTOL = 1e-12  # a term's steps the wrong way along the scan that are rounding  # count vectors x thresholds evaluated per numpy pass


@dataclass(frozen=True)
class OracleSite:
    """One candidate PrfaaS site: its serving system (prefill curve, link), prices, bound."""

    system: ServingSystem  # its prfaas_prefill_latency, kv_cache_size, link_bandwidth_bytes_per_s
    usd_per_instance_hour: float  # P_j
    fixed_usd_per_hour: float  # F_j, paid iff n_j >= 1
    usd_per_gb: float  # π_j, link volume, per 1e9 bytes
    max_instances: int  # U_j
    name: str = "site"

    def __post_init__(self) -> None:
        prices = (self.usd_per_instance_hour, self.fixed_usd_per_hour, self.usd_per_gb)
        if min(prices) < 0 or self.max_instances < 0:
            raise ValueError(f"{self.name}: prices and max_instances must be >= 0")


@dataclass(frozen=True)
class OracleSpace:
    pd_system: ServingSystem  # pd_prefill_latency, decode point, output tokens
    workload: LengthDistribution
    mode: Mode
    pd_usd_per_instance_hour: float  # P_pd
    max_pd_instances: int  # N: n_p + n_d <= N
    sites: tuple[OracleSite, ...]

    def __post_init__(self) -> None:
        if self.pd_usd_per_instance_hour < 0 or self.max_pd_instances < 1:
            raise ValueError("pd_usd_per_instance_hour must be >= 0 and max_pd_instances >= 1")


@dataclass(frozen=True)
class OraclePoint:
    """A deployment at a threshold, serving `served_rps` at `usd_per_hour`."""

    threshold_tokens: float
    site_instances: tuple[int, ...]
    site_rps: tuple[float, ...]  # r_j, offloaded req/s each site carries (cheapest volume first)
    pd_prefill_instances: int
    pd_decode_instances: int
    served_rps: float
    usd_per_hour: float


@dataclass(frozen=True)
class BudgetOptimum:
    """`max_rps`: the largest Λ within the budget. `point`: the cheapest deployment reaching
    max_rps (1 − TIE_RTOL), serving the most it can within the budget at its threshold (in
    [max_rps (1 − TIE_RTOL), max_rps]), costed at that rate."""

    max_rps: float
    point: OraclePoint


# ----------------------------------------------------------------------------- the model


class _Terms(NamedTuple):
    """Per-threshold terms of the model (site terms stacked on axis 0), nan-free."""

    offload: FloatArray  # p
    local: FloatArray  # s
    pd_prefill_rps: FloatArray  # c per instance (0 where s = 0)
    compute_rps: FloatArray  # a_j per instance (0 where p = 0)
    link_rps: FloatArray  # b_j (0 where p = 0)
    volume_usd: FloatArray  # w_j, $/h per offloaded req/s

    def shaped(self, shape: tuple[int, ...]) -> "_Terms":
        """Per-threshold terms reshaped to `shape`, site terms to (J, *shape)."""
        j = self.compute_rps.shape[0]
        one = [x.reshape(shape) for x in self[:3]]
        sites = [x.reshape((j, *shape)) for x in self[3:]]
        return _Terms(*one, *sites)

    def sliced(self, part: slice) -> "_Terms":
        """The terms at the thresholds `part` of the scan."""
        return _Terms(*(x[..., part] for x in self))


def _terms(space: OracleSpace, thresholds: FloatArray) -> _Terms:
    t = np.asarray(thresholds, float).ravel()
    short, long = space.workload.split(t)
    pd = rates(space.pd_system, space.workload, t, 1, 1, 1, space.mode)
    a, b, w = [], [], []
    for site in space.sites:
        r = rates(site.system, space.workload, t, 1, 1, 1, space.mode)
        a.append(np.nan_to_num(np.asarray(r.prfaas_compute_rps, float)))
        b.append(np.nan_to_num(np.asarray(r.prfaas_link_rps, float)))
        kv_gb = units.bytes_to_gb(np.nan_to_num(np.asarray(r.long_kv_cache_bytes, float)))
        w.append(units.per_s_to_per_hour(kv_gb * site.usd_per_gb))
    j = len(space.sites)
    return _Terms(
        np.asarray(long[0], float),
        np.asarray(short[0], float),
        np.nan_to_num(np.asarray(pd.pd_prefill_rps, float)),
        np.array(a, float).reshape(j, t.size),
        np.array(b, float).reshape(j, t.size),
        np.array(w, float).reshape(j, t.size),
    )


def _ratio(capacity: FloatArray, share: FloatArray) -> FloatArray:
    """capacity / share: the Λ a pool allows; inf where it serves nobody (share 0)."""
    serves = share > 0
    with np.errstate(invalid="ignore"):
        out: FloatArray = np.where(serves, capacity / np.where(serves, share, 1.0), np.inf)
    return out


def _site_caps(terms: _Terms, n: IntArray) -> FloatArray:
    """min(a_j n_j, b_j), 0 where n_j = 0 (site axis first, broadcast)."""
    caps: FloatArray = np.where(n > 0, np.minimum(terms.compute_rps * n, terms.link_rps), 0.0)
    return caps


def _by_price(terms: _Terms, caps: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(w, caps) sorted cheapest volume first along the site axis (ties: site order)."""
    shape = np.broadcast_shapes(terms.volume_usd.shape, caps.shape)
    order = np.broadcast_to(np.argsort(terms.volume_usd, axis=0, kind="stable"), shape)
    w = np.take_along_axis(np.broadcast_to(terms.volume_usd, shape), order, 0)
    return w, np.take_along_axis(np.broadcast_to(caps, shape), order, 0)


def _fill_usd(w: FloatArray, caps: FloatArray, demand: FloatArray) -> FloatArray:
    """$/h of the offloaded `demand` filled cheapest first (w, caps sorted by `_by_price`)."""
    left = demand
    usd: FloatArray = np.zeros(np.broadcast_shapes(w.shape[1:], np.shape(demand)))
    for k in range(w.shape[0]):
        take = np.minimum(caps[k], left)
        usd = usd + w[k] * take
        left = left - take
    return usd


def _affordable(w: FloatArray, caps: FloatArray, money: FloatArray) -> FloatArray:
    """The most offloaded req/s `money` ($/h) pays the volume of, cheapest first, each site
    up to its cap (sorted by `_by_price`)."""
    total: FloatArray = np.zeros(np.broadcast_shapes(w.shape[1:], np.shape(money)))
    left = money
    for k in range(w.shape[0]):
        with np.errstate(divide="ignore", invalid="ignore"):
            paid = np.where(w[k] > 0, left / np.where(w[k] > 0, w[k], 1.0), np.inf)
        take = np.minimum(caps[k], paid)
        total = total + take
        with np.errstate(invalid="ignore"):  # inf − inf never: take is finite
            left = np.maximum(left - take * w[k], 0.0)
    return total


def _target_kernel(
    terms: _Terms, n: IntArray, n_p: IntArray, target_rps: float
) -> tuple[FloatArray, FloatArray]:
    """(min(c n_p / s, Σ_j min(a_j n_j, b_j) / p), volume $/h of p X): the prefill capacity
    and the volume cost of serving X, broadcast over counts and thresholds."""
    caps = _site_caps(terms, n)
    prefill = np.minimum(
        _ratio(caps.sum(axis=0), terms.offload), _ratio(terms.pd_prefill_rps * n_p, terms.local)
    )
    w, sorted_caps = _by_price(terms, caps)
    return prefill, _fill_usd(w, sorted_caps, terms.offload * target_rps)


def _budget_kernel(
    space: OracleSpace, terms: _Terms, n: IntArray, n_p: IntArray, n_d: IntArray, money: FloatArray
) -> FloatArray:
    """The four limits on Λ stacked on axis 0: θ n_d, c n_p / s, Σ_j min(a_j n_j, b_j) / p and
    A / p, A the offloaded req/s the money left after the instances pays the volume of."""
    caps = _site_caps(terms, n)
    w, sorted_caps = _by_price(terms, caps)
    limits = (
        space.pd_system.decode_rps_per_instance * n_d,
        _ratio(terms.pd_prefill_rps * n_p, terms.local),
        _ratio(caps.sum(axis=0), terms.offload),
        _ratio(_affordable(w, sorted_caps, money), terms.offload),
    )
    shape = np.broadcast_shapes(*(np.shape(x) for x in limits))
    return np.stack([np.broadcast_to(x, shape) for x in limits])


def _budget_scan(
    space: OracleSpace,
    terms: _Terms,
    counts: IntArray,
    n_p: IntArray,
    n_d: IntArray,
    money_by_total: FloatArray,
) -> FloatArray:
    """Λ* of site vectors `counts` (J, V, 1, 1) x PD pairs (n_p, n_d) (P,) x thresholds
    (`terms` shaped (1, 1, T)): shape (V, P, T). As `_budget_kernel` and `_served`, with the
    budget term computed once per total n_p + n_d (`money_by_total` (V, N): the money left
    after the instances, for n_p + n_d = 1..N) and gathered to the pairs."""
    caps = _site_caps(terms, counts)
    w, sorted_caps = _by_price(terms, caps)
    money = money_by_total[:, :, None]
    affordable = _ratio(_affordable(w, sorted_caps, money), terms.offload)
    # -inf where the instances alone exceed the budget; the offloading caps are site-only
    remote = np.where(
        money >= 0, np.minimum(_ratio(caps.sum(axis=0), terms.offload), affordable), -np.inf
    )
    local = np.minimum(
        space.pd_system.decode_rps_per_instance * n_d[None, :, None],
        _ratio(terms.pd_prefill_rps * n_p[None, :, None], terms.local),
    )
    served: FloatArray = np.minimum(local, remote[:, n_p + n_d - 1])
    return served


def _served(limits: FloatArray, money: FloatArray) -> FloatArray:
    """Λ* = the least limit; -inf where the instances alone exceed the budget."""
    lam: FloatArray = np.where(money >= 0, limits.min(axis=0), -np.inf)
    return lam


def _bracket_terms(terms: _Terms) -> _Terms:
    """Bounds of the terms inside each bracket [t_i, t_(i+1)] of a scan: the least p, s and w
    and the largest c, a and b of its two ends. Every term is monotone in t (p, s; and c, a,
    b, w are profiles at conditional means, which move one way with t), so these bound the
    values inside, and the kernels at them bound capacities (above) and costs (below)."""

    def low(x: FloatArray) -> FloatArray:
        return np.minimum(x[..., :-1], x[..., 1:])

    def high(x: FloatArray) -> FloatArray:
        return np.maximum(x[..., :-1], x[..., 1:])

    return _Terms(
        low(terms.offload), low(terms.local), high(terms.pd_prefill_rps),
        high(terms.compute_rps), high(terms.link_rps), low(terms.volume_usd),
    )  # fmt: skip


def _monotone(terms: _Terms) -> bool:
    """Every term monotone along the scan (where defined: c where s > 0, the site terms where
    p > 0), as `_bracket_terms` needs, up to rounding (steps the wrong way of <= 1e-12
    relative, far inside _BOUND_RTOL); checked, not assumed: without it nothing is pruned."""
    serves_local = (terms.local[:-1] > 0) & (terms.local[1:] > 0)
    serves_remote = (terms.offload[:-1] > 0) & (terms.offload[1:] > 0)
    rows = [(terms.offload, None), (terms.local, None), (terms.pd_prefill_rps, serves_local)]
    rows += [(x, serves_remote) for x in (*terms.compute_rps, *terms.link_rps, *terms.volume_usd)]
    for x, where in rows:
        step, size = np.diff(x), np.maximum(np.abs(x[:-1]), np.abs(x[1:]))
        if where is not None:
            step, size = step[where], size[where]
        noise = _MONOTONE_RTOL * size
        if not ((step >= -noise).all() or (step <= noise).all()):
            return False
    return True


# ----------------------------------------------------------------------- refinement tools


def _bisect(
    holds: Callable[[FloatArray], BoolArray], good_t: FloatArray, bad_t: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Shrink each [good, bad] bracket (in ln t) to adjacent doubles keeping `holds` at the
    good end (where it held at every evaluated point). Returns (good_t, bad_t)."""
    good_t, bad_t = good_t.astype(float), bad_t.astype(float)
    g, b = np.log(good_t), np.log(bad_t)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (g + b)
        t = np.exp(mid)
        ok = holds(t)
        g, good_t = np.where(ok, mid, g), np.where(ok, t, good_t)
        b, bad_t = np.where(ok, b, mid), np.where(ok, bad_t, t)
    return good_t, bad_t


def _golden_max(
    f: Callable[[FloatArray], FloatArray], lo_t: FloatArray, hi_t: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Golden-section search for the maximum of f on each [lo, hi] (in ln t), vectorised over
    brackets; returns the best point evaluated (t, f(t)) of each."""
    a, b = np.log(lo_t), np.log(hi_t)
    c, d = b - _INVPHI * (b - a), a + _INVPHI * (b - a)
    tc, td = np.exp(c), np.exp(d)
    fc, fd = f(tc), f(td)
    best_t, best_f = np.where(fc >= fd, tc, td), np.maximum(fc, fd)
    for _ in range(_GOLDEN_STEPS):
        left = fc >= fd  # the maximum is in [a, d]: d becomes c, a new c; else c becomes d
        a, b = np.where(left, a, c), np.where(left, d, b)
        x = np.where(left, b - _INVPHI * (b - a), a + _INVPHI * (b - a))
        tx = np.exp(x)
        fx = f(tx)
        c, d, fc, fd = (
            np.where(left, x, d),
            np.where(left, c, x),
            np.where(left, fx, fd),
            np.where(left, fc, fx),
        )
        better = fx > best_f
        best_t, best_f = np.where(better, tx, best_t), np.where(better, fx, best_f)
    return best_t, best_f


def _local_maxima(values: FloatArray) -> tuple[IntArray, IntArray]:
    """(row, column) of every point >= both neighbours along axis 1 and > one of them (a
    missing neighbour counts as -inf): peaks, plateau ends, rising or falling ends."""
    pad = np.full((values.shape[0], 1), -np.inf)
    left = np.concatenate([pad, values[:, :-1]], axis=1)
    right = np.concatenate([values[:, 1:], pad], axis=1)
    peak = (values >= left) & (values >= right) & ((values > left) | (values > right))
    rows, cols = np.nonzero(peak)
    return rows, cols


def _around(alive: BoolArray) -> BoolArray:
    """Per scan point, whether the bracket to its left or to its right is alive."""
    pad = np.zeros((alive.shape[0], 1), bool)
    both: BoolArray = np.concatenate([pad, alive], axis=1) | np.concatenate([alive, pad], axis=1)
    return both


def _neighbours(t: FloatArray, cols: IntArray) -> tuple[FloatArray, FloatArray]:
    """The bracket [t_(i−1), t_(i+1)] around each column i, clipped to the scan."""
    return t[np.maximum(cols - 1, 0)], t[np.minimum(cols + 1, t.size - 1)]


# -------------------------------------------------------------------------- thresholds


def scan_thresholds(
    workload: LengthDistribution, scan_points: int = DEFAULT_SCAN_POINTS
) -> tuple[FloatArray, slice | None]:
    """(thresholds, the slice of them refinement brackets may span, None: no refinement):
    0, every distinct length and ∞ for a discrete distribution (exact: the model is constant
    between them); else 0, `scan_points` geometric points over [min, max] and ∞."""
    candidates = workload.threshold_candidates()
    if candidates is not None:
        return np.unique(np.concatenate([[0.0], candidates, [np.inf]])), None
    lo = max(float(workload.min_tokens), float(workload.max_tokens) * 1e-12)
    inner = np.geomspace(lo, float(workload.max_tokens), scan_points)
    return np.concatenate([[0.0], inner, [np.inf]]), slice(1, 1 + scan_points)


def _thresholds(
    workload: LengthDistribution, thresholds: Sequence[float] | FloatArray | None, scan_points: int
) -> tuple[FloatArray, slice | None]:
    if thresholds is not None:  # a fixed grid: evaluated, not refined
        return np.unique(np.asarray(thresholds, float)), None
    return scan_thresholds(workload, scan_points)


# ------------------------------------------------------------------------ count vectors


def _site_vectors(space: OracleSpace) -> IntArray:
    """Every (n_1..n_J) in Π [0, U_j], shape (M, J)."""
    ranges = [range(s.max_instances + 1) for s in space.sites]
    vectors = np.array(list(itertools.product(*ranges)), dtype=np.int64)
    return vectors.reshape(-1, len(space.sites))


def _site_usd(space: OracleSpace, vectors: IntArray) -> FloatArray:
    """Σ_j (P_j n_j + F_j [n_j > 0]) of each site vector."""
    usd = np.zeros(vectors.shape[0])
    for j, s in enumerate(space.sites):
        usd += s.usd_per_instance_hour * vectors[:, j] + s.fixed_usd_per_hour * (vectors[:, j] > 0)
    return usd


def _pd_pairs(space: OracleSpace) -> tuple[IntArray, IntArray]:
    """Every (n_p, n_d) with n_p >= 0, n_d >= 1, n_p + n_d <= N."""
    big = space.max_pd_instances
    pairs = [(p, d) for p in range(big) for d in range(1, big - p + 1)]
    return np.array([p for p, _ in pairs]), np.array([d for _, d in pairs])


def _chunks(rows: int, per_row: int) -> list[slice]:
    step = max(1, _CHUNK_ELEMENTS // max(per_row, 1))
    return [slice(i, min(i + step, rows)) for i in range(0, rows, step)]


# ---------------------------------------------------------------------------- points


def capacity_rps(
    space: OracleSpace, threshold_tokens: float, site_instances: Sequence[int], n_p: int, n_d: int
) -> float:
    """Λ_max of fixed counts at t: min(θ n_d, c n_p / s, Σ_j min(a_j n_j, b_j) / p)."""
    terms = _terms(space, np.array([float(threshold_tokens)]))
    n = np.array(site_instances, dtype=np.int64).reshape(-1, 1)
    limits = _budget_kernel(space, terms, n, np.array([n_p]), np.array([n_d]), np.array([np.inf]))
    return float(limits[:3].min())


def served_within_budget(
    space: OracleSpace,
    threshold_tokens: float,
    site_instances: Sequence[int],
    n_p: int,
    n_d: int,
    budget_usd_per_hour: float,
) -> float:
    """The largest Λ these counts serve at t within the budget (-inf if the instances alone
    exceed it)."""
    terms = _terms(space, np.array([float(threshold_tokens)]))
    n = np.array(site_instances, dtype=np.int64).reshape(-1, 1)
    money = budget_usd_per_hour - float(_site_usd(space, n.T)[0])
    money -= space.pd_usd_per_instance_hour * (n_p + n_d)
    limits = _budget_kernel(space, terms, n, np.array([n_p]), np.array([n_d]), np.array([money]))
    return float(_served(limits, np.array([money]))[0])


def point_at(
    space: OracleSpace,
    threshold_tokens: float,
    site_instances: Sequence[int] | IntArray,
    n_p: int,
    n_d: int,
    served_rps: float,
) -> OraclePoint:
    """The deployment serving `served_rps` at t, its offloaded p Λ split cheapest volume first,
    and its cost (whatever its capacity: check that with `capacity_rps`)."""
    t = float(threshold_tokens)
    terms = _terms(space, np.array([t]))
    counts = np.array(site_instances, dtype=np.int64)
    caps = _site_caps(terms, counts.reshape(-1, 1))[:, 0]
    w = terms.volume_usd[:, 0]
    shares = np.zeros(len(space.sites))
    left = float(terms.offload[0]) * served_rps
    for j in np.argsort(w, kind="stable"):
        shares[j] = min(float(caps[j]), left)
        left -= shares[j]
    usd = float(_site_usd(space, counts.reshape(1, -1))[0])
    usd += space.pd_usd_per_instance_hour * (n_p + n_d) + float(w @ shares)
    return OraclePoint(
        t, tuple(int(c) for c in counts), tuple(float(r) for r in shares), int(n_p), int(n_d),
        float(served_rps), usd,
    )  # fmt: skip


# ------------------------------------------------------------------------- target mode


def cheapest_for_target(
    space: OracleSpace,
    target_rps: float,
    *,
    thresholds: Sequence[float] | FloatArray | None = None,
    scan_points: int = DEFAULT_SCAN_POINTS,
    rtol: float = FEASIBILITY_RTOL,
) -> OraclePoint | None:
    """The least-cost deployment serving `target_rps` over every count vector and every t
    (or only the given `thresholds`, unrefined: a grid brute force); None if none reaches it.
    Ties: the first count vector in enumeration order."""
    t, span = _thresholds(space.workload, thresholds, scan_points)
    x = float(target_rps)
    need = x * (1.0 - rtol)
    vectors = _site_vectors(space)
    big = space.max_pd_instances
    theta = space.pd_system.decode_rps_per_instance
    # n_d only adds θ n_d >= X and its price: for each n_p, the cheapest n_d that fits
    n_p_all = np.arange(big)
    n_d_all = np.arange(1, big + 1)
    fits = (n_p_all[:, None] + n_d_all[None, :] <= big) & (theta * n_d_all[None, :] >= need)
    pd_usd_all = np.where(
        fits, space.pd_usd_per_instance_hour * (n_p_all[:, None] + n_d_all), np.inf
    )
    pd_usd, n_d_best = pd_usd_all.min(axis=1), n_d_all[pd_usd_all.argmin(axis=1)]
    lower = _site_usd(space, vectors)[:, None] + pd_usd[None, :]  # (M, N): the volume is >= 0

    terms = _terms(space, t)
    volume = np.full(lower.shape, np.inf)  # the least volume $/h of each (site vector, n_p)
    at = np.zeros(lower.shape)
    scan = terms.shaped((1, 1, t.size))
    for rows in _chunks(vectors.shape[0], big * t.size):
        n = vectors[rows].T[:, :, None, None]
        prefill, usd = _target_kernel(scan, n, n_p_all[None, :, None], x)
        value = np.where(prefill >= need, usd, np.inf)
        volume[rows], at[rows] = value.min(axis=-1), t[value.argmin(axis=-1)]

    if span is not None:
        inner = terms.sliced(span)
        prune = _monotone(inner)
        upper = float(np.min(lower + volume))
        qm, qp = np.nonzero(np.isfinite(lower) & (lower < upper) & (volume > 0))
        for part in _chunks(qm.size, inner.offload.size * (len(space.sites) + 4)):
            m, p = qm[part], qp[part]
            better_usd, better_t = _refine_target(
                space, vectors[m], p, lower[m, p], upper if prune else None, inner, t[span], x,
                need,
            )  # fmt: skip
            better = better_usd < volume[m, p]
            volume[m[better], p[better]] = better_usd[better]
            at[m[better], p[better]] = better_t[better]
            upper = min(upper, float(np.min(lower[m, p] + volume[m, p], initial=np.inf)))

    total = lower + volume
    if not np.isfinite(total.min()):
        return None
    m0, p0 = (int(i) for i in np.unravel_index(int(np.argmin(total)), total.shape))
    return point_at(space, float(at[m0, p0]), vectors[m0], p0, int(n_d_best[p0]), x)


def _refine_target(
    space: OracleSpace,
    vectors: IntArray,
    n_p: IntArray,
    lower: FloatArray,
    upper: float | None,
    terms: _Terms,
    t: FloatArray,
    target_rps: float,
    need: float,
) -> tuple[FloatArray, FloatArray]:
    """The least volume $/h of each (site vector, n_p) over the feasible t found between the
    scan points `t` (edges, minima, islands; module docstring): (volume, t), inf where none.
    With `upper` (the best total cost found), only brackets whose bounds (`_bracket_terms`:
    the largest capacity, the least volume + `lower`, the instances' price) could beat it."""
    counts = vectors.T[:, :, None]
    prefill, usd = _target_kernel(terms.shaped((1, t.size)), counts, n_p[:, None], target_rps)
    feasible = prefill >= need
    cost = np.where(feasible, usd, np.inf)
    if upper is None:
        alive = np.ones((n_p.size, t.size - 1), bool)
    else:
        bounds = _bracket_terms(terms).shaped((1, t.size - 1))
        most, least = _target_kernel(bounds, counts, n_p[:, None], target_rps)
        alive = (most >= need * (1 - _BOUND_RTOL)) & (
            (lower[:, None] + least) * (1 - _BOUND_RTOL) < upper
        )
    around = _around(alive)
    best = np.full(n_p.size, np.inf)
    best_t = np.zeros(n_p.size)

    def at(rows: IntArray, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        return _target_kernel(_terms(space, x), vectors[rows].T, n_p[rows], target_rps)

    def priced(rows: IntArray) -> Callable[[FloatArray], FloatArray]:
        def f(x: FloatArray) -> FloatArray:
            capacity, volume = at(rows, x)
            return np.where(capacity >= need, -volume, -np.inf)

        return f

    def keep(rows: IntArray, x: FloatArray, volume: FloatArray) -> None:
        np.minimum.at(best, rows, volume)
        hit = volume == best[rows]  # a row's least (any one of equal values)
        best_t[rows[hit]] = x[hit]

    # edges of the feasible set, to the feasible end
    rows, cols = np.nonzero((feasible[:, :-1] != feasible[:, 1:]) & alive)
    if rows.size:
        inside = feasible[rows, cols]
        good = np.where(inside, t[cols], t[cols + 1])
        bad = np.where(inside, t[cols + 1], t[cols])
        edge, _ = _bisect(lambda x: at(rows, x)[0] >= need, good, bad)
        capacity, volume = at(rows, edge)
        keep(rows, edge, np.where(capacity >= need, volume, np.inf))
    # local minima of the volume among feasible points
    rows, cols = _local_maxima(-cost)
    inside = feasible[rows, cols] & around[rows, cols]
    rows, cols = rows[inside], cols[inside]
    if rows.size:
        lo, hi = _neighbours(t, cols)
        x, value = _golden_max(priced(rows), lo, hi)
        keep(rows, x, -value)
    # islands: a local maximum of the capacity below X between scan points may rise above it
    rows, cols = _local_maxima(prefill)
    outside = ~feasible[rows, cols] & around[rows, cols]
    rows, cols = rows[outside], cols[outside]
    if rows.size:
        lo, hi = _neighbours(t, cols)
        peak, top = _golden_max(lambda x: at(rows, x)[0], lo, hi)
        island = top >= need
        rows, peak, lo, hi = rows[island], peak[island], lo[island], hi[island]
        if rows.size:
            keep(rows, peak, at(rows, peak)[1])

            def holds(x: FloatArray) -> BoolArray:
                return at(rows, x)[0] >= need

            left, _ = _bisect(holds, peak, lo)
            right, _ = _bisect(holds, peak, hi)
            for x in (left, right):
                capacity, volume = at(rows, x)
                keep(rows, x, np.where(capacity >= need, volume, np.inf))
            x, value = _golden_max(priced(rows), left, right)
            keep(rows, x, -value)
    return best, best_t


# ------------------------------------------------------------------------- budget mode


def most_within_budget(
    space: OracleSpace,
    budget_usd_per_hour: float,
    *,
    thresholds: Sequence[float] | FloatArray | None = None,
    scan_points: int = DEFAULT_SCAN_POINTS,
    rtol: float = FEASIBILITY_RTOL,
) -> BudgetOptimum | None:
    """The largest Λ any deployment serves within `budget_usd_per_hour`, and the cheapest
    deployment reaching it (relative TIE_RTOL); None when the budget buys no deployment
    (P_pd: one decode instance, serving 0). `thresholds`: as in `cheapest_for_target`."""
    t, span = _thresholds(space.workload, thresholds, scan_points)
    budget = float(budget_usd_per_hour)
    vectors = _site_vectors(space)
    n_p, n_d = _pd_pairs(space)
    money = (
        budget - _site_usd(space, vectors)[:, None] - space.pd_usd_per_instance_hour * (n_p + n_d)
    )  # (M, P): what is left for the link volume
    if not (money >= 0).any():
        return None

    terms = _terms(space, t)
    lam = np.full(money.shape, -np.inf)  # the largest Λ* of each count vector
    at = np.zeros(money.shape)
    bound = np.full(money.shape, np.inf)  # an upper bound of Λ* between the scan points
    inner = terms.sliced(span) if span is not None else terms
    prune = span is not None and _monotone(inner)
    scan = terms.shaped((1, 1, t.size))
    brackets = _bracket_terms(inner).shaped((1, 1, inner.offload.size - 1)) if prune else None
    site_usd = _site_usd(space, vectors)
    # the money left depends on the PD instances only through n_p + n_d = 1..N
    by_total = (
        budget
        - site_usd[:, None]
        - space.pd_usd_per_instance_hour * np.arange(1, space.max_pd_instances + 1)
    )
    for rows in _chunks(vectors.shape[0], space.max_pd_instances * t.size * 2):
        counts = vectors[rows].T[:, :, None, None]
        served = _budget_scan(space, scan, counts, n_p, n_d, by_total[rows])
        where = served.argmax(axis=-1)
        lam[rows] = np.take_along_axis(served, where[..., None], axis=-1)[..., 0]
        at[rows] = t[where]
        if brackets is not None:
            most = _budget_scan(space, brackets, counts, n_p, n_d, by_total[rows])
            bound[rows] = most.max(axis=-1)

    if span is not None:
        best = float(lam.max())
        theta = space.pd_system.decode_rps_per_instance
        alive = (money >= 0) & (theta * n_d[None, :] > best) & (bound * (1 + _BOUND_RTOL) > best)
        vm, vp = np.nonzero(alive)
        for part in _chunks(vm.size, inner.offload.size * (len(space.sites) + 6)):
            m, p = vm[part], vp[part]
            better_lam, better_t = _refine_budget(
                space, vectors[m], n_p[p], n_d[p], money[m, p], best if prune else None, inner,
                t[span],
            )  # fmt: skip
            better = better_lam > lam[m, p]
            lam[m[better], p[better]] = better_lam[better]
            at[m[better], p[better]] = better_t[better]
            best = max(best, float(lam.max()))

    m0, p0 = (int(i) for i in np.unravel_index(int(np.argmax(lam)), lam.shape))
    lam_max = max(float(lam[m0, p0]), 0.0)
    reach = lam_max * (1.0 - TIE_RTOL)
    # the tie rule: the cheapest deployment reaching Λ_max (1 − TIE_RTOL), or the argmax itself
    candidates = [
        point_at(space, float(at[m0, p0]), vectors[m0], int(n_p[p0]), int(n_d[p0]), reach)
    ]
    cheapest = cheapest_for_target(
        space, reach, thresholds=thresholds, scan_points=scan_points, rtol=rtol
    )
    if cheapest is not None:
        candidates.insert(0, cheapest)
    chosen = min(candidates, key=lambda c: c.usd_per_hour)
    serves = served_within_budget(
        space, chosen.threshold_tokens, chosen.site_instances, chosen.pd_prefill_instances,
        chosen.pd_decode_instances, budget,
    )  # fmt: skip
    if serves > lam_max * (1 + 1e-12):  # the target search found more: the budget one missed it
        raise AssertionError(f"oracle inconsistency: {serves!r} req/s > Λ_max {lam_max!r}")
    point = point_at(
        space, chosen.threshold_tokens, chosen.site_instances, chosen.pd_prefill_instances,
        chosen.pd_decode_instances, min(max(serves, reach), lam_max),  # rounding: [reach, Λ_max]
    )  # fmt: skip
    return BudgetOptimum(lam_max, point)


def _refine_budget(
    space: OracleSpace,
    vectors: IntArray,
    n_p: IntArray,
    n_d: IntArray,
    money: FloatArray,
    best: float | None,
    terms: _Terms,
    t: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """The largest Λ* of each count vector found between the scan points `t`: crossings of
    the binding terms by bisection, local maxima by golden section: (Λ*, t). With `best` (the
    largest Λ found), only brackets whose bound (`_bracket_terms`) exceeds it."""
    counts, pd = vectors.T[:, :, None], (n_p[:, None], n_d[:, None])
    limits = _budget_kernel(space, terms.shaped((1, t.size)), counts, *pd, money[:, None])
    served = _served(limits, money[:, None])
    binding = limits.argmin(axis=0)
    if best is None:
        alive = np.ones((n_p.size, t.size - 1), bool)
    else:
        bounds = _bracket_terms(terms).shaped((1, t.size - 1))
        most = _served(_budget_kernel(space, bounds, counts, *pd, money[:, None]), money[:, None])
        alive = most * (1 + _BOUND_RTOL) > best
    around = _around(alive)
    top = np.full(n_p.size, -np.inf)
    top_t = np.zeros(n_p.size)

    def at(rows: IntArray, x: FloatArray) -> FloatArray:
        return _budget_kernel(
            space, _terms(space, x), vectors[rows].T, n_p[rows], n_d[rows], money[rows]
        )

    def keep(rows: IntArray, x: FloatArray, lam: FloatArray) -> None:
        np.maximum.at(top, rows, lam)
        hit = lam == top[rows]  # a row's largest (any one of equal values)
        top_t[rows[hit]] = x[hit]

    # the binding term changes between neighbours: bisect on which binds, keep both ends
    rows, cols = np.nonzero((binding[:, :-1] != binding[:, 1:]) & alive)
    if rows.size:
        first = binding[rows, cols]
        ends = _bisect(lambda x: at(rows, x).argmin(axis=0) == first, t[cols], t[cols + 1])
        for x in ends:
            keep(rows, x, _served(at(rows, x), money[rows]))
    # every local maximum of Λ*
    rows, cols = _local_maxima(served)
    inside = np.isfinite(served[rows, cols]) & around[rows, cols]
    rows, cols = rows[inside], cols[inside]
    if rows.size:
        lo, hi = _neighbours(t, cols)
        x, lam = _golden_max(lambda x: _served(at(rows, x), money[rows]), lo, hi)
        keep(rows, x, lam)
    return top, top_t


# ------------------------------------------------------------------------ spaces for tests


@functools.lru_cache(maxsize=1)
def _case() -> tuple[Catalog, Problem]:
    return Catalog.open(), open_problem()


def oracle_space(
    catalog: Catalog,
    problem: Problem,
    pricing: Pricing,
    *,
    max_instances_per_site: int | None = None,
    mode: Mode = Mode.PAPER,
) -> OracleSpace:
    """The candidate sites of `procure` for this problem (procure_candidates: systems, GPU
    and link prices, bounds), as an OracleSpace."""
    sites, space, systems = procure_candidates(
        catalog, problem, pricing, None, max_instances_per_site, mode
    )
    oracle_sites = tuple(
        OracleSite(
            system=system,
            usd_per_instance_hour=rated.usd_per_instance_hour,
            fixed_usd_per_hour=rated.fixed_usd_per_hour,
            usd_per_gb=catalog.link_offering(site.link_offering).usd_per_gb,
            max_instances=rated.max_instances,
            name=site.name,
        )
        for site, rated, system in zip(sites, space.sites, systems, strict=True)
    )
    return OracleSpace(
        problem.system, problem.workload, mode, space.pd_usd_per_instance_hour,
        space.max_pd_instances, oracle_sites,
    )  # fmt: skip


def grid_space(space: OracleSpace, thresholds: FloatArray | None = None) -> ProcureSpace:
    """`space` as procure_candidates builds its ProcureSpace: the rates of each role at each
    threshold of `thresholds` (default: procure's own grid, milp_threshold_grid)."""
    grid = milp_threshold_grid(space.workload) if thresholds is None else np.asarray(thresholds)
    workload, mode = space.workload, space.mode
    pd = rates(space.pd_system, workload, grid, 1, 1, 1, mode)
    sites = []
    for s in space.sites:
        r = rates(s.system, workload, grid, 1, 1, 1, mode)
        sites.append(SiteRates(
            name=s.name,
            compute_rps_per_instance=np.nan_to_num(np.asarray(r.prfaas_compute_rps, float)),
            link_rps=np.nan_to_num(np.asarray(r.prfaas_link_rps, float)),
            usd_per_instance_hour=s.usd_per_instance_hour,
            fixed_usd_per_hour=s.fixed_usd_per_hour,
            usd_per_offloaded_request=np.nan_to_num(
                units.bytes_to_gb(np.asarray(r.long_kv_cache_bytes, float))) * s.usd_per_gb,
            max_instances=s.max_instances,
        ))  # fmt: skip
    return ProcureSpace(
        thresholds_tokens=grid,
        offload_fraction=np.asarray(pd.offload_fraction, float),
        local_fraction=np.asarray(workload.split(grid)[0][0], float),
        pd_prefill_rps_per_instance=np.nan_to_num(np.asarray(pd.pd_prefill_rps, float)),
        decode_rps_per_instance=space.pd_system.decode_rps_per_instance,
        pd_usd_per_instance_hour=space.pd_usd_per_instance_hour,
        max_pd_instances=space.max_pd_instances,
        sites=tuple(sites),
    )


_GPU_USD_PER_GPU_HOUR = {"h200": (2.0, 5.0), "h20": (0.8, 2.0)}  # ranges drawn from


def random_space(
    rng: np.random.Generator,
    sites: int | None = None,
    mode: Mode | None = None,
    *,
    max_instances: int = 5,
    max_pd_instances: int = 10,
) -> OracleSpace:
    """A small random space from the shipped case study: 1-3 sites (or `sites`), each an H200
    or H20 at a random GPU price, a link of 5-200 Gbps at 0-0.1 $/GB (0 a quarter of the
    time) and 0-30 $/h fixed (0 a third of the time), U_j in 0..max_instances; the PD price
    varied, N in 2..max_pd_instances; a third of the time the workload's μ/σ too; `mode`
    PAPER or EXACT (random when None)."""
    catalog, problem = _case()
    count = int(rng.integers(1, 4)) if sites is None else sites
    chosen = (Mode.PAPER, Mode.EXACT)[int(rng.integers(2))] if mode is None else mode
    workload: LengthDistribution = problem.workload
    if rng.random() < 1 / 3:
        workload = truncated_log_normal(
            float(rng.uniform(9.0, 10.8)), float(rng.uniform(0.5, 1.5)),
            workload.min_tokens, workload.max_tokens,
        )  # fmt: skip
    scenario = problem.scenario
    per_instance = scenario.prfaas_cluster.gpus_per_instance
    built = []
    for j in range(count):
        gpu = ("h200", "h20")[int(rng.integers(2))]
        curve = catalog.prefill_latency(scenario.model, gpu, per_instance, workload.max_tokens)
        gbps = float(np.exp(rng.uniform(math.log(5.0), math.log(200.0))))
        system = dataclasses.replace(
            problem.system,
            prfaas_prefill_latency=curve,
            link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(gbps),
        )
        built.append(OracleSite(
            system=system,
            usd_per_instance_hour=float(rng.uniform(*_GPU_USD_PER_GPU_HOUR[gpu])) * per_instance,
            fixed_usd_per_hour=0.0 if rng.random() < 1 / 3 else float(rng.uniform(0.0, 30.0)),
            usd_per_gb=0.0 if rng.random() < 0.25 else float(rng.uniform(0.0, 0.1)),
            max_instances=0 if rng.random() < 0.1 else int(rng.integers(1, max_instances + 1)),
            name=f"{gpu}-{gbps:.0f}g-{j}",
        ))  # fmt: skip
    pd_usd = (
        float(rng.uniform(*_GPU_USD_PER_GPU_HOUR["h20"])) * scenario.pd_cluster.gpus_per_instance
    )
    return OracleSpace(
        problem.system, workload, chosen, pd_usd, int(rng.integers(2, max_pd_instances + 1)),
        tuple(built),
    )  # fmt: skip


def random_target(rng: np.random.Generator, space: OracleSpace) -> float:
    """A target between 5% and 100% of what the PD cluster's decode could serve (θ (N − 1)):
    some reachable, some not."""
    theta = space.pd_system.decode_rps_per_instance
    return float(rng.uniform(0.05, 1.0)) * theta * (space.max_pd_instances - 1)


def random_budget(rng: np.random.Generator, space: OracleSpace) -> float:
    """A budget between 80% of two PD instances (serving nothing) and every instance bought."""
    full = space.pd_usd_per_instance_hour * space.max_pd_instances + sum(
        s.usd_per_instance_hour * s.max_instances + s.fixed_usd_per_hour for s in space.sites
    )
    low = 1.6 * space.pd_usd_per_instance_hour
    return float(rng.uniform(low, max(full, low)))
