"""CPU a varied /api/v1/plan body costs in-process (jobs._compute), and per stage: python benchmarks/plan_stages.py <worktree> (issue 23)."""

import collections
import json
import sys
import time

sys.path.insert(0, sys.argv[1] + "/benchmarks")
import bench_serve as b

from prfaas_plan.inputs.cached_catalog import CachedCatalog
from prfaas_plan.server import endpoints, jobs
from prfaas_plan.use_cases import calls, plan_reports
from prfaas_plan.use_cases import plan as planmod

acc = collections.Counter()


def wrap(mod, name, label=None):
    f = getattr(mod, name)
    label = label or name

    def w(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            acc[label] += time.process_time() - t

    setattr(mod, name, w)


wrap(endpoints, "problem_of")
wrap(plan_reports, "search_many")
wrap(plan_reports, "homogeneous_configurations", "homog(reports)")
wrap(plan_reports, "evaluate_many")
wrap(plan_reports, "_unloaded_ttfts")
wrap(plan_reports, "plan_costs")
wrap(planmod, "range_notes")
wrap(calls, "prices") if hasattr(calls, "prices") else None
cat = CachedCatalog.open(None)
work = [json.dumps(x).encode() for x in b.bodies(None, "varied", 650)]
for raw in work[:50]:
    jobs._compute("plan", raw, "json", 64, cat, None)
acc.clear()
best = None
for rep in range(3):
    t = time.process_time()
    for raw in work[50 + 200 * rep : 250 + 200 * rep]:
        jobs._compute("plan", raw, "json", 64, cat, None)
    ms = (time.process_time() - t) / 200 * 1000
    best = ms if best is None else min(best, ms)
print("ms/body best of 3 batches of 200:", round(best, 3))
for k, v in acc.most_common():
    print(f"  {k:20s} {v / 600 * 1000:.3f} ms")
