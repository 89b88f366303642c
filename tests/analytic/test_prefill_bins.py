"""Prefill bins robust for small random-length runs (issue 22): a run of <= 64 prompts of random
lengths, one request per distinct length, with 1% timing jitter is accepted and its fit is
right; a curve that really falls is refused; every point says how many requests it rests on."""

import json

import numpy as np
import pytest

from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.prefill_bins import MAX_JITTER_FALL, bin_requests
from tests.cli.test_cli import assert_clean_error, run
from tests.inputs.test_hostile_import import H200, vllm


def truth_s(tokens):
    """A prefill curve: 50 ms overhead, linear and attention terms (seconds)."""
    return 0.05 + 3e-5 * tokens + 2e-10 * tokens**2


def random_run(seed, n=48, jitter=0.01, low=500, high=8000):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(low, high, n).astype(float)
    return lengths, truth_s(lengths) * rng.normal(1, jitter, n)


@pytest.mark.parametrize("n", [16, 32, 48, 64])
def test_small_random_length_runs_with_1_percent_jitter_are_accepted_and_fit(n):
    falls = 0
    for seed in range(40):
        lengths, ttft = random_run(seed, n)
        order = np.argsort(lengths)
        falls += bool(np.any(np.diff(ttft[order]) < 0))  # one bin per request would fall
        bins = bin_requests(lengths, ttft, "run.json")
        assert np.all(np.diff(bins.input_tokens) > 0) and np.all(np.diff(bins.latency_s) >= 0)
        assert bins.requests.sum() == n and bins.requests.min() >= min(4, n // 3)
        # each point within the jitter of the curve at its length (a median of >= 4 requests)
        gap = bins.latency_s / truth_s(bins.input_tokens) - 1
        assert np.max(np.abs(gap)) < 0.03, (seed, gap)
    assert falls >= 20  # most runs were ones the old per-length bins refused


def test_a_fixed_length_sweep_keeps_one_point_per_length():
    lengths = np.repeat([1000.0, 4000, 16000, 64000], 5)
    ttft = truth_s(lengths) * np.tile([1.0, 1.004, 0.996, 1.002, 0.998], 4)
    bins = bin_requests(lengths, ttft, "run.json")
    assert bins.input_tokens.tolist() == [1000, 4000, 16000, 64000]
    np.testing.assert_allclose(bins.latency_s, truth_s(bins.input_tokens))
    assert bins.requests.tolist() == [5, 5, 5, 5] and bins.pooled == 0


def test_a_dip_within_jitter_is_pooled_and_said():
    lengths = np.array([1000.0, 2000, 3000, 4000, 5000])
    ttft = np.array([0.10, 0.20, 0.19, 0.30, 0.40])  # 5% down at 3000: pooled with 2000
    bins = bin_requests(lengths, ttft, "run.json", min_requests=1)
    assert bins.input_tokens.tolist() == [1000, 2500, 4000, 5000]
    assert bins.requests.tolist() == [1, 2, 1, 1] and bins.pooled == 1
    assert "1 bin(s) pooled" in bins.describe()


REFUSED = [
    ("a curve falling by 30% at long inputs",
     np.array([1000.0, 2000, 4000, 8000, 16000] * 4),
     np.array([0.1, 0.2, 0.4, 0.8, 0.56] * 4),
     ["median TTFT falls from 0.8 s at 8000 tokens (4 request(s)) to 0.56 s at 16000 (4)",
      "by 30%", "queued or mislabelled"]),
    ("the shortest prompts slowest", np.array([1000.0, 2000, 4000] * 4),
     np.array([7.0, 0.2, 0.4] * 4), ["falls from 7 s at 1000 tokens"]),
    ("two lengths", np.array([1000.0, 8000] * 6), np.array([0.1, 0.8] * 6),
     ["input_lens has 2 distinct length(s) in 2 bin(s)", "needs at least 3"]),
]  # fmt: skip


@pytest.mark.parametrize("lengths, ttft, fragments", [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])  # fmt: skip
def test_a_curve_that_really_falls_is_refused(lengths, ttft, fragments):
    with pytest.raises(ConfigError) as refused:
        bin_requests(lengths, ttft, "run.json")
    for fragment in fragments:
        assert fragment in str(refused.value)
    assert str(refused.value).startswith("run.json: ")


def test_the_boundary_of_jitter():
    lengths = np.array([1000.0, 2000, 3000])
    for fall, refused in ((MAX_JITTER_FALL * 0.99, False), (MAX_JITTER_FALL * 1.01, True)):
        ttft = np.array([0.1, 0.2, 0.2 * (1 - fall)])
        if refused:
            with pytest.raises(ConfigError, match="median TTFT falls"):
                bin_requests(lengths, ttft, "r", min_requests=1)
        else:  # pooled: two bins left, too few for the fit
            with pytest.raises(ConfigError, match="in 2 bin"):
                bin_requests(lengths, ttft, "r", min_requests=1)


def test_a_48_prompt_vllm_run_imports_and_says_what_each_point_rests_on(tmp_path):
    lengths, ttft = random_run(7, 48, low=1000, high=128000)
    document = vllm(
        input_lens=lengths.astype(int).tolist(), ttfts=ttft.tolist(), output_lens=[2] * 48,
        itls=[[0.02]] * 48, errors=[""] * 48, latencies=(ttft + 0.02).tolist(),
        start_times=np.cumsum(ttft + 0.03).tolist(), num_prompts=48, completed=48,
    )  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps(document))
    result = run("import-profile", "vllm", path, *H200, "--data-dir", tmp_path / "d", "--force",
                 "-f", "json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    (table,) = json.loads(result.stdout)["tables"]
    assert sum(table["samples_per_row"]) == 48 and min(table["samples_per_row"]) >= 4
    assert any("48 requests in" in note and "per point" in note for note in table["notes"])
    # the same lengths with the curve falling at the long end: refused, one line
    document["ttfts"] = np.where(lengths > 100000, truth_s(lengths) * 0.5, ttft).tolist()
    document["latencies"] = (np.array(document["ttfts"]) + 0.02).tolist()
    path.write_text(json.dumps(document))
    result = run("import-profile", "vllm", path, *H200, "--data-dir", tmp_path / "d", "--force")
    assert_clean_error(result, 3, str(path), "median TTFT falls")
