"""What one simulated run is fed: its requests (arrivals drawn at a rate, Poisson, gamma or
sinusoidal, each with its own input and output length; or a Mooncake trace replayed as recorded
or sped up) and the link's bandwidth under a stress test's dip.

Every draw takes the run's random generator, so runs that share a seed share their stream.
Units: seconds, tokens, req/s, bytes/s.
"""

from pathlib import Path

import numpy as np

from prfaas_plan.analytic.capacity import ServingSystem
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.choices import ArrivalProcess, RoutingPolicy
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.inputs.traces import read_mooncake_trace
from prfaas_plan.sim.arrivals import PrefixBlocks, RequestTrace
from prfaas_plan.sim.queues import BandwidthTrace
from prfaas_plan.use_cases.simulation_spec import ArrivalSpec, SimulationRequest, StressSpec


def run_requests(
    problem: Problem,
    spec: ArrivalSpec,
    rate_rps: float | None,
    rng: np.random.Generator,
    trace: RequestTrace | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, PrefixBlocks | None]:
    """(arrival_s, input_tokens, output_tokens, prefix_blocks) for one run."""
    from prfaas_plan.sim import arrivals

    if trace is not None:
        speedup = 1.0 if rate_rps is None else rate_rps / (trace.requests / trace.arrival_s[-1])
        replay = trace.with_speedup(speedup) if speedup != 1.0 else trace
        return replay.arrival_s, replay.input_tokens, replay.output_tokens, replay.prefix_blocks
    assert rate_rps is not None  # only a trace is replayed at its own rate
    count, duration_s = spec.requests, spec.duration_s
    if spec.process is ArrivalProcess.POISSON:
        arrival_s = arrivals.poisson_arrivals(rate_rps, rng=rng, count=count, duration_s=duration_s)
    elif spec.process is ArrivalProcess.GAMMA:
        arrival_s = arrivals.gamma_arrivals(
            rate_rps, spec.burst_cv, rng=rng, count=count, duration_s=duration_s
        )
    else:
        arrival_s = arrivals.sinusoidal_arrivals(
            rate_rps, spec.amplitude, spec.period_s, rng=rng, count=count, duration_s=duration_s
        )
    if arrival_s.size == 0:  # a short window, drawn empty
        raise empty_window_error(spec, rate_rps)
    input_tokens = problem.workload.sample(rng, arrival_s.size)
    return arrival_s, input_tokens, draw_output_tokens(problem, rng, arrival_s.size), None


def draw_output_tokens(
    problem: Problem, rng: np.random.Generator, count: int, *, stratified: bool = False
) -> np.ndarray:
    """Each request's own output length: drawn from workload.output_tokens when it is a
    distribution (independently of the input length), else the constant."""
    distribution = output_distribution(problem)
    if distribution is None:
        return np.full(count, problem.system.output_tokens)
    return distribution.sample(rng, count, stratified=stratified)


def output_distribution(problem: Problem) -> LengthDistribution | None:
    """The scenario's output-length distribution, None where every request has the mean."""
    return None if problem.output_lengths is None else problem.output_lengths.distribution


def empty_window_error(spec: ArrivalSpec, rate_rps: float) -> ConfigError:
    """The refusal of an arrivals.duration_s window that holds no request at `rate_rps`."""
    return ConfigError(
        f"arrivals.duration_s of {spec.duration_s:g} s holds no request at {rate_rps:.3g} req/s; "
        f"give a window of at least a few times 1 / rate = {1 / rate_rps:.3g} s, or "
        "arrivals.requests",
        parameter="arrivals.duration_s",
    )


def with_trace_workload(problem: Problem, trace: RequestTrace, path: Path) -> Problem:
    """`problem` with the trace's own input lengths as its workload and their mean output."""
    import dataclasses

    from prfaas_plan.analytic.distributions import ObservedLengths

    system = dataclasses.replace(problem.system, output_tokens=float(np.mean(trace.output_tokens)))
    workload = ObservedLengths(trace.input_tokens, source=str(path))
    return dataclasses.replace(problem, system=system, workload=workload)


def read_replay_trace(request: SimulationRequest) -> RequestTrace | None:
    """The trace arrivals.trace names (None without one), refused if it cannot be replayed."""
    path = request.arrivals.trace
    if path is None:
        return None
    trace = read_mooncake_trace(path)
    if trace.requests < 2 or not trace.arrival_s[-1] > 0:
        raise ConfigError(
            f"{path}: a replay needs at least two distinct timestamps", parameter="arrivals.trace"
        )
    if request.policy.kind is RoutingPolicy.PREFIX and trace.prefix_blocks.values.size == 0:
        raise ConfigError(
            f"{path}: policy.kind prefix needs hash_ids in the trace, found none",
            parameter="policy.kind",
        )
    return trace


def bandwidth_trace(system: ServingSystem, stress: StressSpec) -> BandwidthTrace | None:
    """The link's bandwidth over time under the stress test's dip; None without a dip."""
    if stress.dip_start_s is None or stress.dip_duration_s is None:
        return None
    return BandwidthTrace.dip(
        system.link_bandwidth_bytes_per_s, stress.dip_start_s, stress.dip_duration_s,
        stress.dip_fraction,
    )  # fmt: skip
