"""An `optimize` study over the input lengths' bounds: SCENARIOS (1,000) scenarios of the case
study whose min_tokens run 1,000, 1,001, ... (max_tokens 120,000, inside the profiled 128,000),
under `out_of_range: error`; with `--refused`, the last scenario's min_tokens is 128 instead,
below the prefill tables, so that scenario is refused; with `--one-range`, min_tokens stays
1,000 and mu_log runs 8.5, 8.501, ... instead of the case study's 9.9 (one length range); `--pd-instances N` sets the
PD cluster's size (default the case study's 8). One chunk planned in this process (after a
warm-up of 20), its CPU seconds printed; run under `/usr/bin/time -f %M` for its peak memory.
Run it from the checkout to measure, alternated with another (issue 23):

    PYTHONPATH=. python benchmarks/bench_sweep_bounds.py [SCENARIOS] [--refused]
        [--one-range] [--pd-instances N]
"""

import argparse
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_chunk(path: Path) -> tuple[list, int, float]:
    """The sweep file's scenarios planned as one chunk in this process, after a warm-up of 20:
    its points, how many rows are errors, and its CPU seconds."""
    from prfaas_plan.sweep.commands import parameter_names
    from prfaas_plan.sweep.rows import chunk_table
    from prfaas_plan.sweep.spec import load_sweep

    sweep = load_sweep(path, parameter_names)
    points = list(sweep.points())
    chunk_table(sweep, points[:20])
    cpu = time.process_time()
    rows = chunk_table(sweep, points).to_pylist()
    cpu = time.process_time() - cpu
    return points, sum(r["error_class"] is not None for r in rows), cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenarios", type=int, nargs="?", default=1000)
    parser.add_argument("--refused", action="store_true")
    parser.add_argument("--one-range", action="store_true")
    parser.add_argument("--pd-instances", type=int, default=8)
    args = parser.parse_args()
    n = args.scenarios
    lows = [1000] if args.one_range else [1000 + i for i in range(n)]
    mus = [round(8.5 + i * 0.001, 4) for i in range(n)]  # --one-range's axis
    if args.refused:
        lows[-1] = 128
    mu_axis = f"  workload.input_tokens.mu_log: {{values: {mus}}}\n" if args.one_range else ""
    text = (
        f"name: bounds\nscenario: {ROOT}/examples/case_study.yaml\ncommand: optimize\n"
        "parameters: {out_of_range: error}\nsampling: grid\naxes:\n"
        f"  workload.input_tokens.min_tokens: {{values: {lows}}}\n{mu_axis}"
        "  workload.input_tokens.max_tokens: {values: [120000]}\n"
        f"  pd_cluster.instances: {{values: [{args.pd_instances}]}}\nchunk_size: {n}\n"
    )
    path = Path(tempfile.mkdtemp()) / "bounds.yaml"
    path.write_text(text)
    points, refused, cpu = one_chunk(path)
    what = "mu_log on one range" if args.one_range else "min_tokens"
    print(f"{ROOT.name}: {len(points):,} scenarios over {what}, {args.pd_instances} PD instances, "
          f"{refused} refused: {cpu:.2f} CPU s = {len(points) / cpu:,.0f}/CPU s")  # fmt: skip


if __name__ == "__main__":
    main()
