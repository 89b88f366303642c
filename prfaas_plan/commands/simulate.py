"""Library entry point of `prfaas-plan simulate`: simulate a planned deployment at one or more
loads and put the result next to the closed-form model (capacity and unloaded TTFT).

Load is given as a fraction of the **exact-mode** Λ_max of the simulated configuration (what its
pools can actually sustain; the paper-mode figure overstates it) or as an absolute rate. Every
load uses the same random stream (same seed), so rows differ only by the load.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from prfaas_plan.analytic.capacity import Configuration, evaluate
from prfaas_plan.analytic.ttft import TtftSummary, unloaded_ttft
from prfaas_plan.choices import ArrivalProcess, Mode, RoutingPolicy
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware

Progress = Callable[[float], None]


@dataclass(frozen=True)
class SimulationSpec:
    """What to simulate; units in every name. Exactly one of `load_fractions`/`rate_rps`."""

    load_fractions: tuple[float, ...] = (0.8,)
    rate_rps: float | None = None
    requests: int | None = 100_000
    duration_s: float | None = None
    seed: int = 0
    arrivals: ArrivalProcess = ArrivalProcess.POISSON
    burst_cv: float = 3.0  # gamma inter-arrival coefficient of variation
    period_s: float = 600.0  # sinusoidal rate period
    amplitude: float = 0.5  # sinusoidal: rate swings by ±amplitude × mean
    trace: Path | None = None  # Mooncake JSONL
    policy: RoutingPolicy = RoutingPolicy.STATIC
    link_latency_s: float = 0.0
    dip_start_s: float | None = None  # bandwidth dip: start, duration, remaining fraction
    dip_duration_s: float | None = None
    dip_fraction: float = 0.1


@dataclass(frozen=True)
class SimulationRun:
    load_fraction: float | None  # offered / exact-mode Λ_max, None for a trace replayed as is
    rate_rps: float  # the arrival rate asked for
    result: object  # simulate.SimulationResult


@dataclass(frozen=True)
class SimulationReport:
    problem: Problem
    spec: SimulationSpec
    configuration: Configuration  # the planned deployment that was simulated
    plan_mode: Mode
    exact_capacity_rps: float  # Λ_max of the configuration, exact mode
    paper_capacity_rps: float  # ... paper mode
    unloaded: TtftSummary  # the model's unloaded TTFT of the configuration
    runs: tuple[SimulationRun, ...]
    sustainable: object = None  # simulate.SustainableRate, when asked for


def validate(spec: SimulationSpec) -> None:
    """Raise ConfigError for an inconsistent spec (before any work starts)."""
    if spec.rate_rps is not None and not (spec.rate_rps > 0 and np.isfinite(spec.rate_rps)):
        raise ConfigError(f"--rate-rps must be a finite number > 0, got {spec.rate_rps:g}")
    if spec.rate_rps is None and not spec.load_fractions and spec.trace is None:
        raise ConfigError("give --load or --rate-rps")
    if spec.rate_rps is not None and spec.load_fractions:
        raise ConfigError("give --load or --rate-rps, not both")
    for f in spec.load_fractions:
        if not (f > 0 and np.isfinite(f)):
            raise ConfigError(f"--load must be fractions > 0 of the exact-mode Λ_max, got {f:g}")
    if spec.trace is not None and (spec.requests is not None or spec.duration_s is not None):
        raise ConfigError("--trace replays its own requests: drop --requests/--duration-s")
    if (spec.requests is None) == (spec.duration_s is None) and spec.trace is None:
        raise ConfigError("give exactly one of --requests and --duration-s")
    if not (spec.burst_cv > 0 and np.isfinite(spec.burst_cv)):
        raise ConfigError(f"--burst-cv must be a finite number > 0, got {spec.burst_cv:g}")
    if not (spec.period_s > 0 and np.isfinite(spec.period_s)):
        raise ConfigError(f"--period-s must be a finite number > 0, got {spec.period_s:g}")
    if not 0 <= spec.amplitude <= 1:
        raise ConfigError(
            f"--amplitude must be in [0, 1] (a share of the mean rate), got {spec.amplitude:g}"
        )
    if not 0 <= spec.dip_fraction <= 1:
        raise ConfigError(
            f"--dip-fraction must be in [0, 1] (the share of the link left), got {spec.dip_fraction:g}"
        )
    for flag, value in (
        ("--dip-start-s", spec.dip_start_s),
        ("--dip-duration-s", spec.dip_duration_s),
    ):
        if value is not None and not (value > 0 and np.isfinite(value)):
            raise ConfigError(f"{flag} must be a finite number > 0, got {value:g}")
    if spec.requests is not None and spec.requests < 1:
        raise ConfigError(f"--requests must be >= 1, got {spec.requests}")
    if spec.duration_s is not None and not (spec.duration_s > 0 and np.isfinite(spec.duration_s)):
        raise ConfigError(f"--duration-s must be a finite number > 0, got {spec.duration_s:g}")
    if spec.link_latency_s < 0 or not np.isfinite(spec.link_latency_s):
        raise ConfigError(f"--link-latency-s must be >= 0, got {spec.link_latency_s:g}")
    if (spec.arrivals is ArrivalProcess.TRACE) != (spec.trace is not None):
        raise ConfigError("--arrivals trace and --trace FILE go together")
    if spec.policy is RoutingPolicy.PREFIX and spec.trace is None:
        raise ConfigError("--policy prefix needs --trace FILE with hash_ids (prefix blocks)")
    if (spec.dip_start_s is None) != (spec.dip_duration_s is None):
        raise ConfigError("a bandwidth dip needs both --dip-start-s and --dip-duration-s")


BYTES_PER_SIMULATED_REQUEST = 400  # measured ~255 B (1M requests: 313 MB peak), with margin
MEMORY_SHARE = 0.5  # of physical memory a run may plan to use


def _check_memory(requests: float) -> None:
    """Refuse runs that cannot fit in memory, before allocating anything."""
    import os

    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not on every platform
        return
    limit = int(physical * MEMORY_SHARE / BYTES_PER_SIMULATED_REQUEST)
    if requests > limit:
        raise ConfigError(
            f"{requests:.3g} requests would need ~{requests * BYTES_PER_SIMULATED_REQUEST / 2**30:.0f} GiB; "
            f"this machine fits about {limit:,} per run (--requests/--duration-s)"
        )


def _requests(problem: Problem, spec: SimulationSpec, rate_rps: float, rng, trace):
    """(arrival_s, input_tokens, output_tokens, prefix_blocks) for one run."""
    from prfaas_plan.sim import arrivals

    if trace is not None:
        speedup = 1.0 if rate_rps is None else rate_rps / (trace.requests / trace.arrival_s[-1])
        replay = trace.with_speedup(speedup) if speedup != 1.0 else trace
        return replay.arrival_s, replay.input_tokens, replay.output_tokens, replay.prefix_blocks
    size = {"count": spec.requests, "duration_s": spec.duration_s}
    if spec.arrivals is ArrivalProcess.POISSON:
        arrival_s = arrivals.poisson_arrivals(rate_rps, rng=rng, **size)
    elif spec.arrivals is ArrivalProcess.GAMMA:
        arrival_s = arrivals.gamma_arrivals(rate_rps, spec.burst_cv, rng=rng, **size)
    else:
        arrival_s = arrivals.sinusoidal_arrivals(
            rate_rps, spec.amplitude, spec.period_s, rng=rng, **size
        )
    input_tokens = arrivals.sample_lengths(problem.workload, arrival_s.size, rng)
    output_tokens = np.full(arrival_s.size, problem.system.output_tokens)
    return arrival_s, input_tokens, output_tokens, None


def _policy(spec: SimulationSpec):
    from prfaas_plan.sim.engine import AdaptiveThreshold, StaticThreshold
    from prfaas_plan.sim.prefix import PrefixAwareThreshold
    from prfaas_plan.sim.rebalance import RoleRebalancing

    return {
        RoutingPolicy.STATIC: StaticThreshold,
        RoutingPolicy.ADAPTIVE: AdaptiveThreshold,
        RoutingPolicy.REBALANCE: RoleRebalancing,
        RoutingPolicy.DUAL: lambda: RoleRebalancing(adaptive=AdaptiveThreshold()),
        RoutingPolicy.PREFIX: PrefixAwareThreshold,
    }[spec.policy]()


def _sustainable(problem: Problem, configuration, spec: SimulationSpec, exact_rps: float, trace):
    """simulate.sustainable_rate on Poisson arrivals with stratified lengths (sampling noise
    in the pools' capacity otherwise moves the answer by ~0.7% between seeds)."""
    from prfaas_plan.sim.arrivals import poisson_arrivals, sample_lengths
    from prfaas_plan.sim.engine import sustainable_rate

    rng = np.random.default_rng(spec.seed)
    count = spec.requests or 100_000
    unit_arrival_s = poisson_arrivals(1.0, rng=rng, count=count)
    if trace is not None:
        input_tokens = rng.choice(trace.input_tokens, size=count)
    else:
        input_tokens = sample_lengths(problem.workload, count, rng, stratified=True)
    return sustainable_rate(
        problem.system, configuration, unit_arrival_s, input_tokens,
        low_rps=0.9 * exact_rps, high_rps=1.1 * exact_rps, link_latency_s=spec.link_latency_s,
    )  # fmt: skip


def _with_trace_workload(problem: Problem, trace, path: Path) -> Problem:
    import dataclasses

    from prfaas_plan.analytic.distributions import ObservedLengths

    system = dataclasses.replace(problem.system, output_tokens=float(np.mean(trace.output_tokens)))
    workload = ObservedLengths(trace.input_tokens, source=str(path))
    return dataclasses.replace(problem, system=system, workload=workload)


def run_simulations(
    problem: Problem,
    spec: SimulationSpec,
    *,
    plan_mode: Mode = Mode.PAPER,
    threshold_tokens: float | None = None,
    find_sustainable: bool = False,
    progress: Progress | None = None,
) -> SimulationReport:
    """Plan the scenario (as `optimize` does, in `plan_mode`), then simulate that deployment.
    With `find_sustainable`, also search the highest rate the simulated deployment sustains
    (bisection on the rate with common random numbers), to set against both modes' Λ_max."""
    from prfaas_plan.sim.arrivals import read_mooncake_trace
    from prfaas_plan.sim.engine import simulate
    from prfaas_plan.sim.queues import BandwidthTrace

    validate(spec)
    trace = read_mooncake_trace(spec.trace) if spec.trace is not None else None
    if trace is not None:
        if trace.requests < 2 or not trace.arrival_s[-1] > 0:
            raise ConfigError(f"{spec.trace}: a replay needs at least two distinct timestamps")
        if spec.policy is RoutingPolicy.PREFIX and trace.prefix_blocks.values.size == 0:
            raise ConfigError(
                f"{spec.trace}: --policy prefix needs hash_ids in the trace, found none"
            )
        # plan and measure capacity on the trace's own requests
        problem = _with_trace_workload(problem, trace, spec.trace)
    system, workload = problem.system, problem.workload
    space = SearchSpace(problem.prfaas_instances, problem.pd_instances, threshold_tokens)
    configuration = optimize_fixed_hardware(system, workload, space, plan_mode).configuration
    exact = evaluate(system, workload, configuration, Mode.EXACT).system_throughput_rps
    paper = evaluate(system, workload, configuration, Mode.PAPER).system_throughput_rps
    if not exact > 0:
        raise ConfigError("the planned configuration serves no requests; nothing to simulate")
    most = max(spec.load_fractions, default=0) * exact if spec.rate_rps is None else spec.rate_rps
    _check_memory(spec.requests if spec.requests is not None else (spec.duration_s or 0) * most)
    if spec.rate_rps is not None:
        loads = [(spec.rate_rps / exact, spec.rate_rps)]
    elif trace is not None and spec.load_fractions == ():
        loads = [(None, None)]
    else:
        loads = [(f, f * exact) for f in spec.load_fractions]
    bandwidth = None
    if spec.dip_start_s is not None:
        bandwidth = BandwidthTrace.dip(
            system.link_bandwidth_bytes_per_s,
            spec.dip_start_s,
            spec.dip_duration_s,
            spec.dip_fraction,
        )
    sustainable = None
    if find_sustainable:
        sustainable = _sustainable(problem, configuration, spec, exact, trace)
    runs = []
    for i, (fraction, rate_rps) in enumerate(loads):
        rng = np.random.default_rng(spec.seed)
        arrival_s, input_tokens, output_tokens, prefix = _requests(
            problem, spec, rate_rps, rng, trace
        )

        def step(done: float, i=i) -> None:
            if progress is not None:
                progress((i + done) / len(loads))

        result = simulate(
            system, configuration, arrival_s, input_tokens, output_tokens,
            policy=_policy(spec), link_latency_s=spec.link_latency_s, bandwidth=bandwidth,
            prefix_blocks=prefix, progress=step,
        )  # fmt: skip
        asked = rate_rps if rate_rps is not None else result.offered_rate_rps
        runs.append(SimulationRun(fraction, asked, result))
    return SimulationReport(
        problem=problem,
        spec=spec,
        configuration=configuration,
        plan_mode=plan_mode,
        exact_capacity_rps=exact,
        paper_capacity_rps=paper,
        unloaded=unloaded_ttft(system, workload, configuration.threshold_tokens),
        runs=tuple(runs),
        sustainable=sustainable,
    )


@dataclass(frozen=True)
class ComparisonReport:
    problem: Problem
    plan_mode: Mode
    comparison: object  # sim_compare.PolicyComparison


def compare_policies_for(
    problem: Problem,
    *,
    load_fraction: float = 0.8,
    requests: int = 20_000,
    seed: int = 0,
    trace: Path | None = None,
    plan_mode: Mode = Mode.PAPER,
    progress: Progress | None = None,
) -> ComparisonReport:
    """Plan the scenario, then run the policy comparison of sim_compare on that plan."""
    from prfaas_plan.sim.arrivals import read_mooncake_trace
    from prfaas_plan.sim.compare import compare_policies

    if not (load_fraction > 0 and np.isfinite(load_fraction)):
        raise ConfigError(f"--load must be a finite fraction > 0, got {load_fraction:g}")
    if requests < 100:
        raise ConfigError(f"--requests must be >= 100 per scenario, got {requests}")
    space = SearchSpace(problem.prfaas_instances, problem.pd_instances)
    configuration = optimize_fixed_hardware(
        problem.system, problem.workload, space, plan_mode
    ).configuration
    comparison = compare_policies(
        problem.system, problem.workload, configuration, load_fraction=load_fraction,
        requests=requests, seed=seed, trace=read_mooncake_trace(trace) if trace else None,
        progress=progress,
    )  # fmt: skip
    return ComparisonReport(problem, plan_mode, comparison)
