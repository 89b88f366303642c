"""A whole public trace for a plan: `optimize` on a scenario pointing at a GENERATED Azure LLM
inference 2024-format CSV of 27,303,999 rows (the size of the public code week trace), timed in
a fresh process with its peak RSS (resource.getrusage of the child).

The file is synthetic (written to a temporary directory, removed afterwards): the 2024 columns and
formats (`TIMESTAMP,ContextTokens,GeneratedTokens`, `2024-05-10 00:00:00.009930+00:00`, CRLF line
ends as the published files), Poisson arrivals over a week, log-normal lengths with the log-mean
and log-spread of the public 2023 code trace (inputs e^7.0, sigma 1.36, clipped to [1, 7,437];
outputs e^2.79, sigma 0.85, clipped to [1, 1,899]), seed 0. It checks speed and memory, not any
number of the plan.

    PYTHONPATH=. python benchmarks/bench_traces.py [--rows 27303999] [--keep DIR]

Measured 2026-12 on the project's 2-core machine: see the figures printed (and README/plausible.py).
"""

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROWS = 27_303_999
WEEK_S = 7 * 24 * 3600
START = datetime.datetime(2024, 5, 10, tzinfo=datetime.UTC)
SCENARIO = """\
name: azure-2024-code-generated
model: internal-1t-hybrid
prfaas_cluster: {{gpu: h200, gpus_per_instance: 8, instances: 4}}
pd_cluster: {{gpu: h20, gpus_per_instance: 8, instances: 8}}
link: {{bandwidth_gbps: 100}}
workload:
  input_tokens: {{distribution: observed, file: {file}{extra}}}
  output_tokens: {{distribution: from_trace}}
slo: {{decode_tokens_per_s: 40}}
"""


def write_trace(path: Path, rows: int, seed: int = 0) -> None:
    """The generated trace, a million rows at a time."""
    rng = np.random.default_rng(seed)
    stamps_us = np.sort(rng.integers(0, WEEK_S * 10**6, rows))
    prefix: dict[int, str] = {}
    with open(path, "w", newline="") as handle:
        handle.write("TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
        for start in range(0, rows, 10**6):
            part = stamps_us[start : start + 10**6]
            n = part.size
            inputs = np.clip(np.rint(rng.lognormal(7.0, 1.36, n)), 1, 7437).astype(np.int64)
            outputs = np.clip(np.rint(rng.lognormal(2.79, 0.85, n)), 1, 1899).astype(np.int64)
            seconds, micros = np.divmod(part, 10**6)
            lines = []
            for s, us, i, o in zip(
                seconds.tolist(), micros.tolist(), inputs.tolist(), outputs.tolist(), strict=True
            ):
                text = prefix.get(s)
                if text is None:
                    text = prefix[s] = (START + datetime.timedelta(seconds=s)).strftime(
                        "%Y-%m-%d %H:%M:%S"
                    )
                lines.append(f"{text}.{us:06d}+00:00,{i},{o}\r\n")
            handle.write("".join(lines))


def run(scenario: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS MB) of `optimize scenario` in a fresh process (os.wait4: this
    child's own resource use)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "prfaas_plan", "optimize", str(scenario), "--format", "json"],
            stdout=out,
            stderr=err,
        )
        _, status, usage = os.wait4(child.pid, 0)
        wall_s = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            raise SystemExit(f"optimize failed ({child.returncode}): {err.read().decode()[:500]}")
    return wall_s, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--keep", type=Path, help="write the trace here and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_traces_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        trace = folder / "AzureLLMInferenceTrace_code_1week.csv"
        if not trace.exists():
            started = time.perf_counter()
            write_trace(trace, args.rows)
            print(f"generated {args.rows:,} rows, {os.path.getsize(trace) / 1e9:.2f} GB in "
                  f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        cases = {
            "whole trace": "",
            "window 1 day from day 2": ", window: {start_s: 86400, duration_s: 86400}",
            "sample 10^6": ", sample: {requests: 1000000, seed: 1}",
        }
        for name, extra in cases.items():
            scenario = folder / "scenario.yaml"
            scenario.write_text(SCENARIO.format(file=trace, extra=extra))
            wall_s, cpu_s, rss_mb = run(scenario)
            print(f"optimize, {name}: {wall_s:.1f} s wall, {cpu_s:.1f} s CPU, peak RSS {rss_mb} MB")
    finally:
        if args.keep is None:
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
