"""Discrete-event simulation of a PrfaaS-PD deployment under a request stream (reference
prfaas-model.md §2 and §8). Units: seconds, tokens, bytes, bytes/s, requests/s.

What is simulated, per request (all of it exact for the model below, no fluid approximation):

1. Routing: input length l > t goes to the PrfaaS pool, else to the PD-P pool (`StaticThreshold`);
   or t moves with the load (`AdaptiveThreshold`, the paper's short-timescale scheduler); or l is
   the length not already in a cluster's prefix cache (`PrefixAwareThreshold`, sim_prefix.py,
   with the paper's scarce/abundant-bandwidth rules, for traces with prefix blocks); or PD
   instances also move between the PD-P and PD-D roles (`RoleRebalancing`, sim_rebalance.py,
   the paper's long-timescale scheduler, optionally with the adaptive threshold on top), which
   is simulated in epochs between its decisions, exactly as well.
2. Prefill: each pool is a FIFO queue with one server per instance; a request occupies one
   instance for that pool's profiled latency T(l) (`FittedCurve`).
3. KV transfer (offloaded requests only): when prefill ends, S_kv(l) bytes cross the shared
   inter-cluster link; the transfers in flight share its bandwidth B(t) equally (processor
   sharing, B piecewise constant via `BandwidthTrace`), and each transfer then takes a further
   fixed `link_latency_s` (propagation and connection set-up, which uses no bandwidth).
   Transfer starts after prefill, as in the unloaded TTFT of ttft.py (no layer-wise overlap).
4. Decode: N_d · BS_max slots in one FIFO queue; a request holds a slot for
   output_tokens · T_decode (the SLO step time at BS_max, a conservative constant step).

TTFT = first-token time - arrival, where the first token is ready when prefill ends (local) or
when the KVCache has arrived (offloaded): the unloaded TTFT of ttft.py plus queueing and link
sharing, so at very low load the two agree request by request. Waiting for a decode slot is
reported separately (`pd_decode.wait`), not in TTFT.

Every request is followed to completion (queues are unbounded, nothing is dropped). Metrics are
measured over the window [warmup_s, horizon_s] (horizon defaults to the last arrival): the
requests still in the system at the horizon are counted by stage in `RequestCounts`; TTFT and
wait statistics cover the requests that arrived in the window, each with its full TTFT even if
that ends after the horizon (as if the system kept serving once arrivals stop).

Cost: O(n log n) in the number of requests (in practice linear), dominated by one heap
operation per request and queue (pure Python) plus numpy sorting: about 2 µs per request on the
case study, 1M requests in ~2 s on one core (benchmarks/bench_simulate.py); about 3 µs with
`RoleRebalancing`, whose decode stage runs inside the epoch loop.

`sustainable_rate` bisects on the arrival rate for the highest rate the deployment sustains,
to compare with the closed-form Λ_max.
"""

import dataclasses
import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from prfaas_plan.analytic.capacity import Configuration, ServingSystem
from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.arrivals import PrefixBlocks
from prfaas_plan.sim.prefix import PrefixAwareThreshold, route_with_prefix_cache
from prfaas_plan.sim.queues import (
    BandwidthTrace,
    SharedLink,
    fifo_start_times,
)
from prfaas_plan.sim.rebalance import (
    RoleRebalancing,
    RoleStats,
    role_stats,
    run_rebalancing,
    static_role_stats,
)

Progress = Callable[[float], None]
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class StaticThreshold:
    """Route l > t to PrfaaS with the configuration's fixed threshold t."""


@dataclass(frozen=True)
class AdaptiveThreshold:
    """Short-timescale bandwidth- and queue-aware threshold (reference §8; the paper gives no
    numbers, so trigger, step and period are parameters).

    Every `period_s` the scheduler looks at the link utilisation over the last period (bytes
    moved / bytes the link could have moved) and at the waiting requests per instance of the
    PrfaaS and PD-P pools. The PrfaaS side is hot when the link utilisation reaches
    `link_trigger` or its queue reaches `queue_trigger` per instance; the PD-P side is hot when
    its queue reaches `queue_trigger` per instance. If only the PrfaaS side is hot, t is
    multiplied by `step_factor` (at most `max_threshold_tokens`): fewer, longer requests cross
    the link. If only the PD-P side is hot (raising t has moved too much load onto it), or both
    PrfaaS signals are at or below `release` times their triggers (the pressure has eased),
    t is divided by `step_factor`, never below the planned threshold. When both sides are hot
    the system is overloaded whatever t is: t is lowered (as above) if PD-P's queue pressure
    (queue per instance / `queue_trigger`) exceeds the PrfaaS side's (the larger of link
    utilisation / `link_trigger` and queue per instance / `queue_trigger`), so that raising t
    cannot leave PD-P swamped for as long as the link stays hot, and held otherwise.
    """

    period_s: float = 10.0
    link_trigger: float = 0.9
    queue_trigger: float = 2.0
    release: float = 0.5
    step_factor: float = 1.25
    max_threshold_tokens: float = math.inf

    def __post_init__(self):
        checks = (
            ("period_s", self.period_s, self.period_s > 0 and math.isfinite(self.period_s)),
            ("link_trigger", self.link_trigger, self.link_trigger > 0),
            ("queue_trigger", self.queue_trigger, self.queue_trigger > 0),
            ("release", self.release, 0 <= self.release <= 1),
            ("step_factor", self.step_factor, self.step_factor > 1),
            ("max_threshold_tokens", self.max_threshold_tokens, self.max_threshold_tokens > 0),
        )
        for name, value, ok in checks:
            if not ok:
                raise ConfigError(f"adaptive threshold: {name} out of range, got {value:g}")

    def next_threshold(
        self,
        threshold_tokens: float,
        base_tokens: float,
        link_utilization: float,
        prfaas_queue_per_instance: float,
        pd_queue_per_instance: float,
    ) -> float:
        """The threshold for the next period, by the rule of the class docstring (`base_tokens`
        is the floor: the planned threshold)."""
        remote_hot = (
            link_utilization >= self.link_trigger or prfaas_queue_per_instance >= self.queue_trigger
        )
        local_hot = pd_queue_per_instance >= self.queue_trigger
        calm = (
            link_utilization <= self.release * self.link_trigger
            and prfaas_queue_per_instance <= self.release * self.queue_trigger
        )
        if remote_hot and not local_hot:
            return min(threshold_tokens * self.step_factor, self.max_threshold_tokens)
        if calm or (local_hot and not remote_hot):
            return max(threshold_tokens / self.step_factor, base_tokens)
        if remote_hot and local_hot:
            remote = max(
                link_utilization / self.link_trigger,
                prfaas_queue_per_instance / self.queue_trigger,
            )
            if pd_queue_per_instance / self.queue_trigger > remote:
                return max(threshold_tokens / self.step_factor, base_tokens)
        return threshold_tokens


Policy = StaticThreshold | AdaptiveThreshold | PrefixAwareThreshold | RoleRebalancing


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
        return self.first_token_s - self.arrival_s


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


def _stage(progress: Progress | None, lo: float, hi: float) -> Progress | None:
    if progress is None:
        return None
    return lambda fraction: progress(lo + (hi - lo) * fraction)


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


def _occupancy(begin_s, end_s, t0: float, t1: float) -> tuple[float, int]:
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
    arrive_s, start_s, end_s, servers: int, t0: float, t1: float, mean_servers: float
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
    start_s, finish_s, latency_s: float, bandwidth: BandwidthTrace, t0: float, t1: float
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


def _check_inputs(system, configuration, arrival_s, input_tokens, output_tokens):
    arrays = {"arrival_s": arrival_s, "input_tokens": input_tokens, "output_tokens": output_tokens}
    for name, values in arrays.items():
        if values.ndim != 1 or values.size != arrival_s.size:
            raise ConfigError(
                f"{name} must be a one-dimensional array of {arrival_s.size} values (one per "
                f"request), got shape {values.shape}"
            )
        if not np.all(np.isfinite(values)):
            raise ConfigError(f"{name} must be finite, found {values[~np.isfinite(values)][0]:g}")
    if arrival_s.size == 0:
        raise ConfigError("no requests to simulate")
    if arrival_s[0] < 0 or np.any(np.diff(arrival_s) < 0):
        raise ConfigError("arrival_s must start at >= 0 s and be non-decreasing")
    if np.any(input_tokens <= 0) or np.any(output_tokens < 0):
        raise ConfigError("input_tokens must be > 0 and output_tokens >= 0 for every request")
    c = configuration
    if c.pd_decode_instances < 1:
        raise ConfigError(f"pd_decode_instances must be >= 1, got {c.pd_decode_instances}")
    if c.prfaas_instances < 0 or c.pd_prefill_instances < 0:
        raise ConfigError("instance counts must be >= 0")


def _check_pool(requests: int, instances: int, role: str) -> None:
    if requests and instances < 1:
        raise ConfigError(
            f"{requests} requests are routed to {role} but the configuration has no {role} "
            "instance; change the threshold or add instances"
        )


def _fifo_pool(ready_s, service_s, servers: int, progress) -> np.ndarray:
    """FIFO start times for jobs ready at `ready_s` in any order (ties keep index order)."""
    start = np.empty(ready_s.size)
    if ready_s.size:
        order = np.argsort(ready_s, kind="stable")
        start[order] = fifo_start_times(ready_s[order], service_s[order], servers, progress)
    return start


def _simulate_routed(
    system,
    c: Configuration,
    arrival_s,
    offloaded,
    prefill_tokens,
    to_pd_tokens,
    move_to_pd_tokens,
    move_to_prfaas_tokens,
    bandwidth: BandwidthTrace,
    latency_s: float,
    progress,
):
    """Queues for routes fixed in advance, in causal order: PrfaaS prefill (after any prefix
    move from PD, over the reverse direction, uncontended at the nominal bandwidth), the shared
    link (KV of offloaded requests after their prefill, prefixes moved to PD at arrival), PD-P
    prefill (after any prefix move), as one processor-sharing run of the link."""
    n = arrival_s.size
    remote, local = np.flatnonzero(offloaded), np.flatnonzero(~offloaded)
    _check_pool(remote.size, c.prfaas_instances, "PrfaaS")
    _check_pool(local.size, c.pd_prefill_instances, "PD prefill")
    kv = system.kv_cache_size
    ready = arrival_s.copy()
    back = remote[move_to_prfaas_tokens[remote] > 0]
    ready[back] += kv(move_to_prfaas_tokens[back]) / system.link_bandwidth_bytes_per_s + latency_s
    start = np.empty(n)
    service = np.where(
        offloaded,
        system.prfaas_prefill_latency(prefill_tokens),
        system.pd_prefill_latency(prefill_tokens),
    )
    start[remote] = _fifo_pool(
        ready[remote], service[remote], c.prfaas_instances, _stage(progress, 0.0, 0.35)
    )
    end = start + service
    moved = local[move_to_pd_tokens[local] > 0]
    crossing = np.concatenate([remote, moved])
    link_start = np.full(n, math.nan)
    link_start[remote] = end[remote]
    link_start[moved] = arrival_s[moved]
    size = np.concatenate([kv(to_pd_tokens[remote]), kv(move_to_pd_tokens[moved])])
    link = SharedLink(bandwidth, crossing.size)
    link.add_sorted(link_start[crossing], size)
    link.advance(math.inf, _stage(progress, 0.35, 0.65))
    link_finish = np.full(n, math.nan)
    link_finish[crossing] = link.finish_s
    ready[moved] = link_finish[moved] + latency_s
    start[local] = _fifo_pool(
        ready[local], service[local], c.pd_prefill_instances, _stage(progress, 0.65, 1.0)
    )
    end[local] = start[local] + service[local]
    return ready, start, end, link_start, link_finish


def _route_adaptive(
    system,
    c: Configuration,
    policy: AdaptiveThreshold,
    arrival_s,
    input_tokens,
    link: SharedLink,
    bandwidth: BandwidthTrace,
    progress,
):
    """Route, prefill and announce transfers request by request, adjusting t every period from
    the state at that instant (link advanced to it, queues as they stand)."""
    _check_pool(1, c.prfaas_instances, "PrfaaS")
    _check_pool(1, c.pd_prefill_instances, "PD prefill")
    n = arrival_s.size
    base = float(c.threshold_tokens)
    remote_service = system.prfaas_prefill_latency(input_tokens).tolist()
    local_service = system.pd_prefill_latency(input_tokens).tolist()
    kv_bytes = system.kv_cache_size(input_tokens).tolist()
    free = {True: [-math.inf] * c.prfaas_instances, False: [-math.inf] * c.pd_prefill_instances}
    waiting = {True: deque(), False: deque()}  # start times of waiting requests, non-decreasing
    offloaded = np.zeros(n, dtype=bool)
    thresholds = np.empty(n)
    start = np.empty(n)
    end = np.empty(n)
    threshold, changes = base, 0
    period = policy.period_s
    next_control, moved_before = period, 0.0
    replace = heapq.heapreplace
    for i, (a, length) in enumerate(zip(arrival_s.tolist(), input_tokens.tolist(), strict=True)):
        while a >= next_control:
            link.advance(next_control)
            capacity = float(bandwidth.transferable_bytes(next_control - period, next_control))
            utilization = (link.moved_bytes - moved_before) / capacity if capacity > 0 else 1.0
            moved_before = link.moved_bytes
            for queue in waiting.values():
                while queue and queue[0] <= next_control:
                    queue.popleft()
            old = threshold
            threshold = policy.next_threshold(
                threshold,
                base,
                utilization,
                len(waiting[True]) / c.prfaas_instances,
                len(waiting[False]) / c.pd_prefill_instances,
            )
            changes += threshold != old
            next_control += period
        remote = length > threshold
        servers = free[remote]
        service = remote_service[i] if remote else local_service[i]
        begin = max(a, servers[0])
        finish = begin + service
        replace(servers, finish)
        if begin > a:
            waiting[remote].append(begin)
        if remote:
            link.add(finish, kv_bytes[i], i)
        offloaded[i], thresholds[i], start[i], end[i] = remote, threshold, begin, finish
        if progress is not None and (i + 1) % (1 << 16) == 0:
            progress((i + 1) / n)
    return offloaded, thresholds, start, end, changes


def simulate(
    system: ServingSystem,
    configuration: Configuration,
    arrival_s,
    input_tokens,
    output_tokens=None,
    *,
    policy: Policy | None = None,
    link_latency_s: float = 0.0,
    bandwidth: BandwidthTrace | None = None,
    warmup_s: float = 0.0,
    horizon_s: float | None = None,
    prefix_blocks: PrefixBlocks | None = None,
    progress: Progress | None = None,
) -> SimulationResult:
    """Simulate the deployment `configuration` of `system` for the given requests.

    `arrival_s` (non-decreasing, seconds), `input_tokens` and `output_tokens` (default: the
    system's mean output length for every request) have one value per request. `bandwidth`
    replaces the constant link bandwidth by a trace; `prefix_blocks` (a trace's hash_ids) feed
    `PrefixAwareThreshold` and are ignored by the other policies; `progress(fraction)` is called
    as the simulation advances (fraction in [0, 1]). Deterministic: the same inputs give the
    same result.
    """
    policy = policy if policy is not None else StaticThreshold()
    arrival_s = np.asarray(arrival_s, dtype=float)
    input_tokens = np.asarray(input_tokens, dtype=float)
    if output_tokens is None:
        output_tokens = np.full(arrival_s.size, float(system.output_tokens))
    output_tokens = np.asarray(output_tokens, dtype=float)
    _check_inputs(system, configuration, arrival_s, input_tokens, output_tokens)
    if not (link_latency_s >= 0 and math.isfinite(link_latency_s)):
        raise ConfigError(f"link latency must be a finite number >= 0 s, got {link_latency_s:g}")
    horizon = float(arrival_s[-1]) if horizon_s is None else float(horizon_s)
    if not (0 <= warmup_s < horizon and math.isfinite(horizon)):
        raise ConfigError(
            f"the measurement window needs 0 <= warmup < horizon, got warmup {warmup_s:g} s and "
            f"horizon {horizon:g} s (the horizon defaults to the last arrival)"
        )
    if bandwidth is None:
        bandwidth = BandwidthTrace.constant(system.link_bandwidth_bytes_per_s)
    c = configuration
    n = arrival_s.size
    if c.prfaas_instances == 0 or c.pd_prefill_instances == 0:
        # one prefill pool is empty: a moving threshold would route requests into it, so the
        # threshold stays where the plan put it (which already sends nothing there)
        if isinstance(policy, AdaptiveThreshold):
            policy = StaticThreshold()
        elif isinstance(policy, RoleRebalancing) and policy.adaptive is not None:
            policy = dataclasses.replace(policy, adaptive=None)

    # 1-3. routing, prefill, KV transfer over the shared link
    thresholds = np.full(n, float(c.threshold_tokens))
    prefill_tokens, changes, role_changes = input_tokens, 0, None
    decode_service = output_tokens * system.decode.step_latency_s
    if isinstance(policy, RoleRebalancing):  # with decode: its slots change over time
        run = run_rebalancing(
            system,
            c,
            policy,
            arrival_s,
            input_tokens,
            output_tokens,
            bandwidth,
            link_latency_s,
            _stage(progress, 0.0, 0.95),
        )
        offloaded, thresholds, changes = run.offloaded, run.threshold_tokens, run.threshold_changes
        prefill_ready, prefill_start, prefill_end = (
            arrival_s,
            run.prefill_start_s,
            run.prefill_end_s,
        )
        link_start, link_finish = run.link_start_s, run.link_finish_s
        role_changes = run.role_changes
    elif isinstance(policy, AdaptiveThreshold):
        link = SharedLink(bandwidth, n)
        offloaded, thresholds, prefill_start, prefill_end, changes = _route_adaptive(
            system, c, policy, arrival_s, input_tokens, link, bandwidth, _stage(progress, 0, 0.4)
        )
        link.advance(math.inf, _stage(progress, 0.4, 0.7))
        prefill_ready = arrival_s
        link_start = np.where(offloaded, prefill_end, math.nan)
        link_finish = link.finish_s
    else:
        if isinstance(policy, PrefixAwareThreshold):
            if prefix_blocks is None:
                raise ConfigError(
                    "prefix-aware routing needs the requests' prefix blocks (a trace's hash_ids)"
                )
            routes = route_with_prefix_cache(
                input_tokens, prefix_blocks, c.threshold_tokens, policy
            )
            offloaded, prefill_tokens = routes.offloaded, routes.prefill_tokens
            to_pd, to_pd_move, to_prfaas_move = (
                routes.to_pd_tokens,
                routes.move_to_pd_tokens,
                routes.move_to_prfaas_tokens,
            )
        else:
            offloaded = input_tokens > c.threshold_tokens
            to_pd, to_pd_move, to_prfaas_move = input_tokens, np.zeros(n), np.zeros(n)
        prefill_ready, prefill_start, prefill_end, link_start, link_finish = _simulate_routed(
            system,
            c,
            arrival_s,
            offloaded,
            prefill_tokens,
            to_pd,
            to_pd_move,
            to_prfaas_move,
            bandwidth,
            link_latency_s,
            _stage(progress, 0.0, 0.7),
        )
    transfer_end = np.where(offloaded, link_finish + link_latency_s, math.nan)
    first_token = np.where(offloaded, transfer_end, prefill_end)

    # 4. decode slots, FIFO in order of first token
    if role_changes is None:
        order = np.argsort(first_token, kind="stable")
        slots = c.pd_decode_instances * system.decode.batch_size
        decode_start = np.empty(n)
        decode_start[order] = fifo_start_times(
            first_token[order], decode_service[order], slots, _stage(progress, 0.7, 0.95)
        )
    else:
        decode_start = run.decode_start_s
    decode_end = decode_start + decode_service
    timeline = RequestTimeline(
        arrival_s=arrival_s,
        input_tokens=input_tokens,
        prefill_tokens=prefill_tokens,
        offloaded=offloaded,
        threshold_tokens=thresholds,
        prefill_ready_s=prefill_ready,
        prefill_start_s=prefill_start,
        prefill_end_s=prefill_end,
        link_start_s=link_start,
        link_finish_s=link_finish,
        transfer_end_s=transfer_end,
        decode_start_s=decode_start,
        decode_end_s=decode_end,
    )
    roles = (
        static_role_stats(c)
        if role_changes is None
        else role_stats(c, role_changes, warmup_s, horizon)
    )
    result = _measure(
        system, c, policy, timeline, bandwidth, link_latency_s, warmup_s, horizon, changes, roles
    )
    if progress is not None:
        progress(1.0)
    return result


def _measure(
    system, c, policy, timeline: RequestTimeline, bandwidth, latency_s, t0, t1, changes, roles
) -> SimulationResult:
    tl = timeline
    window = t1 - t0
    arrived = (tl.arrival_s >= t0) & (tl.arrival_s <= t1)
    ttft = tl.ttft_s
    first_token = tl.first_token_s
    local = ~tl.offloaded
    h = t1
    counts = RequestCounts(
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
        offload_fraction=float(np.count_nonzero(arrived & r) / max(np.count_nonzero(arrived), 1)),
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


@dataclass(frozen=True)
class SustainableRate:
    """Result of `sustainable_rate`: the bracket [stable_rps, unstable_rps] around the highest
    sustainable arrival rate, and `rate_rps` its midpoint."""

    rate_rps: float
    stable_rps: float
    unstable_rps: float
    backlog_fraction: float
    requests: int
    runs: int


def backlog_share(result: SimulationResult) -> float:
    """Largest share of a stage's requests still queued at the horizon: waiting for PrfaaS
    prefill, PD prefill or a decode slot, or in transfer, each divided by the requests that
    reached that stage in the window (requests in service are not counted: there are at most
    as many as servers)."""
    shares = [
        queued / max(reached, 1)
        for queued, reached in (
            (result.prfaas_prefill.queued_at_horizon, result.prfaas_prefill.requests),
            (result.pd_prefill.queued_at_horizon, result.pd_prefill.requests),
            (result.link.in_flight_at_horizon, result.link.transfers),
            (result.pd_decode.queued_at_horizon, result.pd_decode.requests),
        )
    ]
    return max(shares)


def sustainable_rate(
    system: ServingSystem,
    configuration: Configuration,
    unit_arrival_s,
    input_tokens,
    output_tokens=None,
    *,
    low_rps: float,
    high_rps: float,
    backlog_fraction: float = 0.005,
    rel_tol: float = 1e-3,
    **simulate_options,
) -> SustainableRate:
    """Highest arrival rate the deployment sustains, found by bisection on the rate.

    Common random numbers: the stream at rate λ is `unit_arrival_s / λ` (so `unit_arrival_s`
    should have mean rate 1 req/s) with the same lengths, so the backlog grows monotonically
    with λ. λ counts as sustainable when, at the last arrival, no stage holds a backlog of more
    than `backlog_fraction` of the requests it received (`backlog_share`). Above the true limit
    Λ* the queue of a binding stage grows by about (λ/Λ* − 1) per request it receives, so the
    estimate lies between Λ* and about Λ* · (1 + backlog_fraction), give or take the backlog a
    stable queue near saturation holds (of order sqrt(requests)): use enough requests that
    backlog_fraction · requests dwarfs sqrt(requests). The bracket [low_rps, high_rps] is
    widened if it does not contain the limit; bisection stops at relative width `rel_tol`.
    """
    unit_arrival_s = np.asarray(unit_arrival_s, dtype=float)
    n = unit_arrival_s.size
    if not 0 < low_rps < high_rps:
        raise ConfigError(f"need 0 < low_rps < high_rps, got {low_rps:g} and {high_rps:g}")
    runs = 0

    def stable(rate_rps: float) -> bool:
        nonlocal runs
        runs += 1
        result = simulate(
            system,
            configuration,
            unit_arrival_s / rate_rps,
            input_tokens,
            output_tokens,
            **simulate_options,
        )
        return backlog_share(result) <= backlog_fraction

    for _ in range(30):
        if stable(low_rps):
            break
        low_rps, high_rps = low_rps / 2, low_rps
    else:
        raise ConfigError("no sustainable rate found: even a very low rate builds a backlog")
    for _ in range(30):
        if not stable(high_rps):
            break
        low_rps, high_rps = high_rps, high_rps * 2
    else:
        raise ConfigError("no unsustainable rate found: the backlog never builds up")
    while high_rps - low_rps > rel_tol * low_rps:
        middle = 0.5 * (low_rps + high_rps)
        if stable(middle):
            low_rps = middle
        else:
            high_rps = middle
    return SustainableRate(
        rate_rps=0.5 * (low_rps + high_rps),
        stable_rps=low_rps,
        unstable_rps=high_rps,
        backlog_fraction=backlog_fraction,
        requests=n,
        runs=runs,
    )
