"""Benchmark: analytic.erfc (numpy, one pass) against `math.erfc` per element, the uncached
4,096-cell TTFT mesh of a new length distribution, and the worst distance to `math.erfc` and to
the exact value (mpmath) on a dense grid.

Run by hand (not a test), from the checkout to measure:
    PYTHONPATH=$PWD python benchmarks/bench_erfc.py [--runs N]
"""

import argparse
import math
import statistics
import time

import numpy as np

from prfaas_plan.analytic.erfc import erfc
from prfaas_plan.analytic.log_normal import TruncatedLogNormal, _log_normal_mesh


def seconds(fn, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def math_erfc(x: np.ndarray) -> np.ndarray:
    return np.fromiter(map(math.erfc, x.ravel().tolist()), float, count=x.size)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    print(f"# {args.runs} runs each (median / min, µs)")
    for size in (1, 3, 64, 4097 * 2, 1_000_000):
        x = np.linspace(-8.0, 27.0, size)
        runs = max(3, args.runs // max(1, size // 10_000))
        for label, fn in (("numpy erfc", erfc), ("math.erfc loop", math_erfc)):
            t = seconds(lambda fn=fn, x=x: fn(x), runs)
            print(
                f"{label:<16} n={size:<9,} {statistics.median(t) * 1e6:10.1f} / {min(t) * 1e6:.1f}"
            )
    d = TruncatedLogNormal(9.2, 1.1, 64.0, 131072.0)
    t = seconds(lambda: _log_normal_mesh.__wrapped__(d), args.runs)
    print(
        f"TTFT mesh (4,096 cells, uncached) {statistics.median(t) * 1e3:.3f} / {min(t) * 1e3:.3f} ms"
    )
    x = np.linspace(-30.0, 30.0, 2_000_001)
    ours, reference = erfc(x), math_erfc(x)
    apart = np.abs(ours - reference) / np.vectorize(math.ulp, otypes=[float])(reference)
    print(
        f"vs math.erfc on 2,000,001 points of [-30, 30]: max {apart.max():.0f} ulp, "
        f"> 1 ulp {np.count_nonzero(apart > 1):,}, > 2 ulp {np.count_nonzero(apart > 2):,}"
    )
    try:
        import mpmath
    except ImportError:
        return
    mpmath.mp.dps = 60
    rng = np.random.default_rng(0)
    sample = rng.uniform(-6.0, 27.3, 20_000)
    worst = {"numpy erfc": 0.0, "math.erfc": 0.0}
    for v, o in zip(sample.tolist(), erfc(sample).tolist(), strict=False):
        truth = mpmath.erfc(mpmath.mpf(v))
        spacing = math.ulp(float(truth))
        for label, value in (("numpy erfc", o), ("math.erfc", math.erfc(v))):
            worst[label] = max(worst[label], float(abs(mpmath.mpf(value) - truth) / spacing))
    print(
        "vs the exact value (mpmath, 20,000 uniform points of [-6, 27.3]): "
        + ", ".join(f"{label} max {value:.2f} ulp" for label, value in worst.items())
    )


if __name__ == "__main__":
    main()
