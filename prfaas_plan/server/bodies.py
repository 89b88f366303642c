"""Request bodies of the HTTP API: a scenario (the scenario file's schema, inputs/scenario_schema.py)
plus the command's request (use_cases/requests.py: the fields the CLI's flags and a sweep's
parameters set, declared once), and the server's own limits. Strict as a scenario file:
unknown keys, wrong types, NaN/inf refused. Units in every name."""

from typing import Annotated, Literal

from pydantic import Field

from prfaas_plan.export.build import ExportRequest
from prfaas_plan.inputs.reading import Strict
from prfaas_plan.inputs.scenario_schema import Scenario
from prfaas_plan.use_cases.field_docs import describe
from prfaas_plan.use_cases.procure_requests import ParetoRequest, ProcureRequest
from prfaas_plan.use_cases.requests import (
    EvaluateRequest,
    ExplainRequest,
    PlanRequest,
    SensitivityRequest,
)
from prfaas_plan.use_cases.simulate_request import SimulateRequest

# what one request may ask for (the server's own bounds; the library's are in plausible.py)
MAX_SIMULATED_REQUESTS = 20_000  # over every load of one /simulate request (~1 s of simulation)
MAX_LOADS = 8  # loads in one /simulate sweep
MAX_LENGTHS = 64  # lengths in one /kv request
MAX_MODELS = 64  # models named in one /kv or /egress request
MAX_SENSITIVITY_BINS = 5_000  # routing-LP bins of one /sensitivity request (~1 s of LPs)
# instances per candidate site and in the PD cluster of one /procure request: the MILP grows
# with them (the case study's 32 solves in ~1 s; the CLI takes up to 1,000)
MAX_PROCURE_INSTANCES = 64

ModeName = Literal["paper", "exact"]
Models = Annotated[list[str], Field(max_length=MAX_MODELS)]


class ScenarioBody(Strict):
    """Every body: the scenario (default: the paper's case study, as the CLI's)."""

    scenario: Scenario | None = Field(None, description=describe("ScenarioBody", "scenario"))
    bandwidth_gbps: float | None = Field(
        None, description=describe("ScenarioBody", "bandwidth_gbps")
    )


# a command's body: the scenario and the command's request (use_cases/requests.py), field for
# field as the CLI's flags and a sweep's parameters build it; the server's own limits on top


class PlanBody(ScenarioBody, PlanRequest):
    pass


class EvaluateBody(ScenarioBody, EvaluateRequest):
    pass


class KvBody(Strict):
    models: Models | None = None
    lengths_tokens: Annotated[list[float], Field(min_length=1, max_length=MAX_LENGTHS)] = Field(
        default_factory=lambda: [1024.0, 8192.0, 32768.0, 131072.0]
    )
    kv_dtype: str = "bf16"
    state_dtype: str = "fp32"
    gpu: str = "h200"
    gpus_per_instance: int = 8


class EgressBody(Strict):
    """The catalog form of `egress` (eq. 2 at one length); the scenario form is `optimize`'s
    KV egress (kv_egress_bytes_per_s in /plan)."""

    models: Models | None = None
    prfaas_gpus: int | None = None
    gpus_per_instance: int | None = None
    gpu: str | None = None
    mean_tokens: float | None = None
    link_gbps: float | None = None


class SimulateBody(ScenarioBody, SimulateRequest):
    """A bounded `simulate`: a number of requests (no duration, no trace file: the server reads
    no file a request names; no sustainable-rate search), at most MAX_SIMULATED_REQUESTS over
    all loads."""

    load: Annotated[list[float], Field(min_length=1, max_length=MAX_LOADS)] | None = Field(
        None, description=describe("SimulateBody", "load")
    )
    requests: int = Field(
        default=2_000, ge=1, le=MAX_SIMULATED_REQUESTS,
        description=describe("SimulateBody", "requests"),
    )  # fmt: skip
    duration_s: None = Field(None, description=describe("SimulateBody", "duration_s"))
    trace: None = Field(None, description=describe("SimulateBody", "trace"))
    sustainable: Literal[False] = Field(False, description=describe("SimulateBody", "sustainable"))


class SensitivityBody(ScenarioBody, SensitivityRequest):
    bins: Annotated[int, Field(ge=2, le=MAX_SENSITIVITY_BINS)] = Field(
        2000, description=describe("SensitivityBody", "bins")
    )


class ExplainBody(ScenarioBody, ExplainRequest):
    pass


ServerInstances = Annotated[int, Field(ge=0, le=MAX_PROCURE_INSTANCES)] | None


class ProcureBody(ScenarioBody, ProcureRequest):
    """No `export_model` (the server writes no file)."""

    max_instances_per_site: ServerInstances = Field(
        None, description=describe("ProcureBody", "max_instances_per_site")
    )


class ParetoBody(ScenarioBody, ParetoRequest):
    max_instances_per_site: ServerInstances = Field(
        None, description=describe("ParetoBody", "max_instances_per_site")
    )


class ExportBody(ScenarioBody, ExportRequest):
    """The scenario's plan (planned in `mode`: the what-if page's current plan) as a stack's
    files. No output directory and no plan file: the server reads no file a request names and
    writes none (the files are the answer)."""
