"""The cost of a planned deployment and both equal-cost comparisons: the homogeneous PD
deployment (whole PD instances, floor, best split) that the plan's GPU spend and its all-in
$/hour each buy, and the plan's throughput gain over each. Always both:

- equal GPU spend (the paper's comparison, §4: 32 H200 + 64 H20 priced as 128 H20-equivalents
  against homogeneous H20): the plan's GPU $/hour only;
- all-in: the plan's whole $/hour, GPUs + the link's fixed price + its volume at the priced
  utilisation, which a homogeneous PD deployment (no link) spends on GPUs alone.

`plan_cost` is the library entry point (optimize/evaluate call it; so can sweeps or a server).
Units: USD per hour, req/s.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from prfaas_plan.analytic.capacity import Evaluation, evaluate_many
from prfaas_plan.analytic.cost import DeploymentCost, affordable_instances, deployment_cost
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.pricing import Pricing
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.solve.baselines import homogeneous_configurations
from prfaas_plan.use_cases.batch_model import model_inputs


@dataclass(frozen=True)
class EqualCost:
    """Homogeneous PD on the PD GPU type that `budget_usd_per_hour` buys."""

    budget_usd_per_hour: float
    pd_instances: int  # floor(budget / price of one PD instance-hour)
    evaluation: Evaluation | None  # None when the budget buys fewer than two instances
    cost: DeploymentCost | None

    @property
    def system_throughput_rps(self) -> float:
        return self.evaluation.system_throughput_rps if self.evaluation else 0.0

    def gain(self, system_throughput_rps: float) -> float:
        """Λ_max of a deployment / Λ_max of this homogeneous PD (inf when this serves nothing)."""
        base = self.system_throughput_rps
        if base > 0:
            return system_throughput_rps / base
        return math.inf if system_throughput_rps > 0 else math.nan


@dataclass(frozen=True)
class PlanCost:
    deployment: DeploymentCost
    equal_cost: EqualCost  # all-in: the deployment's whole $/hour
    equal_gpu_spend: EqualCost  # the paper's: the deployment's GPU $/hour only
    pricing: Pricing

    def gain_vs_equal_cost(self, system_throughput_rps: float) -> float:
        """Λ_max of the deployment / Λ_max of the all-in equal-cost homogeneous PD."""
        return self.equal_cost.gain(system_throughput_rps)

    def gain_vs_equal_gpu_spend(self, system_throughput_rps: float) -> float:
        """Λ_max of the deployment / Λ_max of the homogeneous PD its GPU $/hour buys."""
        return self.equal_gpu_spend.gain(system_throughput_rps)


def price_deployment(
    problem: Problem, pricing: Pricing, prfaas_gpus: int, pd_gpus: int, evaluation: Evaluation
) -> DeploymentCost:
    """The deployment's $/hour at `pricing.utilization` x its Λ_max."""
    return deployment_cost(
        prfaas_gpus=prfaas_gpus,
        pd_gpus=pd_gpus,
        prfaas_usd_per_gpu_hour=pricing.prfaas.usd_per_gpu_hour,
        pd_usd_per_gpu_hour=pricing.pd.usd_per_gpu_hour,
        links=pricing.links,
        system_throughput_rps=evaluation.system_throughput_rps,
        kv_egress_bytes_per_s=evaluation.kv_egress_bytes_per_s,
        output_tokens=problem.system.output_tokens,
        utilization=pricing.utilization,
    )


def equal_cost(
    problem: Problem, pricing: Pricing, budget_usd_per_hour: float, mode: Mode
) -> EqualCost:
    """The homogeneous PD deployment `budget_usd_per_hour` buys: floor(budget / (PD GPUs per
    instance x PD $/GPU-hour)) instances, best split (solve/baselines.py homogeneous_baseline),
    priced as any deployment (its GPUs only: it buys no link)."""
    return equal_costs_many([problem], [pricing], [budget_usd_per_hour], mode)[0]


def equal_costs_many(
    problems: Sequence[Problem],
    pricings: Sequence[Pricing],
    budgets_usd_per_hour: Sequence[float],
    mode: Mode,
) -> list[EqualCost]:
    """`equal_cost` of each (problem, pricing, budget), the problems sharing their system but
    for the link and the decode point, and their workload or each a truncated log-normal (a
    sweep's batch, use_cases/batch_model.py): every baseline in one model call."""
    bought: list[int] = []
    wanted: list[int] = []  # the rows whose budget buys a deployment
    for i, (problem, pricing, budget) in enumerate(
        zip(problems, pricings, budgets_usd_per_hour, strict=True)
    ):
        per_instance = problem.scenario.pd_cluster.gpus_per_instance * pricing.pd.usd_per_gpu_hour
        n = affordable_instances(budget, per_instance) if per_instance > 0 else 0
        bought.append(n)
        if per_instance > 0 and n >= 2:  # one prefill and one decode instance at least
            wanted.append(i)
    buying = [problems[i] for i in wanted]
    evaluations = []
    if buying:
        configurations = homogeneous_configurations(
            [p.system for p in buying], [p.workload for p in buying], [bought[i] for i in wanted],
            mode,
        )  # fmt: skip
        workload, decode = model_inputs(buying)
        evaluations = evaluate_many(
            buying[0].system, workload, configurations, [mode] * len(configurations),
            [p.system.link_bandwidth_bytes_per_s for p in buying], decode,
        )  # fmt: skip
    found = dict(zip(wanted, evaluations, strict=True))
    out = []
    for i, (problem, pricing, budget) in enumerate(
        zip(problems, pricings, budgets_usd_per_hour, strict=True)
    ):
        base = found.get(i)
        if base is None:
            out.append(EqualCost(budget, bought[i], None, None))
            continue
        gpus = bought[i] * problem.scenario.pd_cluster.gpus_per_instance
        out.append(
            EqualCost(budget, bought[i], base, price_deployment(problem, pricing, 0, gpus, base))
        )
    return out


def plan_cost(
    problem: Problem,
    evaluation: Evaluation,
    pricing: Pricing,
    *,
    mode: Mode = Mode.PAPER,
) -> PlanCost:
    """Price `evaluation` (a configuration of `problem`) and find the homogeneous PD deployments
    its all-in $/hour and its GPU $/hour buy (`equal_cost`)."""
    return plan_costs_many([problem], [evaluation], [pricing], mode)[0]


def plan_costs_many(
    problems: Sequence[Problem],
    evaluations: Sequence[Evaluation],
    pricings: Sequence[Pricing],
    mode: Mode,
    deployment_costs: Sequence[DeploymentCost | None] | None = None,
) -> list[PlanCost]:
    """`plan_cost` of each (problem, evaluation, pricing) of a batch (`equal_costs_many`);
    `deployment_costs[i]`, where not None, is evaluation i's own cost at pricing i (a plan's
    deployment, priced already: `price_deployment` of its GPUs)."""
    known = deployment_costs or [None] * len(problems)
    costs = []
    for problem, evaluation, pricing, cost in zip(
        problems, evaluations, pricings, known, strict=True
    ):
        if cost is None:
            c, s = evaluation.configuration, problem.scenario
            cost = price_deployment(
                problem, pricing,
                c.prfaas_instances * s.prfaas_cluster.gpus_per_instance,
                c.pd_instances * s.pd_cluster.gpus_per_instance, evaluation,
            )  # fmt: skip
        costs.append(cost)
    count = len(costs)
    bases = equal_costs_many(
        [*problems, *problems], [*pricings, *pricings],
        [c.total_usd_per_hour for c in costs] + [c.gpus_usd_per_hour for c in costs], mode,
    )  # fmt: skip
    return [
        PlanCost(cost, bases[i], bases[count + i], pricing)
        for i, (cost, pricing) in enumerate(zip(costs, pricings, strict=True))
    ]
