"""Benchmark: one in-process plan of the default scenario with a new length distribution each
time (its caches miss, as for the API's varied bodies: the TTFT mesh, the split constants).

Run by hand (not a test), from the checkout to measure:
    PYTHONPATH=$PWD python benchmarks/bench_plan_fresh_workload.py [--plans N]
"""

import argparse
import dataclasses
import statistics
import time

from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import build_problem, load_scenario
from prfaas_plan.use_cases.plan import plan


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans", type=int, default=150)
    args = parser.parse_args()
    path = default_scenario_file()
    problem = build_problem(load_scenario(path), path, Catalog.open())
    w = problem.workload
    assert isinstance(w, TruncatedLogNormal)
    times = []
    for i in range(args.plans):
        d = TruncatedLogNormal(w.mu_log + 1e-6 * (i + 1), w.sigma_log, w.min_tokens, w.max_tokens)
        start = time.perf_counter()
        plan(dataclasses.replace(problem, workload=d))
        times.append(time.perf_counter() - start)
    print(
        f"plan, fresh length distribution ({args.plans} plans): median "
        f"{statistics.median(times) * 1e3:.2f} ms, min {min(times) * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    main()
