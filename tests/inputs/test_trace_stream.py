"""Whole traces for a plan, streamed (inputs/trace_stream.py, trace_select.py): the block reader
keeps exactly what the row reader reads (the same lengths, so the same plan), a window, a sample
and BurstGPT's model / log_type select the rows they say, counts stand for repeated lengths, and
hostile files and fields get one line naming the file and line or field."""

import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from prfaas_plan import plausible
from prfaas_plan.analytic.distributions import ObservedLengths
from prfaas_plan.choices import TraceFormat
from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs import trace_stream
from prfaas_plan.inputs.trace_select import TraceSelection
from prfaas_plan.inputs.trace_stream import read_trace_lengths
from prfaas_plan.inputs.traces import read_observed_trace
from tests.cli.test_cli import CASE, assert_clean_error, run

ROOT = Path(__file__).resolve().parents[2]
AZURE_2023 = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"  # the published files end lines in CRLF
BURST_HEADER = (
    "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
)


def _azure(tmp_path, rows, name="a.csv", offset="+00:00"):
    """An Azure 2024-format trace: (seconds after 2024-05-10 00:00, input, output) per row."""
    lines = [AZURE_2023]
    for s, i, o in rows:
        whole, frac = divmod(s, 1.0)
        stamp = (
            f"2024-05-10 {int(whole) // 3600:02d}:{int(whole) // 60 % 60:02d}:{int(whole) % 60:02d}"
        )
        lines.append(f"{stamp}.{round(frac * 1e6):06d}{offset},{i},{o}\r\n")
    path = tmp_path / name
    path.write_text("".join(lines), newline="")
    return path


def _burst(tmp_path, rows, name="b.csv"):
    """A BurstGPT 3-format trace: (s, model, input, output, log type) per row."""
    lines = [BURST_HEADER]
    for s, model, i, o, kind in rows:
        session = "" if kind == "API log" else "1722ac82-0a46-4bf0-aa08-89794e7a2b3f"
        lines.append(f"{s:.1f},{session},3,{model},{i},{o},{i + o},{kind}\n")
    path = tmp_path / name
    path.write_text("".join(lines))
    return path


def _random_rows(n, seed=0):
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0, 3000, n))
    inputs = rng.integers(1, 5000, n)
    outputs = rng.integers(1, 300, n)
    return list(zip(times.tolist(), inputs.tolist(), outputs.tolist(), strict=True))


def _same(a: ObservedLengths, b: ObservedLengths):
    cuts = np.array([0, 10, 500, 1000, 2500, 4999, 1e6])
    np.testing.assert_allclose(a.partial_moments(cuts[:-1], cuts[1:]),
                               b.partial_moments(cuts[:-1], cuts[1:]), rtol=1e-12)  # fmt: skip
    u = np.linspace(0, 1, 101, endpoint=False)
    np.testing.assert_array_equal(a.quantile(u), b.quantile(u))
    np.testing.assert_array_equal(a.threshold_candidates(), b.threshold_candidates())


@pytest.fixture(autouse=True)
def _fresh_cache():
    trace_stream._CACHE.clear()


def test_counts_stand_for_repeated_lengths():
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 50, 1000).astype(float)
    values, counts = np.unique(lengths, return_counts=True)
    weighted = ObservedLengths(values[::-1], "w", counts[::-1].astype(float))  # any order
    _same(weighted, ObservedLengths(lengths, "plain"))
    np.testing.assert_allclose(weighted.mesh()[1], ObservedLengths(lengths).mesh()[1])
    assert weighted.requests == 1000


def test_streamed_azure_keeps_what_the_row_reader_reads(tmp_path):
    path = _azure(tmp_path, _random_rows(3000))
    streamed = read_trace_lengths(path)
    whole = read_observed_trace(path)
    _same(streamed.inputs, ObservedLengths(whole.input_tokens))
    _same(streamed.outputs, ObservedLengths(whole.output_tokens))
    assert streamed.mean_input_times_output_tokens == pytest.approx(
        np.mean(whole.input_tokens * whole.output_tokens), rel=1e-12
    )


@pytest.mark.parametrize("block_bytes", [1 << 10, 1 << 20])
def test_blocks_and_rows_give_one_result(tmp_path, monkeypatch, block_bytes):
    """Small blocks (many), one block, and the row reader (forced) agree; so does the sample."""
    path = _azure(tmp_path, _random_rows(2000, seed=2))
    selection = TraceSelection(window_start_s=500, window_duration_s=1500, sample_requests=300)
    monkeypatch.setattr(trace_stream, "BLOCK_BYTES", block_bytes)
    blocks = read_trace_lengths(path, selection=selection)
    trace_stream._CACHE.clear()

    def refuse(*args):
        raise trace_stream._NotForBlocksError

    monkeypatch.setattr(trace_stream, "_arrow_blocks", refuse)
    monkeypatch.setattr(trace_stream, "_SLOW_BLOCK_ROWS", 7)
    rows = read_trace_lengths(path, selection=selection)
    _same(blocks.inputs, rows.inputs)
    _same(blocks.outputs, rows.outputs)
    assert blocks.inputs.requests == 300


def test_a_window_holds_the_requests_it_says_from_the_earliest_request(tmp_path):
    rows = [(10.0, 100, 1), (11.5, 200, 2), (12.0, 300, 3), (13.25, 400, 4), (20.0, 500, 5)]
    # out of time order in the file: the window still counts from the earliest request (10 s)
    path = _azure(tmp_path, [rows[2], rows[0], rows[1], rows[3], rows[4]])
    got = read_trace_lengths(
        path, selection=TraceSelection(window_start_s=1.5, window_duration_s=1.75)
    )
    assert got.inputs.lengths_tokens.tolist() == [200.0, 300.0]  # 11.5 and 12.0 s: [1.5, 3.25)
    assert "2 of 5 requests" in got.source


def test_a_sample_is_uniform_reproducible_and_at_most_the_trace(tmp_path):
    path = _azure(tmp_path, [(i * 0.01, i + 1, 1) for i in range(20_000)])
    a = read_trace_lengths(path, selection=TraceSelection(sample_requests=4000, sample_seed=5))
    trace_stream._CACHE.clear()
    b = read_trace_lengths(path, selection=TraceSelection(sample_requests=4000, sample_seed=5))
    c = read_trace_lengths(path, selection=TraceSelection(sample_requests=4000, sample_seed=6))
    _same(a.inputs, b.inputs)
    assert a.inputs.requests == 4000 and len(set(a.inputs.lengths_tokens)) == 4000  # no repeats
    assert not np.array_equal(a.inputs.lengths_tokens, c.inputs.lengths_tokens)
    # uniform: the sample's mean of 1..20000 is within 4 standard errors of the whole's
    assert abs(a.inputs.mean_tokens - 10_000.5) < 4 * 5773.5 / np.sqrt(4000)
    everything = read_trace_lengths(path, selection=TraceSelection(sample_requests=10**6))
    assert everything.inputs.requests == 20_000


BURST_ROWS = [
    (0, "ChatGPT", 100, 10, "Conversation log"),
    (1, "GPT-4", 200, 20, "Conversation log"),
    (2, "ChatGPT", 300, 0, "Conversation log"),  # failed
    (3, "GPT-4", 400, 40, "API log"),
    (4, "ChatGPT", 500, 50, "API log"),
]


@pytest.mark.parametrize(
    ("model", "log_type", "inputs"),
    [
        (None, None, [100, 200, 400, 500]),
        ("GPT-4", None, [200, 400]),
        ("ChatGPT", "api", [500]),
        (None, "conversation", [100, 200]),
    ],
)
def test_burstgpt_model_and_log_type_select(tmp_path, model, log_type, inputs):
    path = _burst(tmp_path, BURST_ROWS)
    got = read_trace_lengths(path, selection=TraceSelection(model=model, log_type=log_type))
    assert got.inputs.lengths_tokens.tolist() == inputs
    assert "1 failed request(s)" in got.source
    assert ("mixes" in got.source) is (len(inputs) > 1)  # several Model/Log Type kinds kept


def test_the_mix_is_said_with_shares(tmp_path):
    got = read_trace_lengths(_burst(tmp_path, BURST_ROWS))
    assert "ChatGPT/Conversation log 25.0%" in got.source and "pick one with model" in got.source


def _fifo(tmp_path):
    path = tmp_path / "fifo.csv"
    os.mkfifo(path)
    return path


def _lines(tmp_path, text, name="t.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


HOSTILE = [
    # (id, file maker, selection, message fragments)
    (
        "bad timestamp",
        lambda p: _lines(p, AZURE_2023 + "2024-05-10,1,1\n"),
        {},
        ["t.csv:2", "TIMESTAMP must be a datetime"],
    ),
    (
        "zero input",
        lambda p: _lines(p, AZURE_2023 + "2024-05-10 00:00:00,0,1\n"),
        {},
        ["t.csv:2", "ContextTokens must be in [1, 1e+09]"],
    ),
    (
        "text input",
        lambda p: _lines(p, AZURE_2023 + "2024-05-10 00:00:00,many,1\n"),
        {},
        ["t.csv:2", "ContextTokens must be a number"],
    ),
    (
        "extra cell",
        lambda p: _lines(p, AZURE_2023 + "2024-05-10 00:00:00,5,1,9\n"),
        {},
        ["t.csv:2", "4 cells, expected 3"],
    ),
    ("header only", lambda p: _lines(p, AZURE_2023), {}, ["no requests found"]),
    ("only failed", lambda p: _burst(p, [BURST_ROWS[2]]), {}, ["no requests found", "1 failed"]),
    (
        "/dev/zero",
        lambda p: Path("/dev/zero"),
        {"fmt": TraceFormat.AZURE},
        ["must be a regular file"],
    ),
    ("a FIFO", _fifo, {"fmt": TraceFormat.AZURE}, ["must be a regular file"]),
    (
        "unknown model",
        lambda p: _burst(p, BURST_ROWS),
        {"model": "GPT-5"},
        ["model 'GPT-5' matches no request", "ChatGPT/Conversation log (1)"],
    ),
    (
        "model, wrong log type",
        lambda p: _burst(p, BURST_ROWS[:2]),
        {"model": "GPT-4", "log_type": "api"},
        ["no request has model 'GPT-4' and log_type api"],
    ),
    (
        "model on Azure",
        lambda p: _azure(p, [(0, 1, 1)]),
        {"model": "GPT-4"},
        ["select among a BurstGPT trace's requests"],
    ),
    (
        "empty window",
        lambda p: _azure(p, [(0, 1, 1), (5, 2, 2)]),
        {"window_start_s": 100.0, "window_duration_s": 1.0},
        ["window [100, 101) s holds no request", "spans 5 s"],
    ),
    (
        "window on lengths",
        lambda p: _lines(p, "input_tokens\n5\n"),
        {"window_start_s": 0.0, "window_duration_s": 1.0},
        ["a window needs arrival times"],
    ),
]


@pytest.mark.parametrize(("maker", "options", "fragments"),
                         [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])  # fmt: skip
def test_hostile_traces_get_one_line(tmp_path, maker, options, fragments):
    path = maker(tmp_path)
    fmt = options.pop("fmt", TraceFormat.AUTO)
    with pytest.raises(ConfigError) as caught:
        read_trace_lengths(path, fmt, TraceSelection(**options))
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize(
    ("bound", "value", "fragment"),
    [
        ("MAX_STREAMED_TRACE_BYTES", 100, "over the limit of 100 bytes"),
        ("MAX_STREAMED_TRACE_REQUESTS", 10, "at most 10 requests"),
        ("MAX_TRACE_DISTINCT_LENGTHS", 10, "more than 10 distinct input lengths"),
    ],
)
def test_size_bounds_refuse(tmp_path, monkeypatch, bound, value, fragment):
    """Each bound refuses (the real bounds are stated with their reason in plausible.py)."""
    path = _azure(tmp_path, _random_rows(3000))
    monkeypatch.setattr(plausible, bound, value)
    monkeypatch.setattr(trace_stream, "BLOCK_BYTES", 1 << 10)
    if bound == "MAX_TRACE_DISTINCT_LENGTHS":
        monkeypatch.setattr(trace_stream.Selector, "add", _merging_add)
    with pytest.raises(ConfigError, match=fragment):
        read_trace_lengths(path)


_original_add = trace_stream.Selector.add


def _merging_add(self, block):
    _original_add(self, block)
    self._inputs._merge()  # merge every block (the real merge waits for 2^20 values)


def _scenario(tmp_path, input_tokens, output_tokens=None):
    data = yaml.safe_load(CASE.read_text())
    data["workload"]["input_tokens"] = input_tokens
    if output_tokens is not None:
        data["workload"]["output_tokens"] = output_tokens
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_windowed_sampled_trace_plans(tmp_path):
    rows = [
        (t, int(1000 + 37 * k % 20000), 200 + k % 300)
        for k, t in enumerate(np.arange(0, 600, 0.05))
    ]
    _azure(tmp_path, rows, name="trace.csv")
    spec = {"distribution": "observed", "file": "trace.csv",
            "window": {"start_s": 60, "duration_s": 300}, "sample": {"requests": 2000, "seed": 1}}  # fmt: skip
    result = run(
        "optimize", _scenario(tmp_path, spec, {"distribution": "from_trace"}), "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    assert "2,000 of 12,000 requests" in result.stdout


SCHEMA = [
    ({"window": {"start_s": -1, "duration_s": 5}}, "window.start_s"),
    ({"window": {"start_s": 0, "duration_s": 0}}, "window.duration_s"),
    ({"window": {"start_s": 0, "duration_s": 1e300}}, "window.duration_s"),
    ({"window": {"start_s": 0}}, "window.duration_s"),
    ({"window": {"start_s": 0, "duration_s": 5, "end_s": 9}}, "window.end_s"),
    ({"sample": {"requests": 0}}, "sample.requests"),
    ({"sample": {"requests": plausible.MAX_TRACE_SAMPLE_REQUESTS + 1}}, "sample.requests"),
    ({"sample": {"requests": "100"}}, "sample.requests"),
    ({"sample": {"requests": 10, "seed": -1}}, "sample.seed"),
    ({"sample": {"requests": 10.5}}, "sample.requests"),
    ({"log_type": "chat"}, "log_type"),
    ({"model": ""}, "model"),
    ({"model": "GPT\n4"}, "model"),
]


@pytest.mark.parametrize(("extra", "field"), SCHEMA)
def test_selection_fields_are_strict(tmp_path, extra, field):
    _azure(tmp_path, [(0, 100, 1)], name="trace.csv")
    spec = {"distribution": "observed", "file": "trace.csv", **extra}
    result = run("optimize", _scenario(tmp_path, spec))
    assert_clean_error(result, 3, f"workload.input_tokens.observed.{field}")


def test_a_sample_cannot_measure_prefix_reuse(tmp_path):
    lines = [f'{{"timestamp": {k * 100}, "input_length": 2048, "output_length": 100, '
             f'"hash_ids": [{k % 3}, {10 + k}, {20 + k}, {30 + k}]}}' for k in range(50)]  # fmt: skip
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    data = yaml.safe_load(CASE.read_text())
    data["workload"]["input_tokens"] = {"distribution": "observed", "file": "t.jsonl",
                                        "sample": {"requests": 10}}  # fmt: skip
    data["workload"]["prefix_cache_hit_rate"] = "from_trace"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert_clean_error(run("optimize", path), 3, "a sample breaks")


def test_a_window_measures_prefix_reuse_on_its_own_requests(tmp_path):
    """Request k carries blocks [k % 3, 10 + k]: within any window, the first request of each
    k % 3 class misses its first block and every later one hits it."""
    from prfaas_plan.inputs.trace_stream import select_prefix_trace
    from prfaas_plan.inputs.traces import prefix_hit_rate
    from prfaas_plan.inputs.workload_files import TraceWindow

    lines = [f'{{"timestamp": {k * 1000}, "input_length": 1024, "output_length": 10, '
             f'"hash_ids": [{k % 3}, {10 + k}]}}' for k in range(30)]  # fmt: skip
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    trace = select_prefix_trace(
        read_observed_trace(path), TraceWindow(start_s=20, duration_s=10), "t"
    )
    assert trace.input_tokens.size == 10  # requests 20..29
    assert trace.prefix_blocks.values.tolist() == [
        v for k in range(20, 30) for v in (k % 3, 10 + k)
    ]
    assert prefix_hit_rate(trace, 512) == pytest.approx((10 - 3) * 512 / (10 * 1024))
