"""Dynamo profiler data as the profiler writes it (issue 22): a decode sweep whose client
concurrency goes past what the engine batches keeps only the points the engine batched; the
ConfigMap JSON form (`prefill_raw_data.json`, `decode_raw_data.json`, made by dgd_generation.py
from the npz with `.tolist()` and `json.dumps`) gives the same tables; AIConfigurator-made data is
never stamped `provenance: measured`."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.cli.test_cli import assert_clean_error, run
from tests.inputs.test_hostile_import import H200

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "examples" / "imports" / "dynamo"
DECODE_CSV = "profiles/internal-1t-hybrid/decode/h200-x8/decode_step.csv"


def arrays(kind: str) -> dict[str, np.ndarray]:
    with np.load(SAMPLES / kind / "raw_data.npz") as sample:
        return {k: sample[k] for k in sample.files}


def configmap_json(kind: str, **extra: object) -> str:
    """dgd_generation.py's ConfigMap data entry for `kind` from the sample npz."""
    raw = arrays(kind)
    keys = {
        "prefill": ("prefill_isl", "prefill_ttft", "prefill_thpt_per_gpu"),
        "decode": ("x_kv_usage", "y_context_length", "z_itl", "z_thpt_per_gpu"),
    }[kind]
    document: dict[str, object] = {k: raw[k].tolist() for k in keys}
    if kind == "decode":
        document["max_kv_tokens"] = int(raw["max_kv_tokens"].tolist()[0])
    return json.dumps({**document, **extra})


def step_s(batch):
    return 0.004 + 0.0001 * batch  # a decode step rising with the batch (seconds)


def saturated_sweep(path: Path, max_num_seqs: int = 64, gpus: int = 8) -> None:
    """profile_decode.py's sweep of num_request at two contexts on an engine that batches at
    most max_num_seqs: beyond it the rest queue, the ITL is that of max_num_seqs and the
    throughput stops growing (aiperf's output tokens/s, 2% of each request's time in prefill)."""
    osl, max_kv = 500, 1_000_000
    usage, context, itl, thpt = [], [], [], []
    for isl in (100, 2000):
        for n in (1, 16, 32, 48, 64, 96, 128, 160):
            engine = min(n, max_num_seqs)
            usage.append((isl + osl / 2) * n / max_kv)
            context.append(isl + osl / 2)
            itl.append(step_s(engine) * 1e3 * (1 + 0.001 * isl / 2000))  # ms
            thpt.append(0.98 * engine / step_s(engine) / gpus)
    np.savez(path, x_kv_usage=np.array(usage), y_context_length=np.array(context),
             z_itl=np.array(itl), z_thpt_per_gpu=np.array(thpt), max_kv_tokens=np.array([max_kv]))  # fmt: skip


def _import(files, data: Path, *flags: str):
    return run("import-profile", "dynamo", *files, *H200, "--data-dir", data, "--force", *flags,
               "-f", "json")  # fmt: skip


def test_points_past_the_engine_batch_are_dropped_and_said(tmp_path):
    saturated_sweep(tmp_path / "raw_data.npz")
    result = _import([tmp_path / "raw_data.npz"], tmp_path / "d")
    assert result.returncode == 0, result.stderr
    (table,) = json.loads(result.stdout)["tables"]
    rows = np.array(table["rows"])
    assert sorted(set(rows[:, 0].tolist())) == [1, 16, 32, 48, 64]  # never "batch 96" at step(64)
    np.testing.assert_allclose(rows[:, 2], step_s(rows[:, 0]), rtol=0.002)
    assert any("10 of 16 points used; 6 dropped as saturated" in n for n in table["notes"])


def test_a_sweep_without_throughput_says_saturation_was_not_checked(tmp_path):
    raw = {k: v for k, v in arrays("decode").items() if k != "z_thpt_per_gpu"}
    np.savez(tmp_path / "raw_data.npz", **raw)
    result = _import([tmp_path / "raw_data.npz"], tmp_path / "d")
    assert result.returncode == 0, result.stderr
    notes = json.loads(result.stdout)["tables"][0]["notes"]
    assert any("no z_thpt_per_gpu: saturation" in n for n in notes)


def test_the_configmap_json_form_gives_the_npz_tables(tmp_path):
    files = []
    for kind in ("prefill", "decode"):
        files.append(tmp_path / f"{kind}_raw_data.json")
        files[-1].write_text(configmap_json(kind))
    from_json = _import(files, tmp_path / "a")
    from_npz = _import([SAMPLES / "prefill/raw_data.npz", SAMPLES / "decode/raw_data.npz"],
                       tmp_path / "b")  # fmt: skip
    assert from_json.returncode == 0 and from_npz.returncode == 0, from_json.stderr
    tables = [[t["rows"] for t in json.loads(r.stdout)["tables"]] for r in (from_json, from_npz)]
    assert tables[0] == tables[1]
    assert (tmp_path / "a" / DECODE_CSV).read_text() == (tmp_path / "b" / DECODE_CSV).read_text()


def _meta(data: Path) -> dict:
    return yaml.safe_load((data / DECODE_CSV).with_name("meta.yaml").read_text())


def test_aiconfigurator_data_is_never_stamped_measured(tmp_path):
    marked = tmp_path / "decode_raw_data.json"
    marked.write_text(configmap_json("decode", source="AIConfigurator estimate (rapid mode)"))
    result = _import([marked], tmp_path / "a")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["provenance"] == "estimated"
    assert _meta(tmp_path / "a")["provenance"] == "estimated"
    assert run("check", tmp_path / "a", "-f", "json").returncode == 0
    result = _import([marked], tmp_path / "b", "--provenance", "measured")
    assert_clean_error(result, 3, "decode_raw_data.json: estimated by AIConfigurator (its source "
                       "'AIConfigurator estimate (rapid mode)')", "--provenance estimated")  # fmt: skip
    assert not (tmp_path / "b").exists()
    # the profiler's npz says nothing: the flag says it
    result = _import([SAMPLES / "decode/raw_data.npz"], tmp_path / "c", "--provenance", "estimated")
    assert result.returncode == 0, result.stderr
    assert _meta(tmp_path / "c")["provenance"] == "estimated"
    result = _import([SAMPLES / "decode/raw_data.npz"], tmp_path / "e", "--provenance", "guessed")
    assert result.returncode == 2 and "guessed" in result.stderr


HOSTILE_JSON = [
    ("truncated", lambda: configmap_json("decode")[:-30], ["decode_raw_data.json: not JSON"]),
    ("a key twice", lambda: configmap_json("decode")[:-1] + ', "z_itl": []}',
     ["duplicate key 'z_itl'"]),
    ("max_kv_tokens as text", lambda: configmap_json("decode", max_kv_tokens="945029"),
     ["max_kv_tokens must be one number, found '945029'"]),
    ("lists of different lengths",
     lambda: configmap_json("decode", z_itl=arrays("decode")["z_itl"][:-1].tolist()),
     ["x_kv_usage, y_context_length and z_itl differ in length"]),
    ("ITLs in seconds under the ms key",
     lambda: configmap_json("decode", z_itl=(arrays("decode")["z_itl"] / 1e3).tolist()),
     ["z_itl 0.0155", "the values look like seconds, expected milliseconds"]),
    ("neither form", lambda: json.dumps({"isl": [1, 2]}),
     ["not a numpy .npz archive, nor its ConfigMap JSON form", "found isl"]),
    ("text after the object", lambda: configmap_json("decode") + "\nx",
     ["not JSON (text after the object, line 2)"]),
]  # fmt: skip


@pytest.mark.parametrize("text, fragments", [h[1:] for h in HOSTILE_JSON],
                         ids=[h[0] for h in HOSTILE_JSON])  # fmt: skip
def test_hostile_configmap_json_is_one_line(tmp_path, text, fragments):
    path = tmp_path / "decode_raw_data.json"
    path.write_text(text())
    result = run("import-profile", "dynamo", path, *H200, "--data-dir", tmp_path / "d", "--force")
    code = 4 if "seconds" in fragments[-1] else 3
    assert_clean_error(result, code, *fragments)
    assert not (tmp_path / "d").exists()
