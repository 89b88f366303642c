"""A Latin-hypercube `optimize` study over the input-length distribution (mu_log 8.5-10.5,
sigma_log 0.5-1.5), the link (5-100 Gbps, log), the PrfaaS size (0-16 instances) and the H200's
price (1-10 $/GPU-hour, the scenario's cost block) of the case study: every scenario has its own
workload and price, which the fast path plans in one batch (sweep/fast.py). Reports scenarios/s
and scenarios per CPU second in-process for one chunk (after a warm-up chunk), with 1 local
worker, and on a Dask LocalCluster of 2 workers (CPU seconds and Dask measured as
benchmarks/bench_sweep.py does, whose helpers this imports).

    PYTHONPATH=. python benchmarks/bench_sweep_lhs.py [SCENARIOS] [--profile] [--no-dask-profiler]

`--profile` prints the cProfile of the in-process chunk (top 25 by cumulative time).
`--no-dask-profiler` starts the Dask workers with their statistical profiler off
(`distributed.worker.profile.enabled: false`; it is on by default and samples the running
task's stack every 10 ms)."""

import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweep import children_cpu_s, load, own_cpu_s, timed

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 4000


def sweep_file(directory: Path, scenarios: int) -> Path:
    """The study's sweep file, its base scenario the case study with a cost block."""
    base = yaml.safe_load((ROOT / "examples/case_study.yaml").read_text())
    base["cost"] = {"gpu_prices_usd_per_gpu_hour": {"h200": 4.0, "h20": 1.6}}
    (directory / "base.yaml").write_text(yaml.safe_dump(base))
    path = directory / "lhs.yaml"
    path.write_text(f"""
name: lhs
scenario: base.yaml
command: optimize
sampling: latin_hypercube
samples: {scenarios}
seed: 11
axes:
  workload.input_tokens.mu_log: {{low: 8.5, high: 10.5}}
  workload.input_tokens.sigma_log: {{low: 0.5, high: 1.5}}
  link.bandwidth_gbps: {{low: 5, high: 100, log: true}}
  prfaas_cluster.instances: {{low: 0, high: 16, integer: true}}
  cost.gpu_prices_usd_per_gpu_hour.h200: {{low: 1.0, high: 10.0}}
chunk_size: {CHUNK}
""")
    return path


def in_process(path: Path, profile: bool) -> None:
    """One chunk in this process, after a warm-up chunk (imports, catalog, caches)."""
    from prfaas_plan.sweep.commands import parameter_names
    from prfaas_plan.sweep.rows import chunk_table
    from prfaas_plan.sweep.run import chunks
    from prfaas_plan.sweep.spec import load_sweep

    sweep = load_sweep(path, parameter_names)
    generated = chunks(sweep)
    chunk_table(sweep, next(generated)[:500])
    chunk = next(generated)
    profiler = cProfile.Profile() if profile else None
    cpu, start = time.process_time(), time.perf_counter()
    if profiler is not None:
        profiler.enable()
    table = chunk_table(sweep, chunk)
    if profiler is not None:
        profiler.disable()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    errors = sum(1 for e in table.column("error_class").to_pylist() if e is not None)
    print(f"in-process chunk: {len(chunk):,} scenarios in {wall:.2f} s = {len(chunk) / wall:,.0f}"
          f"/s; {cpu:.2f} CPU s = {len(chunk) / cpu:,.0f}/CPU s; {errors} error rows; {load()}")  # fmt: skip
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    scenarios = int(args[0]) if args else 20_000
    print(f"{ROOT}: load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        path = sweep_file(d, scenarios)
        in_process(path, "--profile" in sys.argv)
        cpu = children_cpu_s()
        s = timed("sweep", str(path), str(d / "local1"), "--workers", "1")
        cpu = children_cpu_s() - cpu
        print(f"local --workers 1: {scenarios:,} scenarios in {s:.1f} s = {scenarios / s:,.0f}/s; "
              f"{cpu:.1f} CPU s = {scenarios / cpu:,.0f}/CPU s; {load()}")  # fmt: skip
        import dask
        from dask.distributed import Client, LocalCluster

        profiler = "--no-dask-profiler" not in sys.argv
        with (
            dask.config.set({"distributed.worker.profile.enabled": profiler}),
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):  # fmt: skip
            before = sum(client.run(own_cpu_s).values())
            s = timed("sweep", str(path), str(d / "dask2"), "--dask-scheduler",
                      cluster.scheduler_address)  # fmt: skip
            cpu = sum(client.run(own_cpu_s).values()) - before
        print(f"dask 2 workers{'' if profiler else ' (profiler off)'}: {scenarios / s:,.0f}/s "
              f"({s:.1f} s); workers' {cpu:.1f} CPU s = "
              f"{scenarios / cpu:,.0f}/CPU s per worker; {load()}")  # fmt: skip
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
