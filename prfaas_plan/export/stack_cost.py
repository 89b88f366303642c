"""What a stack will actually run, in the model's terms, and what it costs against the plan.

A stack with a length threshold (llm-d, a router of your own on plain Kubernetes) runs the plan's
configuration at the threshold it can hold (whole tokens): that is the `evaluate` use-case
(use_cases/plan.py evaluate_configuration) at that threshold. A stack without one (Dynamo's
DynamoGraphDeployment with vLLM workers) prefills every request on a prefill worker chosen in
turn (round-robin), whatever its length: each worker then sees the whole length distribution,
and Λ is bound by the slowest worker's share, the PrfaaS workers' share of the link and decode
(equations (3)-(6) of the reference with a length-blind split instead of a threshold).
Units: requests/s, tokens, seconds, bytes.
"""

import math
from dataclasses import dataclass

import numpy as np

from prfaas_plan import plausible
from prfaas_plan.analytic.capacity import rates
from prfaas_plan.export.plan_source import ExportPlan
from prfaas_plan.inputs.scenario import Problem


@dataclass(frozen=True)
class StackCost:
    """Λ_max of what the stack runs, next to the plan's."""

    method: str  # how the stack's configuration was evaluated
    stack_threshold_tokens: float | None  # the threshold the stack holds; None: it has none
    stack_system_rps: float
    plan_system_rps: float

    @property
    def relative_change(self) -> float:
        """Λ_stack / Λ_plan − 1 (negative: the stack serves less)."""
        return self.stack_system_rps / self.plan_system_rps - 1.0


def _tokens(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def threshold_cost(problem: Problem, plan: ExportPlan, stack_threshold_tokens: float) -> StackCost:
    """The plan's instances at the threshold the stack holds (the `evaluate` use-case)."""
    from prfaas_plan.use_cases.plan import evaluate_configuration

    report = evaluate_configuration(
        problem, threshold_tokens=stack_threshold_tokens,
        pd_prefill_instances=plan.pd_prefill_instances, prfaas_instances=plan.prfaas_instances,
        mode=plan.mode,
    )  # fmt: skip
    return StackCost(
        f"evaluate (t = {_tokens(stack_threshold_tokens)} tokens, instances "
        f"{plan.prfaas_instances}/{plan.pd_prefill_instances}/{plan.pd_decode_instances}, "
        f"{plan.mode.value} mode)",
        stack_threshold_tokens,
        report.deployment.evaluation.system_throughput_rps,
        plan.system_rps,
    )


def round_robin_system_rps(problem: Problem, plan: ExportPlan) -> float:
    """Λ_max when every request is prefilled on one of the N = N_prfaas + N_p prefill workers in
    turn: min( N / T_prfaas(L), N / T_pd(L), B·N / (N_prfaas · S_kv(L)), N_d · Θ_decode ),
    with T and S_kv over the whole distribution (at its mean length in paper mode, their means in
    exact mode). A pool without workers of one kind has no term for it."""
    system, workload = problem.system, problem.workload
    # threshold 0: every request is "long" (PrfaaS); beyond every length: every request "short"
    everything_long = rates(system, workload, 0.0, 1, 1, 1, plan.mode)
    everything_short = rates(system, workload, plausible.MAX_TOKENS, 1, 1, 1, plan.mode)
    t_prfaas_s = float(everything_long.prfaas_service_time_s)
    kv_bytes = float(everything_long.long_kv_cache_bytes)
    t_pd_s = float(everything_short.pd_prefill_service_time_s)
    workers = plan.prfaas_instances + plan.pd_prefill_instances
    limits = [plan.pd_decode_instances * system.decode_rps_per_instance]
    if workers == 0:
        return 0.0
    if plan.prfaas_instances:
        limits += [
            workers / t_prfaas_s,
            system.link_bandwidth_bytes_per_s * workers / (plan.prfaas_instances * kv_bytes),
        ]
    if plan.pd_prefill_instances:
        limits.append(workers / t_pd_s)
    return float(np.min(limits))


def round_robin_cost(problem: Problem, plan: ExportPlan) -> StackCost:
    rps = round_robin_system_rps(problem, plan)
    return StackCost(
        f"length-blind round-robin over {plan.prfaas_instances + plan.pd_prefill_instances} "
        f"prefill workers ({plan.prfaas_instances} PrfaaS, {plan.pd_prefill_instances} PD), "
        f"{plan.pd_decode_instances} decode workers, {plan.mode.value} mode",
        None,
        rps if math.isfinite(rps) else 0.0,
        plan.system_rps,
    )
