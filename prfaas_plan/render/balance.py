"""The threshold-balance curve of a plan as data (for the what-if page; the figure is plot.py):
for the plan's split, the system throughput each term allows as the threshold t varies
(Θ_prfaas/p, Θ_pd-p/(1 − p), Θ_pd-d) and Λ_max, their minimum (analytic/threshold_balance.py).
Units: tokens, req/s."""

import numpy as np

from prfaas_plan.analytic.threshold_balance import threshold_balance
from prfaas_plan.render.views import Document, number
from prfaas_plan.use_cases.plan import PlanReport

BALANCE_POINTS = 120


def balance_json(report: PlanReport, points: int = BALANCE_POINTS) -> Document:
    """`points` thresholds spaced geometrically over the workload's lengths, and each term."""
    problem, plan = report.problem, report.plan.evaluation
    c = plan.configuration
    curve = threshold_balance(problem.system, problem.workload, c, report.mode, points)
    t = curve.thresholds_tokens

    def column(values: np.ndarray) -> list[float | None]:
        return [number(v) for v in np.broadcast_to(values, t.shape)]

    return {
        "mode": str(report.mode),
        "split": [c.pd_prefill_instances, c.pd_decode_instances],
        "prfaas_instances": c.prfaas_instances,
        "threshold_tokens": column(t),
        "prfaas_rps": column(curve.prfaas_rps),
        "pd_prefill_rps": column(curve.pd_prefill_rps),
        "pd_decode_rps": column(curve.pd_decode_rps),
        "system_rps": column(curve.system_rps),
        "plan_threshold_tokens": number(c.threshold_tokens),
        "plan_system_rps": number(plan.system_throughput_rps),
    }
