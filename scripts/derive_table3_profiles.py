"""Write the derived 8 x H200 prefill tables and architecture KV tables of the six public models
of the paper's Table 3 into data/profiles/. Deterministic; re-run after editing models.yaml or
the kv_throughput.csv inputs. tests/use_cases/test_catalog.py
(test_derivation_script_reproduces_the_committed_tables) checks the committed files match.

    python scripts/derive_table3_profiles.py
"""

from pathlib import Path

import numpy as np

from prfaas_plan import units
from prfaas_plan.analytic.architecture import kv_footprint
from prfaas_plan.analytic.derive import prefill_latency_from_kv_throughput
from prfaas_plan.inputs.catalog import Catalog

ROOT = Path(__file__).resolve().parent.parent
TABLE3_TOKENS = (1024, 8192, 32768, 131072)
# Φ_kv in Gbps at TABLE3_TOKENS, arXiv 2604.15039 v2 Table 3 (8 x H200, SGLang v0.5.9)
TABLE3_GBPS = {
    "kimi-linear-48b": (1.19, 2.29, 3.87, 4.88),
    "mimo-v2-flash": (0.82, 2.85, 4.66, 4.71),
    "qwen3.5-397b": (4.13, 6.28, 8.25, 7.47),
    "ring-2.5-1t": (7.27, 4.47, 2.59, 1.46),
    "minimax-m2.5": (4.94, 32.87, 59.93, 47.82),
    "qwen3-235b": (4.12, 22.42, 33.35, 21.50),
}
KV_DTYPE, STATE_DTYPE = "bf16", "fp32"

PREFILL_META = """quantity: prefill_latency
model: {model}
gpu: h200
gpus_per_instance: 8
parallelism: "8 GPUs per instance (the paper's Table 3 setting)"
engine: SGLang
engine_version: "v0.5.9"
provenance: derived
method: "DERIVED, NOT MEASURED. T_prefill(l) = S_kv(l) / Phi_kv(l): Phi_kv from the paper's Table 3 (kv_throughput.csv beside this file, measured by the paper), S_kv from the architecture in models.yaml with {kv} KV and {state} recurrent state. Table 3's lengths labelled 1K/8K/32K/128K are read as 1,024/8,192/32,768/131,072 tokens (the reading under which its Phi_kv matches the architectures' KV sizes, shared/reference/model-configs.md). Written by scripts/derive_table3_profiles.py."
source: "Qin et al., arXiv 2604.15039 v2, Table 3; models.yaml"
"""
KV_META = """quantity: kv_cache_size
model: {model}
kv_dtype: {kv}
recurrent_state_dtype: {state}
engine: "not applicable (computed from the architecture)"
engine_version: "not applicable"
provenance: derived
method: "DERIVED, NOT MEASURED. S_kv(l) from the architecture in models.yaml: full-attention KV per token + sliding-window KV up to its window + linear-attention recurrent ({state}) and conv state. Written by scripts/derive_table3_profiles.py."
source: "models.yaml (facts from shared/reference/model-configs.md)"
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def main(root: Path = ROOT) -> None:
    """Write the derived tables under `root`/data from `root`/models.yaml."""
    catalog = Catalog.open(root / "data", root / "models.yaml")
    tokens = np.array(TABLE3_TOKENS, dtype=float)
    for model, gbps in TABLE3_GBPS.items():
        footprint = kv_footprint(catalog.model(model).layer_groups(), KV_DTYPE, STATE_DTYPE)
        latency_s = prefill_latency_from_kv_throughput(footprint, tokens, gbps)
        size_mib = units.bytes_to_mib(footprint.size_bytes(tokens))
        base = root / "data" / "profiles" / model
        fmt = {"model": model, "kv": KV_DTYPE, "state": STATE_DTYPE}
        write(base / "prefill/h200-x8/meta.yaml", PREFILL_META.format(**fmt))
        write(base / "prefill/h200-x8/kv_throughput.csv", "input_tokens,kv_throughput_gbps\n"
              + "".join(f"{int(t)},{g}\n" for t, g in zip(tokens, gbps, strict=True)))  # fmt: skip
        write(base / "prefill/h200-x8/prefill_latency.csv", "input_tokens,prefill_latency_s\n"
              + "".join(f"{int(t)},{s:.6f}\n" for t, s in zip(tokens, latency_s, strict=True)))  # fmt: skip
        write(base / f"kv/{KV_DTYPE}/meta.yaml", KV_META.format(**fmt))
        write(base / f"kv/{KV_DTYPE}/kv_cache_size.csv", "input_tokens,kv_cache_mib\n"
              + "".join(f"{int(t)},{m:.6f}\n" for t, m in zip(tokens, size_mib, strict=True)))  # fmt: skip
        print(
            f"{model}: T = {np.round(latency_s, 3).tolist()} s, S = {np.round(size_mib, 1).tolist()} MiB"
        )


if __name__ == "__main__":
    main()
