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

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError, field_validator

from prfaas_plan.choices import ArrivalProcess, CostModel, Mode, RangePolicy, RoutingPolicy, Solver
from prfaas_plan.errors import ConfigError, PrfaasPlanError
from prfaas_plan.inputs.reading import Strict, format_validation_error
from prfaas_plan.use_cases.field_docs import describe

if TYPE_CHECKING:
    from prfaas_plan.use_cases.simulation_spec import SimulationRequest

Percentile = Literal["mean", "50", "90", "99"]
# a choice is given by its value ("exact", "tco"): from a JSON body, a sweep file or a flag
ModeChoice = Annotated[Mode, Field(strict=False)]
RangeChoice = Annotated[RangePolicy, Field(strict=False)]
SolverChoice = Annotated[Solver, Field(strict=False)]
CostModelChoice = Annotated[CostModel, Field(strict=False)]


class TtftFields(Strict):
    """A TTFT target under load."""

    ttft_target_s: float | None = Field(None, description=describe("TtftFields", "ttft_target_s"))
    ttft_percentile: Percentile | None = Field(
        None,
        description=describe("TtftFields", "ttft_percentile"),
    )
    ttft_load: float | None = Field(None, description=describe("TtftFields", "ttft_load"))
    ttft_load_rps: float | None = Field(None, description=describe("TtftFields", "ttft_load_rps"))

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
        description=describe("GpuPrices", "gpu_prices_usd_per_gpu_hour"),
    )
    cost_model: CostModelChoice | None = Field(
        None, description=describe("GpuPrices", "cost_model")
    )


class Prices(GpuPrices):
    """How a deployment is priced (default: the scenario's `cost:` block, else the catalog)."""

    link_offering: str | None = Field(None, description=describe("Prices", "link_offering"))
    utilization: float | None = Field(
        None,
        description=describe("Prices", "utilization"),
    )


class PlanRequest(Prices, TtftFields):
    """`optimize`: the threshold and the PD split (or the PrfaaS size) against both baselines."""

    mode: ModeChoice = Field(Mode.PAPER, description=describe("PlanRequest", "mode"))
    threshold_tokens: float | None = Field(
        None, description=describe("PlanRequest", "threshold_tokens")
    )
    target_rps: float | None = Field(None, description=describe("PlanRequest", "target_rps"))
    max_prfaas_gpus: int | None = Field(
        None, description=describe("PlanRequest", "max_prfaas_gpus")
    )
    solver: SolverChoice | None = Field(None, description=describe("PlanRequest", "solver"))
    out_of_range: RangeChoice = Field(
        RangePolicy.EXTRAPOLATE,
        description=describe("PlanRequest", "out_of_range"),
    )


class EvaluateRequest(Prices):
    """`evaluate`: one given configuration (t, N_p; the rest of the PD cluster decodes)."""

    threshold_tokens: float = Field(description=describe("EvaluateRequest", "threshold_tokens"))
    pd_prefill_instances: int = Field(
        description=describe("EvaluateRequest", "pd_prefill_instances")
    )
    prfaas_instances: int | None = Field(
        None, description=describe("EvaluateRequest", "prfaas_instances")
    )
    mode: ModeChoice = Field(Mode.PAPER, description=describe("EvaluateRequest", "mode"))
    out_of_range: RangeChoice = Field(
        RangePolicy.EXTRAPOLATE, description=describe("EvaluateRequest", "out_of_range")
    )


class SensitivityRequest(Prices):
    """`sensitivity`: what binds, what the next unit of each resource buys, the routing bound."""

    mode: ModeChoice = Field(Mode.PAPER, description=describe("SensitivityRequest", "mode"))
    bins: int = Field(2000, description=describe("SensitivityRequest", "bins"))


class ExplainRequest(Strict):
    """`explain`: the model's equations with the scenario's numbers substituted."""

    mode: ModeChoice = Field(Mode.PAPER, description=describe("ExplainRequest", "mode"))


class ProcureSpaceFields(GpuPrices):
    """What `procure` and its Pareto frontier share: prices and the candidate space's bound.
    No link offering or utilization: each candidate site brings its own offering."""

    max_instances_per_site: int | None = Field(
        None,
        description=describe("ProcureSpaceFields", "max_instances_per_site"),
    )
    mode: ModeChoice = Field(Mode.PAPER, description=describe("ProcureSpaceFields", "mode"))


class ProcureRequest(ProcureSpaceFields, TtftFields):
    """`procure`: the cheapest deployment reaching target_rps, or the most Λ within a budget."""

    target_rps: float | None = Field(None, description=describe("ProcureRequest", "target_rps"))
    ttft_load: float | None = Field(None, description=describe("ProcureRequest", "ttft_load"))
    budget_usd_per_hour: float | None = Field(
        None, description=describe("ProcureRequest", "budget_usd_per_hour")
    )


class ParetoRequest(ProcureSpaceFields):
    """`procure --pareto`: cost against Λ_max and, reaching target_rps, against P90 TTFT."""

    target_rps: float = Field(description=describe("ParetoRequest", "target_rps"))
    ttft_load_rps: float | None = Field(
        None, description=describe("ParetoRequest", "ttft_load_rps")
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
    simulator's SimulationRequest, its defaults and checks: use_cases/simulation_spec.py, the
    one home of simulate's defaults; a field left None takes the spec's)."""

    load: list[float] | None = Field(None, description=describe("SimulateRequest", "load"))
    rate_rps: float | None = Field(None, description=describe("SimulateRequest", "rate_rps"))
    requests: int | None = Field(None, description=describe("SimulateRequest", "requests"))
    duration_s: float | None = Field(None, description=describe("SimulateRequest", "duration_s"))
    seed: int | None = Field(None, description=describe("SimulateRequest", "seed"))
    arrivals: ArrivalChoice | None = Field(
        None, description=describe("SimulateRequest", "arrivals")
    )
    burst_cv: float | None = Field(None, description=describe("SimulateRequest", "burst_cv"))
    period_s: float | None = Field(None, description=describe("SimulateRequest", "period_s"))
    amplitude: float | None = Field(None, description=describe("SimulateRequest", "amplitude"))
    trace: Annotated[Path, Field(strict=False)] | None = Field(
        None, description=describe("SimulateRequest", "trace")
    )
    policy: PolicyChoice | None = Field(None, description=describe("SimulateRequest", "policy"))
    link_latency_s: float | None = Field(
        None, description=describe("SimulateRequest", "link_latency_s")
    )
    dip_start_s: float | None = Field(None, description=describe("SimulateRequest", "dip_start_s"))
    dip_duration_s: float | None = Field(
        None, description=describe("SimulateRequest", "dip_duration_s")
    )
    dip_fraction: float | None = Field(
        None, description=describe("SimulateRequest", "dip_fraction")
    )
    mode: ModeChoice = Field(Mode.PAPER, description=describe("SimulateRequest", "mode"))
    threshold_tokens: float | None = Field(
        None, description=describe("SimulateRequest", "threshold_tokens")
    )
    sustainable: bool = Field(False, description=describe("SimulateRequest", "sustainable"))

    @field_validator("load", mode="before")
    @classmethod
    def _one_load(cls, value: object) -> object:
        """A sweep's axis gives one fraction a scenario: a run of one."""
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return [value] if number else value

    def spec(self) -> "SimulationRequest":
        """The simulator's request: without a load, the default fraction, unless a rate is
        given or a trace replays as recorded; without requests or a window, the default
        count. Refuses flags of another arrival process, then checks the whole (validate),
        its errors told in this request's terms (`in_request_terms`)."""
        try:
            return self._spec()
        except PrfaasPlanError as exc:
            raise in_request_terms(exc) from None

    def _spec(self) -> "SimulationRequest":
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
        given: dict[str, Any] = {"burst_cv": self.burst_cv, "period_s": self.period_s,
                                 "amplitude": self.amplitude, "seed": self.seed}  # fmt: skip
        request = SimulationRequest(
            arrivals=ArrivalSpec(
                process=process, requests=self.requests if sized else ArrivalSpec.requests,
                duration_s=self.duration_s, trace=self.trace,
                **{k: v for k, v in given.items() if v is not None},
            ),
            load=LoadSpec(
                fractions=tuple(self.load) if self.load is not None else default_load,
                rate_rps=self.rate_rps,
            ),
            stress=StressSpec(
                self.dip_start_s, self.dip_duration_s,
                *(() if self.dip_fraction is None else (self.dip_fraction,)),
            ),
            policy=PolicySpec(*(() if self.policy is None else (self.policy,))),
            **({} if self.link_latency_s is None else {"link_latency_s": self.link_latency_s}),
        )  # fmt: skip
        validate(request)
        return request


# the simulator's spec paths (use_cases/simulation_spec.py) of SimulateRequest's fields
SPEC_FIELDS = {
    "arrivals.process": "arrivals", "arrivals.requests": "requests",
    "arrivals.duration_s": "duration_s", "arrivals.seed": "seed", "arrivals.trace": "trace",
    "arrivals.burst_cv": "burst_cv", "arrivals.period_s": "period_s",
    "arrivals.amplitude": "amplitude", "load.fractions": "load", "load.rate_rps": "rate_rps",
    "stress.dip_start_s": "dip_start_s", "stress.dip_duration_s": "dip_duration_s",
    "stress.dip_fraction": "dip_fraction", "policy.kind": "policy",
}  # fmt: skip
_SPEC_PATH = re.compile(r"(?<![\w.-])(?:arrivals|load|stress|policy)\.\w+")


def in_request_terms(exc: PrfaasPlanError) -> PrfaasPlanError:
    """`exc` of the simulator about its spec (`arrivals.burst_cv`) told in SimulateRequest's
    terms (`burst_cv`, as code: the field every door takes), its parameter too."""

    def field(match: re.Match[str]) -> str:
        name = SPEC_FIELDS.get(match.group(0))
        return match.group(0) if name is None else f"`{name}`"

    exc.args = (_SPEC_PATH.sub(field, str(exc)), *exc.args[1:])
    if exc.parameter is not None:
        exc.parameter = SPEC_FIELDS.get(exc.parameter, exc.parameter)
    return exc
