"""One use-case per command: its typed request (use_cases/requests.py) and the problem in, its
typed report out. The CLI, the HTTP API and sweeps call these and nothing else, so one request
gives one answer whichever door it came through; each renders the report with the command's
one renderer (render/). What a door adds stays in the door: files the CLI writes (--plot,
--export-model), the server's own size limits.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from prfaas_plan.errors import PrfaasPlanError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.use_cases.requests import (
    EvaluateRequest,
    ExplainRequest,
    PlanRequest,
    Prices,
    SensitivityRequest,
)

if TYPE_CHECKING:
    from prfaas_plan.inputs.pricing import Pricing
    from prfaas_plan.use_cases.explain import ExplainReport
    from prfaas_plan.use_cases.plan import EvaluationReport, PlanReport
    from prfaas_plan.use_cases.procure import ProcureReport
    from prfaas_plan.use_cases.procure_pareto import ParetoReport
    from prfaas_plan.use_cases.procure_requests import ParetoRequest, ProcureRequest
    from prfaas_plan.use_cases.sensitivity import SensitivityReport
    from prfaas_plan.use_cases.simulate import Progress, SimulationReport
    from prfaas_plan.use_cases.simulate_request import SimulateRequest


def prices(problem: Problem, request: Prices, catalog: Catalog) -> "Pricing | None":
    """The prices a deployment of `problem` is quoted at: the request's, over the scenario's
    `cost:` block, over the catalog's (inputs/pricing.py); the link priced at its bandwidth."""
    from prfaas_plan.inputs.pricing import resolve_pricing

    return resolve_pricing(
        catalog, problem.scenario, problem.source,
        gpu_prices=request.gpu_prices_usd_per_gpu_hour, link_offering=request.link_offering,
        cost_model=request.cost_model, utilization=request.utilization,
        link_bytes_per_s=problem.system.link_bandwidth_bytes_per_s,
    )  # fmt: skip


def optimize(problem: Problem, request: PlanRequest, catalog: Catalog) -> "PlanReport":
    """`optimize`: the threshold and the PD split (or the PrfaaS size), priced."""
    from prfaas_plan.use_cases.plan import plan, ttft_target

    ttft = ttft_target(
        request.ttft_target_s, request.percentile(), request.ttft_load_rps, request.ttft_load
    )
    return plan(
        problem, mode=request.mode, threshold_tokens=request.threshold_tokens,
        target_rps=request.target_rps, max_prfaas_gpus=request.max_prfaas_gpus,
        solver=request.solver, range_policy=request.out_of_range, ttft=ttft,
        pricing=prices(problem, request, catalog),
    )  # fmt: skip


def optimize_many(
    problems: Sequence[Problem], request: PlanRequest, catalog: Catalog
) -> "list[PlanReport]":
    """`optimize` of problems that differ only in instance counts, link bandwidth, the
    parameters of a truncated log-normal input length, output lengths and prices, searched together
    (use_cases/plan_reports.py plan_many): the reports `optimize` gives one at a time. For a
    request without sizing or a TTFT target (sweep/commands.py: the fast path's test)."""
    from prfaas_plan.use_cases.plan_reports import plan_many

    assert request.target_rps is None and request.max_prfaas_gpus is None
    assert request.ttft_target_s is None and request.solver is None
    # the problems' prices differ only in the link bought and the scenarios' cost blocks
    found: dict[tuple[float, str], Pricing | None] = {}
    keys = []
    for problem in problems:
        cost = problem.scenario.cost
        key = (
            problem.system.link_bandwidth_bytes_per_s,
            "" if cost is None else cost.model_dump_json(),
        )
        keys.append(key)
        if key not in found:
            found[key] = prices(problem, request, catalog)
    return plan_many(
        problems, [found[key] for key in keys],
        mode=request.mode, threshold_tokens=request.threshold_tokens,
        range_policy=request.out_of_range,
    )  # fmt: skip


def evaluate(problem: Problem, request: EvaluateRequest, catalog: Catalog) -> "EvaluationReport":
    """`evaluate`: one given configuration, priced."""
    from prfaas_plan.use_cases.plan import evaluate_configuration

    return evaluate_configuration(
        problem, threshold_tokens=request.threshold_tokens,
        pd_prefill_instances=request.pd_prefill_instances,
        prfaas_instances=request.prfaas_instances, mode=request.mode,
        range_policy=request.out_of_range, pricing=prices(problem, request, catalog),
    )  # fmt: skip


def sensitivity(
    problem: Problem, request: SensitivityRequest, catalog: Catalog
) -> "SensitivityReport":
    """`sensitivity`: what binds and what the next unit of each resource buys, priced."""
    from prfaas_plan.use_cases.sensitivity import sensitivity_report

    pricing = prices(problem, request, catalog)
    return sensitivity_report(problem, request.mode, request.bins, catalog, pricing)


def explain(problem: Problem, request: ExplainRequest, _catalog: Catalog) -> "ExplainReport":
    """`explain`: the model's equations with the scenario's numbers."""
    from prfaas_plan.use_cases.explain import explain as explain_plan

    return explain_plan(problem, request.mode)


def procure(
    problem: Problem,
    request: "ProcureRequest",
    catalog: Catalog,
    export_model: Path | None = None,
) -> "ProcureReport":
    """`procure`: the cheapest deployment reaching target_rps, or the most Λ within a budget
    (`export_model`: also write the MILP there, the CLI's --export-model)."""
    from prfaas_plan.use_cases.procure import procure as procure_plan
    from prfaas_plan.use_cases.procure import procure_ttft_target
    from prfaas_plan.use_cases.procure_sites import procure_pricing

    ttft = procure_ttft_target(
        request.ttft_target_s, request.percentile(), request.ttft_load_rps, request.ttft_load
    )
    pricing = procure_pricing(
        catalog, problem, gpu_prices=request.gpu_prices_usd_per_gpu_hour,
        cost_model=request.cost_model,
    )  # fmt: skip
    return procure_plan(
        catalog, problem, pricing, target_rps=request.target_rps,
        budget_usd_per_hour=request.budget_usd_per_hour,
        gpu_prices=request.gpu_prices_usd_per_gpu_hour,
        max_instances_per_site=request.max_instances_per_site, mode=request.mode,
        export_model=export_model, ttft=ttft,
    )  # fmt: skip


def pareto(problem: Problem, request: "ParetoRequest", catalog: Catalog) -> "ParetoReport":
    """`procure --pareto`: the cost frontiers against Λ_max and against P90 TTFT."""
    from prfaas_plan.use_cases.procure_pareto import procure_pareto
    from prfaas_plan.use_cases.procure_sites import procure_pricing

    pricing = procure_pricing(
        catalog, problem, gpu_prices=request.gpu_prices_usd_per_gpu_hour,
        cost_model=request.cost_model,
    )  # fmt: skip
    return procure_pareto(
        catalog, problem, pricing, target_rps=request.target_rps,
        gpu_prices=request.gpu_prices_usd_per_gpu_hour,
        max_instances_per_site=request.max_instances_per_site, mode=request.mode,
        ttft_load_rps=request.ttft_load_rps,
    )  # fmt: skip


def simulate(
    problem: Problem,
    request: "SimulateRequest",
    _catalog: Catalog,
    progress: "Progress | None" = None,
) -> "SimulationReport":
    """`simulate`: the planned deployment (or the request's threshold) under load; an error
    names the request's fields (`burst_cv`), not the simulator's spec (`arrivals.burst_cv`)."""
    from prfaas_plan.use_cases.simulate import run_simulations
    from prfaas_plan.use_cases.simulate_request import in_request_terms

    try:
        return run_simulations(
            problem, request.spec(), plan_mode=request.mode,
            threshold_tokens=request.threshold_tokens, find_sustainable=request.sustainable,
            progress=progress,
        )  # fmt: skip
    except PrfaasPlanError as exc:
        raise in_request_terms(exc) from None
