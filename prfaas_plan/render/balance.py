"""The threshold-balance curve of a plan as data (for the what-if page; the figure is plot.py):
for the plan's split, the system throughput each term allows as the threshold t varies
(Θ_prfaas/p, Θ_pd-p/(1 − p), Θ_pd-d) and Λ_max, their minimum. Units: tokens, req/s."""

import numpy as np

from prfaas_plan.analytic.capacity import rates
from prfaas_plan.commands.plan import PlanReport
from prfaas_plan.render.views import Document, number

BALANCE_POINTS = 120


def balance_json(report: PlanReport, points: int = BALANCE_POINTS) -> Document:
    """`points` thresholds spaced geometrically over the workload's lengths, and each term."""
    problem, plan = report.problem, report.plan.evaluation
    c = plan.configuration
    w = problem.workload
    t = np.geomspace(w.min_tokens, w.max_tokens, points)
    r = rates(problem.system, w, t, c.prfaas_instances, c.pd_prefill_instances,
              c.pd_decode_instances, report.mode)  # fmt: skip
    limits = r.limits_rps

    def column(values: np.ndarray) -> list[float | None]:
        return [number(v) for v in np.broadcast_to(values, t.shape)]

    return {
        "mode": str(report.mode),
        "split": [c.pd_prefill_instances, c.pd_decode_instances],
        "prfaas_instances": c.prfaas_instances,
        "threshold_tokens": column(t),
        "prfaas_rps": column(np.minimum(limits[0], limits[1])),
        "pd_prefill_rps": column(limits[2]),
        "pd_decode_rps": column(limits[3]),
        "system_rps": column(r.system_rps),
        "plan_threshold_tokens": number(c.threshold_tokens),
        "plan_system_rps": number(plan.system_throughput_rps),
    }
