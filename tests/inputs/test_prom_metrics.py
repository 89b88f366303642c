"""A workload from production metrics (inputs/prom_metrics.py): vLLM's and SGLang's length
histograms in a /metrics snapshot, or the difference of two, become histogram length
distributions whose bins hold exactly the bucket counts, and the counted requests over
interval_s the arrival rate; the shipped synthetic example becomes a plan; hostile snapshots get
one line."""

import json
from pathlib import Path

import pytest
import yaml

from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.prom_metrics import read_metrics_workload
from tests.cli.test_cli import CASE, assert_clean_error, run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "metrics" / "metrics_workload.yaml"
MODEL = 'model_name="m"'


def _family(name, les, cumulative, total, labels=MODEL):
    lines = [f"# TYPE {name} histogram"]
    for le, count in zip([*les, "+Inf"], cumulative, strict=True):
        shown = le if le == "+Inf" else float(le)
        lines.append(f'{name}_bucket{{{labels},le="{shown}"}} {float(count)}')
    lines += [
        f"{name}_count{{{labels}}} {float(cumulative[-1])}",
        f"{name}_sum{{{labels}}} {total}",
    ]
    return "\n".join(lines) + "\n"


def _snapshot(tmp_path, prompt, generation, name="m.prom", engine="vllm", labels=MODEL):
    names = {"vllm": ("vllm:request_prompt_tokens", "vllm:request_generation_tokens"),
             "sglang": ("sglang:prompt_tokens_histogram", "sglang:generation_tokens_histogram")}[engine]  # fmt: skip
    text = "# HELP something else\nother_metric 3\n"
    text += _family(names[0], *prompt, labels=labels) + _family(
        names[1], *generation, labels=labels
    )
    path = tmp_path / name
    path.write_text(text)
    return path


PROMPT = ([1, 100, 1000], [0, 10, 40, 40], 15_000.0)  # 10 in (1, 100], 30 in (100, 1000]
GENERATION = ([1, 10, 100], [2, 12, 20, 20], 500.0)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_bins_hold_the_bucket_counts(tmp_path, engine):
    path = _snapshot(tmp_path, PROMPT, GENERATION, engine=engine)
    got = read_metrics_workload(path, None, None, None)
    assert got.inputs.bin_edges_tokens == (1.0, 100.0, 1000.0)
    assert got.inputs.weights == (10.0, 30.0)
    # lengths at or below 1 token are folded into the first bucket above
    assert got.outputs.bin_edges_tokens == (1.0, 10.0, 100.0)
    assert got.outputs.weights == (12.0, 8.0)
    assert got.requests == 40 and got.arrival_rate_rps is None
    # uniform bins: mean = Σ w (a + b) / 2 / Σ w, stated beside the exact _sum/_count
    assert got.inputs.mean_tokens == pytest.approx((10 * 50.5 + 30 * 550) / 40)
    assert "mean 375 tokens exact" in got.inputs.describe()


def test_the_open_bucket_continues_the_boundaries_ratio(tmp_path):
    prompt = ([100, 1000, 10_000], [0, 10, 40, 50], 200_000.0)  # 10 above 10,000
    got = read_metrics_workload(_snapshot(tmp_path, prompt, GENERATION), None, None, None)
    assert got.inputs.bin_edges_tokens == (100.0, 1000.0, 10_000.0, 100_000.0)
    assert got.inputs.weights == (10.0, 30.0, 10.0)
    assert "20.0% above le=10000, taken up to 100,000 tokens" in got.inputs.describe()


def test_two_snapshots_give_the_window_and_the_rate(tmp_path):
    before = _snapshot(tmp_path, ([1, 100, 1000], [0, 5, 5, 5], 250.0), ([1, 10, 100], [0, 5, 5, 5], 25.0), "a.prom")  # fmt: skip
    after = _snapshot(tmp_path, PROMPT, GENERATION, "b.prom")
    got = read_metrics_workload(after, before, 7.0, None)
    assert got.inputs.weights == (5.0, 30.0)
    assert got.requests == 35 and got.arrival_rate_rps == pytest.approx(5.0)
    assert "5 req/s over 7 s" in got.source


def test_series_of_one_model_are_summed(tmp_path):
    text = ""
    for engine in ("0", "1"):
        labels = f'{MODEL},engine="{engine}"'
        text += _family("vllm:request_prompt_tokens", *PROMPT, labels=labels)
        text += _family("vllm:request_generation_tokens", *GENERATION, labels=labels)
    path = tmp_path / "m.prom"
    path.write_text(text)
    got = read_metrics_workload(path, None, None, None)
    assert got.inputs.weights == (20.0, 60.0) and got.requests == 80


def _two_models(tmp_path):
    text = ""
    for model in ("a", "b"):
        labels = f'model_name="{model}"'
        text += _family("vllm:request_prompt_tokens", *PROMPT, labels=labels)
        text += _family("vllm:request_generation_tokens", *GENERATION, labels=labels)
    path = tmp_path / "m.prom"
    path.write_text(text)
    return path


def test_several_models_need_a_name(tmp_path):
    path = _two_models(tmp_path)
    with pytest.raises(ConfigError, match="several models \\('a', 'b'\\); name one"):
        read_metrics_workload(path, None, None, None)
    assert read_metrics_workload(path, None, None, "b").requests == 40


def _text(tmp_path, text):
    path = tmp_path / "m.prom"
    path.write_text(text)
    return path


HOSTILE = [
    ("no histogram", lambda p: _text(p, "other 1\n"), None, "no request-length histogram found"),
    (
        "falling buckets",
        lambda p: _snapshot(p, ([1, 100, 1000], [0, 20, 10, 40], 1.0), GENERATION),
        None,
        "must not decrease",
    ),
    (
        "no +Inf",
        lambda p: _text(
            p,
            _family("vllm:request_prompt_tokens", *PROMPT).replace('le="+Inf"', 'le="5000"')
            + _family("vllm:request_generation_tokens", *GENERATION),
        ),
        None,
        'le="+Inf"',
    ),
    (
        "+Inf and _count differ",
        lambda p: _text(
            p,
            _family("vllm:request_prompt_tokens", *PROMPT).replace(
                '_count{model_name="m"} 40.0', '_count{model_name="m"} 41.0'
            )
            + _family("vllm:request_generation_tokens", *GENERATION),
        ),
        None,
        "_count 41",
    ),
    (
        "negative count",
        lambda p: _snapshot(p, ([1, 100, 1000], [0, -10, 40, 40], 1.0), GENERATION),
        None,
        "finite count >= 0",
    ),
    (
        "NaN count",
        lambda p: _text(p, 'vllm:request_prompt_tokens_bucket{le="1.0"} NaN\n'),
        None,
        "finite count >= 0",
    ),
    (
        "not a number",
        lambda p: _text(p, "vllm:request_prompt_tokens_sum{} lots\n"),
        None,
        "expected a number",
    ),
    (
        "bad labels",
        lambda p: _text(p, "vllm:request_prompt_tokens_sum{model_name=m} 3\n"),
        None,
        "malformed labels",
    ),
    (
        "no requests",
        lambda p: _snapshot(p, ([1, 100], [0, 0, 0], 0.0), GENERATION),
        None,
        "counts no request",
    ),
    (
        "unknown model",
        lambda p: _snapshot(p, PROMPT, GENERATION),
        "other",
        "no histogram with model_name 'other'",
    ),
    ("/dev/zero", lambda p: Path("/dev/zero"), None, "must be a regular file"),
]


@pytest.mark.parametrize(("maker", "model", "fragment"),
                         [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])  # fmt: skip
def test_hostile_snapshots_get_one_line(tmp_path, maker, model, fragment):
    path = maker(tmp_path)
    with pytest.raises(ConfigError) as caught:
        read_metrics_workload(path, None, None, model)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    assert fragment in str(caught.value)


def test_a_restart_between_snapshots_is_refused(tmp_path):
    before = _snapshot(tmp_path, PROMPT, GENERATION, "a.prom")
    after = _snapshot(tmp_path, ([1, 100, 1000], [0, 1, 2, 2], 10.0), GENERATION, "b.prom")
    with pytest.raises(ConfigError, match="counts fell between the snapshots"):
        read_metrics_workload(after, before, 60.0, None)


def test_the_synthetic_example_becomes_a_plan():
    text = (EXAMPLE.parent / "vllm_after.prom").read_text()
    assert text.startswith("# SYNTHETIC")
    result = run("optimize", EXAMPLE, "--format", "json")
    assert result.returncode == 0, result.stderr
    workload = json.loads(result.stdout)["inputs"]["workload"]
    assert "6,000 requests, 10 req/s over 600 s" in workload


@pytest.mark.parametrize(
    ("input_tokens", "output_tokens", "fragment"),
    [
        ({"distribution": "metrics", "file": "x.prom", "interval_s": 0}, 100, "interval_s"),
        ({"distribution": "metrics", "file": "x.prom", "model_name": ""}, 100, "model_name"),
        (
            {
                "distribution": "truncated_lognormal",
                "mu_log": 9,
                "sigma_log": 1,
                "min_tokens": 1,
                "max_tokens": 1e5,
            },
            {"distribution": "from_metrics"},
            "from_metrics needs",
        ),
    ],
)
def test_metrics_fields_are_strict(tmp_path, input_tokens, output_tokens, fragment):
    data = yaml.safe_load(CASE.read_text())
    data["workload"]["input_tokens"] = input_tokens
    data["workload"]["output_tokens"] = output_tokens
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert_clean_error(run("optimize", path), 3, fragment)
