"""Closed-form role throughputs and system throughput of a PrfaaS-PD deployment.

Units: requests/s for throughputs, seconds, bytes, bytes/s, tokens. Equations of the reference
(prfaas-model.md §4), with p = P(L > t):

    Θ_prfaas = min(N_prfaas / T_prfaas(long), B_out / S_kv(long))        (3)
    Θ_pd-p   = N_p / T_pd(short)                                          (4)
    Θ_pd-d   = N_d · BS_max / (T_decode · L_out)                          (5)
    Λ_max    = min(Θ_prfaas / p, Θ_pd-p / (1 − p), Θ_pd-d)               (6)

`Mode.PAPER` evaluates T and S at the representative lengths l_long = E[L | L > t] and
l_short = E[L | L <= t], as the paper does; `Mode.EXACT` uses the conditional mean service time
E[T(L) | L > t] (and E[S_kv(L) | L > t]), which is what a pool of servers actually sustains.
All functions broadcast over numpy arrays so the optimiser evaluates whole grids at once.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import NamedTuple, TypeVar

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, BoolArray, FloatArray, IntArray
from prfaas_plan.analytic.decode_point import DecodePoint
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.log_normal_rows import LogNormalRows
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.choices import Mode

# what the model splits at a threshold: one length distribution for every element, or one per
# row of a batch (analytic/log_normal_rows.py, a sweep's scenarios of differing workloads)
Lengths = LengthDistribution | LogNormalRows


class Bound(StrEnum):
    """The capacity term that limits Λ_max."""

    PRFAAS_COMPUTE = "prfaas_compute"
    PRFAAS_LINK = "prfaas_link"
    PD_PREFILL = "pd_prefill"
    PD_DECODE = "pd_decode"


@dataclass(frozen=True)
class ServingSystem:
    """Per-instance performance of the three roles and the inter-cluster link."""

    prfaas_prefill_latency: FittedCurve  # T_prfaas(l), one PrfaaS instance, seconds
    pd_prefill_latency: FittedCurve  # T_pd(l), one PD instance, seconds
    kv_cache_size: FittedCurve  # S_kv(l), bytes
    decode: DecodePoint  # BS_max and T_decode on one PD instance at the SLO
    output_tokens: float  # L_out, mean output length
    link_bandwidth_bytes_per_s: float  # B_out

    @property
    def decode_rps_per_instance(self) -> float:
        """BS_max / (T_decode · L_out): requests/s one decode instance completes."""
        return self.decode.batch_size / (self.decode.step_latency_s * self.output_tokens)


@dataclass(frozen=True)
class Configuration:
    prfaas_instances: int
    pd_prefill_instances: int
    pd_decode_instances: int
    threshold_tokens: float  # requests with L > threshold are prefilled on PrfaaS

    @property
    def pd_instances(self) -> int:
        return self.pd_prefill_instances + self.pd_decode_instances


class Rates(NamedTuple):
    """Vectorised capacity terms (arrays broadcast over thresholds and instance counts)."""

    offload_fraction: FloatArray  # p
    long_mean_tokens: FloatArray  # l_long (nan when p = 0)
    short_mean_tokens: FloatArray  # l_short (nan when p = 1)
    prfaas_service_time_s: FloatArray
    pd_prefill_service_time_s: FloatArray
    long_kv_cache_bytes: FloatArray  # S_kv used for the link term
    prfaas_compute_rps: FloatArray
    prfaas_link_rps: FloatArray
    pd_prefill_rps: FloatArray
    pd_decode_rps: FloatArray
    # system throughput each term allows once divided by the share of requests it serves
    limits_rps: FloatArray  # stacked in Bound order, shape (4, ...)

    @property
    def prfaas_rps(self) -> FloatArray:
        return np.minimum(self.prfaas_compute_rps, self.prfaas_link_rps)

    @property
    def system_rps(self) -> FloatArray:
        lowest: FloatArray = self.limits_rps.min(axis=0)
        return lowest


# the least share of requests a role serves: a subnormal share (below the smallest normal
# double) keeps no precision in its moments (a mass of 5e-324 has a first moment of 0, a mean
# length of 0), so a role given one serves nobody, as at a share of 0
LEAST_SHARE = float(np.finfo(float).tiny)


def _per_share(capacity_rps: FloatArray, share: FloatArray) -> FloatArray:
    """capacity / share, with capacity / 0 = inf (a role that serves nobody never binds, nor
    one whose share is below LEAST_SHARE), and inf where a tiny share overflows the quotient.
    Called under np.errstate(divide="ignore", invalid="ignore")."""
    serves = share >= LEAST_SHARE
    with np.errstate(over="ignore"):
        limit: FloatArray = np.where(serves, capacity_rps / np.where(serves, share, 1.0), np.inf)
    return limit


def _service_times(
    curves: tuple[FittedCurve, ...], moments: FloatArray, mode: Mode | BoolArray
) -> tuple[FloatArray, list[FloatArray]]:
    """The mean length of the requests described by `moments` and the mean value of each of
    `curves` over them (service time, KV size), nan where there are none: at the mean length
    (Mode.PAPER) or the conditional mean E[y(L) | A] (Mode.EXACT); `mode` an array: per
    element, True where EXACT. Called under np.errstate(divide="ignore", invalid="ignore")."""
    m0 = moments[0]
    serves = m0 >= LEAST_SHARE
    mean_tokens = moments[1] / m0
    if mode is Mode.PAPER:
        values = [curve(mean_tokens) for curve in curves]
    elif mode is Mode.EXACT:
        values = [curve.expectation(moments) / m0 for curve in curves]
    else:
        values = [
            np.where(mode, curve.expectation(moments) / m0, curve(mean_tokens)) for curve in curves
        ]
    return np.where(serves, mean_tokens, np.nan), [np.where(serves, v, np.nan) for v in values]


def row_modes(exact: BoolArray) -> Mode | BoolArray:
    """The `mode` argument of `rates` for rows whose modes are `exact` (True where Mode.EXACT):
    one Mode when every row shares it (the cheaper path), else the flags."""
    if exact.all():
        return Mode.EXACT
    return exact if exact.any() else Mode.PAPER


class _Prefill(NamedTuple):
    """What both prefill roles and the link give at a threshold (see `rates`)."""

    short: FloatArray  # partial moments of L <= t
    long: FloatArray  # partial moments of L > t
    long_mean_tokens: FloatArray
    short_mean_tokens: FloatArray
    prfaas_service_time_s: FloatArray
    pd_prefill_service_time_s: FloatArray
    long_kv_cache_bytes: FloatArray
    prfaas_compute_rps: FloatArray
    prfaas_link_rps: FloatArray

    def prfaas_limit_rps(self) -> FloatArray:
        """Θ_prfaas / p: the least of the compute and link terms, each over the offloaded share
        (called under np.errstate(divide="ignore", invalid="ignore"))."""
        p = self.long[0]
        limit: FloatArray = np.minimum(
            _per_share(self.prfaas_compute_rps, p), _per_share(self.prfaas_link_rps, p)
        )
        return limit

    def pd_prefill_rps(self, pd_prefill_instances: ArrayLike) -> FloatArray:
        """Θ_pd-p of `pd_prefill_instances` PD prefill instances (nan where none is short)."""
        rps: FloatArray = np.asarray(pd_prefill_instances, float) / self.pd_prefill_service_time_s
        return rps


def _prefill(
    system: ServingSystem,
    workload: Lengths,
    threshold_tokens: ArrayLike,
    prfaas_instances: ArrayLike,
    mode: Mode | BoolArray,
    link_bandwidth_bytes_per_s: ArrayLike | None,
) -> _Prefill:
    """Both sides of the threshold, up to the PD prefill instances (`_Prefill.pd_prefill_rps`:
    the only term that depends on the PD split)."""
    short, long = workload.split(threshold_tokens)
    with np.errstate(divide="ignore", invalid="ignore"):  # nan where a role serves nobody
        # S_kv is affine, so E[S_kv(L) | L > t] = S_kv(l_long): both modes agree on the link term.
        l_long, (t_long, s_long) = _service_times(
            (system.prfaas_prefill_latency, system.kv_cache_size), long, mode
        )
        l_short, (t_short,) = _service_times((system.pd_prefill_latency,), short, mode)
    # nan where a role serves nobody (p = 0 or p = 1): its capacity is then undefined
    compute = np.asarray(prfaas_instances, float) / t_long
    bandwidth = (
        system.link_bandwidth_bytes_per_s
        if link_bandwidth_bytes_per_s is None
        else link_bandwidth_bytes_per_s
    )
    link = np.asarray(bandwidth, float) / s_long
    return _Prefill(short, long, l_long, l_short, t_long, t_short, s_long, compute, link)


def rates(
    system: ServingSystem,
    workload: Lengths,
    threshold_tokens: ArrayLike,
    prfaas_instances: ArrayLike,
    pd_prefill_instances: ArrayLike,
    pd_decode_instances: ArrayLike,
    mode: Mode | BoolArray,
    link_bandwidth_bytes_per_s: ArrayLike | None = None,
    decode_rps_per_instance: float | FloatArray | None = None,
) -> Rates:
    """All capacity terms of equations (3)-(6), broadcast over the inputs; `link_bandwidth_bytes_per_s`
    and `decode_rps_per_instance` (default: the system's) may be arrays too, for many
    deployments of one system at once (whose workloads, and so decode points, may differ:
    `workload` a LogNormalRows), and so may `mode` (True where Mode.EXACT: both modes' rows
    in one call).
    The optimiser calls this in its inner loop on arrays of a few dozen elements, where each
    numpy call's fixed cost is the cost: hence one call per quantity, no more."""
    r = _prefill(
        system, workload, threshold_tokens, prfaas_instances, mode, link_bandwidth_bytes_per_s
    )
    pd_prefill = r.pd_prefill_rps(pd_prefill_instances)
    p = r.long[0]
    per_instance = (
        system.decode_rps_per_instance
        if decode_rps_per_instance is None
        else decode_rps_per_instance
    )
    decode: FloatArray = np.asarray(pd_decode_instances, float) * per_instance
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = (
            _per_share(r.prfaas_compute_rps, p),
            _per_share(r.prfaas_link_rps, p),
            _per_share(pd_prefill, r.short[0]),
            decode,
        )
    limits = np.empty((len(terms), *np.broadcast_shapes(*(term.shape for term in terms))))
    for row, term in enumerate(terms):
        limits[row] = term
    return Rates(
        offload_fraction=p,
        long_mean_tokens=r.long_mean_tokens,
        short_mean_tokens=r.short_mean_tokens,
        prfaas_service_time_s=r.prfaas_service_time_s,
        pd_prefill_service_time_s=r.pd_prefill_service_time_s,
        long_kv_cache_bytes=r.long_kv_cache_bytes,
        prfaas_compute_rps=r.prfaas_compute_rps,
        prfaas_link_rps=r.prfaas_link_rps,
        pd_prefill_rps=pd_prefill,
        pd_decode_rps=decode,
        limits_rps=limits,
    )


def prefill_limits(
    system: ServingSystem,
    workload: Lengths,
    threshold_tokens: ArrayLike,
    prfaas_instances: ArrayLike,
    pd_prefill_instances: ArrayLike,
    mode: Mode | BoolArray,
    link_bandwidth_bytes_per_s: ArrayLike | None = None,
) -> tuple[FloatArray, FloatArray]:
    """The two terms the threshold trades, Θ_prfaas/p and Θ_pd-p/(1 − p), as `rates` computes
    them (the same numbers) without the rest: the optimiser's root search calls only this."""
    r = _prefill(
        system, workload, threshold_tokens, prfaas_instances, mode, link_bandwidth_bytes_per_s
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        prfaas = r.prfaas_limit_rps()
        return prfaas, _per_share(r.pd_prefill_rps(pd_prefill_instances), r.short[0])


def prefill_limits_of_splits(
    system: ServingSystem,
    workload: Lengths,
    threshold_tokens: ArrayLike,
    prfaas_instances: ArrayLike,
    pd_prefill_instances: IntArray,
    mode: Mode | BoolArray,
    link_bandwidth_bytes_per_s: ArrayLike,
    splits: int,
) -> tuple[FloatArray, FloatArray]:
    """`prefill_limits` of deployments of `splits` consecutive rows each (the optimiser's PD
    splits), a deployment's rows differing in their PD prefill instances alone: every argument
    given per deployment (a row each, broadcast against the row of thresholds) but
    `pd_prefill_instances`, a column of one per row. The split of the workload, the service
    times and the PrfaaS term are computed once per deployment, not once per split: each
    row's terms are the same numbers as `prefill_limits` on the rows (the same arithmetic on
    the same numbers, element by element)."""
    r = _prefill(
        system, workload, threshold_tokens, prfaas_instances, mode, link_bandwidth_bytes_per_s
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        prfaas = r.prfaas_limit_rps()
        shape = prfaas.shape  # deployments x thresholds: every argument broadcast

        def each_split(per_deployment: FloatArray) -> FloatArray:
            spread: FloatArray = np.repeat(np.broadcast_to(per_deployment, shape), splits, axis=0)
            return spread

        pd_prefill = np.asarray(pd_prefill_instances, float) / each_split(
            r.pd_prefill_service_time_s
        )
        return each_split(prfaas), _per_share(pd_prefill, each_split(r.short[0]))


@dataclass(frozen=True)
class RoleThroughput:
    """Θ per role in requests/s (what each role can complete, not what it is offered)."""

    prfaas_rps: float  # nan when nothing is offloaded (p = 0)
    prfaas_compute_rps: float
    prfaas_link_rps: float
    pd_prefill_rps: float  # nan when everything is offloaded (p = 1)
    pd_decode_rps: float


@dataclass(frozen=True)
class Evaluation:
    """One configuration evaluated by the closed-form model."""

    configuration: Configuration
    mode: Mode
    offload_fraction: float  # p = P(L > t)
    long_mean_tokens: float  # l_long, nan if nothing is offloaded
    short_mean_tokens: float  # l_short, nan if everything is offloaded
    prfaas_service_time_s: float
    pd_prefill_service_time_s: float
    throughput: RoleThroughput
    system_throughput_rps: float  # Λ_max
    bounds: tuple[Bound, ...]  # every term within 1e-6 of Λ_max, tightest first
    kv_egress_bytes_per_s: float  # KV crossing the link at Λ_max: Λ · p · E[S_kv | L > t]
    link_bandwidth_bytes_per_s: float

    @property
    def link_utilization(self) -> float:
        return self.kv_egress_bytes_per_s / self.link_bandwidth_bytes_per_s


BOUND_ORDER = (Bound.PRFAAS_COMPUTE, Bound.PRFAAS_LINK, Bound.PD_PREFILL, Bound.PD_DECODE)
BOUND_TOLERANCE = 1e-6
# binding terms are ordered by their distance above Λ_max rounded to this grid (relative), then
# in BOUND_ORDER: at a balance point two terms agree to the last bits, and which of them comes
# out a rounding error lower differs between machines (numpy's log and exp differ by CPU in the
# last bit). The term equal to Λ_max and those within half a step of it always tie; two terms
# either side of a half step (~5e-10 above Λ_max) would still sort by value
BOUND_TIE_RTOL = 1e-9


_Rates = TypeVar("_Rates", float, FloatArray)


def binding_bound(system_rps: _Rates) -> _Rates:
    """The largest term that binds at Λ_max `system_rps` (a number, or an array of them):
    within BOUND_TOLERANCE of it (and 1e-300 above, so that Λ_max 0 binds its zero terms)."""
    return system_rps * (1 + BOUND_TOLERANCE) + 1e-300


def binding_terms(limits: Sequence[float], system_rps: float) -> tuple[Bound, ...]:
    """The terms within BOUND_TOLERANCE of Λ_max, tightest first (ties on BOUND_TIE_RTOL's
    grid in BOUND_ORDER)."""
    bound = binding_bound(system_rps)
    within = [k for k, limit in enumerate(limits) if limit <= bound]
    if len(within) > 1:  # most evaluations have one binding term: nothing to order
        if 0 < system_rps < np.inf:
            within.sort(
                key=lambda k: (round(float(limits[k] / system_rps - 1) / BOUND_TIE_RTOL), k)
            )
        else:  # Λ_max 0 or inf: the terms equal to it, in BOUND_ORDER
            within.sort(key=lambda k: (limits[k], k))
    return _bounds(tuple(within))


@cache  # at most 65: the orders of any of the four terms
def _bounds(within: tuple[int, ...]) -> tuple[Bound, ...]:
    """The terms at indices `within`, one tuple for each order (a block's evaluations share a
    few)."""
    return tuple(BOUND_ORDER[k] for k in within)


def evaluate(
    system: ServingSystem,
    workload: LengthDistribution,
    configuration: Configuration,
    mode: Mode = Mode.PAPER,
) -> Evaluation:
    """Equations (3)-(6) for one configuration."""
    return evaluate_many(system, workload, [configuration], [mode])[0]


def evaluate_many(
    system: ServingSystem,
    workload: Lengths,
    configurations: Sequence[Configuration],
    modes: Sequence[Mode],
    links_bytes_per_s: Sequence[float] | None = None,
    decode_rps_per_instance: Sequence[float] | None = None,
) -> list[Evaluation]:
    """`evaluate` of each configuration in its mode (a plan, its baselines, the other mode's
    view of it), in one vectorised model call: the same numbers as one call each.
    `links_bytes_per_s` and `decode_rps_per_instance`: each configuration's (default: the
    system's), for deployments of one system that differ in their link or, `workload` being
    one distribution per configuration, in their workload (a sweep's batch)."""
    links = (
        np.full(len(configurations), system.link_bandwidth_bytes_per_s)
        if links_bytes_per_s is None
        else np.asarray(links_bytes_per_s, float)
    )
    r = rates(
        system,
        workload,
        np.array([c.threshold_tokens for c in configurations], float),
        np.array([c.prfaas_instances for c in configurations], float),
        np.array([c.pd_prefill_instances for c in configurations], float),
        np.array([c.pd_decode_instances for c in configurations], float),
        row_modes(np.array([m is Mode.EXACT for m in modes])),
        links,
        None if decode_rps_per_instance is None else np.asarray(decode_rps_per_instance, float),
    )
    count = len(configurations)

    def each(values: FloatArray) -> list[float]:  # one Python float per configuration
        numbers: list[float] = np.broadcast_to(values, (count,)).tolist()
        return numbers

    # each configuration's four terms, a contiguous row each: its least as `.min()` of the
    # row alone finds it (the same reduction; a nan or a signed zero included)
    by_configuration = np.ascontiguousarray(np.broadcast_to(r.limits_rps, (4, count)).T)
    least = by_configuration.min(axis=1)
    terms, lowest = by_configuration.tolist(), least.tolist()
    # most configurations have one binding term: found for all at once (`binding_terms`'
    # test, element by element), the others by `binding_terms` itself
    within = by_configuration <= binding_bound(least)[:, None]
    single = (within.sum(axis=1) == 1).tolist()
    term = within.argmax(axis=1).tolist()
    p_all, kv = each(r.offload_fraction), each(r.long_kv_cache_bytes)
    long_means, short_means = each(r.long_mean_tokens), each(r.short_mean_tokens)
    prfaas_times, pd_times = each(r.prfaas_service_time_s), each(r.pd_prefill_service_time_s)
    prfaas_rps, compute = each(r.prfaas_rps), each(r.prfaas_compute_rps)
    link_rps, pd_prefill = each(r.prfaas_link_rps), each(r.pd_prefill_rps)
    decode, link_list = each(r.pd_decode_rps), each(links)
    evaluations = []
    for i, (c, mode) in enumerate(zip(configurations, modes, strict=True)):
        system_rps, p = lowest[i], p_all[i]
        egress = system_rps * p * kv[i] if p > 0 and math.isfinite(system_rps) else 0.0
        evaluations.append(
            Evaluation(
                configuration=c,
                mode=mode,
                offload_fraction=p,
                long_mean_tokens=long_means[i],
                short_mean_tokens=short_means[i],
                prfaas_service_time_s=prfaas_times[i],
                pd_prefill_service_time_s=pd_times[i],
                throughput=RoleThroughput(
                    prfaas_rps=prfaas_rps[i],
                    prfaas_compute_rps=compute[i],
                    prfaas_link_rps=link_rps[i],
                    pd_prefill_rps=pd_prefill[i],
                    pd_decode_rps=decode[i],
                ),
                system_throughput_rps=system_rps,
                bounds=_bounds((term[i],)) if single[i] else binding_terms(terms[i], system_rps),
                kv_egress_bytes_per_s=egress,
                link_bandwidth_bytes_per_s=link_list[i],
            )
        )
    return evaluations
