"""Stages every policy shares: the prefill pools and the link for routes fixed in advance, the
decode slots, and the checks and progress bookkeeping around them. Units: seconds, tokens,
bytes, bytes/s.

Decode: N_d · BS_max slots in one FIFO queue, in order of first token; a request holds a slot
for output_tokens · T_decode. The first token is ready when prefill ends (local) or when the
KVCache has arrived, link_finish + link_latency (offloaded).
"""

import math

import numpy as np

from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.policies import Job, Progress, Schedule
from prfaas_plan.sim.queues import SharedLink, fifo_start_times


def stage(progress: Progress | None, lo: float, hi: float) -> Progress | None:
    """`progress` rescaled so that a stage's [0, 1] reports [lo, hi] of the whole."""
    if progress is None:
        return None
    return lambda fraction: progress(lo + (hi - lo) * fraction)


def check_pool(requests: int, instances: int, role: str) -> None:
    if requests and instances < 1:
        raise ConfigError(
            f"{requests} requests are routed to {role} but the configuration has no {role} "
            "instance; change the threshold or add instances"
        )


def fifo_pool(
    ready_s: np.ndarray, service_s: np.ndarray, servers: int, progress: Progress | None
) -> np.ndarray:
    """FIFO start times for jobs ready at `ready_s` in any order (ties keep index order)."""
    start = np.empty(ready_s.size)
    if ready_s.size:
        order = np.argsort(ready_s, kind="stable")
        start[order] = fifo_start_times(ready_s[order], service_s[order], servers, progress)
    return start


def first_token_s(
    offloaded: np.ndarray, prefill_end_s: np.ndarray, link_finish_s: np.ndarray, latency_s: float
) -> np.ndarray:
    """Prefill end (local) or KVCache arrival, link_finish + latency (offloaded)."""
    transfer_end = np.where(offloaded, link_finish_s + latency_s, math.nan)
    return np.where(offloaded, transfer_end, prefill_end_s)


def fifo_decode(job: Job, first_token: np.ndarray, progress: Progress | None) -> np.ndarray:
    """Decode start times: N_d · BS_max slots, FIFO in order of first token."""
    order = np.argsort(first_token, kind="stable")
    service = job.decode_service_s
    slots = job.configuration.pd_decode_instances * job.system.decode.batch_size
    start = np.empty(job.requests)
    start[order] = fifo_start_times(first_token[order], service[order], slots, progress)
    return start


def fixed_routes(
    job: Job,
    offloaded: np.ndarray,
    prefill_tokens: np.ndarray,
    to_pd_tokens: np.ndarray,
    move_to_pd_tokens: np.ndarray,
    move_to_prfaas_tokens: np.ndarray,
    progress: Progress | None,
) -> Schedule:
    """The schedule of routes fixed in advance, in causal order: PrfaaS prefill (after any
    prefix move from PD, over the reverse direction, uncontended at the nominal bandwidth), the
    shared link (KV of offloaded requests after their prefill, prefixes moved to PD at arrival)
    as one processor-sharing run, PD-P prefill (after any prefix move), then decode. Progress:
    0-0.7 to the end of prefill, 0.7-0.95 decode."""
    system, c, arrival_s = job.system, job.configuration, job.arrival_s
    latency_s, n = job.link_latency_s, job.requests
    remote, local = np.flatnonzero(offloaded), np.flatnonzero(~offloaded)
    check_pool(remote.size, c.prfaas_instances, "PrfaaS")
    check_pool(local.size, c.pd_prefill_instances, "PD prefill")
    prefill_progress = stage(progress, 0.0, 0.7)
    kv = system.kv_cache_size
    ready = arrival_s.copy()
    back = remote[move_to_prfaas_tokens[remote] > 0]
    ready[back] += kv(move_to_prfaas_tokens[back]) / system.link_bandwidth_bytes_per_s + latency_s
    start = np.full(n, math.nan)  # every entry is set below, remote then local
    end = np.full(n, math.nan)
    service = np.where(
        offloaded,
        system.prfaas_prefill_latency(prefill_tokens),
        system.pd_prefill_latency(prefill_tokens),
    )
    start[remote] = fifo_pool(
        ready[remote], service[remote], c.prfaas_instances, stage(prefill_progress, 0.0, 0.35)
    )
    end[remote] = start[remote] + service[remote]
    moved = local[move_to_pd_tokens[local] > 0]
    crossing = np.concatenate([remote, moved])
    link_start = np.full(n, math.nan)
    link_start[remote] = end[remote]
    link_start[moved] = arrival_s[moved]
    size = np.concatenate([kv(to_pd_tokens[remote]), kv(move_to_pd_tokens[moved])])
    link = SharedLink(job.bandwidth, crossing.size)
    link.add_sorted(link_start[crossing], size)
    link.advance(math.inf, stage(prefill_progress, 0.35, 0.65))
    link_finish = np.full(n, math.nan)
    link_finish[crossing] = link.finish_s
    ready[moved] = link_finish[moved] + latency_s
    start[local] = fifo_pool(
        ready[local], service[local], c.pd_prefill_instances, stage(prefill_progress, 0.65, 1.0)
    )
    end[local] = start[local] + service[local]
    first_token = first_token_s(offloaded, end, link_finish, latency_s)
    return Schedule(
        offloaded=offloaded,
        threshold_tokens=np.full(n, float(c.threshold_tokens)),
        prefill_tokens=prefill_tokens,
        prefill_ready_s=ready,
        prefill_start_s=start,
        prefill_end_s=end,
        link_start_s=link_start,
        link_finish_s=link_finish,
        decode_start_s=fifo_decode(job, first_token, stage(progress, 0.7, 0.95)),
    )
