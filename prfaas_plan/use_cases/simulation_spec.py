"""What `simulate` and `compare-policies` are asked to do: small frozen specs, each default
defined once here (the CLI's option defaults refer to them), and their validation. Units in
every name. Kept free of numpy so the CLI can build them without loading the model.

Errors name the spec field they are about, as `<spec>.<field>` (`arrivals.requests`,
`load.rate_rps`, `comparison.load_fraction`, ...), and carry it in `parameter`.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

from prfaas_plan import plausible
from prfaas_plan.choices import ArrivalProcess, RoutingPolicy
from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.defaults import COMPARISON_REQUESTS, LOAD_FRACTION, SEED, SIMULATED_REQUESTS

DEFAULT_REQUESTS = SIMULATED_REQUESTS


@dataclass(frozen=True)
class ArrivalSpec:
    """How requests arrive: a process and exactly one of `requests`/`duration_s`, or a
    Mooncake JSONL `trace` replayed (its own requests; sped up to a load if one is given)."""

    process: ArrivalProcess = ArrivalProcess.POISSON
    requests: int | None = DEFAULT_REQUESTS
    duration_s: float | None = None
    seed: int = SEED
    burst_cv: float = 3.0  # gamma: coefficient of variation of the inter-arrival times
    period_s: float = 600.0  # sinusoidal: period of the rate
    amplitude: float = 0.5  # sinusoidal: the rate swings by ±amplitude × mean
    trace: Path | None = None


@dataclass(frozen=True)
class LoadSpec:
    """The arrival rate: fractions of the plan's exact-mode Λ_max (one run each) or an
    absolute `rate_rps`, not both; neither replays a trace as recorded."""

    fractions: tuple[float, ...] = (LOAD_FRACTION,)
    rate_rps: float | None = None


@dataclass(frozen=True)
class StressSpec:
    """A bandwidth dip: the link keeps `dip_fraction` of its bandwidth for `dip_duration_s`
    from `dip_start_s` (both or neither)."""

    dip_start_s: float | None = None
    dip_duration_s: float | None = None
    dip_fraction: float = 0.1


@dataclass(frozen=True)
class PolicySpec:
    """The scheduler policy, by name (its parameters are the simulator's defaults)."""

    kind: RoutingPolicy = RoutingPolicy.STATIC


@dataclass(frozen=True)
class SimulationRequest:
    """Everything `run_simulations` simulates, besides the scenario and the plan."""

    arrivals: ArrivalSpec = field(default_factory=ArrivalSpec)
    load: LoadSpec = field(default_factory=LoadSpec)
    stress: StressSpec = field(default_factory=StressSpec)
    policy: PolicySpec = field(default_factory=PolicySpec)
    link_latency_s: float = 0.0  # extra fixed latency per KV transfer


@dataclass(frozen=True)
class ComparisonSpec:
    """What `compare_policies_for` runs: every stress scenario at one load."""

    load_fraction: float = LOAD_FRACTION  # of the plan's exact-mode Λ_max
    requests: int = COMPARISON_REQUESTS  # per stress scenario
    seed: int = SEED
    trace: Path | None = None  # Mooncake JSONL: lengths and prefix blocks (prefix policy)


def _positive(value: float) -> bool:
    return value > 0 and math.isfinite(value)


def _fail(parameter: str, message: str) -> ConfigError:
    return ConfigError(message, parameter=parameter)


def _validate_load(load: LoadSpec, arrivals: ArrivalSpec) -> None:
    if load.rate_rps is not None and not _positive(load.rate_rps):
        msg = f"load.rate_rps must be a finite number > 0, got {load.rate_rps:g}"
        raise _fail("load.rate_rps", msg)
    if load.rate_rps is None and not load.fractions and arrivals.trace is None:
        raise _fail("load.fractions", "give load.fractions or load.rate_rps")
    if load.rate_rps is not None and load.fractions:
        raise _fail("load.fractions", "give load.fractions or load.rate_rps, not both")
    for f in load.fractions:
        if not _positive(f):
            msg = f"load.fractions must be fractions > 0 of the exact-mode Λ_max, got {f:g}"
            raise _fail("load.fractions", msg)


def _validate_arrivals(a: ArrivalSpec) -> None:
    if a.trace is not None and (a.requests is not None or a.duration_s is not None):
        msg = "arrivals.trace replays its own requests: drop arrivals.requests/arrivals.duration_s"
        raise _fail("arrivals.trace", msg)
    if (a.requests is None) == (a.duration_s is None) and a.trace is None:
        msg = "give exactly one of arrivals.requests and arrivals.duration_s"
        raise _fail("arrivals.requests", msg)
    if not _positive(a.burst_cv):
        msg = f"arrivals.burst_cv must be a finite number > 0, got {a.burst_cv:g}"
        raise _fail("arrivals.burst_cv", msg)
    if not _positive(a.period_s):
        msg = f"arrivals.period_s must be a finite number > 0, got {a.period_s:g}"
        raise _fail("arrivals.period_s", msg)
    if not 0 <= a.amplitude <= 1:
        msg = (
            f"arrivals.amplitude must be in [0, 1] (a share of the mean rate), got {a.amplitude:g}"
        )
        raise _fail("arrivals.amplitude", msg)


def _validate_stress(s: StressSpec) -> None:
    if not 0 <= s.dip_fraction <= 1:
        msg = f"stress.dip_fraction must be in [0, 1] (the share of the link left), got {s.dip_fraction:g}"
        raise _fail("stress.dip_fraction", msg)
    for name, value in (
        ("stress.dip_start_s", s.dip_start_s),
        ("stress.dip_duration_s", s.dip_duration_s),
    ):
        if value is not None and not _positive(value):
            raise _fail(name, f"{name} must be a finite number > 0, got {value:g}")


def validate(request: SimulationRequest) -> None:
    """Raise ConfigError for an inconsistent request (before any work starts)."""
    a, s = request.arrivals, request.stress
    _validate_load(request.load, a)
    _validate_arrivals(a)
    _validate_stress(s)
    if a.requests is not None and a.requests < 1:
        raise _fail("arrivals.requests", f"arrivals.requests must be >= 1, got {a.requests}")
    if a.duration_s is not None and not _positive(a.duration_s):
        msg = f"arrivals.duration_s must be a finite number > 0, got {a.duration_s:g}"
        raise _fail("arrivals.duration_s", msg)
    if request.link_latency_s < 0 or not math.isfinite(request.link_latency_s):
        msg = f"link_latency_s must be >= 0, got {request.link_latency_s:g}"
        raise _fail("link_latency_s", msg)
    if a.trace is not None and a.process is not ArrivalProcess.TRACE:
        msg = (
            f"arrivals.process {a.process} has no effect with arrivals.trace (a trace replays "
            "its own arrival times); drop one of them"
        )
        raise _fail("arrivals.process", msg)
    if (a.process is ArrivalProcess.TRACE) != (a.trace is not None):
        raise _fail(
            "arrivals.process", "arrivals.process trace and arrivals.trace FILE go together"
        )
    if request.policy.kind is RoutingPolicy.PREFIX and a.trace is None:
        msg = "policy.kind prefix needs arrivals.trace FILE with hash_ids (prefix blocks)"
        raise _fail("policy.kind", msg)
    if (s.dip_start_s is None) != (s.dip_duration_s is None):
        msg = "a bandwidth dip needs both stress.dip_start_s and stress.dip_duration_s"
        raise _fail("stress.dip_duration_s", msg)
    _check_bounds(request)


def _check_bounds(request: SimulationRequest) -> None:
    """plausible.py's plausibility bounds (after the rules above, whose messages come first)."""
    a, s, load = request.arrivals, request.stress, request.load
    plausible.check_in_range("arrivals.seed", a.seed, 0, plausible.MAX_SEED)
    if load.rate_rps is not None:
        plausible.check_in_range(
            "load.rate_rps", load.rate_rps, plausible.MIN_RATE_RPS, plausible.MAX_RATE_RPS, "req/s"
        )
    for f in load.fractions:
        plausible.check_in_range(
            "load.fractions", f, plausible.MIN_LOAD_FRACTION, plausible.MAX_LOAD_FRACTION
        )
    plausible.check_in_range(
        "arrivals.burst_cv", a.burst_cv, plausible.MIN_BURST_CV, plausible.MAX_BURST_CV
    )
    seconds = [
        ("arrivals.duration_s", a.duration_s),
        ("arrivals.period_s", a.period_s),
        ("stress.dip_start_s", s.dip_start_s),
        ("stress.dip_duration_s", s.dip_duration_s),
        ("link_latency_s", request.link_latency_s),
    ]
    for name, value in seconds:
        if value is not None:
            plausible.check_in_range(name, value, 0, plausible.MAX_SECONDS, "s")


def validate_comparison(spec: ComparisonSpec) -> None:
    if not _positive(spec.load_fraction):
        msg = f"comparison.load_fraction must be a finite fraction > 0, got {spec.load_fraction:g}"
        raise _fail("comparison.load_fraction", msg)
    if spec.requests < 100:
        msg = f"comparison.requests must be >= 100 per scenario, got {spec.requests}"
        raise _fail("comparison.requests", msg)
    plausible.check_in_range(
        "comparison.load_fraction", spec.load_fraction, plausible.MIN_LOAD_FRACTION,
        plausible.MAX_LOAD_FRACTION,
    )  # fmt: skip
    plausible.check_in_range("comparison.seed", spec.seed, 0, plausible.MAX_SEED)


def refuse_unused(
    process: ArrivalProcess,
    burst_cv: float | None,
    period_s: float | None,
    amplitude: float | None,
    dip_fraction: float | None,
    dip_start_s: float | None,
    dip_duration_s: float | None,
) -> None:
    """`simulate`'s options that only one arrival process (or a dip) reads, refused when given
    with another, where they would have no effect."""
    unused = [
        ("arrivals.burst_cv", burst_cv, process is not ArrivalProcess.GAMMA,
         f"only gamma arrivals have a burst CV (arrivals.process is {process})"),
        ("arrivals.period_s", period_s, process is not ArrivalProcess.SINUSOIDAL,
         f"only sinusoidal arrivals have a period (arrivals.process is {process})"),
        ("arrivals.amplitude", amplitude, process is not ArrivalProcess.SINUSOIDAL,
         f"only sinusoidal arrivals have an amplitude (arrivals.process is {process})"),
        ("stress.dip_fraction", dip_fraction, dip_start_s is None and dip_duration_s is None,
         "it is the share of the link left during a dip; give stress.dip_start_s and "
         "stress.dip_duration_s"),
    ]  # fmt: skip
    for name, value, idle, why in unused:
        if value is not None and idle:
            raise ConfigError(f"{name} has no effect here: {why}", parameter=name)
