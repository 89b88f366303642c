"""The plan report of many problems at once: the evaluations, unloaded TTFTs and costs of a
batch of problems that share their system but for the link and the instance counts, and their
workload (a sweep's group, sweep/fast.py; a single plan is a batch of one), each in one model
call for the whole batch. Every number is computed element by element, so a problem's report
is the same to the last bit whatever else is in its batch.
"""

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from prfaas_plan.analytic.capacity import Configuration, Evaluation, evaluate_many
from prfaas_plan.analytic.ttft import TtftSummary, unloaded_ttfts
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.solve.baselines import homogeneous_configuration, naive_configuration
from prfaas_plan.use_cases.plan import Deployment, ModeComparison, PlanReport, RangeNote

if TYPE_CHECKING:
    from prfaas_plan.inputs.pricing import Pricing
    from prfaas_plan.use_cases.cost import PlanCost

NO_TTFT = TtftSummary(*(math.nan,) * len(dataclasses.fields(TtftSummary)))


def deployments_many(
    problems: Sequence[Problem],
    evaluations: Sequence[dict[str, Evaluation]],
    pricings: Sequence["Pricing | None"],
) -> list[list[Deployment]]:
    """Each problem's named evaluations as Deployments: GPUs, unloaded TTFT (one computation for
    the whole batch) and, with its pricing, its cost."""
    first = problems[0]
    thresholds, links = [], []
    for problem, named in zip(problems, evaluations, strict=True):
        for evaluation in named.values():
            thresholds.append(evaluation.configuration.threshold_tokens)
            links.append(problem.system.link_bandwidth_bytes_per_s)
    ttfts = iter(unloaded_ttfts(first.system, first.workload, thresholds, links))
    out = []
    for problem, named, pricing in zip(problems, evaluations, pricings, strict=True):
        s = problem.scenario
        row = []
        for name, evaluation in named.items():
            ttft = next(ttfts)
            if not evaluation.system_throughput_rps > 0:  # serves nobody: no first token
                ttft = NO_TTFT
            c = evaluation.configuration
            prfaas_gpus = c.prfaas_instances * s.prfaas_cluster.gpus_per_instance
            pd_gpus = c.pd_instances * s.pd_cluster.gpus_per_instance
            cost = None
            if pricing is not None:
                from prfaas_plan.use_cases.cost import price_deployment

                cost = price_deployment(problem, pricing, prfaas_gpus, pd_gpus, evaluation)
            row.append(Deployment(name, prfaas_gpus, pd_gpus, evaluation, ttft, cost))
        out.append(row)
    return out


def plan_costs(
    problems: Sequence[Problem],
    evaluations: Sequence[Evaluation],
    pricings: Sequence["Pricing | None"],
    mode: Mode,
) -> list["PlanCost | None"]:
    """Each priced problem's plan cost and equal-cost comparisons (use_cases/cost.py), the
    batch's in one call; None where a problem has no prices."""
    priced = {i: pricing for i, pricing in enumerate(pricings) if pricing is not None}
    if not priced:
        return [None] * len(problems)
    from prfaas_plan.use_cases.cost import plan_costs_many

    costs = plan_costs_many(
        [problems[i] for i in priced], [evaluations[i] for i in priced], list(priced.values()),
        mode,
    )  # fmt: skip
    found: dict[int, PlanCost] = dict(zip(priced, costs, strict=True))
    return [found.get(i) for i in range(len(problems))]


def reports_many(
    problems: Sequence[Problem],
    optima: Sequence[tuple[Configuration, Configuration]],
    mode: Mode,
    notes: tuple[RangeNote, ...],
    pricings: Sequence["Pricing | None"],
    chosen: Sequence[Evaluation] | None = None,
) -> list[PlanReport]:
    """The plan report of each problem from its paper- and exact-mode optima: the optimum of
    `mode` (or `chosen[i]`: a sized or TTFT-constrained plan) against both baselines, both
    modes' views, the unloaded TTFTs and, with prices, the costs."""
    first = problems[0]
    configurations, modes, links = [], [], []
    for problem, (paper, exact) in zip(problems, optima, strict=True):
        s = problem.scenario
        total_gpus = (
            problem.prfaas_instances * s.prfaas_cluster.gpus_per_instance + s.pd_cluster.gpus
        )
        homogeneous = homogeneous_configuration(
            problem.system, problem.workload, total_gpus // s.pd_cluster.gpus_per_instance, mode
        )
        naive = naive_configuration(problem.prfaas_instances, problem.pd_instances)
        configurations += [paper, exact, homogeneous, naive, paper]
        modes += [Mode.PAPER, Mode.EXACT, mode, mode, Mode.EXACT]
        links += [problem.system.link_bandwidth_bytes_per_s] * 5
    evaluations = evaluate_many(first.system, first.workload, configurations, modes, links)
    rows = [evaluations[5 * i : 5 * i + 5] for i in range(len(problems))]
    picked = [
        chosen[i] if chosen is not None else (row[0] if mode is Mode.PAPER else row[1])
        for i, row in enumerate(rows)
    ]
    named = [
        {"prfaas_pd": plan, "homogeneous_pd": row[2], "naive_heterogeneous": row[3]}
        for plan, row in zip(picked, rows, strict=True)
    ]
    deployments = deployments_many(problems, named, pricings)
    costs = plan_costs(problems, picked, pricings, mode)
    reports = []
    for problem, row, deployed, cost in zip(problems, rows, deployments, costs, strict=True):
        modes_view = ModeComparison(row[0], row[1], row[4].system_throughput_rps)
        reports.append(PlanReport(
            problem=problem, mode=mode, plan=deployed[0], homogeneous=deployed[1],
            naive=deployed[2], modes=modes_view, sizing=None, range_notes=notes, plan_cost=cost,
        ))  # fmt: skip
    return reports
