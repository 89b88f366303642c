"""The decode step where streamed chunks carry several tokens, and SGLang's trace-replay runs
(issue 22). Fixtures: the SGLang samples of examples/imports/, edited as the tools would write
them (speculative decoding streams a chunk per accepted draft: fewer, longer gaps)."""

import json

import numpy as np
import pytest

from tests.cli.test_cli import assert_clean_error, run
from tests.inputs.test_hostile_import import H20, sglang_decode
from tests.inputs.test_import_runs import jsonl, sglang_prefill


def chunked(document: dict, tokens_per_chunk: int) -> dict:
    """The run as streamed `tokens_per_chunk` tokens a chunk: each chunk's gap the sum of the
    per-token gaps it carries; output_lens unchanged (the tokens are all there)."""
    itls = [
        [sum(gaps[i : i + tokens_per_chunk]) for i in range(0, len(gaps), tokens_per_chunk)]
        for gaps in document["itls"]
    ]
    return {**document, "itls": itls}


def _decode(tmp_path, documents, *flags):
    path = tmp_path / "runs.jsonl"
    path.write_text(jsonl(documents))
    return path, run("import-profile", "sglang", path, *H20, "--data-dir", tmp_path / "d",
                     "--force", *flags, "-f", "json")  # fmt: skip


@pytest.mark.parametrize("tokens_per_chunk", [2, 3, 4])
def test_several_tokens_a_chunk_give_the_step_per_token_and_say_so(tmp_path, tokens_per_chunk):
    documents = [chunked(d, tokens_per_chunk) for d in sglang_decode()]
    _, result = _decode(tmp_path, documents)
    assert result.returncode == 0, result.stderr
    (table,) = json.loads(result.stdout)["tables"]
    batch, step = np.array(table["rows"]).T
    # the samples' step: 15 ms + 0.5 ms per request (3% noise); a chunk gap is k of them
    np.testing.assert_allclose(step, 0.015 + 0.0005 * batch, rtol=0.02)
    gap = np.median([g for d in documents[:1] for r in d["itls"] for g in r])
    assert gap > 1.5 * step[0]  # what the median chunk gap would have said
    assert any("median time per output token" in n and "tokens each" in n for n in table["notes"])
    assert table["samples_per_row"][0] == 2  # requests, not gaps


def test_one_token_a_chunk_keeps_the_median_itl_and_says_so(tmp_path):
    _, result = _decode(tmp_path, sglang_decode())
    (table,) = json.loads(result.stdout)["tables"]
    assert any(
        "batch 8: step = median inter-token latency of 368 gaps" in n for n in table["notes"]
    )


def test_a_trace_replay_run_is_read(tmp_path):
    """SGLang writes request_rate "trace" for a replay of a trace's timestamps: a prefill run at
    concurrency 1 is one; in a decode sweep it is not closed-loop, and said so."""
    path = tmp_path / "prefill.jsonl"
    path.write_text(jsonl([{**sglang_prefill(), "request_rate": "trace"}]))
    result = run("import-profile", "sglang", path, *H20, "--data-dir", tmp_path / "d", "--force")
    assert result.returncode == 0, result.stderr
    documents = sglang_decode()
    documents[2]["request_rate"] = "trace"
    path, result = _decode(tmp_path, documents)
    assert_clean_error(result, 3, f"{path}:3: decode needs a closed-loop run",
                       "found request_rate trace (a replay)")  # fmt: skip
    documents[2]["request_rate"] = "replay"
    _, result = _decode(tmp_path, documents)
    assert_clean_error(result, 3, "request_rate must be a number", "found 'replay'")
