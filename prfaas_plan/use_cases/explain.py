"""`explain`: the plan's numbers put through the model's equations one by one, so a reviewer can
check the plan by hand, with the closed-form elasticities of Λ_max (symbolic/, sympy) when the
workload is a truncated log-normal. Units: SI (s, bytes, bytes/s, tokens, req/s).
"""

from dataclasses import dataclass

from prfaas_plan.analytic.capacity import Evaluation
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.scenario import Problem
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware
from prfaas_plan.symbolic.closed_forms import ClosedForms, closed_forms
from prfaas_plan.use_cases.numerics import model_numerics


@dataclass(frozen=True)
class ExplainReport:
    problem: Problem
    plan: Evaluation  # the optimum in the report's mode
    kv_cache_long_bytes: float  # S_kv(l_long), the link term's request size
    closed_forms: ClosedForms | None  # None unless the workload is a truncated log-normal


def output_spread(problem: Problem) -> float:
    """E[L_out²] / E[L_out]² of the problem's output lengths (1 for a constant output): the
    decode context's output part is output_spread · L_out / 2."""
    out = problem.output_lengths
    if out is None:
        return 1.0
    return out.mean_squared_tokens / out.mean_tokens**2


@model_numerics("explain")
def explain(problem: Problem, mode: Mode = Mode.PAPER) -> ExplainReport:
    """The optimum in `mode` and, for a truncated log-normal workload, its closed forms."""
    space = SearchSpace(problem.prfaas_instances, problem.pd_instances)
    plan = optimize_fixed_hardware(problem.system, problem.workload, space, mode)
    forms = None
    if isinstance(problem.workload, TruncatedLogNormal):
        forms = closed_forms(problem.system, problem.workload, plan, output_spread(problem))
    long_kv = float(problem.system.kv_cache_size(plan.long_mean_tokens))
    return ExplainReport(problem, plan, long_kv, forms)
