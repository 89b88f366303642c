"""Unloaded time to first token (seconds) over the input-length distribution.

A request of length l routed locally (l <= t) waits only for its own prefill on the PD
cluster: TTFT(l) = T_pd(l). An offloaded request (l > t) is prefilled on PrfaaS and its whole
KVCache is then pushed over the link: TTFT(l) = T_prfaas(l) + S_kv(l) / B_out. No queueing, no
decode step: this is the paper's kind of TTFT, a lower bound on what users see under load.

The mean is exact (polynomial profiles against partial moments); percentiles come from the
distribution's mesh (4096 cells for continuous distributions, every value for observed ones).
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.analytic.capacity import ServingSystem
from prfaas_plan.analytic.length_distribution import LengthDistribution

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class TtftSummary:
    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    local_mean_s: float  # requests prefilled on the PD cluster (nan if none)
    offloaded_mean_s: float  # requests prefilled on PrfaaS, transfer included (nan if none)


def _weighted_percentiles(
    values: FloatArray,
    weights: FloatArray,
    percentiles: Sequence[float],
    cumulative_in_order: FloatArray | None = None,
) -> FloatArray:
    """The smallest value whose cumulative weight reaches each percentile. With
    `cumulative_in_order` (the normalised cumulative `weights` as given) and `values` already
    in order (non-decreasing: TTFT over sorted lengths, one route throughout, typically),
    the sort is skipped: a stable sort of sorted values is the identity, so the answer is
    the same to the last bit."""
    quantiles = np.asarray(percentiles) / 100.0
    if cumulative_in_order is not None and np.all(values[1:] >= values[:-1]):  # no nan either
        idx = np.searchsorted(cumulative_in_order, quantiles, side="left")
        return values[np.minimum(idx, values.size - 1)]
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    cumulative /= cumulative[-1]
    idx = np.searchsorted(cumulative, quantiles, side="left")
    return values[order[np.minimum(idx, values.size - 1)]]  # the sorted values' (no full copy)


def unloaded_ttft(
    system: ServingSystem, workload: LengthDistribution, threshold_tokens: float
) -> TtftSummary:
    """TTFT summary when requests longer than `threshold_tokens` go to PrfaaS."""
    return unloaded_ttfts(system, workload, [threshold_tokens])[0]


def unloaded_ttfts(
    system: ServingSystem,
    workload: LengthDistribution,
    thresholds_tokens: Sequence[float],
    links_bytes_per_s: Sequence[float] | None = None,
) -> list[TtftSummary]:
    """`unloaded_ttft` at each threshold (a plan and its baselines; `links_bytes_per_s`: each
    one's link, default the system's, for deployments of one system that differ in their link),
    the same numbers as one call each: the split at every threshold is one vectorised call, and
    each length's TTFT on either route is computed once for all of them (once per link)."""
    count = len(thresholds_tokens)
    links = np.asarray(
        [system.link_bandwidth_bytes_per_s] * count if links_bytes_per_s is None
        else links_bytes_per_s, float,
    )  # fmt: skip
    transfer_s_per_byte = 1.0 / links
    short, long = workload.split(np.asarray(thresholds_tokens, float))
    local_totals = system.pd_prefill_latency.expectation(short)
    offloaded_totals = (
        system.prfaas_prefill_latency.expectation(long)
        + system.kv_cache_size.expectation(long) * transfer_s_per_byte
    )
    lengths, weights = workload.mesh()
    prefill_remote, kv_bytes = system.prfaas_prefill_latency(lengths), system.kv_cache_size(lengths)
    remote_by_link: dict[float, FloatArray] = {}
    local = system.pd_prefill_latency(lengths)
    cumulative = np.cumsum(weights)
    cumulative /= cumulative[-1]
    summaries = []
    for i, threshold_tokens in enumerate(thresholds_tokens):
        local_total, offloaded_total = local_totals[i], offloaded_totals[i]
        short_mass, long_mass = short[0][i], long[0][i]
        with np.errstate(divide="ignore", invalid="ignore"):
            local_mean = float(local_total / short_mass) if short_mass > 0 else float("nan")
            offloaded_mean = float(offloaded_total / long_mass) if long_mass > 0 else float("nan")
        per_byte = float(transfer_s_per_byte[i])
        remote = remote_by_link.get(per_byte)
        if remote is None:
            remote = remote_by_link[per_byte] = prefill_remote + kv_bytes * per_byte
        ttft = np.where(lengths > threshold_tokens, remote, local)
        p50, p90, p99 = _weighted_percentiles(ttft, weights, PERCENTILES, cumulative)
        summaries.append(
            TtftSummary(
                mean_s=float((local_total + offloaded_total) / (short_mass + long_mass)),
                p50_s=float(p50),
                p90_s=float(p90),
                p99_s=float(p99),
                local_mean_s=local_mean,
                offloaded_mean_s=offloaded_mean,
            )
        )
    return summaries


def unloaded_percentile_by_threshold(
    system: ServingSystem,
    workload: LengthDistribution,
    thresholds_tokens: FloatArray,
    percentile: float,
    offloaded_extra_s: float = 0.0,
) -> FloatArray:
    """The unloaded TTFT `percentile` (s) at each threshold, as `unloaded_ttft`, an offloaded
    request also waiting `offloaded_extra_s` (e.g. the link's round trip)."""
    lengths, weights = workload.mesh()
    local = system.pd_prefill_latency(lengths)
    remote = (
        system.prfaas_prefill_latency(lengths)
        + system.kv_cache_size(lengths) / system.link_bandwidth_bytes_per_s
        + offloaded_extra_s
    )
    return np.array(
        [
            _weighted_percentiles(np.where(lengths > t, remote, local), weights, [percentile])[0]
            for t in np.asarray(thresholds_tokens, float)
        ]
    )
