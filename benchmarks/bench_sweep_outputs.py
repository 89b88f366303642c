"""An `optimize` study over what moves the decode point alone: SCENARIOS (1,000) scenarios of
the case study whose `workload.output_tokens` run 256, 258, ... tokens (each its own decode
point, one input distribution); with `--log-normal`, the output is a truncated log-normal on
[1, 16,384] tokens whose mu_log runs 6.0, 6.001, ...; with `--slo`, the decode SLO
(`slo.decode_tokens_per_s`) runs 5, 5.1, ... tokens/s instead. One chunk planned in this
process (after a warm-up of 20), its CPU seconds printed. Run it from the checkout to measure,
alternated with another (issue 23):

    PYTHONPATH=. python benchmarks/bench_sweep_outputs.py [SCENARIOS] [--log-normal | --slo]
"""

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sweep_bounds import one_chunk

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenarios", type=int, nargs="?", default=1000)
    parser.add_argument("--log-normal", action="store_true")
    parser.add_argument("--slo", action="store_true")
    args = parser.parse_args()
    n = args.scenarios
    directory = Path(tempfile.mkdtemp())
    base = (ROOT / "examples/case_study.yaml").read_text()
    if args.log_normal:
        output = ("{distribution: truncated_lognormal, mu_log: 6.0, sigma_log: 0.8, "
                  "min_tokens: 1, max_tokens: 16384}")  # fmt: skip
        base = base.replace("output_tokens: 1024", f"output_tokens: {output}")
        axis = "workload.output_tokens.mu_log"
        values = [round(6.0 + i * 0.001, 4) for i in range(n)]
    elif args.slo:
        axis, values = "slo.decode_tokens_per_s", [round(5 + 0.1 * i, 1) for i in range(n)]
    else:
        axis, values = "workload.output_tokens", [256 + 2 * i for i in range(n)]
    (directory / "base.yaml").write_text(base)
    path = directory / "outputs.yaml"
    path.write_text(
        f"name: outputs\nscenario: {directory / 'base.yaml'}\ncommand: optimize\n"
        f"sampling: grid\naxes:\n  {axis}: {{values: {values}}}\nchunk_size: {n}\n"
    )
    points, refused, cpu = one_chunk(path)
    print(f"{ROOT.name}: {len(points):,} scenarios over {axis}, {refused} refused: "
          f"{cpu:.2f} CPU s = {len(points) / cpu:,.0f}/CPU s")  # fmt: skip


if __name__ == "__main__":
    main()
