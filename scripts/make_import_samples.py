"""Write the SYNTHETIC benchmark samples of examples/imports/ and trace samples of
examples/traces/ (made by us, not measurements or real traffic).

Prefill samples replay the paper's 8 x H200 prefill table (data/profiles/internal-1t-hybrid/
prefill/h200-x8/, Table 5) as the TTFT of requests sent one at a time, with 0.5% log-normal
noise, so importing them must reproduce the case-study plan. Decode samples are closed-loop runs
on 8 x H20 whose step latency 15 ms + 0.5 ms per request in the batch (+ a KV-read term growing
with context in the Dynamo sample) is an assumption calibrated to the shipped decode point
(batch 20 at 25 ms), not a measurement. Each file says so (vLLM `label`, SGLang `dataset_name`,
Dynamo: examples/imports/README.md). The trace samples (Azure LLM inference and BurstGPT
CSV layouts, examples/traces/README.md) draw input lengths from the case study's log-normal
and output lengths from a log-normal around 1024 tokens, at Poisson arrivals of 2 req/s;
a few BurstGPT rows are failed requests (0 response tokens). Deterministic (seed 0):

    python scripts/make_import_samples.py
"""

import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "examples" / "imports"
TABLE = (
    ROOT
    / "data"
    / "profiles"
    / "internal-1t-hybrid"
    / "prefill"
    / "h200-x8"
    / "prefill_latency.csv"
)
LABEL = "SYNTHETIC SAMPLE made by prfaas-plan (scripts/make_import_samples.py), not a measurement"
NOISE = 0.005  # log-normal sigma of the prefill samples
REPEATS = 7  # requests per input length
DECODE_CONCURRENCIES = (1, 8, 16, 20, 32)
DECODE_OUTPUT_TOKENS = 24


def _h200_table() -> tuple[np.ndarray, np.ndarray]:
    rows = np.loadtxt(TABLE, delimiter=",", skiprows=1)
    return rows[:, 0], rows[:, 1]


def _step_s(batch: float, context_tokens: float = 0.0) -> float:
    return 0.015 + 0.0005 * batch * (1 + context_tokens / 64_000)


def _prefill_requests(rng: np.random.Generator) -> dict[str, list]:
    tokens, latency = _h200_table()
    inputs = np.repeat(tokens, REPEATS)
    ttft = np.repeat(latency, REPEATS) * rng.lognormal(0.0, NOISE, inputs.size)
    order = rng.permutation(inputs.size)
    inputs, ttft = inputs[order], ttft[order]
    outputs = [2] * inputs.size
    itls = [[round(_step_s(1), 6)] for _ in inputs]
    latencies = ttft + _step_s(1)
    starts = np.concatenate([[0.0], np.cumsum(latencies[:-1] + 0.01)])  # one at a time
    return {
        "input_lens": [int(x) for x in inputs], "output_lens": outputs,
        "ttfts": [round(float(x), 6) for x in ttft], "itls": itls,
        "start_times": [round(float(x), 6) for x in starts],
        "latencies": [round(float(x), 6) for x in latencies],
        "errors": [""] * inputs.size,
    }  # fmt: skip


def _decode_requests(concurrency: int, rng: np.random.Generator) -> dict[str, list]:
    n = 2 * concurrency
    step = _step_s(concurrency)
    itls = [[round(float(x), 6) for x in step * rng.lognormal(0, 0.03, DECODE_OUTPUT_TOKENS - 1)]
            for _ in range(n)]  # fmt: skip
    ttft = [0.08] * n
    latencies = [t + sum(i) for t, i in zip(ttft, itls, strict=True)]
    return {
        "input_lens": [1024] * n, "output_lens": [DECODE_OUTPUT_TOKENS] * n, "ttfts": ttft,
        "itls": itls, "latencies": [round(x, 6) for x in latencies], "errors": [""] * n,
    }  # fmt: skip


def _vllm(requests: dict[str, list], concurrency: int) -> dict[str, object]:
    duration = sum(requests["latencies"]) / concurrency  # closed loop: every slot always busy
    return {
        "date": "20261202-120000", "endpoint_type": "openai", "backend": "vllm", "label": LABEL,
        "model_id": "internal-1t-hybrid", "tokenizer_id": "internal-1t-hybrid",
        "num_prompts": len(requests["input_lens"]), "request_rate": "inf", "burstiness": 1.0,
        "max_concurrency": concurrency, "duration": duration,
        "completed": len(requests["input_lens"]), "failed": 0, **requests,
    }  # fmt: skip


def _sglang(requests: dict[str, list], concurrency: int) -> dict[str, object]:
    details = {
        k: v
        for k, v in requests.items()
        if k in ("input_lens", "output_lens", "ttfts", "itls", "errors")
    }
    duration = sum(requests["latencies"]) / concurrency
    return {
        "backend": "sglang", "dataset_name": LABEL, "request_rate": "inf",
        "max_concurrency": concurrency, "duration": duration,
        "completed": len(requests["input_lens"]), "concurrency": concurrency * 0.97,
        **details, "generated_texts": [""] * len(requests["input_lens"]),
    }  # fmt: skip


def main() -> None:
    rng = np.random.default_rng(0)
    OUT.mkdir(parents=True, exist_ok=True)
    prefill = _prefill_requests(rng)
    prefill["errors"][0], prefill["ttfts"][0] = "synthetic failed request (dropped)", 0.0
    (OUT / "vllm_h200_prefill.json").write_text(json.dumps(_vllm(prefill, 1)) + "\n")
    (OUT / "sglang_h200_prefill.jsonl").write_text(
        json.dumps(_sglang(_prefill_requests(rng), 1)) + "\n"
    )
    decode = {c: _decode_requests(c, rng) for c in DECODE_CONCURRENCIES}
    for c, requests in decode.items():
        (OUT / f"vllm_h20_decode_c{c}.json").write_text(json.dumps(_vllm(requests, c)) + "\n")
    (OUT / "sglang_h20_decode.jsonl").write_text(
        "".join(
            json.dumps(_sglang(_decode_requests(c, rng), c)) + "\n" for c in DECODE_CONCURRENCIES
        )
    )
    tokens, latency = _h200_table()
    for kind in ("prefill", "decode"):
        (OUT / "dynamo" / kind).mkdir(parents=True, exist_ok=True)
    np.savez(
        OUT / "dynamo" / "prefill" / "raw_data.npz",
        prefill_isl=tokens,
        prefill_ttft=latency * 1e3 * rng.lognormal(0, NOISE / 5, tokens.size),  # ms, a mean of many
        prefill_thpt_per_gpu=tokens / latency / 8,
    )
    osl, max_kv = 500, 1_600_000
    usage, context, itl, thpt = [], [], [], []
    for isl in (1000, 8000, 32000):
        for batch in (1, 8, 16, 20, 32):
            usage.append((isl + osl / 2) * batch / max_kv)
            context.append(isl + osl / 2)
            itl.append(_step_s(batch, isl + osl / 2) * 1e3)  # ms
            thpt.append(batch / _step_s(batch, isl + osl / 2) / 8)  # tokens/s per GPU, unsaturated
    np.savez(
        OUT / "dynamo" / "decode" / "raw_data.npz",
        x_kv_usage=np.array(usage),
        y_context_length=np.array(context),
        z_itl=np.array(itl),
        z_thpt_per_gpu=np.array(thpt),
        max_kv_tokens=np.array([max_kv]),
    )
    _traces(np.random.default_rng(1))


def _traces(rng: np.random.Generator) -> None:
    out = ROOT / "examples" / "traces"
    out.mkdir(parents=True, exist_ok=True)
    n = 400
    gaps = rng.exponential(0.5, n)
    inputs = np.clip(np.round(rng.lognormal(9.9, 1.0, n)), 128, 131072).astype(int)
    outputs = np.clip(np.round(rng.lognormal(np.log(1024), 0.5, n)), 1, 16384).astype(int)
    start = np.datetime64("2023-11-16T18:17:03.979960")
    stamps = start + (np.cumsum(gaps) * 1e6).astype("timedelta64[us]")
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    rows += [
        f"{str(t).replace('T', ' ')}0,{i},{o}"
        for t, i, o in zip(stamps, inputs, outputs, strict=True)
    ]
    (out / "azure_sample.csv").write_text("\n".join(rows) + "\n")
    failed = rng.random(n) < 0.02
    rows = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    for t, i, o, f in zip(np.cumsum(gaps), inputs, outputs, failed, strict=True):
        o = 0 if f else o
        rows.append(f"{t:.0f},{'ChatGPT' if i % 3 else 'GPT-4'},{i},{o},{i + o},Conversation log")
    (out / "burstgpt_sample.csv").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
