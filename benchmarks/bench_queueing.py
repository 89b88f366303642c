"""Benchmark: the analytic TTFT-under-load model (analytic/loaded_ttft.py) on the case study.

Run by hand (not a test):  python benchmarks/bench_queueing.py [--requests 1000000]
                                                                [--loads 0.5 0.8 0.9 0.95]
Prints (1) the time of one `loaded_ttft` and of `optimize_with_ttft` for a P90 and a mean
target at 80% of the exact-mode Λ_max; (2) the model next to the discrete-event simulator on
the exact-mode case-study plan at each load: TTFT mean/P50/P90/P99, analytic and simulated
(Poisson arrivals, stratified lengths, first 5% of the time dropped as warm-up, one run of
`--requests` requests per load, seed fixed), and the relative error.
"""

import argparse
import time

import numpy as np

from prfaas_plan.analytic.loaded_ttft import loaded_ttft
from prfaas_plan.choices import Mode
from prfaas_plan.errors import InfeasibleError
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import build_problem, load_scenario
from prfaas_plan.sim.arrivals import poisson_arrivals
from prfaas_plan.sim.engine import simulate
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware
from prfaas_plan.solve.ttft_target import optimize_with_ttft

SEED = 2026


def best_of(repeats: int, call) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--loads", type=float, nargs="+", default=[0.5, 0.8, 0.9, 0.95])
    args = parser.parse_args()

    path = default_scenario_file()
    problem = build_problem(load_scenario(path), path, Catalog.open())
    s, w = problem.system, problem.workload
    space = SearchSpace(problem.prfaas_instances, problem.pd_instances)
    plan = optimize_fixed_hardware(s, w, space, Mode.EXACT)
    c = plan.configuration
    rate = 0.8 * plan.system_throughput_rps
    unconstrained = loaded_ttft(s, w, c, rate)
    print(
        f"# case-study plan {c.prfaas_instances}/{c.pd_prefill_instances}/"
        f"{c.pd_decode_instances}, t = {c.threshold_tokens:.0f} tokens, exact Λ_max = "
        f"{plan.system_throughput_rps:.4f} req/s; at 80% ({rate:.4f} req/s) its P90 TTFT is "
        f"{unconstrained.p90_s:.3f} s"
    )
    print(f"loaded_ttft: {best_of(20, lambda: loaded_ttft(s, w, c, rate)) * 1e3:.1f} ms")
    for metric, target in ((90, 1e3), (90, 6.0), (90, 5.0), ("mean", 3.3)):

        def search(metric=metric, target=target):
            try:
                return optimize_with_ttft(
                    s, w, space, arrival_rate_rps=rate, ttft_target_s=target, ttft_percentile=metric
                )
            except InfeasibleError as error:
                return error

        elapsed = best_of(5, search)
        outcome = search()
        if isinstance(outcome, InfeasibleError):
            text = f"infeasible: {outcome}"
        else:
            found, ttft = outcome
            f = found.configuration
            text = (
                f"Λ_max {found.system_throughput_rps:.4f} req/s at t = {f.threshold_tokens:.0f}, "
                f"{f.prfaas_instances}/{f.pd_prefill_instances}/{f.pd_decode_instances}, "
                f"{'mean' if metric == 'mean' else f'P{metric}'} {ttft.metric(metric):.3f} s"
            )
        label = "mean" if metric == "mean" else f"P{metric}"
        print(f"optimize_with_ttft {label} <= {target:g} s: {elapsed * 1e3:.0f} ms, {text}")

    print()
    print(f"# model vs simulator, {args.requests} requests per load, seed {SEED}")
    print(
        f"{'load':>5} {'rate':>7} | {'mean':>7} {'P50':>7} {'P90':>7} {'P99':>7} | "
        f"{'sim mean':>8} {'sim P50':>7} {'sim P90':>7} {'sim P99':>7} | "
        f"{'err mean':>8} {'err P50':>7} {'err P90':>7} {'err P99':>7}"
    )
    for load in args.loads:
        lam = load * plan.system_throughput_rps
        model = loaded_ttft(s, w, c, lam)
        rng = np.random.default_rng(SEED)
        arrival = poisson_arrivals(lam, rng=rng, count=args.requests)
        lengths = w.sample(rng, args.requests, stratified=True)
        result = simulate(s, c, arrival, lengths, warmup_s=0.05 * arrival[-1])
        ours = (model.mean_s, model.p50_s, model.p90_s, model.p99_s)
        sim = (result.ttft.mean_s, result.ttft.p50_s, result.ttft.p90_s, result.ttft.p99_s)
        errors = [a / b - 1 for a, b in zip(ours, sim, strict=True)]
        print(
            f"{load:>5.2f} {lam:>7.4f} | "
            + " ".join(f"{v:>7.3f}" for v in ours)
            + " | "
            + f"{sim[0]:>8.3f} "
            + " ".join(f"{v:>7.3f}" for v in sim[1:])
            + " | "
            + f"{errors[0]:>+8.1%} "
            + " ".join(f"{e:>+7.1%}" for e in errors[1:])
        )


if __name__ == "__main__":
    main()
