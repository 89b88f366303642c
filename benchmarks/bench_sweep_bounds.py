"""An `optimize` study over the input lengths' bounds: 1,000 scenarios of the case study whose
min_tokens run 1,000..1,999 (max_tokens 120,000, inside the profiled 128,000), under
`out_of_range: error`; with `--refused`, the last scenario's min_tokens is 128 instead, below
the prefill tables, so that scenario is refused. One chunk planned in this process (after a
warm-up of 50), CPU seconds printed. Run it from the checkout to measure, alternated with
another (issue 23):

    PYTHONPATH=. python benchmarks/bench_sweep_bounds.py [--refused]
"""

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    from prfaas_plan.sweep.commands import parameter_names
    from prfaas_plan.sweep.rows import chunk_table
    from prfaas_plan.sweep.spec import load_sweep

    lows = [1000 + i for i in range(999)] + [128 if "--refused" in sys.argv else 1999]
    text = (
        f"name: bounds\nscenario: {ROOT}/examples/case_study.yaml\ncommand: optimize\n"
        "parameters: {out_of_range: error}\nsampling: grid\naxes:\n"
        f"  workload.input_tokens.min_tokens: {{values: {lows}}}\n"
        "  workload.input_tokens.max_tokens: {values: [120000]}\nchunk_size: 1000\n"
    )
    path = Path(tempfile.mkdtemp()) / "bounds.yaml"
    path.write_text(text)
    sweep = load_sweep(path, parameter_names)
    points = list(sweep.points())
    chunk_table(sweep, points[:50])
    cpu = time.process_time()
    rows = chunk_table(sweep, points).to_pylist()
    cpu = time.process_time() - cpu
    refused = sum(r["error_class"] is not None for r in rows)
    print(f"{ROOT.name}: {len(points):,} scenarios over min_tokens, {refused} refused: "
          f"{cpu:.2f} CPU s = {len(points) / cpu:,.0f}/CPU s")  # fmt: skip


if __name__ == "__main__":
    main()
