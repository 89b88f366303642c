"""Benchmark result files of the serving engines our users run, read into typed runs for
`import-profile`: vLLM `bench serve` JSON, SGLang `bench_serving` JSONL and the NVIDIA Dynamo
profiler's `raw_data.npz`. Units: seconds and tokens inside (Dynamo's milliseconds converted here).

The vLLM and SGLang runs are read by inputs/benchmark_run.py (their field names, shapes and
checks). The Dynamo profiler's, here, as it writes them (read in its source, December 2026):
`benchmarks/profiler/utils/profile_prefill.py` and `profile_decode.py`
  (ai-dynamo/dynamo): `np.savez(raw_data.npz, prefill_isl, prefill_ttft (ms),
  prefill_thpt_per_gpu)` and `np.savez(raw_data.npz, x_kv_usage, y_context_length, z_itl (ms),
  z_thpt_per_gpu, max_kv_tokens=[n])`, where x_kv_usage = (isl + osl/2) · num_request /
  max_kv_tokens and y_context_length = isl + osl/2, so a point's batch is
  num_request = x_kv_usage · max_kv_tokens / y_context_length.

Reading is bounded before memory is spent (inputs/bounded_json.py: the per-request lists become
float64 arrays, a key given twice in one object is refused, every number is charged to a budget
shared by the files of one import (plausible.py); a Dynamo archive's members are
checked by their zip entry and `.npy` header before their data is read, and read with a cap).
Every value has its plausible range (plausible.py), checked on the successful requests; the
medians of `ttfts` and `itls` must agree with the file's own `median_ttft_ms` and
`median_itl_ms` where it has them (a list written in ms under a seconds name is 1000x off).
Every message names the file (and line), the field (and request) and what was found.
"""

import math
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from prfaas_plan import plausible, units
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.benchmark_run import (
    RESULT_SHAPES,
    TIME_HINT,
    check_each,
    check_shape,
    run_of,
)
from prfaas_plan.inputs.benchmark_run import (
    BenchmarkRun as BenchmarkRun,  # import_profile.py: bench.BenchmarkRun
)
from prfaas_plan.inputs.bounded_json import read_object, skip_whitespace
from prfaas_plan.inputs.json_terms import Budget
from prfaas_plan.inputs.reading import bounded_lines, open_bounded, open_bounded_binary, read_text


@dataclass(frozen=True)
class DynamoPrefill:
    source: str
    input_tokens: np.ndarray
    ttft_s: np.ndarray
    estimated_by: str | None = None  # what in the file says its latencies were estimated


@dataclass(frozen=True)
class DynamoDecode:
    source: str
    batch_size: np.ndarray  # the client's concurrency (inputs/dynamo_points.py: the engine's)
    context_tokens: np.ndarray
    itl_s: np.ndarray
    max_kv_tokens: float
    throughput_per_gpu: np.ndarray | None = None  # z_thpt_per_gpu, tokens/s per GPU
    estimated_by: str | None = None


def import_budget() -> Budget:
    """The values the files of one import may hold, shared by them (plausible.py:
    MAX_BENCHMARK_NUMBERS, MAX_BENCHMARK_WALKED_VALUES)."""
    return Budget(
        plausible.MAX_BENCHMARK_NUMBERS,
        plausible.MAX_BENCHMARK_WALKED_VALUES,
        "the files of one import",
    )


def read_vllm(path: Path, budget: Budget | None = None) -> list[BenchmarkRun]:
    """The runs in a `vllm bench serve --save-result --save-detailed` JSON file: one object,
    or with `--append-result` one object per run, each after a newline (serve.py writes "\n"
    then the next result into the same file); a run of a file of several is named by the line
    it starts on. Values are charged to `budget` (one import's, else a fresh one)."""
    budget = budget or import_budget()
    text = read_text(path, "vLLM result", limit_bytes=plausible.MAX_BENCHMARK_BYTES)
    runs: list[BenchmarkRun] = []
    start = skip_whitespace(text, 0)
    line = text.count("\n", 0, start) + 1
    several = False
    while True:
        where = f"{path}:{line}" if several else str(path)
        record, end = read_object(text, where, "a vLLM result JSON", RESULT_SHAPES, budget,
                                  nested=("details",), start=start)  # fmt: skip
        after = skip_whitespace(text, end)
        if after < len(text) and not text.startswith("{", after):
            line += text.count("\n", start, after)
            raise ConfigError(f"{path}: not JSON (text after the object, line {line})")
        several = several or after < len(text)
        where = f"{path}:{line}" if several else str(path)
        check_shape(record, where, "vllm")
        runs.append(run_of(record, where, "vLLM bench serve"))
        _check_run_count(runs, where)
        if after == len(text):
            return runs
        line += text.count("\n", start, after)
        start = after


# runs one file may hold: a sweep appends tens; a file of a million tiny runs is refused before
# their arrays add up
MAX_RUNS_PER_FILE = 10_000


def _check_run_count(runs: list[BenchmarkRun], where: str) -> None:
    if len(runs) > MAX_RUNS_PER_FILE:
        raise ConfigError(
            f"{where}: more than {MAX_RUNS_PER_FILE:,} runs in one file; a sweep appends tens: "
            "import its runs in parts"
        )


def read_sglang(path: Path, budget: Budget | None = None) -> list[BenchmarkRun]:
    """The runs in an SGLang `bench_serving --output-file --output-details` JSONL file, one
    per non-blank line (a line may be as long as the file may be); values charged to `budget`."""
    budget = budget or import_budget()
    runs = []
    with open_bounded(path, "SGLang result", plausible.MAX_BENCHMARK_BYTES) as handle:
        lines = bounded_lines(
            handle, path, "SGLang result", limit_chars=plausible.MAX_BENCHMARK_BYTES
        )
        for number, line in enumerate(lines, start=1):
            if skip_whitespace(line, 0) == len(line):
                continue
            where = f"{path}:{number}"
            record, end = read_object(line, where, "an SGLang bench_serving JSONL line",
                                      RESULT_SHAPES, budget, nested=("details",))  # fmt: skip
            if skip_whitespace(line, end) < len(line):
                raise ConfigError(f"{where}: text after the JSON object (one run per line)")
            check_shape(record, where, "sglang")
            runs.append(run_of(record, where, "SGLang bench_serving"))
            _check_run_count(runs, where)
    if not runs:
        raise ConfigError(f"{path}: no runs found (an empty SGLang result file)")
    return runs


_PREFILL_KEYS = ("prefill_isl", "prefill_ttft")
_DECODE_KEYS = ("x_kv_usage", "y_context_length", "z_itl", "max_kv_tokens")
# numpy's own cap on a .npy header (numpy.lib.format, max_header_size)
_MAX_NPY_HEADER_BYTES = 10_000
_NPY_VERSIONS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}
_MAX_ITEM_BYTES = 8  # float64 and int64, the widest dtypes the profiler writes


def read_dynamo(path: Path) -> DynamoPrefill | DynamoDecode:
    """A Dynamo profiler `raw_data.npz`, prefill or decode by the arrays it holds; only the
    arrays used are read, each checked by its zip entry and `.npy` header before its data is
    read (never a pickle); ms converted to s. A file that is not a zip archive is read as the
    ConfigMap JSON form of the same arrays (inputs/dynamo_json.py)."""
    where = str(path)
    with open_bounded_binary(path, "Dynamo raw_data.npz", plausible.MAX_DYNAMO_BYTES) as handle:
        head = handle.read(64)
        handle.seek(0)
        if head.lstrip(b" \t\r\n").startswith(b"{"):  # a zip archive starts with "PK"
            from prfaas_plan.inputs.dynamo_json import read_dynamo_json

            return read_dynamo_json(path)
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            raise ConfigError(
                f"{where}: not a numpy .npz archive (the Dynamo profiler's raw_data.npz)"
            ) from None
        with archive:
            members: dict[str, zipfile.ZipInfo] = {}
            for info in archive.infolist():
                name = info.filename.removesuffix(".npy")
                if name in members:
                    raise ConfigError(
                        f"{where}: the archive holds {plausible.quoted(name)} twice (a duplicate "
                        "key: which one would count?)"
                    )
                members[name] = info
            if all(k in members for k in _PREFILL_KEYS):
                isl, ttft_ms = (_npy(archive, members[k], where, k) for k in _PREFILL_KEYS)
                return dynamo_prefill(where, isl, ttft_ms)
            if all(k in members for k in _DECODE_KEYS):
                usage, context, itl_ms, max_kv = (
                    _npy(archive, members[k], where, k) for k in _DECODE_KEYS
                )
                thpt = members.get("z_thpt_per_gpu")
                return dynamo_decode(
                    where, usage, context, itl_ms, max_kv,
                    None if thpt is None else _npy(archive, thpt, where, "z_thpt_per_gpu"),
                )  # fmt: skip
    names = sorted(members)
    shown = ", ".join(plausible.quoted(n)[1:-1] for n in names[:8])
    more = f" and {len(names) - 8:,} more" if len(names) > 8 else ""
    raise ConfigError(
        f"{where}: a Dynamo raw_data.npz holds {', '.join(_PREFILL_KEYS)} (prefill) or "
        f"{', '.join(_DECODE_KEYS)} (decode); found {shown + more or 'no arrays'}"
    )


def _npy(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, name: str) -> np.ndarray:
    """The `.npy` member `info` as float64 values, refused before its data is read unless its
    zip entry (stored or deflated, declared size) and header (a numeric dtype, at most
    plausible.MAX_PROFILE_POINTS values, matching the declared size) say it is a profiler array;
    read with a cap, so a member that inflates past its declared size is refused (zip CRC)."""
    if info.flag_bits & 0x1:
        raise ConfigError(f"{where}: {name} is encrypted; the profiler writes plain arrays")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ConfigError(
            f"{where}: {name} uses zip compression method {info.compress_type}; numpy writes "
            "stored or deflated members"
        )
    limit = _MAX_NPY_HEADER_BYTES + plausible.MAX_PROFILE_POINTS * _MAX_ITEM_BYTES
    if info.file_size > limit:
        raise ConfigError(
            f"{where}: {name} declares {info.file_size:,} bytes uncompressed, over the "
            f"{limit:,} of {plausible.MAX_PROFILE_POINTS:,} numbers (a profile table's rows); "
            "not a profiler sweep"
        )
    # deflate adds at most ~0.03% and a few bytes to what it cannot compress; a member holding
    # more compressed bytes than that is one whose data goes on past its declared size
    if info.compress_size > info.file_size + info.file_size // 1000 + 64:
        raise ConfigError(
            f"{where}: {name}'s zip entry holds {info.compress_size:,} compressed bytes for "
            f"{info.file_size:,} bytes of data: a damaged or forged archive"
        )
    try:
        with archive.open(info) as member:
            data, dtype, shape, fortran = _npy_data(member, info.file_size, where, name)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, zlib.error) as exc:
        raise ConfigError(f"{where}: {name} is not a readable .npy array ({exc})") from None
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    values = array.astype(np.float64).ravel()
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ConfigError(f"{where}: {name}[{bad[0]}] must be finite, found {values[bad[0]]:g}")
    return values


def _npy_data(
    member: IO[bytes], declared_bytes: int, where: str, name: str
) -> tuple[bytes, np.dtype, tuple[int, ...], bool]:
    version = np.lib.format.read_magic(member)
    read_header = _NPY_VERSIONS.get(version)
    if read_header is None:
        raise ConfigError(f"{where}: {name} is a .npy of version {version}; expected 1.0 or 2.0")
    shape, fortran, dtype = read_header(member, max_header_size=_MAX_NPY_HEADER_BYTES)
    if dtype.kind not in "fiu" or dtype.itemsize > _MAX_ITEM_BYTES:
        raise ConfigError(
            f"{where}: {name} must hold numbers (int or float), found dtype {plausible.quoted(str(dtype))}"
        )
    count = math.prod(shape)
    if count > plausible.MAX_PROFILE_POINTS:
        raise ConfigError(
            f"{where}: {name} declares {count:,} values (shape {plausible.quoted(shape)}), over "
            f"the {plausible.MAX_PROFILE_POINTS:,} rows a profile table may have; not a profiler sweep"
        )
    data_bytes = count * dtype.itemsize
    header_bytes = member.tell()
    if header_bytes + data_bytes != declared_bytes:
        raise ConfigError(
            f"{where}: {name}'s header says {data_bytes:,} bytes of data but its zip entry "
            f"{declared_bytes - header_bytes:,}: a damaged or forged archive"
        )
    data = member.read(data_bytes)
    if len(data) != data_bytes or member.read(1):
        raise ConfigError(f"{where}: {name} holds {len(data):,} bytes, expected {data_bytes:,}")
    return data, dtype, shape, fortran


def dynamo_prefill(where: str, isl: np.ndarray, ttft_ms: np.ndarray) -> DynamoPrefill:
    if isl.size != ttft_ms.size:
        raise ConfigError(f"{where}: prefill_isl and prefill_ttft differ in length")
    tokens = (plausible.MIN_TOKENS, plausible.MAX_TOKENS)
    check_each(isl, "prefill_isl", where, tokens, " tokens", whole=True)
    check_each(ttft_ms, "prefill_ttft", where, (0.0, units.s_to_ms(plausible.MAX_SECONDS)), " ms",
                low_open=True, hint=TIME_HINT)  # fmt: skip
    return DynamoPrefill(where, isl, units.ms_to_s(ttft_ms))


def dynamo_decode(
    where: str,
    usage: np.ndarray,
    context: np.ndarray,
    itl_ms: np.ndarray,
    max_kv: np.ndarray,
    thpt: np.ndarray | None = None,
) -> DynamoDecode:
    if not usage.size == context.size == itl_ms.size:
        raise ConfigError(f"{where}: x_kv_usage, y_context_length and z_itl differ in length")
    if thpt is not None:
        if thpt.size != usage.size:
            raise ConfigError(f"{where}: z_thpt_per_gpu and z_itl differ in length")
        check_each(thpt, "z_thpt_per_gpu", where, (0.0, plausible.MAX_TOKENS), " tokens/s",
                    low_open=True)  # fmt: skip
    if max_kv.size != 1:
        raise ConfigError(f"{where}: max_kv_tokens must be one number, found {max_kv.size}")
    check_each(max_kv, "max_kv_tokens", where, (1.0, plausible.MAX_TOKENS), " tokens", whole=True)
    check_each(itl_ms, "z_itl", where, (0.0, units.s_to_ms(plausible.MAX_SECONDS)), " ms",
                low_open=True, hint=TIME_HINT)  # fmt: skip
    tokens = (plausible.MIN_TOKENS, plausible.MAX_TOKENS)
    check_each(context, "y_context_length", where, tokens, " tokens")
    check_each(usage, "x_kv_usage", where, (0.0, math.inf), "", low_open=True)
    batch = usage * max_kv[0] / context
    if np.any(np.abs(batch - np.round(batch)) > 0.05) or np.any(np.round(batch) < 1):
        i = int(np.argmax(np.abs(batch - np.round(batch)) + (np.round(batch) < 1)))
        raise ConfigError(
            f"{where}: x_kv_usage[{i}] x max_kv_tokens / y_context_length must be a whole "
            f"number of requests >= 1, found {batch[i]:.3g}"
        )
    big = np.flatnonzero(np.round(batch) > plausible.MAX_BATCH_SIZE)
    if big.size:
        raise ConfigError(
            f"{where}: x_kv_usage[{big[0]}] x max_kv_tokens / y_context_length is a batch of "
            f"{batch[big[0]]:.3g} requests, over {plausible.MAX_BATCH_SIZE:g}"
        )
    return DynamoDecode(
        where, np.round(batch), context, units.ms_to_s(itl_ms), float(max_kv[0]), thpt
    )
