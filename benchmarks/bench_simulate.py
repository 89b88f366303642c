"""Benchmark: the discrete-event simulator on the case-study plan at 80% of the exact-mode Λ_max.

Run by hand (not a test):  python benchmarks/bench_simulate.py [--requests 100000 1000000]
                                                               [--policy static|adaptive]
Prints, per request count, the time to generate the requests (Poisson arrivals, log-normal
lengths) and to simulate them, the simulated requests per second, and the cost per request
relative to the smallest run (1.0x = linear scaling). One process, one core (numpy's sorting
and arithmetic are single-threaded here; the event loops are pure Python).
"""

import argparse
import time

import numpy as np

from prfaas_plan.choices import Mode
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import build_problem, load_scenario
from prfaas_plan.sim.arrivals import poisson_arrivals
from prfaas_plan.sim.engine import simulate
from prfaas_plan.sim.threshold_policies import AdaptiveThreshold, StaticThreshold
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware

LOAD = 0.8  # fraction of Λ_max
SEED = 2026


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--policy", choices=["static", "adaptive"], default="static")
    args = parser.parse_args()
    policy = AdaptiveThreshold() if args.policy == "adaptive" else StaticThreshold()

    path = default_scenario_file()
    problem = build_problem(load_scenario(path), path, Catalog.open())
    space = SearchSpace(problem.prfaas_instances, problem.pd_instances)
    plan = optimize_fixed_hardware(problem.system, problem.workload, space, Mode.EXACT)
    c = plan.configuration
    rate = LOAD * plan.system_throughput_rps
    print(
        f"# case-study plan {c.prfaas_instances} PrfaaS / {c.pd_prefill_instances} PD-P / "
        f"{c.pd_decode_instances} PD-D, t = {c.threshold_tokens:.0f} tokens, exact Λ_max = "
        f"{plan.system_throughput_rps:.4f} req/s, offered {rate:.4f} req/s ({LOAD:.0%}), "
        f"policy {args.policy}"
    )
    print(
        f"{'requests':>10} {'generate_s':>10} {'simulate_s':>10} {'requests/s':>11} "
        f"{'us/request':>10} {'vs first':>8} {'P90 TTFT s':>10} {'throughput':>10}"
    )
    first_cost = None
    for n in args.requests:
        rng = np.random.default_rng(SEED)
        start = time.perf_counter()
        arrival = poisson_arrivals(rate, rng=rng, count=n)
        lengths = problem.workload.sample(rng, n)
        generated = time.perf_counter()
        result = simulate(problem.system, c, arrival, lengths, policy=policy)
        done = time.perf_counter()
        cost = (done - generated) / n
        first_cost = first_cost or cost
        print(
            f"{n:>10} {generated - start:>10.2f} {done - generated:>10.2f} {n / (done - generated):>11.0f} "
            f"{cost * 1e6:>10.2f} {cost / first_cost:>7.2f}x {result.ttft.p90_s:>10.3f} "
            f"{result.throughput_rps:>10.4f}"
        )


if __name__ == "__main__":
    main()
