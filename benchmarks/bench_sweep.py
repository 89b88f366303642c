"""A 100,000-scenario optimize sweep (link x PrfaaS size x PD size x median length), fast path:
scenarios/s with 1 and 2 local workers and with 1 and 2 Dask workers (LocalCluster of processes
on 127.0.0.1), peak memory, and the same study as one CLI call per scenario (extrapolated from a
sample). Run by hand: PYTHONPATH=. python benchmarks/bench_sweep.py [SCENARIOS].

Other processes share the cores, so each run also reports the CPU seconds its processes used
(the sweep command and its local workers; for Dask, the workers' own) and the load average
after it: scenarios per CPU second is the speed of a worker whatever the load."""

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def sweep_file(directory: Path, scenarios: int) -> Path:
    # 25 links x 20 PrfaaS sizes x 20 PD sizes = 10,000 points per median length
    lengths = max(1, scenarios // 10_000)
    mus = ", ".join(f"{9.0 + 0.1 * i:.2f}" for i in range(lengths))
    path = directory / "bench.yaml"
    path.write_text(f"""
name: bench
scenario: {ROOT}/examples/case_study.yaml
command: optimize
axes:
  workload.input_tokens.mu_log: {{values: [{mus}]}}
  link.bandwidth_gbps: {{start: 4, stop: 100, step: 4}}
  prfaas_cluster.instances: {{start: 1, stop: 20, step: 1, integer: true}}
  pd_cluster.instances: {{start: 1, stop: 20, step: 1, integer: true}}
chunk_size: 5000
""")
    return path


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "prfaas_plan", *args], env=ENV, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - start


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def main() -> None:
    scenarios = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        path = sweep_file(d, scenarios)
        n = (scenarios // 10_000 or 1) * 10_000
        for workers in (1, 2):
            cpu = children_cpu_s()
            s = timed("sweep", str(path), str(d / f"local{workers}"), "--workers", str(workers))
            cpu = children_cpu_s() - cpu
            print(f"local --workers {workers}: {n:,} scenarios in {s:.1f} s = {n / s:,.0f}/s "
                  f"({n / s / workers:,.0f}/s per worker); {cpu:.1f} CPU s = "
                  f"{n / cpu:,.0f}/CPU s; {load()}")  # fmt: skip
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"peak RSS of a sweep process: {peak:.0f} MiB")
        from dask.distributed import Client, LocalCluster

        for workers in (1, 2):
            with (
                LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                             host="127.0.0.1", dashboard_address=None) as cluster,
                Client(cluster) as client,
            ):  # fmt: skip
                before = sum(client.run(own_cpu_s).values())
                s = timed("sweep", str(path), str(d / f"dask{workers}"), "--dask-scheduler",
                          cluster.scheduler_address)  # fmt: skip
                cpu = sum(client.run(own_cpu_s).values()) - before
            print(f"dask {workers} worker(s): {n / s:,.0f}/s ({s:.1f} s); workers' {cpu:.1f} "
                  f"CPU s = {n / cpu:,.0f}/CPU s; {load()}")  # fmt: skip
            if workers == 1:
                one = s
        print(f"dask speed-up 1 -> 2 workers: {one / s:.2f}x")
        sample = 5
        cli = (
            sum(
                timed("optimize", "--bandwidth-gbps", str(10 + i), "-f", "json")
                for i in range(sample)
            )
            / sample
        )
        print(f"one CLI call: {cli:.2f} s -> {n:,} calls ~ {cli * n / 3600:.1f} h on one core")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
