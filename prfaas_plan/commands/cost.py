"""The cost of a planned deployment and the equal-cost comparison: the homogeneous PD
deployment the same $/hour buys (whole PD instances, floor) and the throughput gain over it.
`plan_cost` is the library entry point (optimize/evaluate call it; so can sweeps or a server).
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
    """Homogeneous PD on the PD GPU type with the deployment's own $/hour budget."""

    budget_usd_per_hour: float
    pd_instances: int  # floor(budget / price of one PD instance-hour)
    evaluation: Evaluation | None  # None when the budget buys fewer than two instances
    cost: DeploymentCost | None

    @property
    def system_throughput_rps(self) -> float:
        return self.evaluation.system_throughput_rps if self.evaluation else 0.0


@dataclass(frozen=True)
class PlanCost:
    deployment: DeploymentCost
    equal_cost: EqualCost
    pricing: Pricing

    def gain_vs_equal_cost(self, system_throughput_rps: float) -> float:
        """Λ_max of the deployment / Λ_max of the equal-cost homogeneous PD."""
        base = self.equal_cost.system_throughput_rps
        if base > 0:
            return system_throughput_rps / base
        return math.inf if system_throughput_rps > 0 else math.nan


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


def plan_cost(
    problem: Problem,
    evaluation: Evaluation,
    pricing: Pricing,
    *,
    mode: Mode = Mode.PAPER,
) -> PlanCost:
    """Price `evaluation` (a configuration of `problem`) and find the homogeneous PD
    deployment its $/hour buys: floor(total $/h / (PD GPUs per instance x PD $/GPU-hour))
    instances, best split (solve/threshold.py homogeneous_baseline)."""
    c, s = evaluation.configuration, problem.scenario
    cost = price_deployment(
        problem, pricing,
        c.prfaas_instances * s.prfaas_cluster.gpus_per_instance,
        (c.pd_prefill_instances + c.pd_decode_instances) * s.pd_cluster.gpus_per_instance,
        evaluation,
    )  # fmt: skip
    per_instance = s.pd_cluster.gpus_per_instance * pricing.pd.usd_per_gpu_hour
    budget = cost.total_usd_per_hour
    n = affordable_instances(budget, per_instance) if per_instance > 0 else 0
    if per_instance > 0 and n >= 2:  # one prefill and one decode instance at least
        base = homogeneous_baseline(problem.system, problem.workload, n, mode)
        base_cost = price_deployment(problem, pricing, 0, n * s.pd_cluster.gpus_per_instance, base)
        equal = EqualCost(budget, n, base, base_cost)
    else:
        equal = EqualCost(budget, n, None, None)
    return PlanCost(cost, equal, pricing)
