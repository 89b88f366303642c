"""Hostile inputs to `import-profile` (issues 26 and 27), one row per case: the files it is given
(built here in tmp_path to the writers' schemas, from the samples of examples/imports/), the exit
code, and fragments of the one `error:` line. Every row is also checked to leave the disk as it
was: no data directory created, an existing one unchanged, no staging folder left. The data
directory itself (read-only, owned by someone else, a new one in a read-only parent) is tried as
another user; the reader's bounds in a real process under an address-space limit. A new importer
is tried the same way: add its rows."""

import io
import json
import os
import pickle
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan import plausible
from tests.cli.test_cli import Ran, assert_clean_error, run

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "examples" / "imports"
H200 = ("--model", "internal-1t-hybrid", "--gpu", "h200", "--gpus-per-instance", "8")
H20 = ("--model", "internal-1t-hybrid", "--gpu", "h20", "--gpus-per-instance", "8")
DECODE = (*H20, "--kind", "decode")
CONCURRENCIES = (1, 8, 16, 20, 32)

Builder = Callable[[Path], list[Path]]


# --- documents as the tools write them (the samples), edited ---


def vllm(**changes: object) -> dict:
    """The sample `vllm bench serve --save-result --save-detailed` prefill run."""
    return {**json.loads((SAMPLES / "vllm_h200_prefill.json").read_text()), **changes}


def vllm_decode(concurrency: int, **changes: object) -> dict:
    text = (SAMPLES / f"vllm_h20_decode_c{concurrency}.json").read_text()
    return {**json.loads(text), **changes}


def sglang_decode() -> list[dict]:
    """The sample SGLang `bench_serving --output-details` decode runs, one per line."""
    return [
        json.loads(line)
        for line in (SAMPLES / "sglang_h20_decode.jsonl").read_text().split("\n")
        if line
    ]


def at(values: list, index: int, value: object) -> list:
    return [value if i == index else v for i, v in enumerate(values)]


def scaled_itls(document: dict, factor: float) -> dict:
    return {**document, "itls": [[t * factor for t in request] for request in document["itls"]]}


def with_key_twice(document: dict, key: str, value: object) -> str:
    """The document's JSON with `key` written again at the end (the last would win)."""
    return json.dumps(document)[:-1] + f", {json.dumps(key)}: {json.dumps(value)}}}"


def text_file(text: str, name: str = "run.json") -> Builder:
    def build(folder: Path) -> list[Path]:
        (folder / name).write_text(text)
        return [folder / name]

    return build


def json_file(document: dict, name: str = "run.json") -> Builder:
    return text_file(json.dumps(document), name)


def jsonl_file(lines: list[dict | str], name: str = "runs.jsonl") -> Builder:
    return text_file(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), name
    )


def vllm_decode_files(edit: Callable[[dict], dict | str]) -> Builder:
    """The five sample decode runs, each edited (a dict, or the JSON text to write)."""

    def build(folder: Path) -> list[Path]:
        paths = []
        for c in CONCURRENCIES:
            document = edit(vllm_decode(c))
            path = folder / f"c{c}.json"
            path.write_text(document if isinstance(document, str) else json.dumps(document))
            paths.append(path)
        return paths

    return build


def dynamo(kind: str, **changes: np.ndarray) -> Builder:
    """The sample Dynamo raw_data.npz of `kind`, arrays replaced by `changes`."""

    def build(folder: Path) -> list[Path]:
        with np.load(SAMPLES / "dynamo" / kind / "raw_data.npz") as sample:
            arrays = {k: sample[k] for k in sample.files}
        path = folder / "raw_data.npz"
        np.savez(path, **{**arrays, **changes})
        return [path]

    return build


def npy(values: np.ndarray | None = None, **header: object) -> bytes:
    """A .npy file: `values` as np.save writes them, or a hand-made header (which may lie)."""
    handle = io.BytesIO()
    if values is not None:
        np.save(handle, values, allow_pickle=values.dtype.hasobject)
    else:
        np.lib.format.write_array_header_1_0(handle, {"fortran_order": False, **header})
    return handle.getvalue()


def members(kind: str, **replaced: bytes) -> dict[str, bytes]:
    """The sample archive's members of `kind` as .npy bytes, some replaced."""
    with np.load(SAMPLES / "dynamo" / kind / "raw_data.npz") as sample:
        found = {f"{k}.npy": npy(sample[k]) for k in sample.files}
    return {**found, **{f"{k}.npy": v for k, v in replaced.items()}}


def decode_members(**replaced: bytes) -> dict[str, bytes]:
    return members("decode", **replaced)


def npz_file(
    members: dict[str, bytes] | list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED
) -> Builder:
    def build(folder: Path) -> list[Path]:
        path = folder / "raw_data.npz"
        with zipfile.ZipFile(path, "w", compression) as archive, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a name twice, when a row wants it
            for name, data in members.items() if isinstance(members, dict) else members:
                archive.writestr(name, data)
        return [path]

    return build


_BLOCK = 16 * 2**20


def deflated_zeros(prefix: bytes, blocks: int) -> bytes:
    """A raw deflate stream of `prefix` then `blocks` x 16 MiB of zeros: one compressed block
    repeated (a full flush makes each independent), so gigabytes take a few MB."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(bytes(_BLOCK)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return head + block * blocks + compressor.flush(zlib.Z_FINISH)


def forged_member(name: str, deflated: bytes, *, size: int, crc: int) -> bytes:
    """A one-member zip written by hand: the deflated `payload` with the uncompressed size and
    CRC it declares (which a forged archive lies about)."""
    n = name.encode()
    local = struct.pack(
        "<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(deflated), size, len(n), 0
    )
    central = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(deflated), size,
                          len(n), 0, 0, 0, 0, 0, 0)  # fmt: skip
    offset = len(local) + len(n) + len(deflated)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central) + len(n), offset, 0)
    return local + n + deflated + central + n + end


def inflating(
    kind: str, member: str, values: int, zero_blocks: int, declared: int | None
) -> Builder:
    """The sample archive of `kind` whose `member` is a .npy header for `values` float64 and
    `zero_blocks` x 16 MiB of zeros, deflated (a few MB); its zip entry declares its true size,
    or `declared` values (with the CRC of those bytes)."""

    def build(folder: Path) -> list[Path]:
        header = npy(descr="<f8", shape=(values,))
        stream = deflated_zeros(header, zero_blocks)
        if declared is None:
            size, crc = len(header) + zero_blocks * _BLOCK, 0  # never read that far
        else:
            size, crc = len(header) + 8 * declared, zlib.crc32(header + bytes(8 * declared))
        forged = folder / "member.zip"
        forged.write_bytes(forged_member(f"{member}.npy", stream, size=size, crc=crc))
        path = folder / "raw_data.npz"
        with zipfile.ZipFile(path, "w") as archive:
            for name, data in members(kind).items():
                if name != f"{member}.npy":
                    archive.writestr(name, data)
        _append_member(path, forged)
        forged.unlink()
        return [path]

    return build


def _append_member(archive_path: Path, one_member_zip: Path) -> None:
    """Add the single member of a hand-written zip to an archive, its bytes as they are."""
    raw = one_member_zip.read_bytes()
    name_length = struct.unpack_from("<H", raw, 26)[0]
    compressed = struct.unpack_from("<L", raw, 18)[0]
    local_end = 30 + name_length + compressed
    with zipfile.ZipFile(archive_path) as archive:
        infos = archive.infolist()
    data = archive_path.read_bytes()
    directory_at = struct.unpack_from("<L", data, len(data) - 22 + 16)[0]
    body, directory = data[:directory_at], data[directory_at : len(data) - 22]
    central = bytearray(raw[local_end : len(raw) - 22])
    struct.pack_into("<L", central, 42, len(body))  # the member's offset in the new archive
    new_directory = directory + bytes(central)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(infos) + 1, len(infos) + 1,
                      len(new_directory), len(body) + local_end, 0)  # fmt: skip
    archive_path.write_bytes(body + raw[:local_end] + new_directory + end)


def pickle_as_npz(folder: Path) -> list[Path]:
    path = folder / "raw_data.npz"
    path.write_bytes(pickle.dumps({"z_itl": [1.0]}))
    return [path]


def repeated(build: Builder, how: str) -> Builder:
    """The files of `build` with the first given again: by the same name, as a copy under
    another name, or through a symbolic link."""

    def build_twice(folder: Path) -> list[Path]:
        paths = build(folder)
        first = paths[0]
        again = {"same name": lambda: first, "copy": lambda: first.with_name("copy-" + first.name),
                 "link": lambda: first.with_name("link-" + first.name)}[how]()  # fmt: skip
        if how == "copy":
            shutil.copyfile(first, again)
        elif how == "link":
            again.symlink_to(first)
        return [first, again, *paths[1:]]

    return build_twice


def deep(levels: int) -> str:
    return json.dumps(vllm())[:-1] + ', "metadata": ' + "[" * levels + "]" * levels + "}"


# --- the corpus: (id, format, files, flags, exit code, message fragments[, bounds changed]) ---

CASES = [
    # a file given twice would count its runs twice in the per-bin medians (run 3's finding 1)
    ("a file given twice", "vllm", repeated(json_file(vllm()), "same name"), H200, 3,
     ["run.json: given twice; its runs would count twice in the medians: give each file once"]),
    ("A A B: a decode run given twice among five", "vllm",
     repeated(vllm_decode_files(lambda d: d), "same name"), DECODE, 3, ["c1.json: given twice"]),
    ("the same file through a link", "vllm", repeated(json_file(vllm()), "link"), H200, 3,
     ["link-run.json: the same file as", "run.json; its runs would count twice"]),
    ("the same bytes under two names", "sglang", repeated(jsonl_file(sglang_decode()), "copy"),
     DECODE, 3, ["copy-runs.jsonl: the same bytes (sha256", "as", "runs.jsonl; its runs would"]),
    ("a Dynamo archive copied", "dynamo", repeated(dynamo("decode"), "copy"), H200, 3,
     ["copy-raw_data.npz: the same bytes (sha256"]),
    # 3. an archive is checked by its zip entry and .npy header before its data is read
    ("npz member declaring 3.2e8 float64 (a 2.5 MB zip)", "dynamo",
     inflating("prefill", "prefill_isl", 320_000_000, 153, None), H200, 3,
     ["prefill_isl declares 2,566,914,176 bytes uncompressed", "not a profiler sweep"]),
    (".npy header claiming 10^12 values", "dynamo",
     npz_file(decode_members(z_itl=npy(descr="<f8", shape=(10**12,)) + bytes(800))), H200, 3,
     ["z_itl declares 1,000,000,000,000 values (shape (1000000000000,))", "not a profiler sweep"]),
    ("zip bomb declaring its size", "dynamo", inflating("decode", "z_itl", 15, 128, None), H200,
     3, ["z_itl declares 2,147,483,776 bytes uncompressed", "not a profiler sweep"]),
    ("zip bomb declaring 15 values", "dynamo", inflating("decode", "z_itl", 15, 128, 15), H200,
     3, ["z_itl's zip entry holds", "compressed bytes for 248 bytes of data", "forged"]),
    ("header and zip entry disagree", "dynamo",
     npz_file(decode_members(z_itl=npy(descr="<f8", shape=(15,)) + bytes(8 * 14))), H200, 3,
     ["z_itl's header says 120 bytes of data but its zip entry 112"]),
    ("a pickle named raw_data.npz", "dynamo", pickle_as_npz, H200, 3, ["not a numpy .npz archive"]),
    ("an object array (a pickle inside)", "dynamo",
     npz_file(decode_members(z_itl=npy(np.array([{"a": 1}], dtype=object)))), H200, 3,
     ["z_itl must hold numbers (int or float), found dtype 'object'"]),
    ("a bzip2 member", "dynamo", npz_file(decode_members(), zipfile.ZIP_BZIP2), H200, 3,
     ["uses zip compression method 12; numpy writes stored or deflated"]),
    ("complex values", "dynamo",
     npz_file(decode_members(z_itl=npy(np.ones(15, dtype=complex)))), H200, 3,
     ["found dtype 'complex128'"]),
    ("an .npy of version 3", "dynamo",
     npz_file(decode_members(z_itl=b"\x93NUMPY\x03\x00" + bytes(8))), H200, 3,
     ["z_itl is a .npy of version (3, 0)"]),
    ("a truncated member", "dynamo", npz_file(decode_members(z_itl=npy(np.full(15, 20.0))[:-3])),
     H200, 3, ["z_itl's header says 120 bytes of data but its zip entry 117"]),
    # 4. a key twice in one object, anywhere the input is JSON
    ("vLLM: model_id twice", "vllm", text_file(with_key_twice(vllm(), "model_id", "other")), H200, 3,
     ["run.json: duplicate key 'model_id' in one JSON object (line 1)", "keep one"]),
    ("vLLM: ttfts twice, s then ms", "vllm",
     text_file(with_key_twice(vllm(), "ttfts", [t * 1e3 for t in vllm()["ttfts"]])), H200, 3,
     ["duplicate key 'ttfts'"]),
    ("vLLM: a key twice in an object nobody reads", "vllm",
     text_file(json.dumps(vllm())[:-1] + ', "metadata": {"a": 1, "b": {"c": 2, "c": 3}}}'), H200, 3,
     ["duplicate key 'c'"]),
    ("SGLang: a key twice on line 2", "sglang",
     jsonl_file([sglang_decode()[0], with_key_twice(sglang_decode()[1], "max_concurrency", 64)]),
     DECODE, 3, ["runs.jsonl:2: duplicate key 'max_concurrency'"]),
    ("SGLang: itls twice under details", "sglang",
     jsonl_file([json.dumps({k: v for k, v in sglang_decode()[0].items() if k != "itls"})[:-1]
                 + ', "details": {"itls": [], "itls": []}}']), DECODE, 3,
     ["runs.jsonl:1: duplicate key 'itls'"]),
    ("a field both at the top level and under details", "sglang",
     jsonl_file([{**sglang_decode()[0], "details": {"ttfts": sglang_decode()[0]["ttfts"]}}]),
     DECODE, 3, ["runs.jsonl:1: ttfts given both at the top level and under details"]),
    ("an npz holding z_itl twice", "dynamo",
     npz_file([*decode_members().items(), ("z_itl.npy", npy(np.full(15, 20.0)))]), H200, 3,
     ["the archive holds 'z_itl' twice"]),
    # 5. a latency in the wrong unit, by physics or by the file's own statistics
    ("SGLang decode ITLs in ms under a seconds key", "sglang",
     jsonl_file([scaled_itls(run_, 1e3) for run_ in sglang_decode()]), DECODE, 4,
     ["runs.jsonl:1: the median of itls 15.39 s at batch 1", "slower than any decode step",
      "the values look like milliseconds, expected seconds"]),
    ("SGLang decode ITLs in ms, its median_itl_ms right", "sglang",
     jsonl_file([{**scaled_itls(r, 1e3), "median_itl_ms": 20.0} for r in sglang_decode()]),
     DECODE, 3, ["runs.jsonl:1: the median of itls is", "but the file's own median_itl_ms is 20 ms",
                 "itls look like milliseconds, expected seconds"]),
    ("vLLM decode ITLs in ms under a seconds key", "vllm",
     vllm_decode_files(lambda d: scaled_itls(d, 1e3)), DECODE, 4,
     ["c1.json: the median of itls", "look like milliseconds, expected seconds"]),
    ("vLLM decode ITLs 1000x too short", "vllm",
     vllm_decode_files(lambda d: scaled_itls(d, 1e-3)), DECODE, 4,
     ["c1.json: the median of itls", "faster than reading the active weights once",
      "speculative decoding"]),
    ("Dynamo z_itl in seconds", "dynamo",
     dynamo("decode", z_itl=np.load(SAMPLES / "dynamo/decode/raw_data.npz")["z_itl"] / 1e3),
     H200, 4, ["raw_data.npz: z_itl 0.0155", "ms at batch 1", "faster than reading the active "
               "weights once", "the values look like seconds, expected milliseconds"]),
    ("Dynamo z_itl in microseconds", "dynamo",
     dynamo("decode", z_itl=np.load(SAMPLES / "dynamo/decode/raw_data.npz")["z_itl"] * 1e3),
     H200, 4, ["raw_data.npz: z_itl 1.551e+04 ms at batch 1", "slower than any decode step",
               "the values look like microseconds, expected milliseconds"]),
    ("vLLM prefill times in ms", "vllm",
     json_file(vllm(**{k: [t * 1e3 for t in vllm()[k]] for k in ("ttfts", "latencies", "start_times")})),
     H200, 4, ["run.json: ttfts (s), imported as", "prefill_latency.csv", "is the column in ms"]),
    ("vLLM TTFTs against its own median_ttft_ms", "vllm",
     json_file(vllm(median_ttft_ms=1.5)), H200, 3,
     ["the median of ttfts is 0.7234 s but the file's own median_ttft_ms is 1.5 ms (482x)",
      "ttfts look like milliseconds, expected seconds"]),
    # 6. impossible values, named by field, request and range
    ("a zero TTFT", "vllm", json_file(vllm(ttfts=at(vllm()["ttfts"], 5, 0))), H200, 3,
     ["run.json: ttfts[5] must be in (0, 3.2e+07] s, found 0", "a clock or unit problem"]),
    ("a negative TTFT", "vllm", json_file(vllm(ttfts=at(vllm()["ttfts"], 3, -0.2))), H200, 3,
     ["ttfts[3] must be in (0, 3.2e+07] s, found -0.2"]),
    ("an input of 0 tokens", "vllm", json_file(vllm(input_lens=at(vllm()["input_lens"], 2, 0))),
     H200, 3, ["run.json: input_lens[2] must be a whole number in [1, 1e+09] tokens, found 0"]),
    ("an input of 10^12 tokens", "vllm",
     json_file(vllm(input_lens=at(vllm()["input_lens"], 4, 10**12))), H200, 3,
     ["input_lens[4] must be a whole number in [1, 1e+09] tokens, found 1e+12"]),
    ("an input of 1000.5 tokens", "vllm",
     json_file(vllm(input_lens=at(vllm()["input_lens"], 1, 1000.5))), H200, 3,
     ["input_lens[1] must be a whole number", "found 1000.5"]),
    ("an input of 10^400 tokens", "vllm",
     text_file(json.dumps(vllm()).replace('"input_lens": [32000', '"input_lens": [1' + "0" * 400, 1)),
     H200, 3, ["input_lens[0] must be finite, found an integer of 401 digits"]),
    ("an output of -1 tokens", "vllm",
     json_file(vllm(output_lens=at(vllm()["output_lens"], 7, -1))), H200, 3,
     ["output_lens[7] must be a whole number in [0, 1e+09] tokens, found -1"]),
    ("a negative ITL", "vllm",
     json_file(vllm(itls=at(vllm()["itls"], 6, [0.01, -0.01]))), H200, 3,
     ["itls[6][1] must be in (0, 3.2e+07] s, found -0.01"]),
    ("a latency shorter than its TTFT", "vllm",
     json_file(vllm(latencies=at(vllm()["latencies"], 9, 0.1))), H200, 3,
     ["latencies[9] is 0.1 s, shorter than ttfts[9]"]),
    ("a NaN TTFT", "vllm", text_file(json.dumps(vllm(ttfts=at(vllm()["ttfts"], 2, float("nan"))))),
     H200, 3, ["ttfts[2] must be finite, found nan"]),
    ("a TTFT as text", "vllm", json_file(vllm(ttfts=at(vllm()["ttfts"], 2, "0.5"))), H200, 3,
     ["ttfts[2] must be a number, found text"]),
    ("a TTFT true", "vllm", json_file(vllm(ttfts=at(vllm()["ttfts"], 2, True))), H200, 3,
     ["ttfts[2] must be a number, found True"]),
    ("ttfts null", "vllm", json_file(vllm(ttfts=None)), H200, 3,
     ["ttfts must be a list of numbers (one entry per request), found None"]),
    ("an ITL list holding an object", "vllm",
     json_file(vllm(itls=at(vllm()["itls"], 1, [0.01, {"t": 1}]))), H200, 3,
     ["itls[1][1] must be a number, found an object"]),
    ("an error entry that is a number", "vllm", json_file(vllm(errors=at(vllm()["errors"], 1, 5))),
     H200, 3, ["errors[1] must be text or null, found 5"]),
    ("max_concurrency 0", "vllm", json_file(vllm(max_concurrency=0)), H200, 3,
     ["max_concurrency must be a whole number in [1, 1e+06], found 0"]),
    ("request_rate -1", "vllm", json_file(vllm(request_rate=-1)), H200, 3,
     ["request_rate must be a number in [1e-06, 1e+06] req/s or inf, found -1"]),
    ("duration 0", "vllm", json_file(vllm(duration=0)), H200, 3,
     ["duration must be a number in (0, 3.2e+07] s, found 0"]),
    ("SGLang concurrency true", "sglang",
     jsonl_file([{**sglang_decode()[0], "concurrency": True}]), DECODE, 3,
     ["runs.jsonl:1: concurrency must be a number, found True"]),
    ("Dynamo input of 0 tokens", "dynamo",
     dynamo("prefill", prefill_isl=np.array([0, 8000, 32000, 128000])), H200, 3,
     ["prefill_isl[0] must be a whole number in [1, 1e+09] tokens, found 0"]),
    ("Dynamo input of 10^12 tokens", "dynamo",
     dynamo("prefill", prefill_isl=np.array([1000, 8000, 32000, 1e12])), H200, 3,
     ["prefill_isl[3] must be a whole number in [1, 1e+09] tokens, found 1e+12"]),
    ("Dynamo TTFT of 0 ms", "dynamo",
     dynamo("prefill", prefill_ttft=np.array([440.0, 0.0, 1840, 7400])), H200, 3,
     ["prefill_ttft[1] must be in (0, 3.2e+10] ms, found 0"]),
    ("Dynamo context of 0 tokens", "dynamo",
     dynamo("decode", y_context_length=np.full(15, 0.0)), H200, 3,
     ["y_context_length[0] must be in [1, 1e+09] tokens, found 0"]),
    ("Dynamo inf ITL", "dynamo", dynamo("decode", z_itl=np.full(15, np.inf)), H200, 3,
     ["z_itl[0] must be finite, found inf"]),
    ("Dynamo batch of 10^9", "dynamo",
     dynamo("decode", x_kv_usage=np.full(15, 1e3), y_context_length=np.full(15, 1.6)), H200, 3,
     ["is a batch of 1e+09 requests, over 1e+06"]),
    # malformed JSON, bounded
    ("JSON nested 100 deep", "vllm", text_file(deep(100)), H200, 3,
     ["run.json: not JSON (nested deeper than 64 levels at line 1"]),
    ("text after the object", "vllm", text_file(json.dumps(vllm()) + " x"), H200, 3,
     ["run.json: not JSON (text after the object, line 1)"]),
    ("a trailing comma in itls", "vllm",
     text_file(json.dumps(vllm()).replace("[0.0155]]", "[0.0155],]", 1)), H200, 3,
     ["run.json: not JSON (expecting value at line 1 column"]),
    ("an empty file", "vllm", text_file(""), H200, 3, ["run.json: no JSON object, expected a vLLM"]),
    # 7. every limit enforced before the memory it protects is spent (limits made small here)
    ("a file over MAX_BENCHMARK_BYTES", "vllm", json_file(vllm()), H200, 3,
     ["vLLM result file is", "over the limit of 1,000 bytes"], {"MAX_BENCHMARK_BYTES": 1000}),
    ("numbers over MAX_BENCHMARK_NUMBERS, across files", "vllm", vllm_decode_files(lambda d: d),
     DECODE, 3, ["c20.json: the files of one import hold more than 1,500 numbers in lists",
                 "import fewer or shorter runs"], {"MAX_BENCHMARK_NUMBERS": 1500}),
    ("values walked over MAX_BENCHMARK_WALKED_VALUES", "sglang",
     jsonl_file(sglang_decode()), DECODE, 3,
     ["runs.jsonl:3: the files of one import hold more than 100 members and list elements"],
     {"MAX_BENCHMARK_WALKED_VALUES": 100}),
    ("an archive over MAX_DYNAMO_BYTES", "dynamo", dynamo("decode"), H200, 3,
     ["Dynamo raw_data.npz file is", "over the limit of 100 bytes"], {"MAX_DYNAMO_BYTES": 100}),
    ("points over MAX_PROFILE_POINTS", "dynamo", dynamo("decode"), H200, 3,
     ["x_kv_usage declares 15 values", "over the 10 rows a profile table may have"],
     {"MAX_PROFILE_POINTS": 10}),
]  # fmt: skip


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every path under `folder` with its mode and, for a file, its bytes."""
    return {
        str(p.relative_to(folder)): (p.lstat().st_mode, p.read_bytes() if p.is_file() else b"")
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A data directory initialised from the shipped data by an import."""
    data = tmp_path_factory.mktemp("existing") / "data"
    result = run(
        "import-profile",
        "vllm",
        SAMPLES / "vllm_h200_prefill.json",
        *H200,
        "--data-dir",
        data,
        "--force",
    )
    assert result.returncode == 0, result.stderr
    return data


@pytest.mark.parametrize("target", ["new", "existing"])
@pytest.mark.parametrize("row", CASES, ids=[row[0] for row in CASES])
def test_hostile_import(tmp_path, monkeypatch, data_dir, row, target):
    _, fmt, build, flags, code, fragments, *limits = row
    (tmp_path / "in").mkdir()
    files = build(tmp_path / "in")
    if target == "existing":
        shutil.copytree(data_dir, tmp_path / "data")
    before = snapshot(tmp_path)
    for name, value in (limits[0] if limits else {}).items():
        monkeypatch.setattr(plausible, name, value)
    result = run("import-profile", fmt, *files, *flags, "--data-dir", tmp_path / "data", "--force")
    assert_clean_error(result, code, *fragments)
    assert snapshot(tmp_path) == before  # nothing created, changed or left behind


def test_the_samples_import_cleanly(tmp_path):
    """The rows above break one thing each in documents that otherwise import."""
    for fmt, build, flags in [
        ("vllm", json_file(vllm()), H200),
        ("vllm", vllm_decode_files(lambda d: d), DECODE),
        ("sglang", jsonl_file(sglang_decode()), DECODE),
        ("dynamo", dynamo("decode"), H200),
        ("dynamo", npz_file(decode_members()), H200),
    ]:
        folder = Path(tempfile.mkdtemp(dir=tmp_path))
        result = run(
            "import-profile", fmt, *build(folder), *flags, "--data-dir", folder / "d", "--force"
        )
        assert result.returncode == 0, (fmt, result.stderr)


# --- the data directory: read-only, someone else's, a new one in a read-only parent ---

_AS_NOBODY = """
import os, sys
# what the command loads, loaded while the interpreter's files are readable (under /root)
import ctypes, encodings.cp437, encodings.utf_8_sig, json, shutil, tempfile, zipfile  # noqa: F401
# typer coerces options through pydantic's TypeAdapter, whose plugin loader imports
# importlib.metadata (no longer loaded earlier: the CLI turns plugins off, schemas build late)
import importlib.metadata, pydantic.type_adapter, typer._adapters  # noqa: F401
import prfaas_plan.cli.import_profile, prfaas_plan.use_cases.import_profile  # noqa: F401
import prfaas_plan.render.imports  # noqa: F401
from prfaas_plan.cli import main
os.setgroups([])
os.setgid(65534)
os.setuid(65534)
sys.argv = ["prfaas-plan", *sys.argv[1:]]
main()
"""
NOBODY = 65534
AS_ROOT = os.geteuid() == 0


def run_as_another_user(*args: object) -> Ran:
    """`prfaas-plan ARGS` as a user who does not own what `theirs` makes: as root, in a process
    that becomes nobody; otherwise in this process, the modes then refusing this user as they
    would another (root passes any mode: os.access says yes to it, so it is not tried as root)."""
    if not AS_ROOT:
        return run(*args)
    closed = [p for p in (ROOT, *ROOT.parents) if not p.stat().st_mode & stat.S_IXOTH]
    if closed:  # the command reads the checkout's data as that user: it must be able to
        pytest.skip(f"{closed[0]} is closed to other users (mode "
                    f"{stat.S_IMODE(closed[0].stat().st_mode):o}, e.g. a mktemp -d checkout): "
                    "nobody could read the checkout's data")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _AS_NOBODY, *map(str, args)],
                          capture_output=True, text=True, env=env, check=False)  # fmt: skip
    return Ran(done.returncode, done.stdout, done.stderr)


def mine(path: Path, mode: int = 0o755) -> Path:
    """A folder of the user `run_as_another_user` runs as."""
    path.mkdir(exist_ok=True)
    if AS_ROOT:
        os.chown(path, NOBODY, NOBODY)
    path.chmod(mode)
    return path


def theirs(path: Path, mode: int) -> Path:
    """A folder of someone else (root), `mode` forbidding that user to write."""
    path.mkdir(exist_ok=True)
    if AS_ROOT:
        os.chown(path, 0, 0)
    path.chmod(mode)
    return path


def my_data_dir(folder: Path) -> Path:
    """A data directory (initialised by an import) of that user."""
    data = folder / "data"
    assert run("import-profile", "vllm", SAMPLES / "vllm_h200_prefill.json", *H200,
               "--data-dir", data, "--force").returncode == 0  # fmt: skip
    for path in [data, *data.rglob("*")]:
        if AS_ROOT:
            os.chown(path, NOBODY, NOBODY)
    return data


@pytest.fixture
def shared():
    """A folder every user may enter (pytest's tmp_path is root's own, mode 0700), with the
    sample results in it; emptied afterwards whatever the modes inside."""
    folder = Path(tempfile.mkdtemp(prefix="prfaas-import-"))
    folder.chmod(0o755)
    for name in ("vllm_h200_prefill.json",):
        shutil.copy(SAMPLES / name, folder / name)
    for kind in ("prefill", "decode"):
        shutil.copy(SAMPLES / "dynamo" / kind / "raw_data.npz", folder / f"{kind}.npz")
    for path in folder.iterdir():
        path.chmod(0o644)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(folder)


DATA_DIRS = [
    ("a new directory in a read-only parent",
     lambda f: theirs(f / "parent", 0o555) / "new", 3,
     ["--data-dir: cannot create", "parent is not writable by this user (mode 0555"]),
    ("a read-only empty directory",
     lambda f: theirs(f / "data", 0o555), 3,
     ["--data-dir: cannot write into", "not writable by this user (mode 0555"]),
    ("someone else's empty read-only directory in a parent one may write",
     lambda f: theirs(mine(f / "parent") / "data", 0o555), 3,
     ["--data-dir: cannot write into", "data: it is not writable by this user (mode 0555"]),
    ("a data directory whose prefill folder is read-only",
     lambda f: (theirs(my_data_dir(f) / "profiles/internal-1t-hybrid/prefill", 0o555), f / "data")[1],
     3, ["--data-dir: cannot write", "prefill/h200-x8: Permission denied"]),
]  # fmt: skip


@pytest.mark.parametrize(
    "make, code, fragments", [d[1:] for d in DATA_DIRS], ids=[d[0] for d in DATA_DIRS]
)
@pytest.mark.slow
def test_a_data_directory_one_may_not_write_is_left_as_it_was(shared, make, code, fragments):
    data = make(shared)
    before = snapshot(shared)
    owners = {p: p.stat().st_uid for p in shared.rglob("*")}
    result = run_as_another_user("import-profile", "vllm", shared / "vllm_h200_prefill.json",
                                 *H200, "--data-dir", data, "--force")  # fmt: skip
    assert_clean_error(result, code, *fragments)
    assert snapshot(shared) == before  # never replaced, its mode and contents as they were
    assert {p: p.stat().st_uid for p in shared.rglob("*")} == owners


@pytest.mark.slow
def test_a_failed_second_table_takes_the_first_back(shared):
    """Dynamo prefill and decode in one import: the decode folder cannot be made, so the prefill
    table already moved in is moved out again (all or nothing)."""
    data = my_data_dir(shared)
    theirs(data / "profiles/internal-1t-hybrid/decode", 0o555)
    before = snapshot(shared)
    result = run_as_another_user("import-profile", "dynamo", shared / "prefill.npz",
                                 shared / "decode.npz", *H200, "--data-dir", data, "--force")  # fmt: skip
    assert_clean_error(result, 3, "--data-dir: cannot write", "decode/h200-x8: Permission denied")
    assert snapshot(shared) == before


@pytest.mark.slow
def test_an_empty_directory_keeps_its_owner_and_mode(shared):
    data = mine(shared / "data", 0o750)
    result = run_as_another_user("import-profile", "vllm", shared / "vllm_h200_prefill.json",
                                 *H200, "--data-dir", data, "--force", "-f", "json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["initialised_from_shipped_data"] is True
    info = data.stat()
    assert (info.st_mode & 0o7777, info.st_uid) == (0o750, NOBODY if AS_ROOT else os.getuid())
    assert sorted(p.name for p in data.iterdir()) == ["golden", "gpus", "profiles"]
    assert run("check", data, "-f", "json").returncode == 0


def test_a_new_directory_gets_the_default_mode_and_its_parents(tmp_path):
    """Not mkdtemp's 0700; missing parents are made (and only on success)."""
    umask = os.umask(0o022)
    try:
        data = tmp_path / "a" / "b" / "data"
        result = run("import-profile", "vllm", SAMPLES / "vllm_h200_prefill.json", *H200,
                     "--data-dir", data, "--force")  # fmt: skip
    finally:
        os.umask(umask)
    assert result.returncode == 0, result.stderr
    assert data.stat().st_mode & 0o777 == 0o755
    bad = tmp_path / "x" / "y" / "bad"
    result = run("import-profile", "vllm", SAMPLES / "sglang_h200_prefill.jsonl", *H200,
                 "--data-dir", bad, "--force")  # fmt: skip
    assert result.returncode == 3 and not (tmp_path / "x").exists()


def test_rename_no_replace_never_replaces_an_empty_directory(tmp_path):
    from prfaas_plan.inputs.files import rename_no_replace

    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "f").write_text("x")
    (tmp_path / "there").mkdir()  # rename(2) would replace it
    with pytest.raises(FileExistsError):
        rename_no_replace(tmp_path / "new", tmp_path / "there")
    assert (tmp_path / "new" / "f").read_text() == "x" and not any((tmp_path / "there").iterdir())
    rename_no_replace(tmp_path / "new", tmp_path / "moved")
    assert (tmp_path / "moved" / "f").read_text() == "x"


# --- the bounds in a real process: only it shows memory ---

_BOUNDED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))
from prfaas_plan.cli import main
sys.argv = ["prfaas-plan", *sys.argv[1:]]
main()
"""


def run_bounded(*args: object) -> Ran:
    """`prfaas-plan ARGS` in a process limited to 1 GiB of address space."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _BOUNDED, *map(str, args)],
                          capture_output=True, text=True, env=env, check=False)  # fmt: skip
    return Ran(done.returncode, done.stdout, done.stderr)


INFLATING = [
    row for row in CASES if row[0].startswith(("npz member declaring", ".npy header", "zip bomb"))
]


@pytest.mark.parametrize("row", INFLATING, ids=[row[0] for row in INFLATING])
@pytest.mark.slow
def test_archives_that_inflated_to_gigabytes_are_refused_in_1_gib(tmp_path, row):
    """They took 2.5 to 3 GB, or asked for 8 TB (exit 9), before being refused."""
    _, fmt, build, flags, code, fragments = row
    files = build(tmp_path)
    result = run_bounded("import-profile", fmt, *files, *flags, "--data-dir", tmp_path / "d")
    assert_clean_error(result, code, *fragments)


@pytest.mark.slow
def test_a_large_result_imports_in_1_gib(tmp_path):
    """1.6·10^7 ITLs in 112 MB of JSON (json.loads held them as Python floats: ~1 GB, exit 9
    under this limit): read into arrays, 350 MB."""
    n, k = 16_000, 1_000
    settings = {"date": "20261202-120000", "backend": "vllm", "model_id": "internal-1t-hybrid",
                "tokenizer_id": "t", "num_prompts": n, "request_rate": "inf", "burstiness": 1.0,
                "max_concurrency": 32, "duration": n * (0.08 + k * 0.031) / 32}  # fmt: skip
    one = "[" + ", ".join(["0.031"] * k) + "]"
    lists = {"input_lens": "1024", "output_lens": str(k + 1), "ttfts": "0.08",
             "latencies": repr(0.08 + k * 0.031), "errors": '""'}  # fmt: skip
    path = tmp_path / "run.json"
    with path.open("w") as out:
        out.write(json.dumps(settings)[:-1])
        for name, value in lists.items():
            out.write(f', "{name}": [' + ", ".join([value] * n) + "]")
        out.write(', "itls": [' + ", ".join([one] * n) + "]}")
    result = run_bounded("import-profile", "vllm", path, *DECODE, "--data-dir", tmp_path / "d",
                         "--force", "-f", "json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    (table,) = json.loads(result.stdout)["tables"]
    assert table["rows"] == [[32, 0.031]] and table["samples_per_row"] == [n * k]
