"""Request bodies of the HTTP API: a scenario (the scenario file's schema, inputs/scenario.py)
plus the command's parameters, named as the library names them (`threshold_tokens`, not
`--threshold-tokens`). Strict as a scenario file: unknown keys, wrong types, NaN/inf refused.
Units in every name, as in the CLI's flags."""

from typing import Annotated, Literal

from pydantic import Field

from prfaas_plan.choices import ArrivalProcess, Mode, RangePolicy, RoutingPolicy, Solver
from prfaas_plan.inputs.reading import Strict
from prfaas_plan.inputs.scenario import Scenario

# what one request may ask for (the server's own bounds; the library's are in bounds.py)
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

    scenario: Scenario | None = None
    bandwidth_gbps: float | None = None  # overrides scenario.link.bandwidth_gbps, as the flag


class PricedBody(ScenarioBody):
    """Prices, as the CLI's pricing flags (default: the scenario's `cost:` block, else the
    catalog's prices)."""

    gpu_prices_usd_per_gpu_hour: dict[str, float] | None = None  # --gpu-price GPU=USD
    link_offering: str | None = None
    cost_model: Literal["on-demand", "tco"] | None = None
    utilization: float | None = None


class TtftFields(Strict):
    """A TTFT target under load (--ttft-target-s, --ttft-percentile, --ttft-load,
    --ttft-load-rps)."""

    ttft_target_s: float | None = None
    ttft_percentile: Literal["mean", "50", "90", "99"] | None = None
    ttft_load: float | None = None
    ttft_load_rps: float | None = None

    def ttft_percentile_value(self) -> int | str | None:
        """The percentile as the library takes it: 'mean' or an int."""
        p = self.ttft_percentile
        return p if p is None or p == "mean" else int(p)


class PlanBody(PricedBody, TtftFields):
    mode: ModeName = Mode.PAPER.value
    threshold_tokens: float | None = None
    target_rps: float | None = None
    max_prfaas_gpus: int | None = None
    solver: Literal["highs", "cbc"] | None = None
    out_of_range: Literal["extrapolate", "error"] = RangePolicy.EXTRAPOLATE.value


class EvaluateBody(PricedBody):
    threshold_tokens: float
    pd_prefill_instances: int
    prfaas_instances: int | None = None
    mode: ModeName = Mode.PAPER.value
    out_of_range: Literal["extrapolate", "error"] = RangePolicy.EXTRAPOLATE.value


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


class SimulateBody(ScenarioBody):
    """A bounded `simulate`: a number of requests (no duration, no trace file: the server reads
    no file a request names), at most MAX_SIMULATED_REQUESTS over all loads."""

    load: Annotated[list[float], Field(min_length=1, max_length=MAX_LOADS)] | None = None
    rate_rps: float | None = None
    requests: int = Field(default=2_000, ge=1, le=MAX_SIMULATED_REQUESTS)
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    arrivals: Literal["poisson", "gamma", "sinusoidal"] = ArrivalProcess.POISSON.value
    burst_cv: float | None = None
    period_s: float | None = None
    amplitude: float | None = None
    policy: Literal["static", "adaptive", "rebalance", "dual"] = RoutingPolicy.STATIC.value
    link_latency_s: float = 0.0
    dip_start_s: float | None = None
    dip_duration_s: float | None = None
    dip_fraction: float | None = None
    mode: ModeName = Mode.PAPER.value
    threshold_tokens: float | None = None


def solver_of(name: str | None) -> Solver | None:
    return Solver(name) if name is not None else None


class SensitivityBody(PricedBody):
    mode: ModeName = Mode.PAPER.value
    bins: Annotated[int, Field(ge=2, le=MAX_SENSITIVITY_BINS)] = 2000


class ExplainBody(ScenarioBody):
    mode: ModeName = Mode.PAPER.value


class ProcurePricesBody(ScenarioBody):
    """What `procure` and `procure --pareto` share: prices, the candidate space's bound, the
    mode. No `export_model` (the server writes no file), no link offering or utilization (each
    candidate site brings its own offering, as in the CLI)."""

    gpu_prices_usd_per_gpu_hour: dict[str, float] | None = None  # --gpu-price GPU=USD
    cost_model: Literal["on-demand", "tco"] | None = None
    max_instances_per_site: Annotated[int, Field(ge=0, le=MAX_PROCURE_INSTANCES)] | None = None
    mode: ModeName = Mode.PAPER.value


class ProcureBody(ProcurePricesBody, TtftFields):
    """`procure`'s flags: a target rate or a budget, and a TTFT target with the rate."""

    target_rps: float | None = None
    budget_usd_per_hour: float | None = None


class ParetoBody(ProcurePricesBody):
    """`procure --pareto`'s flags: the target rate of the latency frontier (required, as
    --pareto needs --target-rps)."""

    target_rps: float
    ttft_load_rps: float | None = None  # the latency frontier at this load (else unloaded)
