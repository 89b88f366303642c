"""Benchmark: CLI start-to-output time and optimiser vs the paper's exhaustive grid.

Run by hand (not a test):  python benchmarks/bench_optimize.py [--runs N]
Needs the package installed (the console script `prfaas-plan` next to this Python).
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from prfaas_plan.analytic.capacity import rates
from prfaas_plan.choices import Mode
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import build_problem, load_scenario
from prfaas_plan.solve.baselines import exhaustive_grid_search
from prfaas_plan.solve.threshold import SearchSpace, optimize_fixed_hardware

GRID_STEP_TOKENS = 100.0  # the paper's 0.1K grid


def cli_seconds(args: list[str], runs: int) -> list[float]:
    exe = Path(sys.executable).with_name("prfaas-plan")
    command = [str(exe)] if exe.exists() else [shutil.which("prfaas-plan") or "prfaas-plan"]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([*command, *args], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def timed(fn, runs: int):
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

    print(f"# CLI, process start to output, {args.runs} runs each (median / min / max, s)")
    for cli_args in (["optimize"], ["optimize", "--format", "json"]):
        t = cli_seconds(cli_args, args.runs)
        print(
            f"prfaas-plan {' '.join(cli_args):<26} {statistics.median(t):.3f} / {min(t):.3f} / {max(t):.3f}"
        )

    path = default_scenario_file()
    problem = build_problem(load_scenario(path), path, Catalog.open())
    s, w = problem.system, problem.workload
    space = SearchSpace(problem.prfaas_instances, problem.pd_instances)
    print("\n# optimiser vs paper-style exhaustive grid (same process, default scenario)")
    for mode in Mode:
        opt_s, opt = timed(lambda mode=mode: optimize_fixed_hardware(s, w, space, mode), 20)
        grid_s, grid = timed(
            lambda mode=mode: exhaustive_grid_search(s, w, space, mode, GRID_STEP_TOKENS), 2
        )
        thresholds = np.arange(w.min_tokens, w.max_tokens + GRID_STEP_TOKENS, GRID_STEP_TOKENS)
        n_p, n_d = space.splits()

        def vector_grid(mode=mode, thresholds=thresholds, n_p=n_p, n_d=n_d):
            r = rates(
                s, w, thresholds[None, :], space.prfaas_instances, n_p[:, None], n_d[:, None], mode
            )
            return r.system_rps.max()

        vec_s, vec_best = timed(vector_grid, 20)
        points = thresholds.size * n_p.size
        print(
            f"mode {mode}: grid of {thresholds.size} thresholds x {n_p.size} splits = {points} points"
        )
        print(
            f"  optimiser          {opt_s * 1e3:8.2f} ms  Λ={opt.system_throughput_rps:.6f} req/s  "
            f"t={opt.configuration.threshold_tokens:.1f} tokens  split {opt.configuration.pd_prefill_instances}/"
            f"{opt.configuration.pd_decode_instances}"
        )
        print(
            f"  exhaustive (loop)  {grid_s * 1e3:8.2f} ms  Λ={grid.system_throughput_rps:.6f} req/s  "
            f"t={grid.configuration.threshold_tokens:.1f} tokens  split {grid.configuration.pd_prefill_instances}/"
            f"{grid.configuration.pd_decode_instances}"
        )
        print(
            f"  exhaustive (numpy) {vec_s * 1e3:8.2f} ms  Λ={vec_best:.6f} req/s  (same grid, vectorised)"
        )
        print(
            f"  speed-up vs loop grid {grid_s / opt_s:.0f}x, vs numpy grid {vec_s / opt_s:.1f}x; "
            f"Λ gain over grid {opt.system_throughput_rps / grid.system_throughput_rps - 1:+.2e}"
        )


if __name__ == "__main__":
    main()
