"""Threshold routing (reference prfaas-model.md §2 and §8): input length l > t goes to the
PrfaaS pool, else to the PD-P pool, with t fixed (`StaticThreshold`) or moved with the load
(`AdaptiveThreshold`, the paper's short-timescale scheduler). Units: seconds, tokens, bytes.

The adaptive threshold is simulated request by request: every period, the link is advanced to
that instant and t is updated from the state then (link utilisation over the period, queues as
they stand), so the routing of each request sees the t in force at its arrival.
"""

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.capacity import Configuration
from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.policies import Job, Policy, Progress, Schedule
from prfaas_plan.sim.queues import PROGRESS_CHUNK, BandwidthTrace, SharedLink
from prfaas_plan.sim.stages import check_pool, fifo_decode, first_token_s, fixed_routes, stage


@dataclass(frozen=True)
class StaticThreshold:
    """Route l > t to PrfaaS with the configuration's fixed threshold t."""

    def for_configuration(self, configuration: Configuration) -> Policy:
        return self

    def schedule(self, job: Job, progress: Progress | None) -> Schedule:
        offloaded = job.input_tokens > job.configuration.threshold_tokens
        zeros = np.zeros(job.requests)
        tokens = job.input_tokens
        return fixed_routes(job, offloaded, tokens, tokens, zeros, zeros, progress)


class LinkMeter:
    """Link utilisation over successive periods: bytes moved since the last reading / bytes
    the link could have moved over the period (1 when it could move none)."""

    def __init__(self, link: SharedLink, bandwidth: BandwidthTrace):
        self._link, self._bandwidth, self._moved_before = link, bandwidth, 0.0

    def utilization(self, now_s: float, period_s: float) -> float:
        capacity = float(self._bandwidth.transferable_bytes(now_s - period_s, now_s))
        moved = self._link.moved_bytes
        utilization = (moved - self._moved_before) / capacity if capacity > 0 else 1.0
        self._moved_before = moved
        return utilization


BACK_TO_BASE_RTOL = 1e-9  # a lowered threshold this close above the planned one is the planned one


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

    def __post_init__(self) -> None:
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
        lowered = threshold_tokens / self.step_factor
        # t·step/step is base only to the last bit: within BACK_TO_BASE_RTOL it is base, so a
        # period that would change t by rounding alone counts no change
        lowered = base_tokens if lowered <= base_tokens * (1 + BACK_TO_BASE_RTOL) else lowered
        if calm or (local_hot and not remote_hot):
            return lowered
        if remote_hot and local_hot:
            remote = max(
                link_utilization / self.link_trigger,
                prfaas_queue_per_instance / self.queue_trigger,
            )
            if pd_queue_per_instance / self.queue_trigger > remote:
                return lowered
        return threshold_tokens

    def for_configuration(self, configuration: Configuration) -> Policy:
        # one prefill pool is empty: a moving threshold would route requests into it, so the
        # threshold stays where the plan put it (which already sends nothing there)
        if configuration.prfaas_instances == 0 or configuration.pd_prefill_instances == 0:
            return StaticThreshold()
        return self

    def schedule(self, job: Job, progress: Progress | None) -> Schedule:
        """Progress: 0-0.4 routing and prefill, 0.4-0.7 the link, 0.7-0.95 decode."""
        link = SharedLink(job.bandwidth, job.requests)
        offloaded, thresholds, start, end, changes = _route_adaptive(
            job, self, link, stage(progress, 0, 0.4)
        )
        link.advance(math.inf, stage(progress, 0.4, 0.7))
        first_token = first_token_s(offloaded, end, link.finish_s, job.link_latency_s)
        return Schedule(
            offloaded=offloaded,
            threshold_tokens=thresholds,
            prefill_tokens=job.input_tokens,
            prefill_ready_s=job.arrival_s,
            prefill_start_s=start,
            prefill_end_s=end,
            link_start_s=np.where(offloaded, end, math.nan),
            link_finish_s=link.finish_s,
            decode_start_s=fifo_decode(job, first_token, stage(progress, 0.7, 0.95)),
            threshold_changes=changes,
        )


def _route_adaptive(
    job: Job, policy: AdaptiveThreshold, link: SharedLink, progress: Progress | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Route, prefill and announce transfers request by request, adjusting t every period from
    the state at that instant (link advanced to it, queues as they stand)."""
    system, c = job.system, job.configuration
    check_pool(1, c.prfaas_instances, "PrfaaS")
    check_pool(1, c.pd_prefill_instances, "PD prefill")
    n, input_tokens = job.requests, job.input_tokens
    base = float(c.threshold_tokens)
    remote_service = system.prfaas_prefill_latency(input_tokens).tolist()
    local_service = system.pd_prefill_latency(input_tokens).tolist()
    kv_bytes = system.kv_cache_size(input_tokens).tolist()
    free = {True: [-math.inf] * c.prfaas_instances, False: [-math.inf] * c.pd_prefill_instances}
    waiting: dict[bool, deque[float]] = {True: deque(), False: deque()}  # waiting starts, sorted
    offloaded = np.zeros(n, dtype=bool)
    thresholds, start, end = np.empty(n), np.empty(n), np.empty(n)
    threshold, changes = base, 0
    period = policy.period_s
    next_control = period
    meter = LinkMeter(link, job.bandwidth)
    replace = heapq.heapreplace
    arrivals = job.arrival_s.tolist()
    for i, (a, length) in enumerate(zip(arrivals, input_tokens.tolist(), strict=True)):
        while a >= next_control:
            link.advance(next_control)
            utilization = meter.utilization(next_control, period)
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
        if progress is not None and (i + 1) % PROGRESS_CHUNK == 0:
            progress((i + 1) / n)
    return offloaded, thresholds, start, end, changes
