"""Library entry point of `prfaas-plan simulate`: simulate a planned deployment at one or more
loads and put the result next to the closed-form model (capacity and unloaded TTFT).

Load is given as a fraction of the **exact-mode** Λ_max of the simulated configuration (what its
pools can actually sustain; the paper-mode figure overstates it) or as an absolute rate. Every
load uses the same random stream (same seed), so rows differ only by the load; what each run is
fed (its requests, the link's bandwidth) is drawn by use_cases/simulation_inputs.py.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from prfaas_plan import plausible, units
from prfaas_plan.analytic.capacity import Configuration, evaluate
from prfaas_plan.analytic.ttft import TtftSummary, unloaded_ttft
from prfaas_plan.choices import Mode
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.inputs.traces import read_mooncake_trace
from prfaas_plan.sim.arrivals import RequestTrace
from prfaas_plan.sim.compare import PolicyComparison
from prfaas_plan.sim.stats import SimulationResult
from prfaas_plan.sim.sustainable import SustainableRate
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware
from prfaas_plan.use_cases.numerics import model_numerics
from prfaas_plan.use_cases.plan import check_threshold
from prfaas_plan.use_cases.simulation_inputs import (
    bandwidth_trace,
    draw_output_tokens,
    empty_window_error,
    output_distribution,
    read_replay_trace,
    run_requests,
    with_trace_workload,
)
from prfaas_plan.use_cases.simulation_spec import (
    DEFAULT_REQUESTS,
    ComparisonSpec,
    SimulationRequest,
    validate,
    validate_comparison,
)

Progress = Callable[[float], None]


@dataclass(frozen=True)
class SimulationRun:
    load_fraction: float | None  # offered / exact-mode Λ_max, None for a trace replayed as is
    rate_rps: float  # the arrival rate asked for
    result: SimulationResult


@dataclass(frozen=True)
class SimulationReport:
    problem: Problem
    request: SimulationRequest
    configuration: Configuration  # the planned deployment that was simulated
    plan_mode: Mode
    exact_capacity_rps: float  # Λ_max of the configuration, exact mode
    paper_capacity_rps: float  # ... paper mode
    unloaded: TtftSummary  # the model's unloaded TTFT of the configuration
    runs: tuple[SimulationRun, ...]
    sustainable: SustainableRate | None = None  # when asked for


# Peak RSS measured with /usr/bin/time -v on `simulate` of the case study: 85 MB at 10^5
# requests and 294 MB at 10^6, i.e. ~237 B per request of a run above ~62 MB of interpreter,
# numpy and model; a sweep of 3 runs of 10^6 peaks at 491 MB: each finished run keeps ~101 B per
# request (its results) while the next runs. The run time was ~2.2 µs per simulated request.
BASE_BYTES = 64 * 2**20
BYTES_PER_SIMULATED_REQUEST = 260  # measured ~237 B, with margin
BYTES_KEPT_PER_REQUEST = 120  # per finished run of a sweep: measured ~101 B, with margin
SECONDS_PER_SIMULATED_REQUEST = 2.5e-6  # measured ~2.2 µs, with margin
SUSTAINABLE_RUNS = 12  # the bisection's simulations (sim/sustainable.py: ~10 from 0.9-1.1 Λ_max)
MEMORY_SHARE = 0.5  # of physical memory a run may plan to use, if below MAX_SIMULATION_BYTES
# compare-policies (every stress scenario and policy on --requests requests): peak RSS 105 MB at
# 10^5 requests and 511 MB at 10^6, ~463 B a request; 33 s at 10^6, ~32 µs a request
COMPARISON_BYTES_PER_REQUEST = 500
COMPARISON_SECONDS_PER_REQUEST = 3.5e-5


def _memory_limit_bytes() -> float:
    """plausible.MAX_SIMULATION_BYTES, or MEMORY_SHARE of physical memory on a smaller machine."""
    import os

    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not on every platform
        return plausible.MAX_SIMULATION_BYTES
    return min(plausible.MAX_SIMULATION_BYTES, physical * MEMORY_SHARE)


def _gib(n_bytes: float) -> str:
    gib = units.bytes_to_gib(n_bytes)
    return f"{gib:.3g}" if gib < 1000 else f"{gib:,.0f}"


def check_memory(
    requests: float,
    parameter: str,
    *,
    runs: int = 1,
    extra_runs: int = 0,
    sweep: str = "",
    bytes_per_request: float = BYTES_PER_SIMULATED_REQUEST,
    seconds_per_request: float = SECONDS_PER_SIMULATED_REQUEST,
) -> None:
    """Refuse, before allocating anything, a simulation that would not fit in memory or time
    (one estimate for `simulate` and `compare-policies`): `runs` runs of `requests` each, whose
    finished runs keep their results, and `extra_runs` more that keep nothing (a bisection).
    memory ≈ BASE_BYTES + requests · (bytes_per_request + BYTES_KEPT_PER_REQUEST · (runs − 1))
    <= _memory_limit_bytes(); time ≈ requests · (runs + extra_runs) · seconds_per_request <=
    plausible.MAX_SIMULATION_S (the per-request figures: simulate's by default). `parameter` names the spec field
    to change, `sweep` the one listing the runs (named when one run alone would fit)."""
    limit = _memory_limit_bytes()
    per_run = int((limit - BASE_BYTES) / bytes_per_request)
    fields = (
        "arrivals.requests/arrivals.duration_s" if parameter == "arrivals.requests" else parameter
    )
    need = BASE_BYTES + requests * (bytes_per_request + BYTES_KEPT_PER_REQUEST * (runs - 1))
    if requests > per_run:
        raise ConfigError(
            f"{requests:.3g} requests would need ~{_gib(need)} GiB, more than the "
            f"{_gib(limit)} GiB a run may use: about {per_run:,} requests fit per run "
            f"({fields})",
            parameter=parameter,
        )
    if need > limit:
        raise ConfigError(
            f"{runs} runs of {requests:,.0f} requests would need ~{_gib(need)} GiB (each "
            f"finished run keeps its results), more than the {_gib(limit)} GiB limit; "
            f"give fewer {sweep + ' values' if sweep else 'runs'} or fewer requests ({fields})",
            parameter=sweep or parameter,
        )
    seconds = requests * (runs + extra_runs) * seconds_per_request
    if seconds > plausible.MAX_SIMULATION_S:
        raise ConfigError(
            f"{runs + extra_runs} simulation{'s' if runs + extra_runs > 1 else ''} of "
            f"{requests:,.0f} requests would take "
            f"~{seconds:.2g} s, more than {plausible.MAX_SIMULATION_S:g} s; ask for fewer "
            f"requests ({fields})",
            parameter=parameter,
        )


def check_span(requests: int, rate_rps: float, parameter: str) -> None:
    """Refuse a run whose span requests / rate exceeds plausible.MAX_SIMULATED_SPAN_S: its time
    grows with the span (the policies act every period), not only with the requests."""
    span_s = requests / rate_rps
    if span_s > plausible.MAX_SIMULATED_SPAN_S:
        raise ConfigError(
            f"{requests:,} requests at {rate_rps:.3g} req/s span ~{span_s:.2g} s, more than "
            f"{plausible.MAX_SIMULATED_SPAN_S:.2g} s (a year); raise {parameter} or ask for fewer "
            "requests",
            parameter=parameter,
        )


def _sustainable(
    problem: Problem,
    configuration: Configuration,
    request: SimulationRequest,
    exact_rps: float,
    trace: RequestTrace | None,
) -> SustainableRate:
    """sim/sustainable.sustainable_rate on Poisson arrivals with stratified lengths (sampling noise
    in the pools' capacity otherwise moves the answer by ~0.7% between seeds): each request's
    own output length, as `simulate` draws it (a trace's requests drawn whole, input and
    output together)."""
    from prfaas_plan.sim.arrivals import poisson_arrivals
    from prfaas_plan.sim.sustainable import sustainable_rate

    rng = np.random.default_rng(request.arrivals.seed)
    count = request.arrivals.requests or DEFAULT_REQUESTS
    unit_arrival_s = poisson_arrivals(1.0, rng=rng, count=count)
    if trace is not None:
        drawn = rng.integers(0, trace.requests, size=count)
        input_tokens, output_tokens = trace.input_tokens[drawn], trace.output_tokens[drawn]
    else:
        input_tokens = problem.workload.sample(rng, count, stratified=True)
        output_tokens = draw_output_tokens(problem, rng, count, stratified=True)
    return sustainable_rate(
        problem.system, configuration, unit_arrival_s, input_tokens, output_tokens,
        low_rps=0.9 * exact_rps, high_rps=1.1 * exact_rps, link_latency_s=request.link_latency_s,
    )  # fmt: skip


def _loads(
    request: SimulationRequest,
    exact_rps: float,
    trace: RequestTrace | None,
    find_sustainable: bool = False,
) -> list[tuple[float | None, float | None]]:
    """(load fraction, rate) of each run: (None, None) replays a trace as recorded."""
    load, arrivals = request.load, request.arrivals
    most = max(load.fractions, default=0) * exact_rps if load.rate_rps is None else load.rate_rps
    runs = 1 if load.rate_rps is not None else max(len(load.fractions), 1)
    if trace is None:
        check_memory(
            arrivals.requests if arrivals.requests is not None else (arrivals.duration_s or 0) * most,
            "arrivals.requests", runs=runs, sweep="load.fractions",
            extra_runs=SUSTAINABLE_RUNS if find_sustainable else 0,
        )  # fmt: skip
    slowest_rps = (
        min(load.fractions, default=0) * exact_rps if load.rate_rps is None else load.rate_rps
    )
    if arrivals.duration_s is not None and arrivals.duration_s * slowest_rps < 1:
        raise empty_window_error(arrivals, slowest_rps)  # less than one request expected
    for f in load.fractions:
        rate_rps = f * exact_rps
        if not plausible.MIN_RATE_RPS <= rate_rps <= plausible.MAX_RATE_RPS:
            raise ConfigError(
                f"load.fractions {f:g} of Λ_max {exact_rps:.3g} req/s is {rate_rps:.3g} req/s, "
                f"outside [{plausible.MIN_RATE_RPS:g}, {plausible.MAX_RATE_RPS:g}] req/s",
                parameter="load.fractions",
            )
    if arrivals.requests is not None and (load.rate_rps is not None or load.fractions):
        if load.rate_rps is not None:
            check_span(arrivals.requests, load.rate_rps, "load.rate_rps")
        else:
            check_span(arrivals.requests, min(load.fractions) * exact_rps, "load.fractions")
    if load.rate_rps is not None:
        return [(load.rate_rps / exact_rps, load.rate_rps)]
    if trace is not None and load.fractions == ():
        return [(None, None)]
    return [(f, f * exact_rps) for f in load.fractions]


@model_numerics("simulate")
def run_simulations(
    problem: Problem,
    request: SimulationRequest,
    *,
    plan_mode: Mode = Mode.PAPER,
    threshold_tokens: float | None = None,
    find_sustainable: bool = False,
    progress: Progress | None = None,
) -> SimulationReport:
    """Plan the scenario (as `optimize` does, in `plan_mode`), then simulate that deployment.
    With `find_sustainable`, also search the highest rate the simulated deployment sustains
    (bisection on the rate with common random numbers), to set against both modes' Λ_max."""
    from prfaas_plan.sim.engine import simulate
    from prfaas_plan.sim.factory import make_policy

    validate(request)
    check_threshold(threshold_tokens)
    trace = read_replay_trace(request)
    if trace is not None:  # plan and measure capacity on the trace's own requests
        assert request.arrivals.trace is not None
        problem = with_trace_workload(problem, trace, request.arrivals.trace)
    system, workload = problem.system, problem.workload
    space = SearchSpace(problem.prfaas_instances, problem.pd_instances, threshold_tokens)
    configuration = optimize_fixed_hardware(system, workload, space, plan_mode).configuration
    exact = evaluate(system, workload, configuration, Mode.EXACT).system_throughput_rps
    paper = evaluate(system, workload, configuration, Mode.PAPER).system_throughput_rps
    if not exact > 0:
        raise ConfigError("the planned configuration serves no requests; nothing to simulate")
    loads = _loads(request, exact, trace, find_sustainable)
    bandwidth = bandwidth_trace(system, request.stress)
    sustainable = None
    if find_sustainable:
        sustainable = _sustainable(problem, configuration, request, exact, trace)
    runs = []
    for i, (fraction, rate_rps) in enumerate(loads):
        rng = np.random.default_rng(request.arrivals.seed)
        arrival_s, input_tokens, output_tokens, prefix = run_requests(
            problem, request.arrivals, rate_rps, rng, trace
        )

        def step(done: float, i: int = i) -> None:
            if progress is not None:
                progress((i + done) / len(loads))

        result = simulate(
            system, configuration, arrival_s, input_tokens, output_tokens,
            policy=make_policy(request.policy.kind), link_latency_s=request.link_latency_s,
            bandwidth=bandwidth, prefix_blocks=prefix, progress=step,
        )  # fmt: skip
        asked = rate_rps if rate_rps is not None else result.offered_rate_rps
        runs.append(SimulationRun(fraction, asked, result))
    return SimulationReport(
        problem=problem,
        request=request,
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
    comparison: PolicyComparison


@model_numerics("compare-policies")
def compare_policies_for(
    problem: Problem,
    spec: ComparisonSpec | None = None,
    *,
    plan_mode: Mode = Mode.PAPER,
    progress: Progress | None = None,
) -> ComparisonReport:
    """Plan the scenario, then run the policy comparison of sim/compare.py on that plan."""
    from prfaas_plan.sim.compare import compare_policies

    spec = spec if spec is not None else ComparisonSpec()
    validate_comparison(spec)
    check_memory(
        spec.requests, "comparison.requests", bytes_per_request=COMPARISON_BYTES_PER_REQUEST,
        seconds_per_request=COMPARISON_SECONDS_PER_REQUEST,
    )  # fmt: skip
    trace = read_mooncake_trace(spec.trace) if spec.trace else None
    if trace is not None and trace.requests < spec.requests:
        raise ConfigError(
            f"{spec.trace}: the trace has {trace.requests:,} requests, fewer than "
            f"comparison.requests {spec.requests:,}; ask for at most {trace.requests:,} or give "
            "a longer trace",
            parameter="comparison.requests",
        )
    space = SearchSpace(problem.prfaas_instances, problem.pd_instances)
    configuration = optimize_fixed_hardware(
        problem.system, problem.workload, space, plan_mode
    ).configuration
    exact = evaluate(problem.system, problem.workload, configuration, Mode.EXACT)
    if exact.system_throughput_rps > 0:  # compare_policies refuses a plan that serves nothing
        rate_rps = spec.load_fraction * exact.system_throughput_rps
        check_span(spec.requests, rate_rps, "comparison.load_fraction")
    comparison = compare_policies(
        problem.system, problem.workload, configuration, load_fraction=spec.load_fraction,
        requests=spec.requests, seed=spec.seed,
        trace=trace, output_lengths=output_distribution(problem), progress=progress,
    )  # fmt: skip
    return ComparisonReport(problem, plan_mode, comparison)
