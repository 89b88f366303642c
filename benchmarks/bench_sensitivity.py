"""Benchmark: `prfaas-plan sensitivity` on the case study, process start to output (cvxpy import,
8 routing LPs of 2,000 bins, 5 threshold optimisations). Goal: <= 3 s process time.

Run by hand (not a test):  PYTHONPATH=$PWD python benchmarks/bench_sensitivity.py [--runs N]
"""

import argparse
import resource
import statistics
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    wall, cpu = [], []
    for _ in range(args.runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "prfaas_plan", "sensitivity", "--format", "json"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    print(f"# prfaas-plan sensitivity (case study), {args.runs} runs (median / min / max, s)")
    print(f"wall          {statistics.median(wall):.3f} / {min(wall):.3f} / {max(wall):.3f}")
    print(f"process time  {statistics.median(cpu):.3f} / {min(cpu):.3f} / {max(cpu):.3f}")


if __name__ == "__main__":
    main()
