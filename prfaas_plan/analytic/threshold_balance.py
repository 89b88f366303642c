"""The threshold-balance curve of a deployment: for its counts, the system throughput each term
allows as the threshold t varies over the workload's lengths (geometric), Θ_prfaas/p (rises),
Θ_pd-p/(1 − p) (falls), Θ_pd-d (flat), and Λ_max, their minimum (equations (3)-(6) of
analytic/capacity.py). The what-if page's data (render/balance.py) and the plots' left panel
(render/plot.py) both draw it. Units: tokens, req/s.
"""

from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.arrays import FloatArray
from prfaas_plan.analytic.capacity import Configuration, ServingSystem, rates
from prfaas_plan.analytic.length_distribution import LengthDistribution
from prfaas_plan.choices import Mode


@dataclass(frozen=True)
class ThresholdBalance:
    thresholds_tokens: FloatArray  # geometric over [min_tokens, max_tokens]
    prfaas_rps: FloatArray  # Θ_prfaas / p: the lower of PrfaaS compute and its link
    pd_prefill_rps: FloatArray  # Θ_pd-p / (1 − p)
    pd_decode_rps: FloatArray  # Θ_pd-d (does not depend on t: may not be broadcast to t)
    system_rps: FloatArray  # Λ_max, the minimum of the three


def threshold_balance(
    system: ServingSystem,
    workload: LengthDistribution,
    configuration: Configuration,
    mode: Mode,
    points: int,
) -> ThresholdBalance:
    """The curve at `points` thresholds for `configuration`'s instance counts."""
    c = configuration
    t = np.geomspace(workload.min_tokens, workload.max_tokens, points)
    r = rates(system, workload, t, c.prfaas_instances, c.pd_prefill_instances,
              c.pd_decode_instances, mode)  # fmt: skip
    limits = r.limits_rps
    return ThresholdBalance(t, np.minimum(limits[0], limits[1]), limits[2], limits[3], r.system_rps)
