"""The plans of many problems at once: their optima in one search (`search_many`), then the
evaluations, unloaded TTFTs and costs of the batch, each in one model call for the whole
batch. The problems share their system but for the link, the instance counts and the decode
point, and their workload or each have a truncated log-normal (a sweep's group, sweep/fast.py;
use_cases/batch_model.py; a single plan is a batch of one). Every number is computed element
by element, so a problem's report is the same to the last bit whatever else is in its batch.
"""

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.analytic.capacity import Configuration, Evaluation, evaluate_many
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.analytic.log_normal_rows import interval_masses
from prfaas_plan.analytic.ttft import TtftSummary, unloaded_ttfts
from prfaas_plan.choices import Mode, RangePolicy
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.solve.baselines import homogeneous_configurations, naive_configuration
from prfaas_plan.solve.threshold import optimize_fixed_hardware_batch
from prfaas_plan.use_cases.batch_model import batches, model_inputs, search_inputs
from prfaas_plan.use_cases.numerics import model_numerics
from prfaas_plan.use_cases.plan import (
    Deployment,
    ModeComparison,
    PlanReport,
    RangeNote,
    check_threshold,
    range_ends,
    range_notes,
)

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
    ttfts = iter(_unloaded_ttfts(problems, evaluations))
    if any(pricing is not None for pricing in pricings):
        from prfaas_plan.use_cases.cost import price_deployment
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
                cost = price_deployment(problem, pricing, prfaas_gpus, pd_gpus, evaluation)
            row.append(Deployment(name, prfaas_gpus, pd_gpus, evaluation, ttft, cost))
        out.append(row)
    return out


def _unloaded_ttfts(
    problems: Sequence[Problem], evaluations: Sequence[dict[str, Evaluation]]
) -> list[TtftSummary]:
    """The unloaded TTFT of every named evaluation, in order: one computation per distinct
    workload of the batch (its mesh and each length's TTFT once for all its thresholds)."""
    by_workload: dict[int, list[int]] = {}  # distinct workload -> its positions in the output
    thresholds: list[float] = []
    links: list[float] = []
    for problem, named in zip(problems, evaluations, strict=True):
        for evaluation in named.values():
            by_workload.setdefault(id(problem.workload), []).append(len(thresholds))
            thresholds.append(evaluation.configuration.threshold_tokens)
            links.append(problem.system.link_bandwidth_bytes_per_s)
    workloads = {id(p.workload): p.workload for p in problems}
    out: list[TtftSummary] = [NO_TTFT] * len(thresholds)
    keys = list(by_workload)
    distinct = [workloads[key] for key in keys]
    chosen_thresholds = [[thresholds[i] for i in by_workload[key]] for key in keys]
    chosen_links = [[links[i] for i in by_workload[key]] for key in keys]
    if len(distinct) > 1 and all(type(w) is TruncatedLogNormal for w in distinct):
        # a block of differing log-normals: their meshes in 2-D passes (analytic/ttft_rows.py,
        # a sweep's module: not on a single plan's path)
        from prfaas_plan.analytic.ttft_rows import unloaded_ttfts_rows

        log_normals = [w for w in distinct if isinstance(w, TruncatedLogNormal)]
        found_all = unloaded_ttfts_rows(
            problems[0].system, log_normals, chosen_thresholds, chosen_links
        )
    else:
        found_all = [
            unloaded_ttfts(problems[0].system, w, ts, ls)
            for w, ts, ls in zip(distinct, chosen_thresholds, chosen_links, strict=True)
        ]
    for key, found in zip(keys, found_all, strict=True):
        for i, summary in zip(by_workload[key], found, strict=True):
            out[i] = summary
    return out


def plan_costs(
    problems: Sequence[Problem],
    deployments: Sequence[Deployment],
    pricings: Sequence["Pricing | None"],
    mode: Mode,
) -> list["PlanCost | None"]:
    """Each priced problem's plan cost (its deployment's, priced by `deployments_many` with the
    same pricing) and equal-cost comparisons (use_cases/cost.py), the batch's in one call;
    None where a problem has no prices."""
    priced = {i: pricing for i, pricing in enumerate(pricings) if pricing is not None}
    if not priced:
        return [None] * len(problems)
    from prfaas_plan.use_cases.cost import plan_costs_many

    chosen = [deployments[i] for i in priced]
    costs = plan_costs_many(
        [problems[i] for i in priced], [d.evaluation for d in chosen], list(priced.values()),
        mode, [d.cost for d in chosen],
    )  # fmt: skip
    found: dict[int, PlanCost] = dict(zip(priced, costs, strict=True))
    return [found.get(i) for i in range(len(problems))]


def _homogeneous_instances(problem: Problem) -> int:
    """The PD instances the plan's GPUs buy in a homogeneous PD deployment (whole instances)."""
    s = problem.scenario
    total_gpus = problem.prfaas_instances * s.prfaas_cluster.gpus_per_instance + s.pd_cluster.gpus
    return total_gpus // s.pd_cluster.gpus_per_instance


def reports_many(
    problems: Sequence[Problem],
    optima: Sequence[tuple[Configuration, Configuration]],
    mode: Mode,
    notes: Sequence[tuple[RangeNote, ...]],
    pricings: Sequence["Pricing | None"],
    chosen: Sequence[Evaluation] | None = None,
) -> list[PlanReport]:
    """The plan report of each problem from its paper- and exact-mode optima: the optimum of
    `mode` (or `chosen[i]`: a sized or TTFT-constrained plan) against both baselines, both
    modes' views, the unloaded TTFTs and, with prices, the costs."""
    configurations, modes, links = [], [], []
    homogeneous = homogeneous_configurations(
        [p.system for p in problems], [p.workload for p in problems],
        [_homogeneous_instances(p) for p in problems], mode,
    )  # fmt: skip
    for problem, (paper, exact), same_gpus in zip(problems, optima, homogeneous, strict=True):
        naive = naive_configuration(problem.prfaas_instances, problem.pd_instances)
        configurations += [paper, exact, same_gpus, naive, paper]
        modes += [Mode.PAPER, Mode.EXACT, mode, mode, Mode.EXACT]
        links += [problem.system.link_bandwidth_bytes_per_s] * 5
    workload, decode = model_inputs(problems, repeat=5)
    evaluations = evaluate_many(problems[0].system, workload, configurations, modes, links, decode)
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
    costs = plan_costs(problems, [d[0] for d in deployments], pricings, mode)
    reports = []
    for problem, row, deployed, cost, note in zip(
        problems, rows, deployments, costs, notes, strict=True
    ):
        modes_view = ModeComparison(row[0], row[1], row[4].system_throughput_rps)
        reports.append(PlanReport(
            problem=problem, mode=mode, plan=deployed[0], homogeneous=deployed[1],
            naive=deployed[2], modes=modes_view, sizing=None, range_notes=note, plan_cost=cost,
        ))  # fmt: skip
    return reports


def search_many(
    problems: Sequence[Problem], threshold_tokens: float | None
) -> list[tuple[Configuration, Configuration]]:
    """The paper- and exact-mode optima of each problem, in one pass of the optimiser over
    every problem's splits (solve/threshold.py: the same optimum to the last bit as one search
    each). The problems share their system but for the link, the instance counts and the
    decode point, and their workload or each have a truncated log-normal (a sweep's group:
    sweep/fast.py; use_cases/batch_model.py)."""
    first, count = problems[0], len(problems)
    prfaas = np.array([p.prfaas_instances for p in problems] * 2)
    pd = np.array([p.pd_instances for p in problems] * 2)
    link = np.array([p.system.link_bandwidth_bytes_per_s for p in problems] * 2)
    modes = [Mode.PAPER] * count + [Mode.EXACT] * count
    workload, decode = search_inputs(problems)
    t, n_p, n_d = optimize_fixed_hardware_batch(
        first.system, workload if isinstance(workload, LengthDistribution) else workload * 2,
        prfaas, pd, link, threshold_tokens, modes, None if decode is None else np.array(decode * 2),
    )  # fmt: skip
    configurations = [
        Configuration(int(prfaas[i]), int(n_p[i]), int(n_d[i]), float(t[i]))
        for i in range(2 * count)
    ]
    return list(zip(configurations[:count], configurations[count:], strict=True))


def _range_notes_by_workload(
    problems: Sequence[Problem], policy: RangePolicy
) -> dict[int, tuple[RangeNote, ...]]:
    """`range_notes` of each distinct workload (by identity), in the problems' order: the
    masses of differing log-normals in one numpy pass (analytic/log_normal_rows.py
    `interval_masses`), the same numbers as each one's own."""
    firsts: dict[int, Problem] = {}
    for problem in problems:
        firsts.setdefault(id(problem.workload), problem)
    masses: dict[int, FloatArray] = {}
    log_normals = [p for p in firsts.values() if type(p.workload) is TruncatedLogNormal]
    if len(log_normals) > 1:
        ranges = _profiled_ranges(log_normals[0])
        log_normals = [p for p in log_normals if _profiled_ranges(p) == ranges]
        _, lows, highs = range_ends(log_normals[0].system)
        workloads = [p.workload for p in log_normals]
        rows = interval_masses(
            [w for w in workloads if isinstance(w, TruncatedLogNormal)], lows, highs
        )
        for problem, row in zip(log_normals, rows, strict=True):
            if not np.isnan(row).any():  # else its own code answers
                masses[id(problem.workload)] = row
    return {key: range_notes(problem, policy, masses.get(key)) for key, problem in firsts.items()}


def _profiled_ranges(problem: Problem) -> tuple[float, ...]:
    """The profiled length ranges of the problem's curves (`range_ends` depends on these)."""
    s = problem.system
    curves = (s.prfaas_prefill_latency, s.pd_prefill_latency, s.kv_cache_size)
    return tuple(x for c in curves for x in (c.table_min_tokens, c.table_max_tokens))


@model_numerics("optimize")
def plan_many(
    problems: Sequence[Problem],
    pricings: Sequence["Pricing | None"],
    *,
    mode: Mode = Mode.PAPER,
    threshold_tokens: float | None = None,
    range_policy: RangePolicy = RangePolicy.EXTRAPOLATE,
) -> list[PlanReport]:
    """`plan` of each problem (no sizing, no TTFT target) with one search per batch of them
    (`search_many`, use_cases/batch_model.py `batches`): the same reports as one `plan` call
    each. The problems share their system but for what `search_many` says; `pricings[i]`
    prices problem i. Under `model_numerics("optimize")`, as `plan` is: an overflow refuses the
    batch as it refuses a plan (a sweep then plans each scenario of it alone)."""
    check_threshold(threshold_tokens)
    notes_of = _range_notes_by_workload(problems, range_policy)  # the tables are shared
    reports: list[PlanReport | None] = [None] * len(problems)
    for batch in batches(problems):
        chosen = [problems[i] for i in batch]
        notes = [notes_of[id(p.workload)] for p in chosen]
        found = reports_many(
            chosen, search_many(chosen, threshold_tokens), mode, notes, [pricings[i] for i in batch]
        )
        for i, report in zip(batch, found, strict=True):
            reports[i] = report
    return [r for r in reports if r is not None]
