"""What `simulate` is asked: its request, declared once and built by every door as
use_cases/requests.py's are, and the simulator's errors told in its terms (`in_request_terms`)."""

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, field_validator

from prfaas_plan.choices import ArrivalProcess, Mode, RoutingPolicy
from prfaas_plan.errors import PrfaasPlanError
from prfaas_plan.inputs.reading import Strict
from prfaas_plan.use_cases.field_docs import describe
from prfaas_plan.use_cases.requests import ModeChoice

if TYPE_CHECKING:
    from prfaas_plan.use_cases.simulation_spec import SimulationRequest

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
