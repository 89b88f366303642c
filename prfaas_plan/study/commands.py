"""The commands a sweep can run: name -> its parameters and a function of (problem, parameters)
returning the command's JSON document (the same dict `--format json` prints).

Adding a command is one `SWEEPABLE` entry: the parameter names a sweep file may set or sweep,
and a function calling the command's library use-case and its JSON serialiser.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prfaas_plan.choices import ArrivalProcess, CostModel, Mode, RangePolicy, RoutingPolicy
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import Problem

Document = dict[str, Any]
Parameters = dict[str, Any]


@dataclass(frozen=True)
class Sweepable:
    parameters: frozenset[str]
    run: Callable[[Problem, Parameters, Catalog], Document]  # the problem's catalog
    # `optimize` without sizing or a TTFT target: a whole chunk in a few array operations
    vectorised: Callable[[Parameters], bool] = lambda _: False


def _mode(value: Any) -> Mode:
    return Mode(value) if value is not None else Mode.PAPER


def _range(value: Any) -> RangePolicy:
    return RangePolicy(value) if value is not None else RangePolicy.EXTRAPOLATE


def _optimize(problem: Problem, p: Parameters, _catalog: Catalog) -> Document:
    from prfaas_plan.commands.plan import plan, ttft_target
    from prfaas_plan.render.plan import plan_to_json

    ttft = ttft_target(
        p.get("ttft_target_s"), p.get("ttft_percentile"), p.get("ttft_load_rps"), p.get("ttft_load")
    )
    report = plan(
        problem, mode=_mode(p.get("mode")), threshold_tokens=p.get("threshold_tokens"),
        target_rps=p.get("target_rps"), max_prfaas_gpus=p.get("max_prfaas_gpus"),
        range_policy=_range(p.get("out_of_range")), ttft=ttft,
    )  # fmt: skip
    return plan_to_json(report)


def _evaluate(problem: Problem, p: Parameters, _catalog: Catalog) -> Document:
    from prfaas_plan.commands.plan import evaluate_configuration
    from prfaas_plan.render.plan import evaluation_to_json

    for required in ("threshold_tokens", "pd_prefill_instances"):
        if p.get(required) is None:
            raise ConfigError(f"evaluate needs the parameter {required}", parameter=required)
    report = evaluate_configuration(
        problem, threshold_tokens=p["threshold_tokens"],
        pd_prefill_instances=p["pd_prefill_instances"], prfaas_instances=p.get("prfaas_instances"),
        mode=_mode(p.get("mode")), range_policy=_range(p.get("out_of_range")),
    )  # fmt: skip
    return evaluation_to_json(report)


def _simulate(problem: Problem, p: Parameters, _catalog: Catalog) -> Document:
    from prfaas_plan.commands.simulate import run_simulations
    from prfaas_plan.commands.simulation_spec import (
        ArrivalSpec,
        LoadSpec,
        PolicySpec,
        SimulationRequest,
        validate,
    )
    from prfaas_plan.render.simulation import simulation_json

    given = {k: v for k, v in p.items() if v is not None}
    arrivals = ArrivalSpec(
        process=ArrivalProcess(given.get("arrivals", ArrivalSpec.process)),
        requests=given.get("requests", ArrivalSpec.requests if "duration_s" not in given else None),
        **{k: given[k] for k in ("duration_s", "seed", "burst_cv", "period_s", "amplitude")
           if k in given},
    )  # fmt: skip
    load = LoadSpec(
        fractions=(given["load"],) if "load" in given else (() if "rate_rps" in given else LoadSpec.fractions),
        rate_rps=given.get("rate_rps"),
    )  # fmt: skip
    request = SimulationRequest(
        arrivals=arrivals, load=load,
        policy=PolicySpec(RoutingPolicy(given.get("policy", PolicySpec.kind))),
        link_latency_s=given.get("link_latency_s", SimulationRequest.link_latency_s),
    )  # fmt: skip
    validate(request)
    report = run_simulations(
        problem, request, plan_mode=_mode(p.get("mode")), threshold_tokens=p.get("threshold_tokens")
    )
    return simulation_json(report)


def _sensitivity(problem: Problem, p: Parameters, catalog: Catalog) -> Document:
    from prfaas_plan.commands.sensitivity import sensitivity_report
    from prfaas_plan.inputs.pricing import resolve_pricing
    from prfaas_plan.render.sensitivity import sensitivity_to_json
    from prfaas_plan.solve.relaxation import DEFAULT_BINS

    bins = p.get("bins")
    pricing = resolve_pricing(catalog, problem.scenario, problem.source)  # the scenario's prices
    report = sensitivity_report(
        problem, _mode(p.get("mode")), DEFAULT_BINS if bins is None else bins, catalog, pricing
    )
    return sensitivity_to_json(report)


def _procure(problem: Problem, p: Parameters, catalog: Catalog) -> Document:
    """Prices as the CLI's without --gpu-price: the scenario's `cost:` block (a sweep can set
    or sweep `cost.gpu_prices_usd_per_gpu_hour.h200`), else the catalog's."""
    from prfaas_plan.commands.procure import procure, procure_pricing, procure_ttft_target
    from prfaas_plan.render.procure import procure_to_json

    model = p.get("cost_model")
    ttft = procure_ttft_target(
        p.get("ttft_target_s"), p.get("ttft_percentile"), p.get("ttft_load_rps"), p.get("ttft_load")
    )
    pricing = procure_pricing(
        catalog, problem, cost_model=None if model is None else CostModel(model),
        parameter="cost.gpu_prices_usd_per_gpu_hour",
    )  # fmt: skip
    report = procure(
        catalog, problem, pricing, target_rps=p.get("target_rps"),
        budget_usd_per_hour=p.get("budget_usd_per_hour"),
        max_instances_per_site=p.get("max_instances_per_site"), mode=_mode(p.get("mode")),
        ttft=ttft,
    )  # fmt: skip
    return procure_to_json(report)


def _optimize_vectorised(p: Parameters) -> bool:
    sizing = ("target_rps", "max_prfaas_gpus", "ttft_target_s")
    return all(p.get(name) is None for name in sizing)


SWEEPABLE: dict[str, Sweepable] = {
    "optimize": Sweepable(
        frozenset(
            {
                "mode",
                "threshold_tokens",
                "target_rps",
                "max_prfaas_gpus",
                "out_of_range",
                "ttft_target_s",
                "ttft_percentile",
                "ttft_load",
                "ttft_load_rps",
            }
        ),
        _optimize,
        _optimize_vectorised,
    ),
    "evaluate": Sweepable(
        frozenset(
            {
                "threshold_tokens",
                "pd_prefill_instances",
                "prfaas_instances",
                "mode",
                "out_of_range",
            }
        ),
        _evaluate,
    ),
    "simulate": Sweepable(
        frozenset(
            {
                "load",
                "rate_rps",
                "requests",
                "duration_s",
                "seed",
                "arrivals",
                "burst_cv",
                "period_s",
                "amplitude",
                "policy",
                "link_latency_s",
                "mode",
                "threshold_tokens",
            }
        ),
        _simulate,
    ),
    "sensitivity": Sweepable(frozenset({"mode", "bins"}), _sensitivity),
    "procure": Sweepable(
        frozenset(
            {
                "target_rps",
                "budget_usd_per_hour",
                "max_instances_per_site",
                "mode",
                "cost_model",
                "ttft_target_s",
                "ttft_percentile",
                "ttft_load",
                "ttft_load_rps",
            }
        ),
        _procure,
    ),
}


def command(name: str) -> Sweepable:
    if name not in SWEEPABLE:
        raise ConfigError(
            f"command: {name!r} cannot be swept; sweepable: {', '.join(sorted(SWEEPABLE))}"
        )
    return SWEEPABLE[name]


def parameter_names(name: str) -> frozenset[str]:
    return command(name).parameters
