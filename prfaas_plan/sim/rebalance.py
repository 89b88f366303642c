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

The simulation is exact for the model of engine.py: time is cut into epochs at the decision
instants; in each, requests are routed and the pools (`ElasticFifo`), the link (`SharedLink`)
and the decode slots are advanced to the epoch's end, starting only the jobs that start
before it, so a decision changes the servers before any job placed after it. With no
conversion and no threshold change the schedule equals the static policy's, bit for bit.
Decisions stop after the last arrival (the backlog is then served with the roles in place).
Demand is measured from the requests' own lengths and output lengths at routing (the
scheduler knows each prompt's length; a real one would estimate the decode work from recent
completions).
"""

import dataclasses
import heapq
import math
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.capacity import Configuration
from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.policies import Job, Policy, Progress, Role, RoleChange, Schedule
from prfaas_plan.sim.queues import PROGRESS_CHUNK, ElasticFifo, SharedLink
from prfaas_plan.sim.splits import SplitChoice, evaluate_splits
from prfaas_plan.sim.stages import check_pool, stage
from prfaas_plan.sim.threshold_policies import AdaptiveThreshold, LinkMeter

__all__ = ["Role", "RoleChange", "RoleRebalancing", "SplitChoice", "evaluate_splits"]


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
    adaptive: AdaptiveThreshold | None = None

    def __post_init__(self) -> None:
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

    def for_configuration(self, configuration: Configuration) -> Policy:
        # one prefill pool is empty: the adaptive threshold would route requests into it
        if self.adaptive is not None and (
            configuration.prfaas_instances == 0 or configuration.pd_prefill_instances == 0
        ):
            return dataclasses.replace(self, adaptive=None)
        return self

    def schedule(self, job: Job, progress: Progress | None) -> Schedule:
        """The epoch loop of the module docstring, decode included (its slots change)."""
        return _RebalancingRun(job, self).run(stage(progress, 0.0, 0.95))


class _RebalancingRun:
    """The mutable state of one re-balancing simulation, advanced epoch by epoch: requests
    routed up to the epoch's end, every queue drained to it, then the decisions due at it (a
    scheduled threshold, the adaptive step, a re-balancing). A helper of `schedule`."""

    def __init__(self, job: Job, policy: RoleRebalancing):
        c, system = job.configuration, job.system
        _check_split(c, policy)
        check_pool(int(np.count_nonzero(job.input_tokens > c.threshold_tokens)),
                   c.prfaas_instances, "PrfaaS")  # fmt: skip
        self.job, self.policy, self.n = job, policy, job.requests
        n = self.n
        self.slots = system.decode.batch_size
        self.arrivals, self.lengths = job.arrival_s.tolist(), job.input_tokens.tolist()
        self.prfaas_work = system.prfaas_prefill_latency(job.input_tokens)
        self.pd_work = system.pd_prefill_latency(job.input_tokens)
        self.kv = system.kv_cache_size(job.input_tokens)
        self.decode_work = job.decode_service_s
        self.remote_service, self.local_service = self.prfaas_work.tolist(), self.pd_work.tolist()
        self.kv_bytes, self.decode_service = self.kv.tolist(), self.decode_work.tolist()
        self.prfaas_free = [-math.inf] * c.prfaas_instances
        self.prfaas_waiting: deque[tuple[float, float]] = deque()  # (start, service) not started
        self.prfaas_waiting_s = 0.0
        self.pd_prefill = ElasticFifo(c.pd_prefill_instances, n)
        self.decode = ElasticFifo(c.pd_decode_instances * self.slots, n)
        self.link = SharedLink(job.bandwidth, n, record_finished=True)
        self.meter = LinkMeter(self.link, job.bandwidth)
        self.offloaded = [False] * n
        self.thresholds = [0.0] * n
        self.prefill_start = [math.nan] * n
        self.prefill_end = [math.nan] * n
        self.ready_heap: list[tuple[float, int]] = []  # (first token, index) not yet in decode
        self.ends: list[tuple[float, int]] = []
        self.threshold = self.base = float(c.threshold_tokens)
        self.threshold_changes = 0
        self.role_changes: list[RoleChange] = []
        self.n_p, self.n_d = c.pd_prefill_instances, c.pd_decode_instances
        self.scheduled_s, self.scheduled_threshold = math.inf, self.threshold  # awaits PD-P growth
        self.settled_s = -math.inf  # conversions in progress until then
        self.next_rebalance = policy.period_s
        self.adaptive_period = policy.adaptive.period_s if policy.adaptive else math.inf
        self.next_adapt = self.adaptive_period
        self.i = 0  # requests routed

    def run(self, progress: Progress | None) -> Schedule:
        reported = 0
        while self.i < self.n:
            horizon = min(self.next_rebalance, self.next_adapt, self.scheduled_s)
            self._route_until(horizon)
            self._drain_to(horizon)
            if progress is not None and self.i - reported >= PROGRESS_CHUNK:
                reported = self.i
                progress(self.i / self.n)
            if self.i >= self.n:
                break
            while self.prfaas_waiting and self.prfaas_waiting[0][0] <= horizon:
                self.prfaas_waiting_s -= self.prfaas_waiting.popleft()[1]
            if not self.prfaas_waiting:
                self.prfaas_waiting_s = 0.0
            if horizon == self.scheduled_s:
                self._set_threshold(self.scheduled_threshold)
                self.scheduled_s = math.inf
            if horizon == self.next_adapt:
                self._adapt(horizon)
            if horizon == self.next_rebalance:
                self.next_rebalance += self.policy.period_s
                if horizon >= self.settled_s:
                    self._rebalance(horizon)
        self._drain_to(math.inf)
        return self._schedule()

    def _route_until(self, horizon: float) -> None:
        """Route the requests that arrive before `horizon` (PrfaaS prefill placed at once)."""
        i, n, arrivals, lengths, threshold = (
            self.i,
            self.n,
            self.arrivals,
            self.lengths,
            self.threshold,
        )
        remote_service, local_service, kv_bytes = (
            self.remote_service,
            self.local_service,
            self.kv_bytes,
        )
        prfaas_free, prfaas_waiting, waiting_s = (
            self.prfaas_free,
            self.prfaas_waiting,
            self.prfaas_waiting_s,
        )
        offloaded, thresholds, start, end = (
            self.offloaded,
            self.thresholds,
            self.prefill_start,
            self.prefill_end,
        )
        link, pd_prefill, replace = self.link, self.pd_prefill, heapq.heapreplace  # fmt: skip
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
                    waiting_s += service
                link.add(finish, kv_bytes[i], i)
                offloaded[i] = True
                start[i], end[i] = begin, finish
            else:
                pd_prefill.submit(a, local_service[i], i)
            thresholds[i] = threshold
            i += 1
        self.i, self.prfaas_waiting_s = i, waiting_s

    def _drain_to(self, horizon: float) -> None:
        """Start every job that starts before `horizon`, in causal order."""
        ready_heap, ends, link, push = self.ready_heap, self.ends, self.link, heapq.heappush
        self.pd_prefill.run_until(horizon, ends)
        for end, j in ends:
            self.prefill_end[j] = end
            push(ready_heap, (end, j))
        ends.clear()
        link.advance(horizon)
        finished, link_finish, latency_s = link.finished, link.finish_s, self.job.link_latency_s
        assert finished is not None
        for j in finished:
            push(ready_heap, (float(link_finish[j]) + latency_s, j))
        finished.clear()
        decode, service = self.decode, self.decode_service
        while ready_heap and ready_heap[0][0] < horizon:
            ready, j = heapq.heappop(ready_heap)
            decode.submit(ready, service[j], j)
        decode.run_until(horizon)

    def _set_threshold(self, threshold_tokens: float) -> None:
        """A new planned threshold (the adaptive floor too)."""
        self.threshold_changes += self.threshold != threshold_tokens
        self.threshold = self.base = threshold_tokens

    def _adapt(self, horizon: float) -> None:
        adaptive = self.policy.adaptive
        assert adaptive is not None
        old = self.threshold
        self.threshold = adaptive.next_threshold(
            old,
            self.base,
            self.meter.utilization(horizon, self.adaptive_period),
            len(self.prfaas_waiting) / max(self.job.configuration.prfaas_instances, 1),
            self.pd_prefill.queued / self.pd_prefill.servers,
        )
        self.threshold_changes += self.threshold != old
        self.next_adapt += self.adaptive_period

    def _rebalance(self, horizon: float) -> None:
        """Measure the last period, and convert instances if the rule of the module
        docstring says so."""
        policy, period, n_p, n_d = self.policy, self.policy.period_s, self.n_p, self.n_d
        lo = bisect_left(self.arrivals, horizon - period, 0, self.i)
        if lo == self.i:
            return  # nothing arrived in the period: nothing to measure
        hi = self.i
        choice = evaluate_splits(
            self.job.input_tokens[lo:hi],
            self.prfaas_work[lo:hi],
            self.pd_work[lo:hi],
            self.kv[lo:hi],
            float(self.decode_work[lo:hi].sum()),
            queued_prfaas_s=self.prfaas_waiting_s,
            queued_pd_prefill_s=self.pd_prefill.queued_work_s,
            queued_decode_slot_s=self.decode.queued_work_s,
            period_s=period,
            link_capacity_bytes=float(self.job.bandwidth.transferable_bytes(horizon - period, horizon)),
            prfaas_instances=self.job.configuration.prfaas_instances,
            pd_instances=n_p + n_d,
            decode_slots_per_instance=self.slots,
            prefill_instances=np.arange(
                max(policy.min_prefill_instances, n_p - policy.max_conversions),
                min(n_p + n_d - policy.min_decode_instances, n_p + policy.max_conversions) + 1,
            ),
            current_prefill_instances=n_p,
            current_threshold_tokens=self.base,
            reoptimize_threshold=policy.reoptimize_threshold,
        )  # fmt: skip
        current = choice.current_utilization
        if not current >= policy.trigger_utilization:
            return
        # the lowest bottleneck; among equals the smallest move (the current split first)
        candidates = choice.prefill_instances.tolist()
        rho = choice.utilization
        best = min(range(len(candidates)), key=lambda k: (rho[k], abs(candidates[k] - n_p)))
        target = candidates[best]
        if target != n_p and rho[best] <= (1 - policy.min_gain) * current:
            self._convert(horizon, target, float(choice.threshold_tokens[best]))

    def _convert(self, horizon: float, target: int, new_threshold: float) -> None:
        """Move PD instances to reach `target` PD-P instances, decided at `horizon`."""
        delay, slots, n_p = self.policy.conversion_delay_s, self.slots, self.n_p
        if target < n_p:  # PD-P -> PD-D: the threshold applies at once
            for _ in range(n_p - target):
                left = self.pd_prefill.remove_servers(1, horizon)
                self.decode.add_servers(slots, left + delay)
                self.role_changes.append(
                    RoleChange(horizon, Role.PD_DECODE, left, left + delay, new_threshold)
                )
                self.settled_s = max(self.settled_s, left + delay)
            self._set_threshold(new_threshold)
        else:  # PD-D -> PD-P: once the last converted instance has joined
            joined = horizon
            for _ in range(target - n_p):
                left = self.decode.remove_servers(slots, horizon)
                self.pd_prefill.add_servers(1, left + delay)
                self.role_changes.append(
                    RoleChange(horizon, Role.PD_PREFILL, left, left + delay, new_threshold)
                )
                joined = max(joined, left + delay)
            self.settled_s = joined
            if joined > horizon:
                self.scheduled_s, self.scheduled_threshold = joined, new_threshold
            else:
                self._set_threshold(new_threshold)
        self.n_d += n_p - target
        self.n_p = target

    def _schedule(self) -> Schedule:
        remote = np.asarray(self.offloaded, dtype=bool)
        start = np.asarray(self.prefill_start, dtype=float)
        start[~remote] = np.asarray(self.pd_prefill.start_s, dtype=float)[~remote]
        end = np.asarray(self.prefill_end, dtype=float)
        return Schedule(
            offloaded=remote,
            threshold_tokens=np.asarray(self.thresholds, dtype=float),
            prefill_tokens=self.job.input_tokens,
            prefill_ready_s=self.job.arrival_s,
            prefill_start_s=start,
            prefill_end_s=end,
            link_start_s=np.where(remote, end, math.nan),
            link_finish_s=self.link.finish_s,
            decode_start_s=np.asarray(self.decode.start_s, dtype=float),
            threshold_changes=self.threshold_changes,
            role_changes=tuple(self.role_changes),
        )


def _check_split(c: Configuration, policy: RoleRebalancing) -> None:
    for role, have, least, name in (
        ("PD prefill", c.pd_prefill_instances, policy.min_prefill_instances, "min_prefill_instances"),
        ("PD decode", c.pd_decode_instances, policy.min_decode_instances, "min_decode_instances"),
    ):  # fmt: skip
        if have < least:
            raise ConfigError(
                f"role re-balancing needs at least {name} = {least} {role} instances, the "
                f"configuration has {have}"
            )
