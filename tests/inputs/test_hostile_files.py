"""Hostile input files (issue 8): scenario, catalog, trace and observed-length files a user may
hand the planner by mistake or on purpose. One row per case: the file, the exit code, the
fragments the one-line error must carry (the file field, the bound or expected type, the value
found). In process (typer's CliRunner); only the memory bound runs in a real process, under an
address-space limit."""

import copy
import functools
import json
import os
import pickle
import random
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import yaml

from prfaas_plan import plausible, units
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs import strict_yaml
from prfaas_plan.inputs.reading import read_yaml
from prfaas_plan.inputs.scenario import build_workload
from prfaas_plan.inputs.scenario_schema import LogNormalLengths
from prfaas_plan.inputs.strict_yaml import parse_yaml_text
from prfaas_plan.inputs.traces import parse_mooncake_trace
from tests.cli.test_cli import CASE, assert_clean_error, data_copy, run

CASE_TEXT = CASE.read_text()
H200_PREFILL = "profiles/internal-1t-hybrid/prefill/h200-x8/prefill_latency.csv"


def replaced(old: str, new: str):
    """The case study with one line's text replaced (raw text: YAML tricks survive)."""

    def make(tmp_path: Path) -> str:
        assert old in CASE_TEXT, old
        return CASE_TEXT.replace(old, new, 1)

    return make


def appended(extra: str):
    return lambda tmp_path: CASE_TEXT + extra


def observed(name: str, content: bytes | str | None, file: str | None = None):
    """A scenario whose input lengths are read from `name` (written with `content`)."""

    def make(tmp_path: Path) -> str:
        if content is not None:
            path = tmp_path / name
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        lognormal = CASE_TEXT[
            CASE_TEXT.index("    distribution: truncated") : CASE_TEXT.index("  output_tokens")
        ]
        return CASE_TEXT.replace(
            lognormal, f"    distribution: observed\n    file: {file or name}\n"
        )

    return make


def histogram(edges: str, weights: str):
    def make(tmp_path: Path) -> str:
        lognormal = CASE_TEXT[
            CASE_TEXT.index("    distribution: truncated") : CASE_TEXT.index("  output_tokens")
        ]
        return CASE_TEXT.replace(
            lognormal,
            f"    distribution: histogram\n    bin_edges_tokens: {edges}\n    weights: {weights}\n",
        )

    return make


def hit_rates(spec: str):
    """The case study with workload.prefix_cache_hit_rate: `spec` (YAML text)."""
    return replaced(
        "  output_tokens: 1024", f"  output_tokens: 1024\n  prefix_cache_hit_rate: {spec}"
    )


def observed_with_hit_rates(spec: str, name: str, content: str):
    """A scenario reading the trace `name` (written with `content`), with hit-rates `spec`."""

    def make(tmp_path: Path) -> str:
        text = observed(name, content)(tmp_path)
        return text.replace(
            "  output_tokens: 1024", f"  output_tokens: 1024\n  prefix_cache_hit_rate: {spec}"
        )

    return make


BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{b}: &{b} [{','.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)
LENGTHS_JSONL = "".join(
    json.dumps({"timestamp": 10 * i, "input_length": 1000 + 500 * i, "output_length": 64}) + "\n"
    for i in range(50)
)

SCENARIOS = [
    # 1. strict types: a number field takes a YAML number, never a boolean or a string
    ("instances: true", replaced("instances: 4", "instances: true"), 3,
     ["prfaas_cluster.instances", "valid integer", "got True"]),
    ("instances: 4.0", replaced("instances: 4", "instances: 4.0"), 3,
     ["prfaas_cluster.instances", "valid integer", "got 4.0"]),
    ("decode SLO true", replaced("decode_tokens_per_s: 40", "decode_tokens_per_s: true"), 3,
     ["slo.decode_tokens_per_s", "valid number", "got True"]),
    ("bandwidth string", replaced("bandwidth_gbps: 100", 'bandwidth_gbps: "100"'), 3,
     ["link.bandwidth_gbps", "valid number", "got '100'"]),
    ("huge string value", replaced("bandwidth_gbps: 100", "bandwidth_gbps: " + "9" * 5000 + "x"),
     3, ["link.bandwidth_gbps", "valid number", "..."]),
    ("a 5,000-digit integer", replaced("instances: 4", "instances: " + "9" * 5000), 3,
     ["scenario.yaml: malformed YAML", "an integer of more than 4,300 digits"]),
    ("gpu name of 300 chars", replaced("gpu: h200", "gpu: " + "x" * 300), 3,
     ["prfaas_cluster.gpu", "string should match pattern", "..."]),
    ("gpu name ../../models", replaced("gpu: h200", "gpu: ../../models"), 3,
     ["prfaas_cluster.gpu", "got '../../models'"]),
    ("kv_dtype of 3,000 chars", replaced("kv_dtype: bf16", "kv_dtype: " + "x" * 3000), 3,
     ["kv_dtype", "string should match pattern"]),
    # 2. the YAML loader: duplicate keys, aliases (billion laughs), depth, size, devices
    ("duplicate key", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 100\n  bandwidth_gbps: 1"),
     3, ["line 18", "duplicate key 'bandwidth_gbps'"]),
    ("billion laughs", appended("laughs:\n" + textwrap.indent(BILLION_LAUGHS, "  ")), 3,
     ["aliases (*name) are not allowed"]),
    ("alias of a number", replaced("instances: 4", "instances: &n 4\n  again: *n"), 3,
     ["line 12", "aliases"]),
    ("nested 10,000 deep", appended("deep: " + "[" * 10_000 + "]" * 10_000 + "\n"), 3,
     [f"nested deeper than {plausible.MAX_YAML_DEPTH} levels"]),
    ("5 MB scenario", appended("# " + "x" * (5 * 2**20) + "\n"), 3,
     ["scenario file is", f"over the limit of {plausible.MAX_SCENARIO_BYTES:,} bytes"]),
    # YAML 1.1 number forms (octal 010 = 8, base-60 1:40 = 100, 0b100, 1_000) mean something
    # else in YAML 1.2, which the README promises: refused, naming the line and the value
    ("instances: 010 (YAML 1.1 octal)", replaced("instances: 4", "instances: 010"), 3,
     ["scenario.yaml: line 11:", "integer '010'", "write 10, not 010"]),
    ("bandwidth 0100 (octal)", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 0100"), 3,
     ["line 17:", "write 100, not 0100"]),
    ("bandwidth 1:40 (base 60)", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 1:40"), 3,
     ["line 17:", "integer '1:40'", "base 60", "write a decimal"]),
    ("bandwidth 1_000", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 1_000"), 3,
     ["line 17:", "write 1000, not 1_000"]),
    ("instances 0b100", replaced("instances: 4", "instances: 0b100"), 3,
     ["line 11:", "integer '0b100'", "0b"]),
    ("instances -010", replaced("instances: 4", "instances: -010"), 3, ["write -10, not -010"]),
    ("bandwidth 1_00.5 (float)", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 1_00.5"), 3,
     ["line 17:", "number '1_00.5'", "underscores"]),
    ("bandwidth 1:40.0 (base-60 float)", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 1:40.0"),
     3, ["line 17:", "number '1:40.0'", "base 60"]),
    # 3. plausibility bounds, each naming the field, the bound and the value found
    ("min_tokens 1e-300", replaced("min_tokens: 128", "min_tokens: 1.0e-300"), 3,
     ["workload.input_tokens.truncated_lognormal.min_tokens", "greater than or equal to 1", "1e-300"]),
    ("max_tokens 1e300", replaced("max_tokens: 131072", "max_tokens: 1.0e+300"), 3,
     ["max_tokens", "less than or equal to 1000000000", "1e+300"]),
    ("mu_log 1e300", replaced("mu_log: 9.90", "mu_log: 1.0e+300"), 3,
     ["mu_log", "less than or equal to 50"]),
    ("sigma_log 5e-324 (subnormal)", replaced("sigma_log: 1.00", "sigma_log: 5.0e-324"), 3,
     ["workload.input_tokens.truncated_lognormal.sigma_log: must be in [0.001, 10] (a "
      "narrower log-normal is a fixed length: give a histogram of one narrow bin), got 5e-324"]),
    ("sigma_log 1e-308", replaced("sigma_log: 1.00", "sigma_log: 1.0e-308"), 3,
     ["sigma_log: must be in [0.001, 10] (a narrower", "got 1e-308"]),
    ("sigma_log 0.0009", replaced("sigma_log: 1.00", "sigma_log: 0.0009"), 3,
     ["sigma_log: must be in [0.001, 10] (a narrower", "got 0.0009"]),
    ("sigma_log 0", replaced("sigma_log: 1.00", "sigma_log: 0"), 3,
     ["sigma_log: must be in [0.001, 10] (a narrower", "got 0"]),
    ("sigma_log 10.5", replaced("sigma_log: 1.00", "sigma_log: 10.5"), 3,
     ["sigma_log: must be in [0.001, 10], got 10.5"]),
    ("sigma_log 0.001 (the bound)", replaced("sigma_log: 1.00", "sigma_log: 0.001"), 0, []),
    ("instances 10^9", replaced("instances: 4", "instances: 1000000000"), 3,
     ["prfaas_cluster.instances", "less than or equal to 100000", "1000000000"]),
    ("10^8 GPUs", replaced("gpus_per_instance: 8\n  instances: 4",
                           "gpus_per_instance: 1000\n  instances: 100000"), 3,
     ["prfaas_cluster", "<= 1,000,000 GPUs", "1000 x 100000"]),
    ("gpus_per_instance 10^6", replaced("gpus_per_instance: 8", "gpus_per_instance: 1000000"), 3,
     ["prfaas_cluster.gpus_per_instance", "less than or equal to 1024"]),
    ("bandwidth 1e-300", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 1.0e-300"), 3,
     ["link", "bandwidth_gbps must be >= 1e-06 (1 kbit/s), got 1e-300"]),
    ("bandwidth 1e300", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 1.0e+300"), 3,
     ["link.bandwidth_gbps", "less than or equal to 1000000", "1e+300"]),
    ("output_tokens 1e300", replaced("output_tokens: 1024", "output_tokens: 1.0e+300"), 3,
     ["workload.output_tokens", "less than or equal to 1000000000"]),
    ("output_tokens 0.001", replaced("output_tokens: 1024", "output_tokens: 0.001"), 3,
     ["workload.output_tokens", "greater than or equal to 1", "0.001"]),
    ("decode SLO 1e300", replaced("decode_tokens_per_s: 40", "decode_tokens_per_s: 1.0e+300"), 3,
     ["slo.decode_tokens_per_s", "less than or equal to 1000000"]),
    ("decode SLO 1e-300", replaced("decode_tokens_per_s: 40", "decode_tokens_per_s: 1.0e-300"),
     3, ["slo.decode_tokens_per_s", "greater than or equal to 0.001"]),
    ("weights overflow", histogram("[100, 1000, 10000]", "[1.0e+308, 1.0e+308]"), 3,
     ["histogram", "weights must each be <= 1e+100 (they are relative), got 1e+308"]),
    ("bin edge 1e-300", histogram("[1.0e-300, 1000, 10000]", "[1, 1]"), 3,
     ["histogram.bin_edges_tokens.0", "greater than or equal to 1"]),
    # prefix-cache hit-rates per band of the input length
    ("bands unsorted", hit_rates("{bands: [{max_input_tokens: 32000, hit_rate: 0.1}, "
                                 "{max_input_tokens: 8000, hit_rate: 0.4}, {hit_rate: 0.6}]}"), 3,
     ["workload.prefix_cache_hit_rate.banded", "max_input_tokens must be strictly increasing",
      "got 8000 after 32000"]),
    ("bands with a repeated edge", hit_rates("{bands: [{max_input_tokens: 8000, hit_rate: 0.1}, "
                                             "{max_input_tokens: 8000, hit_rate: 0.4}, "
                                             "{hit_rate: 0.6}]}"), 3,
     ["strictly increasing", "got 8000 after 8000"]),
    ("band hit-rate 1", hit_rates("{bands: [{max_input_tokens: 8000, hit_rate: 1}, "
                                  "{hit_rate: 0.6}]}"), 3,
     ["workload.prefix_cache_hit_rate.banded.bands.0.hit_rate", "less than or equal to 0.99",
      "got 1"]),
    ("band hit-rate -0.1", hit_rates("{bands: [{max_input_tokens: 8000, hit_rate: 0.1}, "
                                     "{hit_rate: -0.1}]}"), 3,
     ["banded.bands.1.hit_rate", "greater than or equal to 0", "got -0.1"]),
    ("band hit-rate a string", hit_rates("{bands: [{hit_rate: '0.5'}]}"), 3,
     ["banded.bands.0.hit_rate", "valid number", "got '0.5'"]),
    ("no open-ended band", hit_rates("{bands: [{max_input_tokens: 8000, hit_rate: 0.1}, "
                                     "{max_input_tokens: 32000, hit_rate: 0.4}]}"), 3,
     ["prefix_cache_hit_rate.banded", "the last band must be open-ended",
      "got max_input_tokens 32000"]),
    ("a middle band without a bound", hit_rates("{bands: [{hit_rate: 0.1}, {hit_rate: 0.4}]}"),
     3, ["prefix_cache_hit_rate.banded", "band 0 needs max_input_tokens"]),
    ("no bands", hit_rates("{bands: []}"), 3,
     ["prefix_cache_hit_rate.banded.bands", "at least 1 item"]),
    ("65 bands", hit_rates("{bands: [" + "".join(f"{{max_input_tokens: {1000 * (i + 1)}, "
                                                 "hit_rate: 0.1}, " for i in range(64))
                           + "{hit_rate: 0.2}]}"), 3,
     ["prefix_cache_hit_rate.banded.bands", f"at most {plausible.MAX_PREFIX_CACHE_BANDS} items"]),
    ("band edge 1e300", hit_rates("{bands: [{max_input_tokens: 1.0e+300, hit_rate: 0.1}, "
                                  "{hit_rate: 0.2}]}"), 3,
     ["banded.bands.0.max_input_tokens", "less than or equal to 1000000000"]),
    ("a band's unknown key", hit_rates("{bands: [{max_tokens: 8000, hit_rate: 0.1}, "
                                       "{hit_rate: 0.2}]}"), 3,
     ["banded.bands.0.max_tokens", "extra inputs are not permitted"]),
    ("hit-rate mapping of no form", hit_rates("{band: [{hit_rate: 0.1}]}"), 3,
     ["workload.prefix_cache_hit_rate: expected a hit-rate in [0, 0.99], from_trace",
      "{bands: [{max_input_tokens, hit_rate}"]),
    ("hit-rate a list", hit_rates("[0.1, 0.4]"), 3,
     ["workload.prefix_cache_hit_rate: expected a hit-rate", "got [0.1, 0.4]"]),
    ("trace bands unsorted", hit_rates("{from_trace_band_max_input_tokens: [32000, 8000]}"), 3,
     ["prefix_cache_hit_rate.banded_from_trace",
      "from_trace_band_max_input_tokens must be strictly increasing", "got 8000 after 32000"]),
    ("trace bands on a log-normal", hit_rates("{from_trace_band_max_input_tokens: [8000]}"), 3,
     ["prefix_cache_hit_rate: from_trace_band_max_input_tokens needs workload.input_tokens to "
      "be an observed trace with hash_ids", "found truncated_lognormal"]),
    ("trace band fully cached", observed_with_hit_rates(
        "{from_trace_band_max_input_tokens: [8000]}", "t.jsonl",
        "".join(json.dumps({"timestamp": i, "input_length": n, "output_length": 8,
                            "hash_ids": [1, 2]}) + "\n" for i, n in enumerate([20000, 1000]))), 3,
     ["t.jsonl gives 1.0000 in band 0, expected <= 0.99"]),
    ("bands accepted", hit_rates("{bands: [{max_input_tokens: 8000, hit_rate: 0.1}, "
                                 "{hit_rate: 0.6}]}"), 0, []),
    # 4. observed lengths: devices, size, long lines, bounds, a byte-order mark
    ("observed /dev/zero", observed("zero", None, "/dev/zero"), 3,
     ["/dev/zero", "must be a regular file"]),
    ("observed length 1e300", observed("l.csv", "input_tokens\n1000\n1e300\n"), 3,
     ["l.csv", "input lengths must be in [1, 1e+09] tokens, found 1e+300"]),
    ("observed length 0.5", observed("l.csv", "input_tokens\n1000\n0.5\n"), 3,
     ["found 0.5"]),
    ("observed JSONL 1e300", observed("l.jsonl", '{"timestamp": 0, "input_length": 1e300, '
                                      '"output_length": 1}\n'), 3,
     ["l.jsonl:1", "input_length must be <= 1e+09, found 1e+300"]),
    ("observed CSV without newlines", observed("l.csv", "input_tokens," * (2**21)), 3,
     ["l.csv:1: line longer than 16,777,216 characters"]),
    ("observed FIFO", observed("fifo", None, "fifo"), 3, ["fifo", "must be a regular file"]),
    ("observed JSONL 5,000-digit int", observed("l.jsonl", '{"timestamp": ' + "9" * 5000 + "}\n"),
     3, ["l.jsonl:1: not a JSON object"]),
    ("observed JSONL nested JSON", observed("l.jsonl", "[" * 100_000 + "\n"), 3,
     ["l.jsonl:1: not a JSON object"]),
    ("observed JSONL duplicate key", observed("l.jsonl", '{"timestamp": 0, "input_length": '
                                              '20000, "input_length": 1, "output_length": 1}\n'),
     3, ["l.jsonl:1: duplicate key 'input_length' in one object"]),
    # accepted: ints for floats, YAML 1.2 exponents, a spreadsheet's BOM
    ("bandwidth 0x64 (hex, as in YAML 1.2)", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 0x64"),
     0, []),
    ("output_tokens 1", replaced("output_tokens: 1024", "output_tokens: 1"), 0, []),
    ("bandwidth 1.0e2 (YAML 1.2 float)", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 1.0e2"),
     0, []),
    ("bandwidth 100.0", replaced("bandwidth_gbps: 100", "bandwidth_gbps: 100.0"), 0, []),
    ("observed CSV with a BOM", observed("l.csv", "\ufeffinput_tokens\n1000\n20000\n90000\n"),
     0, []),
    ("observed JSONL with a BOM", observed("l.jsonl", "\ufeff" + LENGTHS_JSONL), 0, []),
]  # fmt: skip


@pytest.mark.parametrize(
    "make, code, fragments", [row[1:] for row in SCENARIOS], ids=[row[0] for row in SCENARIOS]
)
def test_hostile_scenario_files(tmp_path, make, code, fragments):
    os.mkfifo(tmp_path / "fifo")  # no writer: opening it blocking would hang
    path = tmp_path / "scenario.yaml"
    path.write_text(make(tmp_path))
    result = run("optimize", path)
    if code == 0:
        assert result.returncode == 0, result.stderr
        return
    assert_clean_error(result, code, *fragments)
    assert len(result.stderr) < 600  # a short quote of the value, never the value


def write_trace(text: str | bytes):
    def make(tmp_path: Path) -> Path:
        path = tmp_path / "trace.jsonl"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    return make


def sparse(size: int):
    def make(tmp_path: Path) -> Path:
        path = tmp_path / "trace.jsonl"
        with open(path, "wb") as handle:
            handle.truncate(size)  # no disk, no memory: a hole of zero bytes
        return path

    return make


def line(**record: object) -> str:
    return json.dumps({"timestamp": 0, "input_length": 1000, "output_length": 8, **record}) + "\n"


TRACES = [
    ("/dev/zero", lambda tmp_path: Path("/dev/zero"), 3, ["/dev/zero", "must be a regular file"]),
    ("a directory", lambda tmp_path: tmp_path, 3, ["is a directory"]),
    ("2 GiB", sparse(2 * 2**30), 3, [f"over the limit of {plausible.MAX_TRACE_BYTES:,} bytes"]),
    ("1 GiB without newlines", sparse(plausible.MAX_TRACE_BYTES), 3,
     ["trace.jsonl:1: line longer than"]),
    ("hash_id 2^64", write_trace(line(hash_ids=[1, 2**64])), 3,
     ["trace.jsonl:1", "hash_ids must fit in 64 bits", "18446744073709551616"]),
    ("all outputs 0", write_trace(line(output_length=0) + line(timestamp=5, output_length=0)), 3,
     ["every output_length is 0"]),
    ("input 1e300", write_trace(line(input_length=1e300)), 3,
     ["trace.jsonl:1", "input_length must be <= 1e+09"]),
    ("output 1e300", write_trace(line(output_length=1e300)), 3,
     ["trace.jsonl:1", "output_length must be <= 1e+09"]),
    ("timestamps span 1e300 ms", write_trace(line() + line(timestamp=1e300)), 3,
     ["timestamps (ms) span 1e+297 s", "more than 3.2e+07 s"]),
    ("a string timestamp", write_trace(line(timestamp="0")), 3,
     ["trace.jsonl:1: expected a numeric timestamp, found '0'"]),
    ("not UTF-8", write_trace(b"\xff\xfe{}\n"), 3, ["not UTF-8 text"]),
    ("duplicate key", write_trace('{"timestamp": 0, "input_length": 20000, "input_length": 1, '
                                  '"output_length": 8}\n'), 3,
     ["trace.jsonl:1: duplicate key 'input_length' in one object"]),
    ("with a BOM", write_trace("\ufeff" + LENGTHS_JSONL), 0, []),
]  # fmt: skip


# every refused trace through both commands that read traces; an accepted one through simulate
TRACE_CASES = [
    (command, *row)
    for row in TRACES
    for command in (["simulate"] if row[2] == 0 else ["simulate", "compare-policies"])
]


@pytest.mark.parametrize(
    "command, make, code, fragments",
    [case[:1] + case[2:] for case in TRACE_CASES],
    ids=[f"{case[0]}-{case[1]}" for case in TRACE_CASES],
)
def test_hostile_traces(tmp_path, command, make, code, fragments):
    result = run(command, "--trace", make(tmp_path))
    if code == 0:
        assert result.returncode == 0, result.stderr
        return
    assert_clean_error(result, code, *fragments)


def edit(relative: str, old: str, new: str):
    def make(data: Path) -> None:
        path = data / relative
        text = path.read_text()
        assert old in text, (relative, old)
        path.write_text(text.replace(old, new, 1))

    return make


def scale_latency(factor: float):
    def make(data: Path) -> None:
        path = data / H200_PREFILL
        header, *rows = path.read_text().split()
        scaled = [f"{r.split(',')[0]},{float(r.split(',')[1]) * factor:g}" for r in rows]
        path.write_text("\n".join([header, *scaled]) + "\n")

    return make


H20_DECODE = "profiles/internal-1t-hybrid/decode/h20-x8/decode_step.csv"


def scale_decode(factor: float):
    def make(data: Path) -> None:
        path = data / H20_DECODE
        header, *rows = path.read_text().split()
        scaled = [f"{r.rsplit(',', 1)[0]},{float(r.rsplit(',', 1)[1]) * factor:g}" for r in rows]
        path.write_text("\n".join([header, *scaled]) + "\n")

    return make


def to_device(relative: str):
    def make(data: Path) -> None:
        path = data / relative
        path.unlink()
        path.symlink_to("/dev/zero")

    return make


CATALOGS = [
    ("latency in ms under _s", scale_latency(1000), 4,
     [H200_PREFILL, "is the column in ms instead of s?", "floor 0.0005"]),
    ("a spreadsheet's BOM", edit(H200_PREFILL, "input_tokens", "\ufeffinput_tokens"), 0, []),
    ("latency 1000x too fast", scale_latency(1e-3), 4,
     [H200_PREFILL, "0.00044 s at 1000 tokens", "beats the speed of light", "FP8"]),
    ("a row of 1e-300 s", edit(H200_PREFILL, "1000,0.44", "1000,1e-300"), 4,
     [H200_PREFILL, "1e-300 s at 1000 tokens (1 row(s) in all) beats the speed of light"]),
    ("latency 1e300 s", scale_latency(1e300), 4,
     [H200_PREFILL, "column prefill_latency_s: must be <= 3.2e+07"]),
    ("decode step in ms under _s", scale_decode(1000), 4,
     [H20_DECODE, "data row 5: 4.859 s at batch 12", "slower than any decode step",
      "the column looks like milliseconds, expected seconds"]),
    ("decode step 1000x too fast", scale_decode(1e-3), 4,
     [H20_DECODE, "data row 1: 6.914e-07 s at batch 1", "faster than reading the active weights",
      "is the column in seconds"]),
    ("GPU TFLOP/s as a string", edit("gpus/h200.yaml", "dense_bf16_tflops: 989",
                                     'dense_bf16_tflops: "989"'), 3,
     ["h200.yaml: dense_bf16_tflops: input should be a valid number, got '989'"]),
    ("GPU file is /dev/zero", to_device("gpus/h200.yaml"), 3, ["must be a regular file"]),
    ("models.yaml duplicate key", edit("../models.yaml", "max_context_tokens:",
                                       "max_context_tokens: 1\n    max_context_tokens:"), 3,
     ["models.yaml: line", "duplicate key 'max_context_tokens'"]),
    ("models.yaml context 1e12", edit("../models.yaml", "max_context_tokens: ",
                                      "max_context_tokens: 1000000000000 #"), 3,
     ["max_context_tokens", "less than or equal to 1000000000"]),
    ("meta gpus_per_instance true", edit(H200_PREFILL.replace("prefill_latency.csv", "meta.yaml"),
                                         "gpus_per_instance: 8", "gpus_per_instance: true"), 4,
     ["meta.yaml: gpus_per_instance: input should be a valid integer, got True"]),
]  # fmt: skip


@functools.cache
def shipped_plan() -> dict:
    return json.loads(run("optimize", "-f", "json").stdout)["plan"]


@pytest.mark.parametrize(
    "make, code, fragments", [row[1:] for row in CATALOGS], ids=[row[0] for row in CATALOGS]
)
def test_hostile_catalog_files(tmp_path, make, code, fragments):
    data = data_copy(tmp_path)
    make(data)
    result = run("optimize", "--data-dir", data, "-f", "json")
    if code == 0:
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["plan"] == shipped_plan()
        return
    assert_clean_error(result, code, *fragments)


@pytest.mark.parametrize("folder, argument", [("", "catalog/data"), ("catalog/sub", "../data")])
def test_check_on_a_relative_data_dir_with_parent_parts(tmp_path, folder, argument):
    """`check nested/data` and `check ../data` on the unmodified data (the paths were doubled)."""
    data_copy(tmp_path)
    cwd = tmp_path / folder
    cwd.mkdir(parents=True, exist_ok=True)
    result = run("check", argument, "-f", "json", cwd=cwd)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["ok"]


STRICT_YAML = [  # (case, text, message fragment): every refusal, with either parser
    ("duplicate key", "a: 1\nb: 2\na: 3\n", "f.yaml: line 3: duplicate key 'a' in one mapping"),
    ("duplicate key, nested", "a:\n  x: 1\n  x: 2\n", "line 3: duplicate key 'x'"),
    ("alias", "a: &n 4\nb: *n\n", "line 2: aliases (*name) are not allowed"),
    ("billion laughs", BILLION_LAUGHS, "aliases (*name) are not allowed"),
    (
        "65 deep",
        "a: " + "[" * 65 + "]" * 65 + "\n",
        f"nested deeper than {plausible.MAX_YAML_DEPTH}",
    ),
    ("10,000 deep", "[" * 10_000 + "]" * 10_000, f"nested deeper than {plausible.MAX_YAML_DEPTH}"),
    ("octal 010", "a: 010\n", "line 1: integer '010' has a YAML 1.1 form"),
    ("base 60", "a: 1:40\n", "line 1: integer '1:40' has a YAML 1.1 form"),
    ("0b100", "a: 0b100\n", "integer '0b100' has a YAML 1.1 form"),
    ("1_000", "a: 1_000\n", "write 1000, not 1_000"),
    ("1_000.5", "a: 1_000.5\n", "number '1_000.5' has a YAML 1.1 form"),
    ("NUL", "a: \x00\n", "f.yaml: malformed YAML: a control character at character 3"),
    ("BEL", "a: b\x07\n", "malformed YAML: a control character at character 4"),
    ("5,000 digits", "a: " + "9" * 5000 + "\n", "an integer of more than 4,300 digits"),
    ("unclosed flow", "a: [1, 2\n", "f.yaml: line 2: malformed YAML:"),
]


@pytest.mark.parametrize("loader", strict_yaml._LOADERS, ids=lambda loader: loader.__name__)
@pytest.mark.parametrize(("case", "text", "fragment"), STRICT_YAML, ids=[r[0] for r in STRICT_YAML])
def test_strict_yaml_with_either_parser(loader, case, text, fragment):
    """libyaml's C parser (the default when PyYAML has it) refuses what the pure one does."""
    with pytest.raises(ConfigError) as refused:
        parse_yaml_text(text, "f.yaml", loader=loader)
    assert fragment in str(refused.value)


@pytest.mark.parametrize("loader", strict_yaml._LOADERS, ids=lambda loader: loader.__name__)
def test_yaml_1_2_numbers_with_either_parser(loader):
    text = "a: 1.0e12\nb: '1.0e12'\nc: 0x1F\nd: 10\ne: -.inf\nf: [1, {g: 2.5}]\nh: 1e3\n"
    assert parse_yaml_text(text, "f.yaml", loader=loader) == {
        "a": 1e12, "b": "1.0e12", "c": 31, "d": 10, "e": float("-inf"), "f": [1, {"g": 2.5}],
        "h": 1000.0,
    }  # fmt: skip


def test_every_bundled_yaml_file_reads_the_same_with_either_parser():
    root = Path(__file__).resolve().parents[2]
    files = [*root.glob("data/**/*.yaml"), root / "models.yaml", *root.glob("examples/**/*.yaml")]
    assert len(files) > 10
    for path in files:
        text = path.read_text()
        results = []
        for loader in strict_yaml._LOADERS:
            try:
                results.append(parse_yaml_text(text, str(path), loader=loader))
            except ConfigError as exc:
                results.append(str(exc))
        assert all(result == results[0] for result in results), path


def test_the_pattern_left_to_its_first_use_is_pyyaml_s_and_compiles_when_used():
    """PyYAML compiles strict_yaml._NON_PRINTABLE at import (were it to change, its import
    would compile the new one again, and this fails to say so). A _CompiledWhenUsed compiles
    at its first use, finds what the pattern finds, and copies and pickles as an object."""
    assert yaml.reader.Reader.NON_PRINTABLE.pattern == strict_yaml._NON_PRINTABLE
    later = strict_yaml._CompiledWhenUsed(strict_yaml._NON_PRINTABLE)
    assert vars(later) == {"pattern": strict_yaml._NON_PRINTABLE}  # nothing compiled yet
    for copied in (copy.copy(later), pickle.loads(pickle.dumps(later))):
        assert vars(copied) == vars(later)
    text = "ok: \x85 \ud800 \x07 ok"
    found = later.search(text)
    assert found is not None and found.span() == (6, 7)  # the lone surrogate, not NEL
    assert "search" in vars(later)  # compiled once, then an attribute of its own


def test_the_strict_loader_leaves_pyyaml_alone(tmp_path):
    """The YAML 1.2 float resolver is the strict loader's own: yaml.safe_load is unchanged."""
    path = tmp_path / "f.yaml"
    path.write_text("a: 1.0e12\nb: '1.0e12'\nc: 0x1F\nd: 10\n")
    assert read_yaml(path, "test") == {"a": 1e12, "b": "1.0e12", "c": 31, "d": 10}
    assert yaml.safe_load(path.read_text())["a"] == "1.0e12"
    path.write_text("c: 1_000\nd: 010\n")  # YAML 1.1 forms: refused here, PyYAML's own there
    with pytest.raises(ConfigError, match="write 1000, not 1_000"):
        read_yaml(path, "test")
    assert yaml.safe_load(path.read_text()) == {"c": 1000, "d": 8}
    path.write_text("a: 1\n? [1, 2]\n: x\n")  # a non-hashable key is PyYAML's own error
    with pytest.raises(ConfigError, match="malformed YAML"):
        read_yaml(path, "test")


_BOUNDED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))
from prfaas_plan.cli import main
sys.argv = ["prfaas-plan", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["simulate", "--trace", "/dev/zero"], "must be a regular file"),
        (["optimize", "{laughs}"], "aliases"),
    ],
    ids=["trace /dev/zero", "billion laughs"],
)
@pytest.mark.slow
def test_refusals_stay_within_an_address_space_limit(tmp_path, args, fragment):
    """Under a 1.5 GB RLIMIT_AS (a real process: only it shows memory) the refusal is clean."""
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text(CASE_TEXT + "laughs:\n" + textwrap.indent(BILLION_LAUGHS, "  "))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run(
        [sys.executable, "-c", _BOUNDED, *(a.format(laughs=laughs) for a in args)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert fragment in result.stderr and "Traceback" not in result.stderr  # no MemoryError


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["egress", "--gpu", "x" * 300], ["--gpu: unknown GPU 'xxx", "...", "known: h20, h200"]),
        (["egress", "--gpu", "../models"], ["--gpu: unknown GPU '../models'"]),
    ],
    ids=["300 chars", "a path"],
)
def test_a_name_flag_never_becomes_a_path(args, fragments):
    """Names are checked before a path is built from them (a 300-character file name was an
    OSError traceback)."""
    assert_clean_error(run(*args), 3, *fragments)


@pytest.mark.parametrize("seed", range(5))
def test_an_unordered_trace_keeps_each_request_with_its_prefix_blocks(seed):
    """The vectorised reorder against the obvious one: a stable sort of whole records."""
    rng = random.Random(seed)
    records = [
        {
            "timestamp": rng.choice([0, 5, 5, 9, 12.5]),
            "input_length": rng.randint(1, 10**6),
            "output_length": rng.randint(0, 99),
            "hash_ids": [rng.randint(-(2**63), 2**63 - 1) for _ in range(rng.randint(0, 4))],
        }
        for _ in range(60)
    ]
    trace = parse_mooncake_trace(json.dumps(r) for r in records)
    expected = sorted(records, key=lambda r: r["timestamp"])  # sorted() is stable
    first = expected[0]["timestamp"]
    assert trace.arrival_s.tolist() == pytest.approx(
        [units.ms_to_s(r["timestamp"] - first) for r in expected]
    )
    assert trace.input_tokens.tolist() == [r["input_length"] for r in expected]
    assert trace.output_tokens.tolist() == [r["output_length"] for r in expected]
    assert [trace.hash_ids(i).tolist() for i in range(60)] == [r["hash_ids"] for r in expected]


@pytest.mark.parametrize(
    "bound, lines, where",
    [("MAX_TRACE_REQUESTS", [line()] * 4, "trace.jsonl:4"),
     ("MAX_TRACE_HASH_IDS", [line(hash_ids=[1, 2])] * 2, "trace.jsonl:2")],
)  # fmt: skip
def test_a_trace_is_bounded_in_requests_and_hash_ids(tmp_path, monkeypatch, bound, lines, where):
    """The bounds that keep a trace under ~1 GB in memory, at a small scale."""
    monkeypatch.setattr(plausible, bound, 3)
    path = write_trace("".join(lines))(tmp_path)
    assert_clean_error(run("simulate", "--trace", path), 3, where, "replay a window of it")


def test_observed_lengths_are_bounded_in_rows(tmp_path, monkeypatch):
    """plausible.MAX_OBSERVED_LENGTHS, at a small scale: refused on the row after the limit, while
    streaming; at the limit the plan is made."""
    monkeypatch.setattr(plausible, "MAX_OBSERVED_LENGTHS", 3)
    path = tmp_path / "scenario.yaml"
    path.write_text(observed("l.csv", "input_tokens\n1000\n2000\n3000\n4000\n")(tmp_path))
    assert_clean_error(
        run("optimize", path),
        3,
        "l.csv: data row 4: observed-lengths file has more than 3 rows; use a sample",
    )
    (tmp_path / "l.csv").write_text("input_tokens\n1000\n2000\n3000\n")
    assert run("optimize", path).returncode == 0


@pytest.mark.parametrize("command", ["optimize", "simulate", "sensitivity"])
def test_a_subnormal_sigma_log_is_one_error_line_in_a_real_process(tmp_path, command):
    """It printed a numpy RuntimeWarning with a code path before a field-less error; warnings
    show only in a real process (pytest captures them in this one)."""
    path = tmp_path / "scenario.yaml"
    path.write_text(replaced("sigma_log: 1.00", "sigma_log: 5.0e-324")(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    result = subprocess.run([sys.executable, "-m", "prfaas_plan", command, str(path)],
                            capture_output=True, text=True, env=env, check=False)  # fmt: skip
    assert result.returncode == 3
    assert result.stderr == (
        f"error: {path}: workload.input_tokens.truncated_lognormal.sigma_log: must be in "
        "[0.001, 10] (a narrower log-normal is a fixed length: give a histogram of one narrow "
        "bin), got 5e-324\n"
    )


def test_a_log_normal_the_model_cannot_compute_names_its_field_not_a_warning():
    """Past the schema (built directly), the mass at load time still fails as one ConfigError
    naming the field: build_workload runs outside use_cases/numerics.py's guard."""
    spec = LogNormalLengths.model_construct(
        distribution="truncated_lognormal", mu_log=9.9, sigma_log=5e-324,
        min_tokens=128.0, max_tokens=131072.0,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail the test
        with pytest.raises(ConfigError, match=r"^s.yaml: workload.input_tokens: the log-normal"):
            build_workload(spec, Path("."), "s.yaml: ")
