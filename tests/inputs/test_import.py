"""`prfaas-plan import-profile`: each format round-trips into the shipped layout, bad input is one
line naming the file and field with nothing written, an imported copy of the paper's H200 table
reproduces the case-study plan, and `check` passes on the imported data."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan.inputs.catalog import Catalog
from tests.cli.test_cli import assert_clean_error, run

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "examples" / "imports"
SHIPPED = ROOT / "data" / "profiles" / "internal-1t-hybrid"
H200 = ("--model", "internal-1t-hybrid", "--gpu", "h200", "--gpus-per-instance", "8")
H20 = ("--model", "internal-1t-hybrid", "--gpu", "h20", "--gpus-per-instance", "8")


def _import(fmt, files, data_dir, *flags):
    return run("import-profile", fmt, *files, *flags, "--data-dir", data_dir, "-f", "json")


def _table(path):
    return np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


def _fit(table):
    return np.polynomial.polynomial.polyfit(table[:, 0], table[:, 1], 2)


def _max_fit_gap(a, b):
    """Largest relative gap between two tables' quadratic fits over [1K, 128K] tokens."""
    grid = np.linspace(1000, 128000, 512)
    fa, fb = (np.polynomial.polynomial.polyval(grid, _fit(t)) for t in (a, b))
    return float(np.max(np.abs(fa / fb - 1)))


@pytest.fixture(scope="module")
def imported_h200(tmp_path_factory):
    """A data directory initialised from the shipped data, its H200 table replaced by the
    import of the vLLM sample (made from the paper's H200 table)."""
    data = tmp_path_factory.mktemp("imported") / "my-data"
    result = _import("vllm", [SAMPLES / "vllm_h200_prefill.json"], data, *H200, "--force")
    assert result.returncode == 0, result.stderr
    return data, json.loads(result.stdout)


@pytest.mark.parametrize(
    "fmt, files",
    [
        ("vllm", ["vllm_h200_prefill.json"]),
        ("sglang", ["sglang_h200_prefill.jsonl"]),
        ("dynamo", ["dynamo/prefill/raw_data.npz"]),
    ],
)
def test_each_format_round_trips_the_h200_table(tmp_path, fmt, files):
    result = _import(fmt, [SAMPLES / f for f in files], tmp_path / "d", *H200, "--force")
    assert result.returncode == 0, result.stderr
    written = tmp_path / "d/profiles/internal-1t-hybrid/prefill/h200-x8"
    table = _table(written / "prefill_latency.csv")
    shipped = _table(SHIPPED / "prefill/h200-x8/prefill_latency.csv")
    assert table[:, 0].tolist() == shipped[:, 0].tolist()
    assert np.max(np.abs(table[:, 1] / shipped[:, 1] - 1)) < 0.01  # 0.5% noise, medians
    assert _max_fit_gap(table, shipped) < 0.01
    meta = Catalog.open(tmp_path / "d").prefill_latency("internal-1t-hybrid", "h200", 8)
    assert meta.provenance == "measured"
    text = (written / "meta.yaml").read_text()
    assert "sha256:" in text and "source_files:" in text


def test_decode_from_several_vllm_files_and_one_sglang_file(tmp_path):
    vllm = sorted(SAMPLES.glob("vllm_h20_decode_c*.json"))
    for fmt, files, where in (
        ("vllm", vllm, "a"),
        ("sglang", [SAMPLES / "sglang_h20_decode.jsonl"], "b"),
    ):
        result = _import(fmt, files, tmp_path / where, *H20, "--force")
        assert result.returncode == 0, result.stderr
        table = Catalog.open(tmp_path / where).decode_table("internal-1t-hybrid", "h20", 8)
        assert table.batch_sizes.tolist() == [1, 8, 16, 20, 32]
        # the samples' step is 15 ms + 0.5 ms per request (3% noise, medians of >= 46 ITLs)
        np.testing.assert_allclose(
            table.step_latencies_s, 0.015 + 0.0005 * table.batch_sizes, rtol=0.02
        )


def test_dynamo_decode_keeps_its_context_column_and_check_reads_it(tmp_path):
    files = [SAMPLES / "dynamo/prefill/raw_data.npz", SAMPLES / "dynamo/decode/raw_data.npz"]
    result = _import("dynamo", files, tmp_path / "d", *H200, "--force")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert [t["kind"] for t in document["tables"]] == ["prefill", "decode"]
    csv = tmp_path / "d/profiles/internal-1t-hybrid/decode/h200-x8/decode_step.csv"
    assert csv.read_text().splitlines()[0] == "batch_size,context_tokens,decode_step_latency_s"
    table = Catalog.open(tmp_path / "d").decode_table("internal-1t-hybrid", "h200", 8)
    assert table.context_tokens is not None and table.context_tokens.size == 15
    assert sorted(set(table.batch_sizes.tolist())) == [1, 8, 16, 20, 32]
    checked = run("check", tmp_path / "d", "-f", "json")
    assert checked.returncode == 0, checked.stdout


def test_imported_h200_reproduces_the_case_study_plan(imported_h200):
    data, document = imported_h200
    assert document["initialised_from_shipped_data"] is True
    shipped = json.loads(run("optimize", "-f", "json").stdout)["plan"]
    mine = json.loads(run("optimize", "--data-dir", data, "-f", "json").stdout)["plan"]
    for key in ("prfaas_instances", "pd_prefill_instances", "pd_decode_instances"):
        assert mine[key] == shipped[key]
    assert mine["threshold_tokens"] == pytest.approx(shipped["threshold_tokens"], rel=0.005)
    assert mine["throughput_rps"]["system"] == pytest.approx(
        shipped["throughput_rps"]["system"], rel=0.005
    )


def test_check_passes_on_the_imported_data(imported_h200):
    data, _ = imported_h200
    result = run("check", data, "-f", "json")
    assert result.returncode == 0, result.stdout
    assert json.loads(result.stdout)["ok"] is True


def _vllm_sample(**changes):
    document = json.loads((SAMPLES / "vllm_h200_prefill.json").read_text())
    document.update(changes)
    return document


def _sglang_sample(**changes):
    line = (SAMPLES / "sglang_h200_prefill.jsonl").read_text().splitlines()[0]
    return {**json.loads(line), **changes}


def _write(tmp_path, name, document):
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def _queued():
    document = _vllm_sample(max_concurrency=8)
    document["start_times"] = [0.0] * len(document["ttfts"])  # every request sent at once
    return document


BAD = [
    ("not json", "{not json", ("not JSON",)),
    (
        "no details",
        {"date": "x", "backend": "vllm"},
        ("no per-request input_lens, ttfts", "--save-detailed"),
    ),
    ("ttft count", _vllm_sample(ttfts=[0.5]), ("ttfts has 1 entries",)),
    (
        "negative",
        _vllm_sample(ttfts=[0.0, -0.1, *_vllm_sample()["ttfts"][2:]]),
        ("ttfts[", "found -0.1"),
    ),
    ("zero itl", _vllm_sample(itls=[[0.0]] * 28), ("itls[", "found 0")),
    ("text length", _vllm_sample(input_lens=["1000"] * 28), ("input_lens[0] must be a number",)),
    ("one length", _vllm_sample(input_lens=[1000] * 28), ("1 distinct length", "at least 3")),
    ("queued", _queued(), ("requests ran alone", "dominated by queueing")),
    (
        "no timing",
        _vllm_sample(max_concurrency=None, start_times=None),
        ("unlimited", "--max-concurrency 1"),
    ),
]


@pytest.mark.parametrize("name, document, fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_vllm_input_is_one_line_and_nothing_is_written(tmp_path, name, document, fragments):
    if isinstance(document, dict) and document.get("start_times", 0) is None:
        del document["start_times"]
    path = _write(tmp_path, "run.json", document)
    result = run("import-profile", "vllm", path, *H200, "--data-dir", tmp_path / "d", "--force")
    assert_clean_error(result, 3, str(path), *fragments)
    assert not (tmp_path / "d").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no staging left behind


def test_mixed_models_wrong_format_and_decode_run_errors(tmp_path):
    other = _write(tmp_path, "other.json", _vllm_sample(model_id="qwen3-235b"))
    result = run("import-profile", "vllm", SAMPLES / "vllm_h200_prefill.json", other, *H200,
                 "--data-dir", tmp_path / "d", "--force")  # fmt: skip
    assert_clean_error(result, 3, "other.json", "model_id is 'qwen3-235b'")
    result = run("import-profile", "dynamo", SAMPLES / "vllm_h200_prefill.json", *H200,
                 "--data-dir", tmp_path / "d", "--force")  # fmt: skip
    assert_clean_error(result, 3, "not a numpy .npz archive")
    result = run("import-profile", "vllm", SAMPLES / "sglang_h20_decode.jsonl", *H20,
                 "--data-dir", tmp_path / "d", "--force")  # fmt: skip
    assert_clean_error(result, 3, "sglang_h20_decode.jsonl:1", "found an SGLang bench_serving JSONL",
                       "run import-profile sglang")  # fmt: skip
    open_loop = _write(
        tmp_path,
        "open.json",
        {**json.loads((SAMPLES / "vllm_h20_decode_c8.json").read_text()), "request_rate": 4.0},
    )
    result = run("import-profile", "vllm", open_loop, SAMPLES / "vllm_h20_decode_c16.json", *H20,
                 "--data-dir", tmp_path / "d", "--force")  # fmt: skip
    assert_clean_error(result, 3, "open.json", "closed-loop", "request_rate 4")
    assert not (tmp_path / "d").exists()


def test_existing_profile_needs_force_and_a_physics_failure_leaves_the_data_as_it_was(tmp_path):
    data = tmp_path / "d"
    result = _import("vllm", [SAMPLES / "vllm_h200_prefill.json"], data, *H200)
    assert_clean_error(result, 3, "already exists", "--force")
    assert not data.exists()
    assert (
        _import("vllm", [SAMPLES / "vllm_h200_prefill.json"], data, *H200, "--force").returncode
        == 0
    )
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    result = _import("vllm", [SAMPLES / "vllm_h200_prefill.json"], data, *H200)
    assert_clean_error(result, 3, "already exists")
    # the times in ms under seconds fields: the MFU floor refuses it, nothing changes
    times = {
        k: [t * 1000 for t in _vllm_sample()[k]] for k in ("ttfts", "latencies", "start_times")
    }
    slow = _vllm_sample(**times)
    slow["errors"] = ["", *slow["errors"][1:]]
    slow["ttfts"][0], slow["latencies"][0] = slow["ttfts"][1], slow["latencies"][1]
    result = _import("vllm", [_write(tmp_path, "ms.json", slow)], data, *H200, "--force")
    assert result.returncode == 4 and "is the column in ms" in result.stderr, result.stderr
    assert {p: p.read_bytes() for p in data.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "ms.json"]


def test_an_existing_non_data_directory_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("mine")
    result = _import("vllm", [SAMPLES / "vllm_h200_prefill.json"], tmp_path / "d", *H200)
    assert_clean_error(result, 3, "no gpus/ folder")
    shutil.rmtree(tmp_path / "d")


def _decode_c8(**changes):
    return {**json.loads((SAMPLES / "vllm_h20_decode_c8.json").read_text()), **changes}


def test_more_bad_input_classes(tmp_path):
    falling = _vllm_sample()
    falling["ttfts"] = [
        7.0 if n == 1000 else t
        for n, t in zip(falling["input_lens"], falling["ttfts"], strict=True)
    ]  # the shortest prompts slowest: a queued or mislabelled run (one at a time, no timings)
    del falling["latencies"], falling["start_times"]
    concurrent = {**_sglang_sample(), "max_concurrency": None}  # SGLang saves no start_times
    cases = [
        ("vllm", _write(tmp_path, "falling.json", falling), H200, ("median TTFT falls", "7 s at 1000")),
        ("vllm", _write(tmp_path, "thin.json", _decode_c8(duration=1e4)), (*H20, "--kind", "decode"),
         ("mean concurrency", "below half of max_concurrency 8")),
        ("sglang", _write(tmp_path, "open.jsonl", json.dumps(concurrent) + "\n"),
         H200, ("open.jsonl:1", "unlimited", "--max-concurrency 1")),
    ]  # fmt: skip
    for fmt, path, flags, fragments in cases:
        result = run("import-profile", fmt, path, *flags, "--data-dir", tmp_path / "d", "--force")
        assert_clean_error(result, 3, str(path), *fragments)
    np.savez(tmp_path / "raw_data.npz", isl=np.array([1.0]))
    result = run(
        "import-profile", "dynamo", tmp_path / "raw_data.npz", *H200, "--data-dir", tmp_path / "d"
    )
    assert_clean_error(result, 3, "prefill_isl, prefill_ttft (prefill)", "found isl")
    np.savez(
        tmp_path / "raw_data.npz",
        prefill_isl=np.array([1000.0, 8000, 32000]),
        prefill_ttft=np.array([440.0, 0, 1840]),
    )
    result = run(
        "import-profile", "dynamo", tmp_path / "raw_data.npz", *H200, "--data-dir", tmp_path / "d"
    )
    assert_clean_error(result, 3, "prefill_ttft[1] must be in (0, 3.2e+10] ms, found 0")
    assert not (tmp_path / "d").exists()


def test_a_new_profile_lands_in_an_existing_data_directory_without_force(imported_h200, tmp_path):
    data = tmp_path / "d"
    shutil.copytree(imported_h200[0], data)
    files = [SAMPLES / "dynamo/decode/raw_data.npz"]
    result = _import("dynamo", files, data, *H200)  # no shipped h200 decode table
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["initialised_from_shipped_data"] is False
    assert (data / "profiles/internal-1t-hybrid/decode/h200-x8/decode_step.csv").is_file()
    # the earlier import is still there
    assert (data / "profiles/internal-1t-hybrid/prefill/h200-x8/meta.yaml").read_text().count(
        "sha256"
    ) == 1


def test_check_finds_a_broken_context_column(imported_h200, tmp_path):
    data = tmp_path / "d"
    shutil.copytree(imported_h200[0], data)
    assert _import("dynamo", [SAMPLES / "dynamo/decode/raw_data.npz"], data, *H200).returncode == 0
    csv = data / "profiles/internal-1t-hybrid/decode/h200-x8/decode_step.csv"
    csv.write_text(csv.read_text().replace("\n1,1250,", "\n1,0,", 1))
    result = run("check", data, "-f", "json")
    assert result.returncode == 8
    assert "context_tokens must be finite, > 0" in result.stdout


def test_queue_free_requests_match_a_brute_force_overlap_check():
    """`_alone` (sorted starts, prefix maxima) against the definition: no other request in
    flight between a request's start and its first token."""
    from prfaas_plan.inputs.benchmark_run import BenchmarkRun
    from prfaas_plan.inputs.profile_import import _alone

    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 25))
        start, ttft = np.round(rng.uniform(0, 20, n), 1), np.round(rng.uniform(0.1, 2, n), 1)
        latency = ttft + np.round(rng.uniform(0, 2, n), 1)  # rounded: ties happen
        run_ = BenchmarkRun("x", "e", None, None, None, 4, np.inf, np.full(n, 1000.0), np.zeros(n),
                            ttft, np.empty(0), start, latency, 0, None)  # fmt: skip
        first, end = start + ttft, start + latency
        brute = [not np.any(np.delete((start < first[i]) & (end > start[i]), i)) for i in range(n)]
        assert _alone(run_).tolist() == brute


def _jsonl(document):
    return json.dumps(document) + "\n"


# FORMAT must match the file: a result of the other tool (told by the settings only it writes,
# not by `backend`, the server benchmarked) is refused, naming what FORMAT expects and what the
# file looks like; a result of the right tool that benchmarked the other's server is read
WRONG_FORMAT = [
    ("vLLM prefill as sglang", "sglang", "vllm_h200_prefill.json", H200,
     ("vllm_h200_prefill.json:1", "import-profile sglang expects an SGLang bench_serving JSONL",
      "found a vLLM bench serve JSON", "model_id", "backend 'vllm'", "run import-profile vllm")),
    ("vLLM decode as sglang", "sglang", "vllm_h20_decode_c8.json", H20,
     ("vllm_h20_decode_c8.json:1", "expects an SGLang", "run import-profile vllm")),
    ("SGLang prefill as vllm", "vllm", "sglang_h200_prefill.jsonl", H200,
     ("sglang_h200_prefill.jsonl", "import-profile vllm expects a vLLM bench serve JSON",
      "found an SGLang bench_serving JSONL", "dataset_name", "backend 'sglang'",
      "run import-profile sglang")),
    ("SGLang without details keys as vllm", "vllm",
     lambda tmp: _write(tmp, "r.json", {k: v for k, v in _sglang_sample().items()
                                        if k != "dataset_name"}), H200,
     ("r.json", "found an SGLang bench_serving JSONL", "concurrency")),
    ("vLLM statistics only as sglang", "sglang",
     lambda tmp: _write(tmp, "r.jsonl", _jsonl({"backend": "vllm", "mean_e2el_ms": 5.0,
                                                "input_lens": [1000], "ttfts": [0.4]})), H200,
     ("r.jsonl:1", "found a vLLM bench serve JSON", "mean_e2el_ms")),
]  # fmt: skip


@pytest.mark.parametrize(
    "fmt, sample, flags, fragments", [w[1:] for w in WRONG_FORMAT], ids=[w[0] for w in WRONG_FORMAT]
)
def test_a_format_that_does_not_match_the_file_is_refused(tmp_path, fmt, sample, flags, fragments):
    path = sample(tmp_path) if callable(sample) else SAMPLES / sample
    result = run("import-profile", fmt, path, *flags, "--data-dir", tmp_path / "d", "--force")
    assert_clean_error(result, 3, *fragments)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(
    "fmt, document, engine",
    [
        ("vllm", lambda: json.dumps(_vllm_sample(backend="sglang")), "vLLM (vllm bench serve), backend sglang"),
        ("sglang", lambda: _jsonl(_sglang_sample(backend="vllm")), "SGLang (sglang.bench_serving), backend vllm"),
    ],
    ids=["vLLM client on an SGLang server", "SGLang client on a vLLM server"],
)  # fmt: skip
def test_the_backend_benchmarked_does_not_decide_the_format(tmp_path, fmt, document, engine):
    """meta.yaml records the tool that measured and the server it measured."""
    import yaml

    path = tmp_path / "run.json"
    path.write_text(document())
    data = tmp_path / "d"
    result = _import(fmt, [path], data, *H200, "--force")
    assert result.returncode == 0, result.stderr
    meta = yaml.safe_load(
        (data / "profiles/internal-1t-hybrid/prefill/h200-x8/meta.yaml").read_text()
    )
    assert meta["engine"].startswith(engine)
