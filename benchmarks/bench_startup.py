"""Benchmark: `prfaas-plan optimize` start-up (wall time of the whole process, and the import
time of the CLI package from `python -X importtime`), to show that commands importing cvxpy or
sympy lazily leave it unchanged.

Run by hand (not a test), from the checkout to measure:
    PYTHONPATH=$PWD python benchmarks/bench_startup.py [--runs N]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def wall_seconds(args: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "prfaas_plan", *args], check=True, stdout=subprocess.DEVNULL
        )
        times.append(time.perf_counter() - start)
    return times


def import_seconds(module: str, runs: int) -> list[float]:
    """Cumulative import time of `module` as `python -X importtime` reports it."""
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            check=True,
            capture_output=True,
            text=True,
            env=os.environ,
        )
        for line in done.stderr.splitlines():
            found = re.match(r"import time:\s+\d+\s+\|\s+(\d+)\s+\|\s*(\S+)$", line)
            if found and found.group(2) == module:
                times.append(int(found.group(1)) * 1e-6)
    return times


HEAVY = ("cvxpy", "sympy", "matplotlib", "highspy", "pulp")


def optimize_modules() -> list[str]:
    """Every module `prfaas-plan optimize` imports (from `-X importtime`): a load-independent
    check that start-up did not change, where wall times on a shared machine are noisy."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "prfaas_plan", "optimize"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return sorted(
        line.split("|")[-1].strip() for line in done.stderr.splitlines() if "import time:" in line
    )[:-1]  # the header line sorts last


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(f"# {args.runs} runs each (median / min / max, s)")
    for label, t in (
        ("import prfaas_plan.cli", import_seconds("prfaas_plan.cli", args.runs)),
        ("prfaas-plan optimize (wall)", wall_seconds(["optimize"], args.runs)),
        ("prfaas-plan --help (wall)", wall_seconds(["--help"], args.runs)),
    ):
        print(f"{label:<30} {statistics.median(t):.3f} / {min(t):.3f} / {max(t):.3f}")
    modules = optimize_modules()
    heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
    print(f"modules imported by optimize: {len(modules)}; heavy among them: {heavy or 'none'}")


if __name__ == "__main__":
    main()
