"""Discrete-event simulation of a PrfaaS-PD deployment under a request stream (reference
prfaas-model.md §2 and §8). Units: seconds, tokens, bytes, bytes/s, requests/s.

What is simulated, per request (all of it exact for the model below, no fluid approximation):

1. Routing, by the policy (policies.py: one interface, one class per policy; threshold.py,
   prefix.py, rebalance.py): input length l > t goes to the PrfaaS pool, else to the PD-P pool
   (`StaticThreshold`);
   or t moves with the load (`AdaptiveThreshold`, the paper's short-timescale scheduler); or l is
   the length not already in a cluster's prefix cache (`PrefixAwareThreshold`, prefix.py,
   with the paper's scarce/abundant-bandwidth rules, for traces with prefix blocks); or PD
   instances also move between the PD-P and PD-D roles (`RoleRebalancing`, rebalance.py,
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

This module validates the requests, asks the policy for the schedule and measures it
(stats.py); `sustainable_rate` (sustainable.py) bisects on the arrival rate for the highest
rate the deployment sustains, to compare with the closed-form Λ_max.
"""

import math

import numpy as np
from numpy.typing import ArrayLike

from prfaas_plan.analytic.capacity import Configuration, ServingSystem
from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.arrivals import PrefixBlocks
from prfaas_plan.sim.policies import Job, Policy, Progress
from prfaas_plan.sim.queues import BandwidthTrace
from prfaas_plan.sim.stats import (
    RequestTimeline,
    SimulationResult,
    measure,
    role_stats,
    static_role_stats,
)
from prfaas_plan.sim.threshold_policies import StaticThreshold


def simulate(
    system: ServingSystem,
    configuration: Configuration,
    arrival_s: ArrayLike,
    input_tokens: ArrayLike,
    output_tokens: ArrayLike | None = None,
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
    policy = (policy if policy is not None else StaticThreshold()).for_configuration(configuration)
    job = Job(
        system, configuration, arrival_s, input_tokens, output_tokens, bandwidth, link_latency_s,
        prefix_blocks,
    )  # fmt: skip
    schedule = policy.schedule(job, progress)
    transfer_end = np.where(schedule.offloaded, schedule.link_finish_s + link_latency_s, math.nan)
    decode_start = schedule.decode_start_s
    timeline = RequestTimeline(
        arrival_s=arrival_s,
        input_tokens=input_tokens,
        prefill_tokens=schedule.prefill_tokens,
        offloaded=schedule.offloaded,
        threshold_tokens=schedule.threshold_tokens,
        prefill_ready_s=schedule.prefill_ready_s,
        prefill_start_s=schedule.prefill_start_s,
        prefill_end_s=schedule.prefill_end_s,
        link_start_s=schedule.link_start_s,
        link_finish_s=schedule.link_finish_s,
        transfer_end_s=transfer_end,
        decode_start_s=decode_start,
        decode_end_s=decode_start + job.decode_service_s,
    )
    changes = schedule.role_changes
    roles = (
        static_role_stats(configuration)
        if changes is None
        else role_stats(configuration, changes, warmup_s, horizon)
    )
    result = measure(
        system, configuration, policy, timeline, bandwidth, link_latency_s, warmup_s, horizon,
        schedule.threshold_changes, roles,
    )  # fmt: skip
    if progress is not None:
        progress(1.0)
    return result


def _check_inputs(
    system: ServingSystem,
    configuration: Configuration,
    arrival_s: np.ndarray,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
) -> None:
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
