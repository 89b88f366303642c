"""Long-timescale re-balancing of PD instances between prefill (PD-P) and decode (PD-D) roles
(reference prfaas-model.md §8), and the event loop that simulates it. Units: seconds, tokens,
bytes, bytes/s.

The policy (`RoleRebalancing`; the paper gives no numbers, so every one is a parameter):
every `period_s` the scheduler measures the demand of the requests that arrived in the last
period, plus the work still queued, in instance-seconds per second:

    ρ_prfaas(t) = (Σ_{l>t} T_prfaas(l) + W_prfaas) / (period · N_prfaas)
    ρ_link(t)   = Σ_{l>t} S_kv(l) / ∫ B over the period
    ρ_pd-p(t)   = (Σ_{l<=t} T_pd(l) + W_pd-p) / (period · N_p)
    ρ_pd-d      = (Σ L_out · T_decode + W_pd-d) / (period · N_d · BS_max)

The producers' utilisation for a split is ρ_pre(N_p) = min over t of max(ρ_prfaas, ρ_link,
ρ_pd-p): t re-searched over the lengths just observed (the paper's "re-search t over the
post-prefix-match length distribution"), and the split's bottleneck is
ρ(N_p) = max(ρ_pre(N_p), ρ_pd-d(N − N_p)). If the bottleneck utilisation of the split and
threshold in force is >= `trigger_utilization`, and the best split at most `max_conversions`
instances away (the current split with a re-searched t included: re-thresholding alone is the
short timescale's job, not a reason to convert) lowers it by at least the fraction `min_gain`
(the hysteresis), that many instances convert toward it, never below `min_prefill_instances`
PD-P or `min_decode_instances` PD-D. PrfaaS instances stay prefill-only. With
`reoptimize_threshold`, t becomes the threshold that attains ρ_pre for the new split on the
arrivals alone (W = 0: a t fitted to drain a backlog would outlive it); it takes
effect at the decision when PD-P shrinks, and when the last converted instance joins PD-P when
it grows (not before its capacity exists). No new decision is taken while a conversion is in
progress, so every decision sees the effect of the previous one. With `adaptive`, the
short-timescale threshold (`AdaptiveThreshold`) runs on top, its floor being the threshold of
the last re-balancing: the paper's dual-timescale scheduler.

A conversion: a PD-P instance leaving prefill finishes the prefill it holds first; a PD-D
instance leaving decode takes the BS_max decode slots that free up first and leaves when the
last of them is free (the scheduler drains the instance with the least decode work left;
optimistic when in-flight requests could not migrate). The instance then serves neither role
for `conversion_delay_s` before it joins the other one.

The simulation is exact for the model of simulate.py: time is cut into epochs at the decision
instants; in each, requests are routed and the pools (`ElasticFifo`), the link (`SharedLink`)
and the decode slots are advanced to the epoch's end, starting only the jobs that start
before it, so a decision changes the servers before any job placed after it. With no
conversion and no threshold change the schedule equals the static policy's, bit for bit.
Decisions stop after the last arrival (the backlog is then served with the roles in place).
Demand is measured from the requests' own lengths and output lengths at routing (the
scheduler knows each prompt's length; a real one would estimate the decode work from recent
completions).
"""

import heapq
import math
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from prfaas_plan.analytic.capacity import Configuration, ServingSystem
from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.queues import PROGRESS_CHUNK, BandwidthTrace, ElasticFifo, SharedLink

if TYPE_CHECKING:
    from prfaas_plan.sim.engine import AdaptiveThreshold


class Role(StrEnum):
    PD_PREFILL = "pd_prefill"
    PD_DECODE = "pd_decode"


@dataclass(frozen=True)
class RoleRebalancing:
    """Convert PD instances between prefill and decode roles (see the module docstring)."""

    period_s: float = 300.0
    conversion_delay_s: float = 60.0
    trigger_utilization: float = 0.7
    min_gain: float = 0.15
    max_conversions: int = 1  # instances converted by one decision
    min_prefill_instances: int = 1
    min_decode_instances: int = 1
    reoptimize_threshold: bool = True
    adaptive: "AdaptiveThreshold | None" = None

    def __post_init__(self):
        checks = (
            ("period_s", self.period_s, self.period_s > 0 and math.isfinite(self.period_s)),
            (
                "conversion_delay_s",
                self.conversion_delay_s,
                self.conversion_delay_s >= 0 and math.isfinite(self.conversion_delay_s),
            ),
            ("trigger_utilization", self.trigger_utilization, self.trigger_utilization >= 0),
            ("min_gain", self.min_gain, 0 <= self.min_gain < 1),
            ("max_conversions", self.max_conversions, self.max_conversions >= 1),
            ("min_prefill_instances", self.min_prefill_instances, self.min_prefill_instances >= 1),
            ("min_decode_instances", self.min_decode_instances, self.min_decode_instances >= 1),
        )
        for name, value, ok in checks:
            if not ok:
                raise ConfigError(f"role re-balancing: {name} out of range, got {value:g}")


@dataclass(frozen=True)
class RoleChange:
    """One PD instance converted to `to_role`."""

    decided_s: float
    to_role: Role
    left_s: float  # stops serving its old role (after the work it holds)
    joined_s: float  # starts serving the new one: left_s + conversion delay
    threshold_tokens: float  # the threshold chosen for the new split


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


@dataclass(frozen=True, eq=False)
class SplitChoice:
    """Bottleneck utilisation of each candidate split (`prefill_instances`), queued work
    included, with the threshold it would run at; and that of the split and threshold in
    force (`current_utilization`), which a conversion has to beat."""

    prefill_instances: np.ndarray  # N_p of each candidate
    producer_utilization: np.ndarray  # ρ_pre(N_p)
    decode_utilization: np.ndarray  # ρ_pd-d(N − N_p)
    threshold_tokens: np.ndarray  # re-optimised: minimises the producers' ρ without queues
    current_utilization: float

    @property
    def utilization(self) -> np.ndarray:
        return np.maximum(self.producer_utilization, self.decode_utilization)


def evaluate_splits(
    lengths_tokens,
    prfaas_work_s,
    pd_work_s,
    kv_bytes,
    decode_slot_work_s: float,
    *,
    queued_prfaas_s: float,
    queued_pd_prefill_s: float,
    queued_decode_slot_s: float,
    period_s: float,
    link_capacity_bytes: float,
    prfaas_instances: int,
    pd_instances: int,
    decode_slots_per_instance: int,
    prefill_instances,
    current_prefill_instances: int,
    current_threshold_tokens: float,
    reoptimize_threshold: bool = True,
) -> SplitChoice:
    """The utilisations of the module docstring for each candidate N_p, from the requests of
    one period (per-request arrays) and the work queued at the decision; the candidates at a
    re-optimised threshold (or at the current one if not `reoptimize_threshold`), the current
    split (one of the candidates) also at the threshold in force.

    The threshold for a split balances the arrivals only: a backlog is transient, and a t
    chosen to drain it would stay in force after it has gone (it changes only at the next
    conversion). A threshold between two observed lengths takes their midpoint; below all of
    them it is 0 (offload everything), above all of them inf (offload nothing)."""
    n_p = np.asarray(prefill_instances, dtype=float)
    order = np.argsort(lengths_tokens, kind="stable")
    lengths = np.asarray(lengths_tokens, dtype=float)[order]
    m = lengths.size

    def tail_sums(values) -> np.ndarray:  # k -> sum over the requests from the k-th shortest on
        v = np.asarray(values, dtype=float)[order]
        return np.concatenate([np.cumsum(v[::-1])[::-1], [0.0]])

    def ratio(work, capacity) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(work > 0, work / capacity if capacity > 0 else np.inf, 0.0)

    remote = tail_sums(prfaas_work_s)
    local = np.concatenate([[0.0], np.cumsum(np.asarray(pd_work_s, dtype=float)[order])])
    link = ratio(tail_sums(kv_bytes), link_capacity_bytes)
    separable = np.ones(m + 1, dtype=bool)  # a threshold cannot separate equal lengths
    separable[1:m] = lengths[1:] != lengths[:-1]

    def utilization(queued_prfaas, queued_pd):  # (split, k local) -> max over the producers
        prfaas = np.maximum(ratio(remote + queued_prfaas, period_s * prfaas_instances), link)
        pd = (local[None, :] + queued_pd) / (period_s * n_p[:, None])
        return np.where(separable, np.maximum(prfaas[None, :], pd), np.inf)

    loaded = utilization(queued_prfaas_s, queued_pd_prefill_s)
    in_force = int(np.searchsorted(lengths, current_threshold_tokens, side="right"))
    decode_capacity = period_s * (pd_instances - n_p) * decode_slots_per_instance
    decode = (decode_slot_work_s + queued_decode_slot_s) / decode_capacity
    current = int(np.flatnonzero(n_p == current_prefill_instances)[0])
    if reoptimize_threshold:
        middle = np.concatenate([[0.0], 0.5 * (lengths[:-1] + lengths[1:]), [np.inf]])
        thresholds = middle[utilization(0.0, 0.0).argmin(axis=1)]
        producers = loaded.min(axis=1)
    else:
        thresholds = np.full(n_p.size, float(current_threshold_tokens))
        producers = loaded[:, in_force]
    return SplitChoice(
        prefill_instances=np.asarray(prefill_instances, dtype=int),
        producer_utilization=producers,
        decode_utilization=decode,
        threshold_tokens=thresholds,
        current_utilization=float(max(loaded[current, in_force], decode[current])),
    )


class RebalancedRun(NamedTuple):
    """Per-request event times (input order) and the scheduler's actions."""

    offloaded: np.ndarray
    threshold_tokens: np.ndarray
    prefill_start_s: np.ndarray
    prefill_end_s: np.ndarray
    link_start_s: np.ndarray
    link_finish_s: np.ndarray
    decode_start_s: np.ndarray
    threshold_changes: int
    role_changes: tuple[RoleChange, ...]


def run_rebalancing(
    system: ServingSystem,
    c: Configuration,
    policy: RoleRebalancing,
    arrival_s: np.ndarray,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    bandwidth: BandwidthTrace,
    link_latency_s: float,
    progress: Callable[[float], None] | None = None,
) -> RebalancedRun:
    """Simulate the deployment under `policy` (module docstring); decode included."""
    if c.pd_prefill_instances < policy.min_prefill_instances:
        raise ConfigError(
            f"role re-balancing needs at least min_prefill_instances = "
            f"{policy.min_prefill_instances} PD prefill instances, the configuration has "
            f"{c.pd_prefill_instances}"
        )
    if c.pd_decode_instances < policy.min_decode_instances:
        raise ConfigError(
            f"role re-balancing needs at least min_decode_instances = "
            f"{policy.min_decode_instances} PD decode instances, the configuration has "
            f"{c.pd_decode_instances}"
        )
    remote_count = int(np.count_nonzero(input_tokens > c.threshold_tokens))
    if remote_count and c.prfaas_instances < 1:
        raise ConfigError(
            f"{remote_count} requests are routed to PrfaaS but the configuration has no PrfaaS "
            "instance; change the threshold or add instances"
        )
    n = arrival_s.size
    slots = system.decode.batch_size
    n_prfaas = c.prfaas_instances
    arrivals = arrival_s.tolist()
    lengths = input_tokens.tolist()
    prfaas_work = system.prfaas_prefill_latency(input_tokens)
    pd_work = system.pd_prefill_latency(input_tokens)
    kv = system.kv_cache_size(input_tokens)
    decode_work = output_tokens * system.decode.step_latency_s
    remote_service, local_service = prfaas_work.tolist(), pd_work.tolist()
    kv_bytes, decode_service = kv.tolist(), decode_work.tolist()

    prfaas_free = [-math.inf] * n_prfaas
    prfaas_waiting: deque[tuple[float, float]] = deque()  # (start, service), not yet started
    prfaas_waiting_s = 0.0
    pd_prefill = ElasticFifo(c.pd_prefill_instances, n)
    decode = ElasticFifo(c.pd_decode_instances * slots, n)
    link = SharedLink(bandwidth, n, record_finished=True)
    link_finish = link.finish_s
    offloaded = [False] * n
    thresholds = [0.0] * n
    prefill_start = [math.nan] * n
    prefill_end = [math.nan] * n
    ready_heap: list[tuple[float, int]] = []  # (first token, index) not yet queued for decode
    ends: list[tuple[float, int]] = []

    threshold = base = float(c.threshold_tokens)
    threshold_changes = 0
    role_changes: list[RoleChange] = []
    n_p, n_d = c.pd_prefill_instances, c.pd_decode_instances
    scheduled_s, scheduled_threshold = math.inf, threshold  # a threshold waiting for PD-P to grow
    settled_s = -math.inf  # conversions in progress until then
    period = policy.period_s
    next_rebalance = period
    adaptive = policy.adaptive
    adaptive_period = adaptive.period_s if adaptive is not None else math.inf
    next_adapt = adaptive_period
    moved_before = 0.0
    replace, push, pop = heapq.heapreplace, heapq.heappush, heapq.heappop
    delay = policy.conversion_delay_s

    def drain_to(horizon: float) -> None:
        """Start every job that starts before `horizon`, in causal order."""
        pd_prefill.run_until(horizon, ends)
        for end, j in ends:
            prefill_end[j] = end
            push(ready_heap, (end, j))
        ends.clear()
        link.advance(horizon)
        for j in link.finished:
            push(ready_heap, (float(link_finish[j]) + link_latency_s, j))
        link.finished.clear()
        while ready_heap and ready_heap[0][0] < horizon:
            ready, j = pop(ready_heap)
            decode.submit(ready, decode_service[j], j)
        decode.run_until(horizon)

    i = 0
    reported = 0
    while i < n:
        horizon = min(next_rebalance, next_adapt, scheduled_s)
        while i < n and arrivals[i] < horizon:
            a = arrivals[i]
            if lengths[i] > threshold:
                service = remote_service[i]
                earliest = prfaas_free[0]
                begin = a if a >= earliest else earliest
                finish = begin + service
                replace(prfaas_free, finish)
                if begin > a:
                    prfaas_waiting.append((begin, service))
                    prfaas_waiting_s += service
                link.add(finish, kv_bytes[i], i)
                offloaded[i] = True
                prefill_start[i], prefill_end[i] = begin, finish
            else:
                pd_prefill.submit(a, local_service[i], i)
            thresholds[i] = threshold
            i += 1
        drain_to(horizon)
        if progress is not None and i - reported >= PROGRESS_CHUNK:
            reported = i
            progress(i / n)
        if i >= n:
            break
        while prfaas_waiting and prfaas_waiting[0][0] <= horizon:
            prfaas_waiting_s -= prfaas_waiting.popleft()[1]
        if not prfaas_waiting:
            prfaas_waiting_s = 0.0
        if horizon == scheduled_s:
            threshold_changes += threshold != scheduled_threshold
            threshold = base = scheduled_threshold
            scheduled_s = math.inf
        if horizon == next_adapt:
            assert adaptive is not None
            capacity = float(bandwidth.transferable_bytes(horizon - adaptive_period, horizon))
            utilization = (link.moved_bytes - moved_before) / capacity if capacity > 0 else 1.0
            moved_before = link.moved_bytes
            old = threshold
            threshold = adaptive.next_threshold(
                threshold,
                base,
                utilization,
                len(prfaas_waiting) / max(n_prfaas, 1),
                pd_prefill.queued / pd_prefill.servers,
            )
            threshold_changes += threshold != old
            next_adapt += adaptive_period
        if horizon == next_rebalance:
            next_rebalance += period
            if horizon < settled_s:
                continue
            lo = bisect_left(arrivals, horizon - period, 0, i)
            if lo == i:
                continue  # nothing arrived in the period: nothing to measure
            choice = evaluate_splits(
                input_tokens[lo:i],
                prfaas_work[lo:i],
                pd_work[lo:i],
                kv[lo:i],
                float(decode_work[lo:i].sum()),
                queued_prfaas_s=prfaas_waiting_s,
                queued_pd_prefill_s=pd_prefill.queued_work_s,
                queued_decode_slot_s=decode.queued_work_s,
                period_s=period,
                link_capacity_bytes=float(bandwidth.transferable_bytes(horizon - period, horizon)),
                prfaas_instances=n_prfaas,
                pd_instances=n_p + n_d,
                decode_slots_per_instance=slots,
                prefill_instances=np.arange(
                    max(policy.min_prefill_instances, n_p - policy.max_conversions),
                    min(n_p + n_d - policy.min_decode_instances, n_p + policy.max_conversions) + 1,
                ),
                current_prefill_instances=n_p,
                current_threshold_tokens=base,
                reoptimize_threshold=policy.reoptimize_threshold,
            )
            current = choice.current_utilization
            if not current >= policy.trigger_utilization:
                continue
            # the lowest bottleneck; among equals the smallest move (the current split first)
            candidates = choice.prefill_instances.tolist()
            rho = choice.utilization
            best = min(range(len(candidates)), key=lambda k: (rho[k], abs(candidates[k] - n_p)))
            target = candidates[best]
            if target == n_p or not rho[best] <= (1 - policy.min_gain) * current:
                continue
            new_threshold = float(choice.threshold_tokens[best])
            if target < n_p:  # PD-P -> PD-D
                for _ in range(n_p - target):
                    left = pd_prefill.remove_servers(1, horizon)
                    decode.add_servers(slots, left + delay)
                    role_changes.append(
                        RoleChange(horizon, Role.PD_DECODE, left, left + delay, new_threshold)
                    )
                    settled_s = max(settled_s, left + delay)
                threshold_changes += threshold != new_threshold
                threshold = base = new_threshold
            else:  # PD-D -> PD-P
                joined = horizon
                for _ in range(target - n_p):
                    left = decode.remove_servers(slots, horizon)
                    pd_prefill.add_servers(1, left + delay)
                    role_changes.append(
                        RoleChange(horizon, Role.PD_PREFILL, left, left + delay, new_threshold)
                    )
                    joined = max(joined, left + delay)
                settled_s = joined
                if joined > horizon:
                    scheduled_s, scheduled_threshold = joined, new_threshold
                else:
                    threshold_changes += threshold != new_threshold
                    threshold = base = new_threshold
            n_d += n_p - target
            n_p = target
    drain_to(math.inf)
    decode_start = np.asarray(decode.start_s, dtype=float)
    remote = np.asarray(offloaded, dtype=bool)
    start = np.asarray(prefill_start, dtype=float)
    start[~remote] = np.asarray(pd_prefill.start_s, dtype=float)[~remote]
    end = np.asarray(prefill_end, dtype=float)
    return RebalancedRun(
        offloaded=remote,
        threshold_tokens=np.asarray(thresholds, dtype=float),
        prefill_start_s=start,
        prefill_end_s=end,
        link_start_s=np.where(remote, end, math.nan),
        link_finish_s=link.finish_s,
        decode_start_s=decode_start,
        threshold_changes=threshold_changes,
        role_changes=tuple(role_changes),
    )
