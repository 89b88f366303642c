"""What each command is asked, declared once: one typed request per command, its fields,
defaults and meaning. Every door builds the same request — the CLI from its flags (cli/), the
HTTP API from the JSON body (server/bodies.py adds the scenario; the OpenAPI schema is this
one), a sweep from its `parameters` and axes (sweep/commands.py) — and hands it to the
command's use-case (use_cases/calls.py), so the three cannot drift apart.

Names are the library's (`target_rps`, `gpu_prices_usd_per_gpu_hour`), with units; the CLI
alone knows them as flags. Plausibility bounds stay in plausible.py, checked by the use-cases
whichever door a request came through. Strict as a scenario file: unknown fields, wrong types,
NaN and inf refused.

Here: the fields requests share, `build`, and the requests of the commands on one deployment
(optimize, evaluate, sensitivity, explain). procure's and its Pareto frontier's requests are in
use_cases/procure_requests.py, simulate's in use_cases/simulate_request.py: modules a command
imports only when it runs them (the console script starts only the one command it runs).
"""

from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError, field_validator

from prfaas_plan.choices import CostModel, Mode, RangePolicy, Solver
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.reading import Strict, format_validation_error
from prfaas_plan.use_cases.field_docs import describe

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
