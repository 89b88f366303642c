"""Benchmark: `procure` on 2 PrfaaS GPU types x 3 sites x 4 link offerings (24 candidate sites)
x up to 32 instances per site, against brute-force enumeration of the same space.

Run by hand (not a test):  python benchmarks/bench_procure.py [--runs N] [--target-rps X]
Also times `procure` with a TTFT target (P90 <= 8 s at 2 req/s), `procure --pareto` at a
load (4 req/s) over the same 24 sites, and the loaded Pareto frontier over the shipped sites
(every GPU with a profile x every shipped link offering, the case study's prices).
The three sites differ in GPU price (x0.8, x1.0, x1.2 of the shipped rate) and RTT; the fourth
link offering is a synthetic leased 100 Gbps circuit (fixed price, no volume charge) written to a
temporary copy of the data. Brute force over 33^24 count vectors cannot run: it is timed on a
slice (the thresholds x a few sites x few instances) and its full time extrapolated from the
measured cost per point (stated as an extrapolation).
"""

import argparse
import itertools
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.pricing import resolve_pricing
from prfaas_plan.inputs.resources import default_data_dir, default_scenario_file
from prfaas_plan.inputs.scenario import build_problem, load_scenario
from prfaas_plan.solve.procure_space import ProcureSpace, brute_force
from prfaas_plan.use_cases.plan import TtftTarget
from prfaas_plan.use_cases.procure import procure
from prfaas_plan.use_cases.procure_pareto import procure_pareto
from prfaas_plan.use_cases.procure_sites import procure_candidates, procure_pricing

LEASED = """name: bench-leased-100g
description: "synthetic leased 100 Gbps circuit (benchmark only)"
bandwidth_gbps: 100
monthly_usd: 40000
usd_per_gb: 0
rtt_ms: 3
prices: {basis: estimate, source: "benchmark", date: "2026-12-02", note: "synthetic"}
rtt: {basis: estimate, source: "benchmark", date: "2026-12-02", note: "synthetic"}
"""
SITES = {"east": (0.8, 4.0), "central": (1.0, 8.0), "west": (1.2, 20.0)}  # price x, RTT ms
BASE_USD_PER_GPU_HOUR = {"h200": 3.5, "h20": 1.2}


def scenario_with_sites(folder: Path, offerings: list[str], h200_usd: float = 3.5) -> Path:
    prices = {**BASE_USD_PER_GPU_HOUR, "h200": h200_usd}
    lines = ["procurement:", "  max_pd_instances: 32", "  sites:"]
    for (site, (scale, rtt)), gpu, link in itertools.product(
        SITES.items(), ("h200", "h20"), offerings
    ):
        lines.append(
            f"    - {{name: {site}.{gpu}.{link}, gpu: {gpu}, link_offering: {link}, "
            f"usd_per_gpu_hour: {prices[gpu] * scale:g}, rtt_ms: {rtt:g}, "
            "max_instances: 32}"
        )
    path = folder / "bench.yaml"
    path.write_text(default_scenario_file().read_text() + "\n".join(lines) + "\n")
    return path


def grid_space(catalog: Catalog, problem: object, pricing: object) -> "ProcureSpace":
    """The 24 sites' rates on the MILP's threshold grid (the brute force's space)."""
    return procure_candidates(catalog, problem, pricing)[1]  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target-rps", type=float, default=4.0)
    parser.add_argument(
        "--h200-usd-per-gpu-hour", type=float, default=3.5,
        help="the H200 sites' base price (x0.8/1.0/1.2 by site); 0.5 makes offloading pay",
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(default_data_dir(), data)
        (data / "links" / "bench-leased-100g.yaml").write_text(LEASED)
        catalog = Catalog.open(data)
        offerings = list(catalog.link_offering_names())
        path = scenario_with_sites(Path(tmp), offerings, args.h200_usd_per_gpu_hour)
        problem = build_problem(load_scenario(path), path, catalog)
        pricing = resolve_pricing(catalog, problem.scenario, str(path))
        assert pricing is not None
        for goal in ({"target_rps": args.target_rps}, {"budget_usd_per_hour": 300.0}):
            times, report = [], None
            for _ in range(args.runs):
                start = time.process_time()
                report = procure(catalog, problem, pricing, **goal)
                times.append(time.process_time() - start)
            assert report is not None
            used = [f"{n} x {s.name}" for s, n in zip(report.sites, report.point.site_instances,
                                                      strict=True) if n]  # fmt: skip
            print(
                f"procure {goal}: {len(report.sites)} sites x <= 32 instances, "
                f"{report.space.thresholds_tokens.size} thresholds; process time median "
                f"{statistics.median(times):.3f} s (min {min(times):.3f}, {args.runs} runs); "
                f"{float(report.point.usd_per_hour):,.1f} $/h, {report.point.served_rps:.3f} req/s, "
                f"PD {report.point.pd_prefill_instances}+{report.point.pd_decode_instances}, "
                f"sites {used or 'none'}"
            )
        # a TTFT target (P90 <= 8 s at 2 req/s) and the cost-P90 frontier at 4 req/s
        ttft_goal = TtftTarget(8.0, 90, load_rps=2.0)
        times = []
        for _ in range(args.runs):
            start = time.process_time()
            latency = procure(catalog, problem, pricing, target_rps=2.0, ttft=ttft_goal)
            times.append(time.process_time() - start)
        assert latency.ttft is not None
        print(
            f"procure target 2 req/s, P90 TTFT <= 8 s at 2 req/s: process time median "
            f"{statistics.median(times):.3f} s (min {min(times):.3f}); "
            f"{float(latency.point.usd_per_hour):,.1f} $/h, P90 {latency.ttft.loaded.p90_s:.2f} s, "
            f"{latency.ttft.pairs_evaluated} of {latency.ttft.pairs} (threshold, site) pairs evaluated"
        )
        start = time.process_time()
        frontier = procure_pareto(catalog, problem, pricing, target_rps=4.0, ttft_load_rps=4.0)
        print(
            f"procure --pareto --target-rps 4 --ttft-load-rps 4: process time "
            f"{time.process_time() - start:.2f} s (one run), {len(frontier.ttft_frontier)} plans "
            "on the loaded cost-P90 frontier"
        )
        shipped = build_problem(load_scenario(default_scenario_file()), default_scenario_file(),
                                Catalog.open())  # fmt: skip
        shipped_pricing = procure_pricing(Catalog.open(), shipped)
        times = []
        for _ in range(args.runs):
            start = time.process_time()
            loaded = procure_pareto(Catalog.open(), shipped, shipped_pricing, target_rps=4.0,
                                    ttft_load_rps=4.0)  # fmt: skip
            times.append(time.process_time() - start)
        print(
            f"procure --pareto --target-rps 4 --ttft-load-rps 4 on the shipped sites "
            f"({len(procure_candidates(Catalog.open(), shipped, shipped_pricing)[0])} sites): "
            f"process time median {statistics.median(times):.2f} s (min {min(times):.2f}, "
            f"{args.runs} runs), {len(loaded.ttft_frontier)} plans on the loaded frontier"
        )
        space = grid_space(catalog, problem, pricing)
        # brute force on a slice: 2 sites x 0..4 instances, every threshold, every PD split
        import dataclasses

        small = dataclasses.replace(
            space, max_pd_instances=32,
            sites=tuple(dataclasses.replace(s, max_instances=4) for s in space.sites[:2]),
        )  # fmt: skip
        points = space.thresholds_tokens.size * 5**2 * (32 * 33 // 2)
        start = time.process_time()
        brute_force(small, args.target_rps)
        seconds = time.process_time() - start
        per_point = seconds / points
        full = space.thresholds_tokens.size * 33 ** len(space.sites) * (32 * 33 // 2)
        print(
            f"brute force on a slice (2 sites x 0..4 instances, {points:,} points at most): "
            f"{seconds:.2f} s process time ({per_point * 1e6:.2f} us a point, an upper bound "
            f"as it skips dearer decode counts); the full space has {full:.3g} points: "
            f"~{full * per_point / 3.15e7:.3g} years at that rate (extrapolated)"
        )


if __name__ == "__main__":
    main()
