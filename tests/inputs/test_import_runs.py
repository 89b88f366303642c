"""Every run in a benchmark file is its own run (issue 22): vLLM `--append-result` files (a
newline, then the next result object) and SGLang JSONL files (one run per line) are split, each
run's role decided on its own, and runs of different roles or settings never pooled. Fixtures
are the samples of examples/imports/ written the way the tools append them."""

import json
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan.inputs import benchmarks
from tests.cli.test_cli import assert_clean_error, run
from tests.inputs.test_hostile_import import CONCURRENCIES, H200, sglang_decode, vllm, vllm_decode

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "examples" / "imports"


def appended(documents: list[dict]) -> str:
    """What `vllm bench serve --save-result --append-result` leaves after one run per document:
    serve.py writes json.dump(result) and, before each later one, a newline."""
    return "\n".join(json.dumps(d) for d in documents)


def jsonl(documents: list[dict]) -> str:
    """What `sglang.bench_serving --output-file` leaves: one json.dumps(result) + newline per run."""
    return "".join(json.dumps(d) + "\n" for d in documents)


def sglang_prefill() -> dict:
    return json.loads((SAMPLES / "sglang_h200_prefill.jsonl").read_text().splitlines()[0])


def _import(tmp_path: Path, fmt: str, text: str, *flags: str, name: str = "runs.json"):
    path = tmp_path / name
    path.write_text(text)
    result = run("import-profile", fmt, path, *H200, "--data-dir", tmp_path / "d", "--force",
                 *flags, "-f", "json")  # fmt: skip
    return path, result


def _tables(result) -> dict[str, dict]:
    assert result.returncode == 0, result.stderr
    return {t["kind"]: t for t in json.loads(result.stdout)["tables"]}


MIXED = [
    ("vLLM --append-result: a prefill run, then a decode sweep", "vllm",
     lambda: appended([vllm(), *(vllm_decode(c) for c in CONCURRENCIES)]), "runs.json"),
    ("SGLang JSONL: a prefill run, then a decode sweep", "sglang",
     lambda: jsonl([sglang_prefill(), *sglang_decode()]), "runs.jsonl"),
    ("SGLang JSONL: the decode sweep, then the prefill run", "sglang",
     lambda: jsonl([*sglang_decode(), sglang_prefill()]), "runs.jsonl"),
]  # fmt: skip


@pytest.mark.parametrize("fmt, text, name", [m[1:] for m in MIXED], ids=[m[0] for m in MIXED])
def test_a_file_holding_both_writes_both_tables_and_never_pools_them(tmp_path, fmt, text, name):
    """The prefill run is at concurrency 1 too: its 28 inter-token latencies must not join the
    sweep's batch 1 (46 of them, from the decode run at concurrency 1 alone)."""
    path, result = _import(tmp_path, fmt, text(), name=name)
    tables = _tables(result)
    assert sorted(tables) == ["decode", "prefill"]
    decode = np.array(tables["decode"]["rows"])
    assert decode[:, 0].tolist() == list(CONCURRENCIES)
    assert tables["decode"]["samples_per_row"][0] == 46  # the decode c1 run's ITLs only
    np.testing.assert_allclose(decode[:, 1], 0.015 + 0.0005 * decode[:, 0], rtol=0.02)
    prefill = np.array(tables["prefill"]["rows"])
    assert prefill[:, 0].tolist() == [1000, 8000, 32000, 128000]
    used = 27 if fmt == "vllm" else 28  # 28 requests; the vLLM sample's one failed request
    assert sum(tables["prefill"]["samples_per_row"]) == used
    prefill_line = 6 if text().startswith(json.dumps(sglang_decode()[0])) else 1
    assert tables["prefill"]["notes"][0].startswith(f"{path}:{prefill_line}: {used} requests used")
    decode_lines = [n.split(": batch")[0] for n in tables["decode"]["notes"] if ": batch" in n]
    assert f"{path}:{prefill_line}" not in decode_lines and len(decode_lines) == 5


def test_each_appended_vllm_run_is_named_by_the_line_it_starts_on(tmp_path):
    documents = [vllm_decode(c) for c in CONCURRENCIES]
    documents[3]["itls"] = [[-0.01, *r[1:]] for r in documents[3]["itls"]]
    path, result = _import(tmp_path, "vllm", appended(documents))
    assert_clean_error(result, 3, f"{path}:4: itls[0][0] must be in (0, 3.2e+07] s, found -0.01")
    # one object: named by the file alone, as before
    path, result = _import(tmp_path, "vllm", json.dumps(documents[3]))
    assert_clean_error(result, 3, f"{path}: itls[0][0]")
    # a run that is neither a prefill run nor part of a sweep: the refusal names its line
    unlimited = {**vllm(), "max_concurrency": None}
    del unlimited["start_times"]
    path, result = _import(
        tmp_path, "vllm", appended([*map(vllm_decode, CONCURRENCIES), unlimited])
    )
    assert_clean_error(result, 3, f"{path}:6: max_concurrency is unlimited", "--max-concurrency 1")


BAD_FILES = [
    ("a truncated second object", "vllm", lambda: appended([vllm(), vllm_decode(8)])[:-40],
     "runs.json", ["runs.json:2: not JSON"]),
    ("text between appended objects", "vllm",
     lambda: json.dumps(vllm()) + "\nx\n" + json.dumps(vllm()), "runs.json",
     ["runs.json: not JSON (text after the object, line 2)"]),
    ("two decode sweeps at different settings", "sglang",
     lambda: jsonl([*sglang_decode(),
                    *({**r, "input_lens": [8 * n for n in r["input_lens"]]} for r in sglang_decode())]),
     "runs.jsonl", ["runs.jsonl:6: two decode sweeps at different settings",
                    "mean input 1,024", "mean input 8,192", "never pooled"]),
    ("an open-loop run of the sweep's settings without start times", "sglang",
     lambda: jsonl([*sglang_decode(), {**sglang_decode()[2], "request_rate": 4.0,
                                       "max_concurrency": None}]),
     "runs.jsonl", ["runs.jsonl:6: max_concurrency is unlimited", "--max-concurrency 1"]),
    ("a sweep whose run at concurrency 8 is open-loop", "sglang",
     lambda: jsonl([{**r, "request_rate": 4.0} if r["max_concurrency"] == 8 else r
                    for r in sglang_decode()]),
     "runs.jsonl", ["runs.jsonl:2: decode needs a closed-loop run", "request_rate 4"]),
]  # fmt: skip


@pytest.mark.parametrize("fmt, text, name, fragments", [b[1:] for b in BAD_FILES],
                         ids=[b[0] for b in BAD_FILES])  # fmt: skip
def test_a_run_that_cannot_be_used_is_refused_by_its_line(tmp_path, fmt, text, name, fragments):
    _, result = _import(tmp_path, fmt, text(), name=name)
    assert_clean_error(result, 3, *fragments)
    assert not (tmp_path / "d").exists()


def test_an_explicit_kind_takes_its_runs_and_says_which_it_set_aside(tmp_path):
    text = jsonl([sglang_prefill(), *sglang_decode()])
    path, result = _import(tmp_path, "sglang", text, "--kind", "decode", name="runs.jsonl")
    tables = _tables(result)
    assert list(tables) == ["decode"]
    assert (
        f"{path}:1: not used (not in the decode sweep; only decode runs asked for)"
        in (tables["decode"]["notes"])
    )
    path, result = _import(tmp_path, "sglang", text, "--kind", "prefill", name="runs.jsonl")
    assert list(_tables(result)) == ["prefill"]
    _, result = _import(tmp_path, "sglang", jsonl(sglang_decode()), "--kind", "prefill",
                        name="runs.jsonl")  # fmt: skip
    assert_clean_error(result, 3, "no prefill run among the files", "are a decode sweep by "
                       "concurrency (1, 8, 16, 20, 32)")  # fmt: skip


def test_a_file_of_countless_tiny_runs_is_refused_before_they_add_up(tmp_path, monkeypatch):
    monkeypatch.setattr(benchmarks, "MAX_RUNS_PER_FILE", 5)
    tiny = {"input_lens": [1000], "ttfts": [0.5], "max_concurrency": 1, "date": "x"}
    _, result = _import(tmp_path, "vllm", appended([tiny] * 7))
    assert_clean_error(result, 3, "runs.json:6: more than 5 runs in one file")
    _, result = _import(tmp_path, "sglang", jsonl([{**tiny, "concurrency": 1}] * 7), name="r.jsonl")
    assert_clean_error(result, 3, "r.jsonl:6: more than 5 runs in one file")
