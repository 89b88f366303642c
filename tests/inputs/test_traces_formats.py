"""Azure LLM inference and BurstGPT traces beside Mooncake JSONL: detection by header, datetime
timestamps, failed BurstGPT requests dropped and counted, joint input/output lengths, the
scenario's `format:` field and `simulate --trace`, and one-line errors on bad input."""

import csv
import datetime
from pathlib import Path

import numpy as np
import pytest
import yaml

from prfaas_plan.choices import TraceFormat
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.trace_csv import detect_format
from prfaas_plan.inputs.traces import read_observed_trace, read_trace
from tests.cli.test_cli import assert_clean_error, run

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "examples" / "traces"
AZURE, BURST = TRACES / "azure_sample.csv", TRACES / "burstgpt_sample.csv"


def _rows(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_formats_are_told_by_their_header():
    assert detect_format(AZURE, "trace") is TraceFormat.AZURE
    assert detect_format(BURST, "trace") is TraceFormat.BURSTGPT


def test_azure_timestamps_are_datetimes_relative_to_the_first_request():
    rows = _rows(AZURE)
    trace = read_trace(AZURE)
    first = datetime.datetime.fromisoformat(rows[0]["TIMESTAMP"][:26])
    last = datetime.datetime.fromisoformat(rows[-1]["TIMESTAMP"][:26])
    # the file's 7th fractional digit is 0, so 6 digits give the exact span
    assert trace.arrival_s[0] == 0.0
    assert trace.arrival_s[-1] == pytest.approx((last - first).total_seconds(), abs=1e-6)
    assert trace.input_tokens.tolist() == [float(r["ContextTokens"]) for r in rows]
    assert trace.output_tokens.tolist() == [float(r["GeneratedTokens"]) for r in rows]
    assert np.all(np.diff(trace.arrival_s) >= 0)


def test_azure_2024_offsets_and_7_digit_fractions(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 01:00:00.5000001+01:00,100,5\n"  # 00:00:00.5000001 UTC
        "2024-05-10 00:00:00.0000000+00:00,200,6\n"
    )
    trace = read_trace(path)
    assert trace.input_tokens.tolist() == [200.0, 100.0]  # sorted by time
    assert trace.arrival_s.tolist() == pytest.approx([0.0, 0.5000001], abs=1e-9)


def test_burstgpt_failed_requests_are_dropped_and_counted():
    rows = _rows(BURST)
    failed = sum(r["Response tokens"] == "0" for r in rows)
    assert failed > 0
    trace = read_trace(BURST)
    assert trace.requests == len(rows) - failed
    assert f"{failed} failed request(s) with 0 Response tokens dropped" in trace.source
    kept = [r for r in rows if r["Response tokens"] != "0"]
    assert trace.output_tokens.tolist() == [float(r["Response tokens"]) for r in kept]


def _scenario(tmp_path, trace, fmt=None):
    data = yaml.safe_load((ROOT / "examples" / "observed_lengths.yaml").read_text())
    data["workload"]["input_tokens"] = {"distribution": "observed", "file": str(trace)}
    if fmt:
        data["workload"]["input_tokens"]["format"] = fmt
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("trace, fmt", [(AZURE, None), (BURST, "burstgpt")])
def test_observed_scenario_plans_from_either_trace(tmp_path, trace, fmt):
    result = run("optimize", _scenario(tmp_path, trace, fmt), "-f", "markdown")
    assert result.returncode == 0, result.stderr
    lengths = read_observed_trace(trace).input_tokens
    assert (
        f"{lengths.size:,} observed lengths (" in result.stdout and f"from {trace}" in result.stdout
    )


def test_simulate_replays_an_azure_trace(tmp_path):
    result = run("simulate", "--trace", AZURE, "--load", "0.5", "-f", "json")
    assert result.returncode == 0, result.stderr
    assert "azure_sample.csv" in result.stdout
    unknown = tmp_path / "t.csv"
    unknown.write_text("a,b,c\n1,2,3\n")
    result = run("simulate", "--trace", unknown)
    assert_clean_error(result, 3, "t.csv", "not a trace format", "TIMESTAMP,ContextTokens")


BAD = [
    ("unknown header", "a,b,c\n1,2,3\n", None, ("header must be input_tokens", "found a,b,c")),
    ("bad datetime", "TIMESTAMP,ContextTokens,GeneratedTokens\n16/11/2023,10,1\n", None,
     ("t.csv:2", "TIMESTAMP must be a datetime", "16/11/2023")),
    ("text tokens", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
     "1,GPT-4,many,3,4,API log\n", None, ("t.csv:2", "Request tokens must be a number", "many")),
    ("short row", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,10\n", None,
     ("t.csv:2", "2 cells, expected 3")),
    ("all failed", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
     "1,GPT-4,10,0,10,API log\n", None, ("no requests found", "1 failed")),
    ("wrong format named", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
     "1,GPT-4,10,2,12,API log\n", "azure", ("Azure LLM inference trace CSV needs", "missing TIMESTAMP")),
]  # fmt: skip


@pytest.mark.parametrize("name, text, fmt, fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_traces_are_one_line_errors(tmp_path, name, text, fmt, fragments):
    trace = tmp_path / "t.csv"
    trace.write_text(text)
    result = run("optimize", _scenario(tmp_path, trace, fmt))
    assert_clean_error(result, 3, *fragments)
    with pytest.raises(ConfigError):
        read_trace(trace, TraceFormat(fmt) if fmt else TraceFormat.AUTO)
