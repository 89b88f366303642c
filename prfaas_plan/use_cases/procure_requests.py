"""What `procure` and its Pareto frontier are asked: their requests, declared once and built by
every door as use_cases/requests.py's are (its docstring says which request lives where)."""

from pydantic import Field

from prfaas_plan.choices import Mode
from prfaas_plan.use_cases.field_docs import describe
from prfaas_plan.use_cases.requests import GpuPrices, ModeChoice, TtftFields


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
