"""The ConfigMap JSON form of the NVIDIA Dynamo profiler's data: `prefill_raw_data.json` and
`decode_raw_data.json`. Units: as the profiler writes them (ms), converted to seconds by the
npz readers' checks (inputs/benchmarks.py) that these values go through too.

Field names as the writer makes them (ai-dynamo/dynamo,
`components/src/dynamo/profiler/utils/dgd_generation.py`: the npz arrays `.tolist()`-ed into a
ConfigMap mounted into the Planner): `{"prefill_isl": [...], "prefill_ttft": [...] (ms),
"prefill_thpt_per_gpu": [...]}` and `{"x_kv_usage": [...], "y_context_length": [...], "z_itl":
[...] (ms), "z_thpt_per_gpu": [...], "max_kv_tokens": n}` (one number here, `[n]` in the npz).
One JSON object per file, json.dumps'd; read with the same bounded reader as the benchmark
results (a key twice refused, lists charged to a budget before they are decoded).

AIConfigurator: Dynamo's profiler can fill the same arrays from AIConfigurator's estimates
(`profile_decode_aiconfigurator`), and neither form records it. A file is taken as estimated
only where it says so: a key or a text value naming AIConfigurator (`ESTIMATE_MARK`); otherwise
the import's `--provenance estimated` says it.
"""

from dataclasses import replace
from pathlib import Path

import numpy as np

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.benchmarks import (
    DynamoDecode,
    DynamoPrefill,
    dynamo_decode,
    dynamo_prefill,
    import_budget,
)
from prfaas_plan.inputs.bounded_json import read_object, skip_whitespace
from prfaas_plan.inputs.json_terms import Shape
from prfaas_plan.inputs.reading import read_text

ESTIMATE_MARK = "aiconfigurator"
_ARRAYS = (
    "prefill_isl",
    "prefill_ttft",
    "prefill_thpt_per_gpu",
    "x_kv_usage",
    "y_context_length",
    "z_itl",
    "z_thpt_per_gpu",
)
_PREFILL = ("prefill_isl", "prefill_ttft")
_DECODE = ("x_kv_usage", "y_context_length", "z_itl", "max_kv_tokens")


def estimate_mark(record: dict[str, object]) -> str | None:
    """The key or text value that names AIConfigurator, if any (module docstring)."""
    for key, value in record.items():
        if ESTIMATE_MARK in key.lower():
            return f"its key {key!r}"
        if isinstance(value, str) and ESTIMATE_MARK in value.lower():
            return f"its {key} {plausible.quoted(value)}"
    return None


def _array(record: dict[str, object], key: str, where: str) -> np.ndarray:
    values = record[key]
    if not isinstance(values, np.ndarray):  # the reader makes every declared list an array
        raise ConfigError(f"{where}: {key} must be a list of numbers")
    if values.size > plausible.MAX_PROFILE_POINTS:
        raise ConfigError(
            f"{where}: {key} holds {values.size:,} values, over the "
            f"{plausible.MAX_PROFILE_POINTS:,} rows a profile table may have; not a profiler sweep"
        )
    return values


def read_dynamo_json(path: Path) -> DynamoPrefill | DynamoDecode:
    """`prefill_raw_data.json` or `decode_raw_data.json`, by the keys it holds."""
    where = str(path)
    text = read_text(path, "Dynamo raw data JSON", limit_bytes=plausible.MAX_DYNAMO_BYTES)
    what = "a Dynamo profiler raw_data.npz or its ConfigMap JSON (prefill_raw_data.json)"
    shapes = dict.fromkeys(_ARRAYS, Shape.NUMBERS)
    record, end = read_object(text, where, what, shapes, import_budget())
    if skip_whitespace(text, end) < len(text):
        line = text.count("\n", 0, skip_whitespace(text, end)) + 1
        raise ConfigError(f"{where}: not JSON (text after the object, line {line})")
    mark = estimate_mark(record)
    if all(k in record for k in _PREFILL):
        isl, ttft_ms = (_array(record, k, where) for k in _PREFILL)
        return replace(dynamo_prefill(where, isl, ttft_ms), estimated_by=mark)
    if all(k in record for k in _DECODE):
        max_kv = record["max_kv_tokens"]
        if isinstance(max_kv, bool) or not isinstance(max_kv, int | float):
            raise ConfigError(
                f"{where}: max_kv_tokens must be one number, found {plausible.quoted(max_kv)}"
            )
        usage, context, itl_ms = (_array(record, k, where) for k in _DECODE[:3])
        thpt = _array(record, "z_thpt_per_gpu", where) if "z_thpt_per_gpu" in record else None
        decode = dynamo_decode(where, usage, context, itl_ms, np.array([float(max_kv)]), thpt)
        return replace(decode, estimated_by=mark)
    shown = ", ".join(sorted(record)[:8]) or "no keys"
    raise ConfigError(
        f"{where}: not a numpy .npz archive, nor its ConfigMap JSON form: prefill_raw_data.json "
        f"holds {', '.join(_PREFILL)}, decode_raw_data.json {', '.join(_DECODE)}; found {shown}"
    )
