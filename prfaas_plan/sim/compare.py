"""Scheduler policies side by side under stress (reference prfaas-model.md §8): each scenario's
request stream is simulated once per policy, so every policy sees the same requests.
Units: seconds, requests/s, tokens.

Scenarios (rate = load_fraction · Λ_max, Λ_max the exact-mode capacity of the configuration;
input lengths drawn from the workload). Each is measured over the window where its stress
applies (the requests that arrive in it, each with its full TTFT; throughput = decode
completions in the window / its length):
- `burst`: gamma inter-arrival times with coefficient of variation `burst_cv` (Poisson is 1);
  window: the whole run.
- `bandwidth_dip`: Poisson arrivals; the link carries `dip_fraction` of its bandwidth during
  `dip_window` (fractions of the expected run length); window: the dip.
- `output_drift`: Poisson arrivals; from `drift_at` of the run on, every request generates
  `drift_output_factor` times the workload's output length (decode demand drifts away from
  the planned split: the case for re-balancing roles); window: from the drift to the end.

Policies: `static` (the configuration's threshold), `adaptive` (`AdaptiveThreshold`),
`rebalance` (`RoleRebalancing`), `dual` (re-balancing with the adaptive threshold on top: the
paper's dual-timescale scheduler) and `prefix` (`PrefixAwareThreshold`), which runs only when the
requests carry prefix blocks (a `trace` with hash_ids); otherwise its row says it was skipped.
Every policy object uses its defaults unless given in `policy_options`.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.capacity import Configuration, ServingSystem, evaluate
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.arrivals import (
    PrefixBlocks,
    RequestTrace,
    gamma_arrivals,
    poisson_arrivals,
)
from prfaas_plan.sim.defaults import COMPARISON_REQUESTS, LOAD_FRACTION
from prfaas_plan.sim.engine import simulate
from prfaas_plan.sim.factory import POLICIES, check_policy_options, make_policy
from prfaas_plan.sim.policies import Policy
from prfaas_plan.sim.queues import BandwidthTrace
from prfaas_plan.sim.rebalance import RoleRebalancing
from prfaas_plan.sim.stages import stage as sim_stage

SCENARIOS = ("burst", "bandwidth_dip", "output_drift")
# one random stream per scenario name, so a subset of scenarios replays the same requests
_STREAM_IDS = {name: k for k, name in enumerate(SCENARIOS)}

Progress = Callable[[float], None]


@dataclass(frozen=True)
class ComparisonRow:
    """One policy under one scenario (nan metrics when the policy was skipped)."""

    scenario: str
    policy: str
    ran: bool
    note: str  # why the policy was skipped, or "" when it ran
    requests: int  # arrivals in the window
    offered_rps: float
    throughput_rps: float  # decode completions within the window / window length
    ttft_mean_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    decode_wait_mean_s: float  # waiting for a decode slot (not part of TTFT)
    offload_fraction: float
    link_utilization: float  # bytes moved / bytes the link could move, over the window
    threshold_changes: int
    conversions: int  # PD instances converted between prefill and decode


@dataclass(frozen=True)
class ScenarioInfo:
    name: str
    description: str
    duration_s: float  # first to last arrival
    window_start_s: float  # the measurement window
    window_end_s: float


@dataclass(frozen=True)
class PolicyComparison:
    configuration: Configuration
    capacity_rps: float  # exact-mode Λ_max of the configuration
    load_fraction: float
    offered_rate_rps: float  # mean arrival rate of every scenario
    requests: int  # per scenario (each policy replays the same requests)
    seed: int
    scenarios: tuple[ScenarioInfo, ...]
    rows: tuple[ComparisonRow, ...]

    def row(self, scenario: str, policy: str) -> ComparisonRow:
        for row in self.rows:
            if row.scenario == scenario and row.policy == policy:
                return row
        raise KeyError(f"no row for scenario {scenario!r} and policy {policy!r}")


@dataclass(frozen=True, eq=False)
class _Requests:
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    bandwidth: BandwidthTrace
    prefix_blocks: PrefixBlocks | None
    description: str
    window_s: tuple[float, float]


def compare_policies(
    system: ServingSystem,
    workload: LengthDistribution,
    configuration: Configuration,
    *,
    load_fraction: float = LOAD_FRACTION,
    requests: int = COMPARISON_REQUESTS,
    seed: int = 0,
    scenarios: Sequence[str] = SCENARIOS,
    policies: Sequence[str] = POLICIES,
    burst_cv: float = 3.0,
    dip_fraction: float = 0.1,
    dip_window: tuple[float, float] = (0.3, 0.6),
    drift_at: float = 0.5,
    drift_output_factor: float = 1.6,
    trace: RequestTrace | None = None,
    output_lengths: LengthDistribution | None = None,
    policy_options: Mapping[str, Policy] | None = None,
    progress: Progress | None = None,
) -> PolicyComparison:
    """Simulate every scenario under every policy (module docstring) and tabulate the results.

    `requests` per scenario; with `trace`, its first `requests` requests supply the input and
    output lengths and prefix blocks (in trace order), and the scenario supplies the arrival
    times (the load stays a fraction of the workload's Λ_max). Without a trace, each request's
    output length is drawn from `output_lengths` (independently of its input length; None:
    `system.output_tokens` for every request). `policy_options` maps a policy
    name to the policy object to use instead of its default. `progress(fraction)` is called as the runs advance. Reproducible: the same
    arguments give the same rows."""
    _check_arguments(
        scenarios, policies, load_fraction, requests, dip_fraction, dip_window, drift_at,
        drift_output_factor,
    )  # fmt: skip
    capacity = evaluate(system, workload, configuration, Mode.EXACT).system_throughput_rps
    if not (capacity > 0 and math.isfinite(capacity)):
        raise ConfigError(f"the configuration has no finite capacity to load: Λ_max = {capacity}")
    rate = load_fraction * capacity
    options = dict(policy_options or {})
    check_policy_options(options)
    infos, rows = [], []
    runs = len(scenarios) * len(policies)
    done = 0
    for scenario in scenarios:
        req = _scenario_requests(
            scenario,
            system,
            workload,
            rate,
            requests,
            np.random.default_rng([seed, _STREAM_IDS[scenario]]),
            burst_cv=burst_cv,
            dip_fraction=dip_fraction,
            dip_window=dip_window,
            drift_at=drift_at,
            drift_output_factor=drift_output_factor,
            trace=trace,
            output_lengths=output_lengths,
        )
        duration = float(req.arrival_s[-1])
        infos.append(ScenarioInfo(scenario, req.description, duration, *req.window_s))
        for name in policies:
            stage = None
            if progress is not None:
                stage = sim_stage(progress, done / runs, (done + 1) / runs)
            rows.append(_run(name, scenario, system, configuration, req, options, stage))
            done += 1
    if progress is not None:
        progress(1.0)
    return PolicyComparison(
        configuration=configuration,
        capacity_rps=capacity,
        load_fraction=load_fraction,
        offered_rate_rps=rate,
        requests=requests,
        seed=seed,
        scenarios=tuple(infos),
        rows=tuple(rows),
    )


def _check_arguments(
    scenarios: Sequence[str],
    policies: Sequence[str],
    load_fraction: float,
    requests: int,
    dip_fraction: float,
    dip_window: tuple[float, float],
    drift_at: float,
    drift_output_factor: float,
) -> None:
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        raise ConfigError(
            f"unknown scenario {unknown[0]!r}; known: {', '.join(SCENARIOS)}", parameter="scenarios"
        )
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise ConfigError(
            f"unknown policy {unknown[0]!r}; known: {', '.join(POLICIES)}", parameter="policies"
        )
    if not (load_fraction > 0 and math.isfinite(load_fraction)):
        raise ConfigError(
            f"load_fraction must be a finite number > 0, got {load_fraction:g}",
            parameter="load_fraction",
        )
    if requests < 2:
        raise ConfigError(
            f"compare needs at least 2 requests per scenario, got {requests}", parameter="requests"
        )
    if not (0 <= dip_window[0] < dip_window[1] and 0 <= dip_fraction <= 1):
        raise ConfigError(
            f"the bandwidth dip needs 0 <= start < end (fractions of the run) and a fraction in "
            f"[0, 1], got window {dip_window} and fraction {dip_fraction:g}"
        )
    if not (0 <= drift_at <= 1 and drift_output_factor > 0):
        raise ConfigError(
            f"the output drift needs drift_at in [0, 1] and a factor > 0, got {drift_at:g} and "
            f"{drift_output_factor:g}"
        )


def _scenario_requests(
    name: str,
    system: ServingSystem,
    workload: LengthDistribution,
    rate_rps: float,
    count: int,
    rng: np.random.Generator,
    *,
    burst_cv: float,
    dip_fraction: float,
    dip_window: tuple[float, float],
    drift_at: float,
    drift_output_factor: float,
    trace: RequestTrace | None,
    output_lengths: LengthDistribution | None,
) -> _Requests:
    if name == "burst":
        arrival = gamma_arrivals(rate_rps, burst_cv, rng=rng, count=count)
        description = f"gamma inter-arrivals, CV {burst_cv:g}"
    else:
        arrival = poisson_arrivals(rate_rps, rng=rng, count=count)
        description = "Poisson arrivals"
    arrival = arrival - arrival[0]  # the run starts with its first request
    if trace is not None:
        count = min(count, trace.requests)
        arrival = arrival[:count]
        input_tokens = np.asarray(trace.input_tokens[:count], dtype=float)
        output_tokens = np.asarray(trace.output_tokens[:count], dtype=float)
        blocks = trace.prefix_blocks
        prefix = None
        if blocks.offsets[count] > 0:  # some request has prefix blocks
            prefix = PrefixBlocks(
                blocks.values[: blocks.offsets[count]], blocks.offsets[: count + 1]
            )
        description += f", lengths and prefixes of {trace.source}"
    else:
        input_tokens = workload.sample(rng, count)
        output_tokens = (
            np.full(count, float(system.output_tokens))
            if output_lengths is None
            else output_lengths.sample(rng, count)
        )
        prefix = None
    bandwidth = BandwidthTrace.constant(system.link_bandwidth_bytes_per_s)
    expected_s = count / rate_rps
    last_s = float(arrival[-1])
    window = (0.0, last_s)
    if name == "bandwidth_dip":
        start_s = max(dip_window[0] * expected_s, 1e-9)
        end_s = min(dip_window[1] * expected_s, last_s)
        bandwidth = BandwidthTrace.dip(
            system.link_bandwidth_bytes_per_s, start_s, end_s - start_s, dip_fraction
        )
        description += (
            f"; link at {dip_fraction:.0%} of its bandwidth from {start_s:.0f} s to {end_s:.0f} s"
        )
        window = (start_s, end_s)
    elif name == "output_drift":
        drift_s = min(drift_at * expected_s, last_s)
        output_tokens = np.where(
            arrival >= drift_s, output_tokens * drift_output_factor, output_tokens
        )
        description += f"; output lengths x{drift_output_factor:g} from {drift_s:.0f} s"
        window = (drift_s, last_s)
    if not window[0] < window[1]:
        raise ConfigError(f"{name}: the stress window {window} is empty; use more requests")
    return _Requests(arrival, input_tokens, output_tokens, bandwidth, prefix, description, window)


def _run(
    name: str,
    scenario: str,
    system: ServingSystem,
    configuration: Configuration,
    req: _Requests,
    options: Mapping[str, Policy],
    progress: Progress | None,
) -> ComparisonRow:
    lo, hi = req.window_s
    n = int(np.count_nonzero((req.arrival_s >= lo) & (req.arrival_s <= hi)))

    def skipped(note: str) -> ComparisonRow:
        nan = math.nan
        return ComparisonRow(
            scenario=scenario,
            policy=name,
            ran=False,
            note=f"skipped: {note}",
            requests=n,
            offered_rps=nan,
            throughput_rps=nan,
            ttft_mean_s=nan,
            ttft_p90_s=nan,
            ttft_p99_s=nan,
            decode_wait_mean_s=nan,
            offload_fraction=nan,
            link_utilization=nan,
            threshold_changes=0,
            conversions=0,
        )

    if name == "prefix" and req.prefix_blocks is None:
        return skipped("the requests carry no prefix blocks (give a trace with hash_ids)")
    policy = make_policy(name, options)
    if isinstance(policy, RoleRebalancing) and (
        configuration.pd_prefill_instances < policy.min_prefill_instances
        or configuration.pd_decode_instances < policy.min_decode_instances
    ):
        return skipped(
            f"the plan has {configuration.pd_prefill_instances} PD-P / "
            f"{configuration.pd_decode_instances} PD-D instances; re-balancing keeps at least "
            f"{policy.min_prefill_instances} / {policy.min_decode_instances}"
        )
    result = simulate(
        system,
        configuration,
        req.arrival_s,
        req.input_tokens,
        req.output_tokens,
        policy=policy,
        bandwidth=req.bandwidth,
        warmup_s=req.window_s[0],
        horizon_s=req.window_s[1],
        prefix_blocks=req.prefix_blocks,
        progress=progress,
    )
    return ComparisonRow(
        scenario=scenario,
        policy=name,
        ran=True,
        note="",
        requests=result.ttft.requests,
        offered_rps=result.offered_rate_rps,
        throughput_rps=result.throughput_rps,
        ttft_mean_s=result.ttft.mean_s,
        ttft_p90_s=result.ttft.p90_s,
        ttft_p99_s=result.ttft.p99_s,
        decode_wait_mean_s=result.pd_decode.wait.mean_s,
        offload_fraction=result.offload_fraction,
        link_utilization=result.link.utilization,
        threshold_changes=result.threshold_changes,
        conversions=result.roles.conversions,
    )
