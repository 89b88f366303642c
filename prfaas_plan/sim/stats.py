"""Results of a simulation and the statistics that make them from the per-request event times
(reference prfaas-model.md §2). Units: seconds, requests/s, bytes.

Metrics cover the window [warmup_s, horizon_s]: the requests still in the system at the horizon
are counted by stage in `RequestCounts`; TTFT and wait statistics cover the requests that
arrived in the window, each with its full TTFT even if that ends after the horizon (as if the
system kept serving once arrivals stop). Pool utilisation = busy server-time / server-time in
the window; queue lengths are exact time averages (a sweep over queue entries and exits).
"""

import math
from dataclasses import dataclass, field

import numpy as np

from prfaas_plan.analytic.capacity import Configuration, ServingSystem
from prfaas_plan.analytic.ttft import PERCENTILES
from prfaas_plan.sim.policies import Policy, Role, RoleChange
from prfaas_plan.sim.queues import BandwidthTrace


@dataclass(frozen=True)
class LatencyStats:
    """Summary of a set of durations (seconds); nan when `requests` is 0."""

    requests: int
    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float
    max_s: float


@dataclass(frozen=True)
class PoolStats:
    """One FIFO pool (PrfaaS prefill, PD prefill, or the decode slots) over the window."""

    servers: int  # instances, or decode slots (N_d · BS_max), at the start
    requests: int  # requests that reached the pool within the window
    utilization: float  # busy server-time / server-time the pool had in the window
    mean_queue_length: float  # time-average number waiting (not in service)
    max_queue_length: int
    queued_at_horizon: int  # waiting (not in service) at the horizon
    wait: LatencyStats  # queueing delay before service, for `requests`


@dataclass(frozen=True)
class LinkStats:
    """The inter-cluster link over the window."""

    transfers: int  # transfers that started within the window
    utilization: float  # bytes moved / bytes the link could move (integral of B(t))
    moved_bytes: float
    mean_transfers_in_flight: float  # time average, fixed latency excluded
    max_transfers_in_flight: int
    in_flight_at_horizon: int  # transfers started, KVCache not yet arrived (latency included)
    transfer: LatencyStats  # prefill end -> KVCache arrived (sharing + fixed latency)


@dataclass(frozen=True)
class RequestCounts:
    """Where every request is at the horizon; the fields add up to `total`."""

    total: int
    not_arrived: int  # arrive after the horizon
    queued_prefill: int
    in_prefill: int
    in_transfer: int
    queued_decode: int
    in_decode: int
    completed: int

    @property
    def in_system(self) -> int:
        return (
            self.queued_prefill
            + self.in_prefill
            + self.in_transfer
            + self.queued_decode
            + self.in_decode
        )


@dataclass(frozen=True, eq=False)
class RequestTimeline:
    """Per-request event times (seconds, arrays in input order); nan where not applicable."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    prefill_tokens: np.ndarray  # tokens prefilled (input minus a reused cached prefix)
    offloaded: np.ndarray  # bool: prefilled on PrfaaS
    threshold_tokens: np.ndarray  # the threshold in force at the request's arrival
    prefill_ready_s: np.ndarray  # joins its prefill queue (after any prefix move)
    prefill_start_s: np.ndarray
    prefill_end_s: np.ndarray
    link_start_s: np.ndarray  # starts crossing the shared link (nan if it does not)
    link_finish_s: np.ndarray  # last byte sent, fixed latency excluded
    transfer_end_s: np.ndarray  # KVCache arrived at PD (offloaded requests, else nan)
    decode_start_s: np.ndarray
    decode_end_s: np.ndarray

    @property
    def first_token_s(self) -> np.ndarray:
        return np.where(self.offloaded, self.transfer_end_s, self.prefill_end_s)

    @property
    def ttft_s(self) -> np.ndarray:
        return np.asarray(self.first_token_s - self.arrival_s)


@dataclass(frozen=True)
class RoleStats:
    """PD roles over the measurement window (constant unless the policy re-balances)."""

    conversions: int  # instances converted, over the whole run (decisions stop at the last arrival)
    to_decode: int
    to_prefill: int
    pd_prefill_instances_mean: float  # time average over the window
    pd_decode_instances_mean: float
    converting_instances_mean: float  # serving neither role
    changes: tuple[RoleChange, ...]


def role_stats(
    c: Configuration, changes: tuple[RoleChange, ...], t0: float, t1: float
) -> RoleStats:
    """Time-average instance counts over [t0, t1]: an instance leaves its role at `left_s` and
    counts in the other from `joined_s`."""
    window = t1 - t0

    def share(since_s: float) -> float:  # fraction of the window from since_s on
        return min(max(t1 - since_s, 0.0), window) / window

    prefill, decode = float(c.pd_prefill_instances), float(c.pd_decode_instances)
    for change in changes:
        if change.to_role is Role.PD_PREFILL:
            decode -= share(change.left_s)
            prefill += share(change.joined_s)
        else:
            prefill -= share(change.left_s)
            decode += share(change.joined_s)
    to_decode = sum(change.to_role is Role.PD_DECODE for change in changes)
    return RoleStats(
        conversions=len(changes),
        to_decode=to_decode,
        to_prefill=len(changes) - to_decode,
        pd_prefill_instances_mean=prefill,
        pd_decode_instances_mean=decode,
        converting_instances_mean=c.pd_instances - prefill - decode,
        changes=changes,
    )


def static_role_stats(c: Configuration) -> RoleStats:
    return RoleStats(0, 0, 0, float(c.pd_prefill_instances), float(c.pd_decode_instances), 0.0, ())


@dataclass(frozen=True)
class SimulationResult:
    configuration: Configuration
    policy: Policy
    warmup_s: float
    horizon_s: float
    offered_rate_rps: float  # arrivals in the window / window length
    throughput_rps: float  # decode completions in the window / window length
    offload_fraction: float  # share of the window's arrivals prefilled on PrfaaS
    ttft: LatencyStats
    ttft_local: LatencyStats
    ttft_offloaded: LatencyStats
    prfaas_prefill: PoolStats
    pd_prefill: PoolStats
    pd_decode: PoolStats
    link: LinkStats
    counts: RequestCounts
    threshold_mean_tokens: float  # mean threshold seen by the window's arrivals
    threshold_max_tokens: float
    threshold_changes: int
    roles: RoleStats  # PD-P / PD-D instances over time and conversions (RoleRebalancing)
    timeline: RequestTimeline = field(repr=False, compare=False)


def _latency_stats(values: np.ndarray) -> LatencyStats:
    if values.size == 0:
        return LatencyStats(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    p50, p90, p99 = np.percentile(values, PERCENTILES)
    return LatencyStats(
        int(values.size),
        float(values.mean()),
        float(p50),
        float(p90),
        float(p99),
        float(values.max()),
    )


def _occupancy(begin_s: np.ndarray, end_s: np.ndarray, t0: float, t1: float) -> tuple[float, int]:
    """Time-average and maximum over [t0, t1) of the number of intervals [begin, end) that
    contain t (an exact sweep over the interval ends)."""
    keep = end_s > begin_s
    begin_s, end_s = begin_s[keep], end_s[keep]
    overlap = np.clip(np.minimum(end_s, t1) - np.maximum(begin_s, t0), 0.0, None)
    mean = float(overlap.sum() / (t1 - t0))
    initial = int(np.count_nonzero((begin_s <= t0) & (end_s > t0)))
    times = np.concatenate([begin_s, end_s])
    steps = np.concatenate([np.ones(begin_s.size, int), -np.ones(end_s.size, int)])
    order = np.lexsort((steps, times))  # at equal times ends (-1) before starts
    times, counts = times[order], np.cumsum(steps[order])
    inside = (times > t0) & (times < t1)
    peak = int(counts[inside].max()) if inside.any() else 0
    return mean, max(initial, peak)


def _pool_stats(
    arrive_s: np.ndarray,
    start_s: np.ndarray,
    end_s: np.ndarray,
    servers: int,
    t0: float,
    t1: float,
    mean_servers: float,
) -> PoolStats:
    in_window = (arrive_s >= t0) & (arrive_s <= t1)
    busy = np.clip(np.minimum(end_s, t1) - np.maximum(start_s, t0), 0.0, None).sum()
    mean_queue, max_queue = _occupancy(arrive_s, start_s, t0, t1)
    return PoolStats(
        servers=servers,
        requests=int(np.count_nonzero(in_window)),
        utilization=float(busy / (mean_servers * (t1 - t0))) if mean_servers else math.nan,
        mean_queue_length=mean_queue,
        max_queue_length=max_queue,
        queued_at_horizon=int(np.count_nonzero((arrive_s <= t1) & (start_s > t1))),
        wait=_latency_stats((start_s - arrive_s)[in_window]),
    )


def _busy_periods(start_s: np.ndarray, end_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of the intervals [start, end) as disjoint (begin, end) arrays."""
    if start_s.size == 0:
        return start_s, end_s
    order = np.argsort(start_s, kind="stable")
    s, e = start_s[order], np.maximum.accumulate(end_s[order])
    new = np.concatenate([[True], s[1:] > e[:-1]])
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:] - 1, [s.size - 1]])
    return s[first], e[last]


def _link_stats(
    start_s: np.ndarray,
    finish_s: np.ndarray,
    latency_s: float,
    bandwidth: BandwidthTrace,
    t0: float,
    t1: float,
) -> LinkStats:
    in_window = (start_s >= t0) & (start_s <= t1)
    begin, end = _busy_periods(start_s, finish_s)
    lo, hi = np.clip(begin, t0, t1), np.clip(end, t0, t1)
    moved = float(bandwidth.transferable_bytes(lo, hi).sum())
    capacity = float(bandwidth.transferable_bytes(t0, t1))
    mean_flight, max_flight = _occupancy(start_s, finish_s, t0, t1)
    done_s = finish_s + latency_s
    return LinkStats(
        transfers=int(np.count_nonzero(in_window)),
        utilization=moved / capacity if capacity > 0 else math.nan,
        moved_bytes=moved,
        mean_transfers_in_flight=mean_flight,
        max_transfers_in_flight=max_flight,
        in_flight_at_horizon=int(np.count_nonzero((start_s <= t1) & (done_s > t1))),
        transfer=_latency_stats((done_s - start_s)[in_window]),
    )


def _request_counts(tl: RequestTimeline, h: float) -> RequestCounts:
    """Where every request is at the horizon h."""
    first_token = tl.first_token_s
    return RequestCounts(
        total=int(tl.arrival_s.size),
        not_arrived=int(np.count_nonzero(tl.arrival_s > h)),
        queued_prefill=int(np.count_nonzero((tl.arrival_s <= h) & (tl.prefill_start_s > h))),
        in_prefill=int(np.count_nonzero((tl.prefill_start_s <= h) & (tl.prefill_end_s > h))),
        in_transfer=int(
            np.count_nonzero(tl.offloaded & (tl.prefill_end_s <= h) & (first_token > h))
        ),
        queued_decode=int(np.count_nonzero((first_token <= h) & (tl.decode_start_s > h))),
        in_decode=int(np.count_nonzero((tl.decode_start_s <= h) & (tl.decode_end_s > h))),
        completed=int(np.count_nonzero(tl.decode_end_s <= h)),
    )


def measure(
    system: ServingSystem,
    c: Configuration,
    policy: Policy,
    timeline: RequestTimeline,
    bandwidth: BandwidthTrace,
    latency_s: float,
    t0: float,
    t1: float,
    changes: int,
    roles: RoleStats,
) -> SimulationResult:
    """The result over the window [t0, t1] (module docstring)."""
    tl = timeline
    window = t1 - t0
    arrived = (tl.arrival_s >= t0) & (tl.arrival_s <= t1)
    ttft = tl.ttft_s
    first_token = tl.first_token_s
    local = ~tl.offloaded
    counts = _request_counts(tl, t1)
    completed_in_window = np.count_nonzero((tl.decode_end_s > t0) & (tl.decode_end_s <= t1))
    r = tl.offloaded
    crossing = np.isfinite(tl.link_start_s)
    slots = c.pd_decode_instances * system.decode.batch_size
    return SimulationResult(
        configuration=c,
        policy=policy,
        warmup_s=float(t0),
        horizon_s=float(t1),
        offered_rate_rps=float(np.count_nonzero(arrived) / window),
        throughput_rps=float(completed_in_window / window),
        offload_fraction=float(
            np.count_nonzero(arrived & r) / max(int(np.count_nonzero(arrived)), 1)
        ),
        ttft=_latency_stats(ttft[arrived]),
        ttft_local=_latency_stats(ttft[arrived & local]),
        ttft_offloaded=_latency_stats(ttft[arrived & r]),
        prfaas_prefill=_pool_stats(
            tl.prefill_ready_s[r],
            tl.prefill_start_s[r],
            tl.prefill_end_s[r],
            c.prfaas_instances,
            t0,
            t1,
            c.prfaas_instances,
        ),
        pd_prefill=_pool_stats(
            tl.prefill_ready_s[local],
            tl.prefill_start_s[local],
            tl.prefill_end_s[local],
            c.pd_prefill_instances,
            t0,
            t1,
            roles.pd_prefill_instances_mean,
        ),
        pd_decode=_pool_stats(
            first_token,
            tl.decode_start_s,
            tl.decode_end_s,
            slots,
            t0,
            t1,
            roles.pd_decode_instances_mean * system.decode.batch_size,
        ),
        link=_link_stats(
            tl.link_start_s[crossing], tl.link_finish_s[crossing], latency_s, bandwidth, t0, t1
        ),
        counts=counts,
        threshold_mean_tokens=float(tl.threshold_tokens[arrived].mean())
        if arrived.any()
        else math.nan,
        threshold_max_tokens=float(tl.threshold_tokens.max()),
        threshold_changes=int(changes),
        roles=roles,
        timeline=timeline,
    )
