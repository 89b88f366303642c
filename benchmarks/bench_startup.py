"""Benchmark: `prfaas-plan optimize` start-up (wall time of the whole process, and the import
time of the CLI package from `python -X importtime`), to show that commands importing cvxpy or
sympy lazily leave it unchanged.

Run by hand (not a test), from the checkout to measure:
    PYTHONPATH=$PWD python benchmarks/bench_startup.py [--runs N] [--against DIR [--frozen-floor]]

With `--against DIR` (another checkout, e.g. `git worktree add /tmp/base <commit>`): paired,
alternated runs of `python -c "import numpy, scipy.special"` (the import floor), this checkout's
`optimize -f json` and DIR's, each with PYTHONPATH set to its checkout; prints the median over
pairs of each one's ratio to the floor run beside it (a shared machine's load drifts: a ratio
of neighbours is steadier than a ratio of medians). `--frozen-floor`: the floor process also
skips the cyclic collector's pass at exit, as the CLI does (see FROZEN).

Every run sees compiled bytecode, as an installed package does (pip compiles it): both
checkouts are compiled first, and PYTHONDONTWRITEBYTECODE is removed from the runs'
environment. A checkout run from source without `__pycache__` recompiles every module at each
start, ~100 ms more for this package, which numpy's and scipy's installed bytecode never pays.
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time

# the environment of every run: bytecode read and written, as an installed package's is
BYTECODE_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


# `--frozen-floor`: the floor process ends as the CLI does (cli/__init__.py `_no_final_collection`),
# its objects out of the cyclic collector's reach before the teardown: the ratio of what each
# process does before its exit, without the ~25 ms teardown pass only the CLI skips
FROZEN = "; import gc; gc.freeze()"


def wall_seconds(args: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "prfaas_plan", *args],
            check=True,
            stdout=subprocess.DEVNULL,
            env=BYTECODE_ENV,
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
            env=BYTECODE_ENV,
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
        check=True, capture_output=True, text=True, env=BYTECODE_ENV,
    )  # fmt: skip
    return sorted(
        line.split("|")[-1].strip() for line in done.stderr.splitlines() if "import time:" in line
    )[:-1]  # the header line sorts last


def compiled(checkout: str) -> None:
    """Write the bytecode of `checkout`'s package, as installing it would."""
    package = os.path.join(checkout, "prfaas_plan")
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)


def one_run(command: list[str], checkout: str | None = None) -> tuple[float, float]:
    """(wall s, CPU s: user + system of the child, less sensitive to a shared machine's load)."""
    env = dict(BYTECODE_ENV)
    if checkout is not None:
        env["PYTHONPATH"] = checkout
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env, cwd=checkout)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def paired(against: str, runs: int, frozen_floor: bool = False) -> None:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    floor = [sys.executable, "-c", "import numpy, scipy.special" + FROZEN * frozen_floor]
    optimize = [sys.executable, "-m", "prfaas_plan", "optimize", "-f", "json"]
    labels = ("this checkout", against)
    for checkout in (here, against):
        compiled(checkout)
    ratios: dict[str, list[tuple[float, float]]] = {label: [] for label in labels}
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in ("floor", *labels)}
    for i in range(runs):
        order = [("this checkout", here), (against, against)]
        for label, checkout in order if i % 2 == 0 else order[::-1]:
            base = one_run(floor)
            run = one_run(optimize, checkout)
            times["floor"].append(base)
            times[label].append(run)
            ratios[label].append((run[0] / base[0], run[1] / base[1]))
    print(f"# {runs} alternated pairs: optimize -f json / {floor[-1]}")
    for label, values in times.items():
        wall, cpu = (statistics.median(v[j] for v in values) for j in (0, 1))
        print(f"{label:<24} median wall {wall:.3f} s, CPU {cpu:.3f} s")
    for label, values in ratios.items():
        wall, cpu = (sorted(v[j] for v in values) for j in (0, 1))
        print(
            f"{label:<24} ratio to the floor, median: wall {statistics.median(wall):.3f} "
            f"({wall[0]:.3f}..{wall[-1]:.3f}), CPU {statistics.median(cpu):.3f} "
            f"({cpu[0]:.3f}..{cpu[-1]:.3f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--against", help="another checkout: paired ratios to the import floor")
    parser.add_argument(
        "--frozen-floor", action="store_true", help="the floor process skips the collector at exit"
    )
    args = parser.parse_args()
    if args.against:
        paired(args.against, args.runs, args.frozen_floor)
        return
    compiled(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
