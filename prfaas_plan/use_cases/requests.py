"""What each command is asked, declared once: one typed request per command, its fields,
defaults and meaning. Every door builds the same request — the CLI from its flags (cli/), the
HTTP API from the JSON body (server/bodies.py adds the scenario; the OpenAPI schema is this
one), a sweep from its `parameters` and axes (sweep/commands.py) — and hands it to the
command's use-case (use_cases/calls.py), so the three cannot drift apart.

Names are the library's (`target_rps`, `gpu_prices_usd_per_gpu_hour`), with units; the CLI
alone knows them as flags. Plausibility bounds stay in plausible.py, checked by the use-cases
whichever door a request came through. Strict as a scenario file: unknown fields, wrong types,
NaN and inf refused.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError, field_validator

from prfaas_plan.choices import ArrivalProcess, CostModel, Mode, RangePolicy, RoutingPolicy, Solver
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import Strict, format_validation_error

if TYPE_CHECKING:
    from prfaas_plan.use_cases.simulation_spec import SimulationRequest

Percentile = Literal["mean", "50", "90", "99"]
# a choice is given by its value ("exact", "tco"): from a JSON body, a sweep file or a flag
ModeChoice = Annotated[Mode, Field(strict=False)]
RangeChoice = Annotated[RangePolicy, Field(strict=False)]
SolverChoice = Annotated[Solver, Field(strict=False)]
CostModelChoice = Annotated[CostModel, Field(strict=False)]


def _doc(text: str) -> str:
    return " ".join(text.split())


class TtftFields(Strict):
    """A TTFT target under load."""

    ttft_target_s: float | None = Field(
        None, description=_doc("TTFT target in seconds at ttft_percentile, under load.")
    )
    ttft_percentile: Percentile | None = Field(
        None,
        description=_doc("The TTFT statistic the target bounds: mean, 50, 90 or 99 (default: 90)."),
    )
    ttft_load: float | None = Field(
        None, description=_doc("Load of the TTFT target as a fraction of Λ_max.")
    )
    ttft_load_rps: float | None = Field(
        None, description=_doc("Load of the TTFT target in req/s (instead of ttft_load).")
    )

    @field_validator("ttft_percentile", mode="before")
    @classmethod
    def _percentile_as_text(cls, value: object) -> object:
        """A sweep file writes `90`, a JSON body "90": the same percentile."""
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    def percentile(self) -> int | str | None:
        """The percentile as the library takes it: 'mean' or an int."""
        p = self.ttft_percentile
        return p if p is None or p == "mean" else int(p)


class GpuPrices(Strict):
    gpu_prices_usd_per_gpu_hour: dict[str, float] | None = Field(
        None,
        description=_doc(
            "USD per GPU-hour by GPU type, over the GPU files and the scenario's cost block."
        ),
    )
    cost_model: CostModelChoice | None = Field(
        None, description=_doc("How GPU-hours are priced: on-demand or tco (default: on-demand).")
    )


class Prices(GpuPrices):
    """How a deployment is priced (default: the scenario's `cost:` block, else the catalog)."""

    link_offering: str | None = Field(
        None, description=_doc("Link offering of data/links/ to price the link with.")
    )
    utilization: float | None = Field(
        None,
        description=_doc("Share of Λ_max the deployment is priced at ($/token) (default: 0.7)."),
    )


class PlanRequest(Prices, TtftFields):
    """`optimize`: the threshold and the PD split (or the PrfaaS size) against both baselines."""

    mode: ModeChoice = Field(
        Mode.PAPER, description="paper: representative lengths; exact: E[T(L)]."
    )
    threshold_tokens: float | None = Field(
        None, description=_doc("Fix the routing threshold t (tokens) instead of optimising it.")
    )
    target_rps: float | None = Field(
        None, description=_doc("Size the PrfaaS cluster: the fewest GPUs reaching this req/s.")
    )
    max_prfaas_gpus: int | None = Field(
        None, description=_doc("Size the PrfaaS cluster: the most req/s with this many GPUs.")
    )
    solver: SolverChoice | None = Field(
        None, description="MILP solver of the sizing: highs or cbc."
    )
    out_of_range: RangeChoice = Field(
        RangePolicy.EXTRAPOLATE,
        description=_doc("A length outside a profiled range: extrapolate or error."),
    )


class EvaluateRequest(Prices):
    """`evaluate`: one given configuration (t, N_p; the rest of the PD cluster decodes)."""

    threshold_tokens: float = Field(description="Routing threshold t (tokens).")
    pd_prefill_instances: int = Field(description="N_p; the other PD instances decode.")
    prfaas_instances: int | None = Field(None, description="Override prfaas_cluster.instances.")
    mode: ModeChoice = Mode.PAPER
    out_of_range: RangeChoice = RangePolicy.EXTRAPOLATE


class SensitivityRequest(Prices):
    """`sensitivity`: what binds, what the next unit of each resource buys, the routing bound."""

    mode: ModeChoice = Mode.PAPER
    bins: int = Field(2000, description="Length bins of the routing LP (its bound's resolution).")


class ExplainRequest(Strict):
    """`explain`: the model's equations with the scenario's numbers substituted."""

    mode: ModeChoice = Mode.PAPER


class ProcureSpaceFields(GpuPrices):
    """What `procure` and its Pareto frontier share: prices and the candidate space's bound.
    No link offering or utilization: each candidate site brings its own offering."""

    max_instances_per_site: int | None = Field(
        None,
        description=_doc(
            "Instances each candidate site may get (default: procurement's, else 32)."
        ),
    )
    mode: ModeChoice = Mode.PAPER


class ProcureRequest(ProcureSpaceFields, TtftFields):
    """`procure`: the cheapest deployment reaching target_rps, or the most Λ within a budget."""

    target_rps: float | None = Field(None, description="The rate to reach at least cost (req/s).")
    budget_usd_per_hour: float | None = Field(
        None, description="The most to spend ($/hour): the most Λ_max within it."
    )


class ParetoRequest(ProcureSpaceFields):
    """`procure --pareto`: cost against Λ_max and, reaching target_rps, against P90 TTFT."""

    target_rps: float = Field(description="The rate every plan of the latency frontier reaches.")
    ttft_load_rps: float | None = Field(
        None, description="The latency frontier at this Poisson load (req/s; else unloaded)."
    )


def parameter_names(request: type[Strict]) -> frozenset[str]:
    """The fields a request takes: what a sweep may set or sweep for its command."""
    return frozenset(request.model_fields)


R = TypeVar("R", bound=Strict)


def build(request: type[R], **values: Any) -> R:
    """`request` from the values a door was given (None: not given, the field's default); a
    value the request refuses is a ConfigError naming the field (`ttft_percentile: ...`)."""
    try:
        return request.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        loc = [str(part) for part in first["loc"]]
        field = loc[0] if loc else None  # a key of a mapping field: `gpu_prices...[h20]`
        text = format_validation_error("", error)[2:]
        if len(loc) > 1:
            text = text.replace(".".join(loc), loc[0] + "".join(f"[{p}]" for p in loc[1:]), 1)
        raise ConfigError(text, parameter=field) from None


ArrivalChoice = Annotated[ArrivalProcess, Field(strict=False)]
PolicyChoice = Annotated[RoutingPolicy, Field(strict=False)]


class SimulateRequest(Strict):
    """`simulate`: the planned deployment under load, event by event (`spec` gives the
    simulator's SimulationRequest, its defaults and checks: use_cases/simulation_spec.py)."""

    load: list[float] | None = Field(
        None, description="Arrival rates as fractions of the plan's exact-mode Λ_max (a run each)."
    )
    rate_rps: float | None = Field(None, description="Absolute arrival rate (req/s) instead.")
    requests: int | None = Field(None, description="Requests per run (default: 100,000).")
    duration_s: float | None = Field(None, description="Arrival window (s) instead of requests.")
    seed: int = Field(0, description="Random seed (same seed, same result).")
    arrivals: ArrivalChoice | None = Field(
        None, description="Arrival process: poisson, gamma, sinusoidal or trace (default: poisson)."
    )
    burst_cv: float | None = Field(None, description="gamma: CV of inter-arrivals (default: 3).")
    period_s: float | None = Field(None, description="sinusoidal: period (s) (default: 600).")
    amplitude: float | None = Field(
        None, description="sinusoidal: ±share of the mean (default: 0.5)."
    )
    trace: Annotated[Path, Field(strict=False)] | None = Field(
        None, description="A Mooncake JSONL trace replayed (its own lengths and times)."
    )
    policy: PolicyChoice = Field(RoutingPolicy.STATIC, description="Routing policy.")
    link_latency_s: float = Field(0.0, description="Extra latency per KV transfer (s).")
    dip_start_s: float | None = Field(None, description="Bandwidth dip: start (s).")
    dip_duration_s: float | None = Field(None, description="Bandwidth dip: duration (s).")
    dip_fraction: float | None = Field(
        None, description="Bandwidth dip: remaining share of the link (default: 0.1)."
    )
    mode: ModeChoice = Mode.PAPER
    threshold_tokens: float | None = Field(
        None, description="Simulate this threshold t instead of the planned one (tokens)."
    )
    sustainable: bool = Field(
        False, description="Also find the highest rate the deployment sustains (~10 runs)."
    )

    @field_validator("load", mode="before")
    @classmethod
    def _one_load(cls, value: object) -> object:
        """A sweep's axis gives one fraction a scenario: a run of one."""
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return [value] if number else value

    def spec(self) -> "SimulationRequest":
        """The simulator's request: without a load, the default fraction, unless a rate is
        given or a trace replays as recorded; without requests or a window, the default
        count. Refuses flags of another arrival process, then checks the whole (validate)."""
        from prfaas_plan.use_cases.simulation_spec import (
            ArrivalSpec,
            LoadSpec,
            PolicySpec,
            SimulationRequest,
            StressSpec,
            refuse_unused,
            validate,
        )

        process = self.arrivals or (
            ArrivalProcess.TRACE if self.trace is not None else ArrivalSpec.process
        )
        refuse_unused(process, self.burst_cv, self.period_s, self.amplitude, self.dip_fraction,
                      self.dip_start_s, self.dip_duration_s)  # fmt: skip
        default_load = () if self.trace or self.rate_rps else LoadSpec.fractions
        sized = self.requests is not None or self.duration_s is not None or self.trace is not None
        shapes = {"burst_cv": self.burst_cv, "period_s": self.period_s,
                  "amplitude": self.amplitude}  # fmt: skip
        request = SimulationRequest(
            arrivals=ArrivalSpec(
                process=process, requests=self.requests if sized else ArrivalSpec.requests,
                duration_s=self.duration_s, seed=self.seed, trace=self.trace,
                **{k: v for k, v in shapes.items() if v is not None},
            ),
            load=LoadSpec(
                fractions=tuple(self.load) if self.load is not None else default_load,
                rate_rps=self.rate_rps,
            ),
            stress=StressSpec(
                self.dip_start_s, self.dip_duration_s,
                *(() if self.dip_fraction is None else (self.dip_fraction,)),
            ),
            policy=PolicySpec(self.policy),
            link_latency_s=self.link_latency_s,
        )  # fmt: skip
        validate(request)
        return request
