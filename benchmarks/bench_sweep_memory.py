"""Peak memory of a sweep as the study grows: a Latin-hypercube optimize study (link, PrfaaS and
PD sizes, mode: the fast path) of SAMPLES samples in chunks of CHUNK, on one local worker, its
peak RSS read by /usr/bin/time. The points are generated a block at a time and the chunks as
they run, so the peak should not grow with SAMPLES beyond the hypercube's permutations (4 bytes
a sample and axis); CHUNK (up to 10^5) sets the rest. Run by hand:

    PYTHONPATH=. python benchmarks/bench_sweep_memory.py SAMPLES [CHUNK]
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    chunk = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lhs.yaml"
        path.write_text(f"""
name: memory
scenario: {ROOT}/examples/case_study.yaml
command: optimize
sampling: latin_hypercube
samples: {samples}
seed: 7
chunk_size: {chunk}
axes:
  link.bandwidth_gbps: {{low: 5, high: 400, log: true}}
  prfaas_cluster.instances: {{low: 0, high: 20, integer: true}}
  pd_cluster.instances: {{low: 1, high: 20, integer: true}}
  mode: {{values: [paper, exact]}}
""")
        command = ["/usr/bin/time", "-f", "%e s %M KB", sys.executable, "-m", "prfaas_plan",
                   "sweep", str(path), str(Path(tmp) / "results"), "--workers", "1"]  # fmt: skip
        started = time.perf_counter()
        ran = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(ROOT)},
                             capture_output=True, text=True, check=True)  # fmt: skip
        elapsed, _, peak_kb, _ = ran.stderr.strip().splitlines()[-1].split()
        print(f"{samples:,} samples, chunks of {chunk:,}: peak RSS {int(peak_kb) / 1024:,.0f} MiB, "
              f"{float(elapsed):,.1f} s ({time.perf_counter() - started:,.1f} s with start-up); "
              f"load {os.getloadavg()[0]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
