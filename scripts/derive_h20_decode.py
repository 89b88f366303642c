"""Write the derived decode table of the case-study model on 8 x H20 (decode step time vs batch
and context) from a memory-bandwidth roofline calibrated to the paper's one point, batch 20 at
25 ms/step at the case study's mean decode context. Deterministic; re-run after editing
models.yaml, data/gpus/h20.yaml or the case-study workload. `prfaas-plan check` verifies the
committed table against its derivation; tests/analytic/test_decode_context.py checks this script
reproduces the committed files.

    python scripts/derive_h20_decode.py
"""

from pathlib import Path

import numpy as np

from prfaas_plan.analytic.decode_point import mean_decode_context_tokens
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.scenario import build_workload, load_scenario
from prfaas_plan.use_cases.table_checks import DECODE_CALIBRATION, decode_roofline

ROOT = Path(__file__).resolve().parent.parent
MODEL, GPU, GPUS = "internal-1t-hybrid", "h20", 8
PAPER_BATCH, PAPER_STEP_S = 20, 0.025  # prfaas-model.md §5, recovered from the case study
BATCHES = (1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 64, 96, 128)
CONTEXTS = (1024, 4096, 8192, 16384, 32768, 65536, 131072)

META = """quantity: decode_step
model: {model}
gpu: {gpu}
gpus_per_instance: {gpus}
parallelism: "8 GPUs per instance"
engine: "not applicable (derived, not profiled)"
engine_version: "not applicable"
provenance: derived
method: "DERIVED, NOT MEASURED. Memory-bandwidth roofline T(b, c) = W / B + b * S_kv(c) / (eta * B): B = 8 x {tbs:g} TB/s HBM (data/gpus/h20.yaml), W = {weights_gb:.1f} GB of weights read per step (1 byte per active parameter; active parameters not published, 1% of total assumed, prfaas_plan/analytic/prefill_physics.py), S_kv(c) the bf16 KV + fp32 recurrent state of one request at context c (models.yaml). eta = {eta:.4f} (the batch-dependent part's share of B, absorbing expert-weight reads and attention) is calibrated so that the paper's recovered point, batch {batch} at {step_ms:g} ms, holds exactly at the case study's mean decode context {context:.1f} tokens (mean input + half the 1024 output tokens; {calibration} beside this file). HBM capacity is not checked. Written by scripts/derive_h20_decode.py."
source: "prfaas-model.md §5 (the one recovered point, from arXiv 2604.15039 v2); models.yaml; data/gpus/h20.yaml"
"""


def main(root: Path = ROOT) -> None:
    catalog = Catalog.open(root / "data", root / "models.yaml")
    case = root / "examples" / "case_study.yaml"
    scenario = load_scenario(case)
    output = float(scenario.workload.output_tokens)  # type: ignore[arg-type]
    inputs = build_workload(scenario.workload.input_tokens, case.parent)
    context = mean_decode_context_tokens(inputs.mean_tokens * output, output, output * output)
    roofline = decode_roofline(
        catalog, MODEL, GPU, GPUS,
        batch_size=PAPER_BATCH, context_tokens=context, step_s=PAPER_STEP_S,
    )  # fmt: skip
    folder = root / "data" / "profiles" / MODEL / "decode" / f"{GPU}-x{GPUS}"
    rows = [(c, b) for c in CONTEXTS for b in BATCHES]
    steps = roofline.step_s([b for _, b in rows], [c for c, _ in rows])
    (folder / "decode_step.csv").write_text(
        "context_tokens,batch_size,decode_step_latency_s\n"
        + "".join(f"{c},{b},{s!r}\n" for (c, b), s in zip(rows, steps.tolist(), strict=True))
    )
    (folder / DECODE_CALIBRATION).write_text(
        f"batch_size,context_tokens,decode_step_latency_s\n{PAPER_BATCH},{context!r},{PAPER_STEP_S!r}\n"
    )
    facts = catalog.gpu(GPU)
    (folder / "meta.yaml").write_text(META.format(
        model=MODEL, gpu=GPU, gpus=GPUS, tbs=facts.hbm_bandwidth_tbytes_per_s,
        weights_gb=roofline.weights_bytes / 1e9, eta=roofline.efficiency, batch=PAPER_BATCH,
        step_ms=PAPER_STEP_S * 1e3, context=context, calibration=DECODE_CALIBRATION,
    ))  # fmt: skip
    print(
        f"calibrated at context {context:.1f} tokens: eta = {roofline.efficiency:.4f}, "
        f"weights {roofline.weights_bytes / roofline.hbm_bytes_per_s * 1e3:.3f} ms/step; "
        f"T(20, context) = {float(roofline.step_s(PAPER_BATCH, context)):.6f} s"
    )
    for c in CONTEXTS:
        print(f"  context {c:>6}: " + " ".join(
            f"b{b}={float(roofline.step_s(b, c)) * 1e3:.1f}ms" for b in (1, 8, 20, 32, 64)
        ))  # fmt: skip


if __name__ == "__main__":
    np.set_printoptions(precision=6)
    main()
