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
from dataclasses import dataclass

from prfaas_plan.analytic.capacity import Evaluation
from prfaas_plan.analytic.cost import DeploymentCost, affordable_instances, deployment_cost
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.pricing import Pricing
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.solve.threshold import homogeneous_baseline


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
    instance x PD $/GPU-hour)) instances, best split (solve/threshold.py homogeneous_baseline),
    priced as any deployment (its GPUs only: it buys no link)."""
    s = problem.scenario
    per_instance = s.pd_cluster.gpus_per_instance * pricing.pd.usd_per_gpu_hour
    n = affordable_instances(budget_usd_per_hour, per_instance) if per_instance > 0 else 0
    if per_instance > 0 and n >= 2:  # one prefill and one decode instance at least
        base = homogeneous_baseline(problem.system, problem.workload, n, mode)
        base_cost = price_deployment(problem, pricing, 0, n * s.pd_cluster.gpus_per_instance, base)
        return EqualCost(budget_usd_per_hour, n, base, base_cost)
    return EqualCost(budget_usd_per_hour, n, None, None)


def plan_cost(
    problem: Problem,
    evaluation: Evaluation,
    pricing: Pricing,
    *,
    mode: Mode = Mode.PAPER,
) -> PlanCost:
    """Price `evaluation` (a configuration of `problem`) and find the homogeneous PD deployments
    its all-in $/hour and its GPU $/hour buy (`equal_cost`)."""
    c, s = evaluation.configuration, problem.scenario
    cost = price_deployment(
        problem, pricing,
        c.prfaas_instances * s.prfaas_cluster.gpus_per_instance,
        (c.pd_prefill_instances + c.pd_decode_instances) * s.pd_cluster.gpus_per_instance,
        evaluation,
    )  # fmt: skip
    return PlanCost(
        cost,
        equal_cost(problem, pricing, cost.total_usd_per_hour, mode),
        equal_cost(problem, pricing, cost.gpus_usd_per_hour, mode),
        pricing,
    )
