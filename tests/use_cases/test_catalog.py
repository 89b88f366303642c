"""Issue 3: the model catalog, KV size from architecture, derived profiles, the bandwidth wall
and `prfaas-plan check`. Hand values restate shared/reference/model-configs.md (per-token bytes,
fixed state; its "Summary" table) and the paper's Table 3 (Φ_kv)."""

import importlib.util
import json
import shutil

import numpy as np
import pytest
import yaml

from prfaas_plan import units
from prfaas_plan.analytic.architecture import all_full_attention, kv_footprint
from prfaas_plan.analytic.egress import (
    egress_at_length,
    egress_at_threshold,
    smallest_fitting_threshold,
)
from prfaas_plan.analytic.log_normal import TruncatedLogNormal
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.resources import default_data_dir, default_scenario_file
from prfaas_plan.use_cases.table_checks import KV_TOLERANCE
from tests.cli.test_cli import assert_clean_error, data_copy, run
from tests.conftest import ROOT

CATALOG = Catalog.open()
MIB = 2**20
# (per-token KV bytes, fixed per-request bytes), computed by hand from the architecture facts
HAND = {
    "internal-1t-hybrid": (15 * (512 + 64) * 2, 45 * 64 * 128 * 128 * 4),
    "kimi-linear-48b": (7 * (512 + 64) * 2, 20 * 32 * 128 * 128 * 4 + 20 * 12288 * 3 * 2),
    "mimo-v2-flash": (9 * 4 * (192 + 128) * 2, 39 * 8 * (192 + 128) * 2 * 128),
    "qwen3.5-397b": (15 * 2 * (256 + 256) * 2, 45 * 64 * 128 * 128 * 4 + 45 * 12288 * 3 * 2),
    "ring-2.5-1t": (10 * (512 + 64) * 2, 70 * 64 * 128 * 128 * 4),
    "minimax-m2.5": (62 * 8 * (128 + 128) * 2, 0),
    "qwen3-235b": (94 * 4 * (128 + 128) * 2, 0),
    "kimi-k2": (61 * (512 + 64) * 2, 0),
}
# model-configs.md summary: per-token KiB and fixed MiB as printed there
REFERENCE = {
    "kimi-linear-48b": (7.875, 41.4), "mimo-v2-flash": (22.5, 24.4), "qwen3.5-397b": (30, 183.2),
    "ring-2.5-1t": (11.25, 280), "minimax-m2.5": (248, 0), "qwen3-235b": (188, 0), "kimi-k2": (68.6, 0),
}  # fmt: skip
TABLE3_GBPS = {  # paper Table 3, at 1K / 8K / 32K / 128K = 1024 / 8192 / 32768 / 131072 tokens
    "kimi-linear-48b": (1.19, 2.29, 3.87, 4.88),
    "mimo-v2-flash": (0.82, 2.85, 4.66, 4.71),
    "qwen3.5-397b": (4.13, 6.28, 8.25, 7.47),
    "ring-2.5-1t": (7.27, 4.47, 2.59, 1.46),
    "minimax-m2.5": (4.94, 32.87, 59.93, 47.82),
    "qwen3-235b": (4.12, 22.42, 33.35, 21.50),
}
TABLE3_GBPS_32K = {model: gbps[2] for model, gbps in TABLE3_GBPS.items()}


def test_catalog_holds_the_paper_models_with_sources():
    models = CATALOG.models()
    assert set(HAND) <= set(models)
    for name, spec in models.items():
        assert all(spec.sources[k] for k in ("params", "attention", "layers", "context")), name
    assert "layers" in models["internal-1t-hybrid"].inferred


@pytest.mark.parametrize("model", sorted(HAND))
def test_kv_per_token_and_fixed_state_match_hand_computation(model):
    f = kv_footprint(CATALOG.model(model).layer_groups(), "bf16", "fp32")
    per_token, fixed = HAND[model]
    assert f.per_token_bytes == per_token
    assert f.fixed_state_bytes + f.swa_bytes_per_token * f.swa_window_tokens == fixed
    if model in REFERENCE:  # and the printed summary of model-configs.md
        kib, mib = REFERENCE[model]
        assert f.per_token_bytes / 1024 == pytest.approx(kib, abs=0.05)
        fixed_mib = (f.fixed_state_bytes + f.swa_bytes_per_token * f.swa_window_tokens) / MIB
        assert fixed_mib == pytest.approx(mib, abs=0.05)


def test_dtype_options_change_the_footprint():
    layers = CATALOG.model("ring-2.5-1t").layer_groups()
    fp32, bf16 = kv_footprint(layers, "bf16", "fp32"), kv_footprint(layers, "bf16", "bf16")
    assert fp32.fixed_state_bytes == 2 * bf16.fixed_state_bytes == 280 * MIB  # model-configs §4
    assert kv_footprint(layers, "fp8", "fp32").per_token_bytes == fp32.per_token_bytes / 2


def test_swa_counts_at_most_its_window():
    f = kv_footprint(CATALOG.model("mimo-v2-flash").layer_groups(), "bf16", "fp32")
    assert f.size_bytes(64) == 64 * 23040 + 64 * 199680
    assert f.size_bytes(100_000) == 100_000 * 23040 + 128 * 199680


def test_case_study_architecture_agrees_with_its_measured_kv_table():
    """Within KV_TOLERANCE (5%). Caveat: the inferred architecture was read off this very table
    (model-configs.md), so this is a consistency check, not independent evidence."""
    layers = CATALOG.model("internal-1t-hybrid").layer_groups()
    measured = CATALOG.kv_cache_size("internal-1t-hybrid", "bf16")
    tokens = np.array([1000, 8000, 32000, 128000.0])
    table_mib = np.array([190.8, 308.9, 701.3, 2316.3])  # paper Table 5
    estimate = kv_footprint(layers, "bf16", "fp32").size_bytes(tokens)
    assert np.all(np.abs(units.mib_to_bytes(table_mib) / estimate - 1) < KV_TOLERANCE)
    assert np.all(np.abs(measured(tokens) / estimate - 1) < KV_TOLERANCE)


def test_all_full_attention_shows_the_hybrid_saving():
    layers = CATALOG.model("kimi-linear-48b").layer_groups()
    assert all_full_attention(layers, "bf16").per_token_bytes == 27 * (512 + 64) * 2
    dense = CATALOG.model("qwen3-235b").layer_groups()
    assert (
        all_full_attention(dense, "bf16").per_token_bytes
        == kv_footprint(dense, "bf16", "fp32").per_token_bytes
    )


@pytest.mark.parametrize("model", sorted(TABLE3_GBPS_32K))
def test_derived_profiles_reproduce_table3(model):
    """T = S_kv / Φ_kv at the Table 3 points, so S_kv / T gives Φ_kv back exactly at those points;
    the quadratic fit through them stays within its stated residual."""
    folder = default_data_dir() / "profiles" / model / "prefill" / "h200-x8"
    rows = np.loadtxt(folder / "prefill_latency.csv", delimiter=",", skiprows=1)
    footprint = kv_footprint(CATALOG.model(model).layer_groups(), "bf16", "fp32")
    phi_gbps = units.bytes_per_s_to_gbps(footprint.size_bytes(rows[:, 0]) / rows[:, 1])
    assert rows[:, 0].tolist() == [1024, 8192, 32768, 131072]
    assert phi_gbps == pytest.approx(TABLE3_GBPS[model], rel=1e-5)
    curve = CATALOG.prefill_latency(model, "h200", 8)
    assert curve.provenance == "derived"
    assert curve.max_relative_residual < 0.06


def test_derivation_script_reproduces_the_committed_tables(tmp_path):
    shutil.copytree(ROOT / "data", tmp_path / "data")
    shutil.copy(ROOT / "models.yaml", tmp_path / "models.yaml")
    spec = importlib.util.spec_from_file_location(
        "derive", ROOT / "scripts" / "derive_table3_profiles.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    for path in (ROOT / "data" / "profiles").rglob("*"):
        if path.is_file():
            twin = tmp_path / "data" / path.relative_to(ROOT / "data")
            assert twin.read_text() == path.read_text(), path


def test_egress_of_a_512_gpu_h200_cluster_at_32k():
    """The paper's cluster-scale reasoning: B_out = 64 instances x Φ_kv(32K). Against Table 3
    the fit adds at most its residual (6%); nothing in the catalog fits 100 Gbps at that size,
    but the hybrids need ~10x less than the dense-GQA models."""
    link = units.gbps_to_bytes_per_s(100)
    needed = {}
    for model, gbps in TABLE3_GBPS_32K.items():
        e = egress_at_length(CATALOG.prefill_latency(model, "h200", 8),
                             CATALOG.kv_cache_size(model, "bf16"), 64, 32768, link)  # fmt: skip
        assert units.bytes_per_s_to_gbps(e.required_bytes_per_s) == pytest.approx(
            64 * gbps, rel=0.06
        )
        assert not e.fits
        needed[model] = e.required_bytes_per_s
    assert max(needed[m] for m in ("kimi-linear-48b", "ring-2.5-1t", "mimo-v2-flash")) * 7 < min(
        needed["minimax-m2.5"], needed["qwen3-235b"]
    )


def test_smallest_fitting_threshold_is_the_boundary():
    s = CATALOG.prefill_latency("ring-2.5-1t", "h200", 8)
    kv = CATALOG.kv_cache_size("ring-2.5-1t", "bf16")
    w = TruncatedLogNormal(9.9, 1.0, 128, 131072)
    link = units.gbps_to_bytes_per_s(18)  # Ring's Φ_kv falls with length: long requests fit
    t = smallest_fitting_threshold(s, kv, 8, w, link)
    assert t is not None and 0 < t < w.max_tokens
    assert egress_at_threshold(s, kv, 8, w, t * 1.001, link).fits
    assert not egress_at_threshold(s, kv, 8, w, t * 0.99, link).fits
    assert smallest_fitting_threshold(s, kv, 8, w, units.gbps_to_bytes_per_s(1)) is None
    assert smallest_fitting_threshold(s, kv, 8, w, units.gbps_to_bytes_per_s(1000)) == 0.0


def test_egress_cli_shows_the_catalog():
    doc = json.loads(run("egress", "-f", "json").stdout)
    rows = {r["model"]: r for r in doc["models"]}
    assert doc["prfaas_gpus"] == 512 and rows["minimax-m2.5"]["fits"] is False
    assert "note" in rows["kimi-k2"]  # no H200 profile: said, not silently dropped
    scenario = json.loads(run("egress", "--scenario", default_scenario_file(), "--threshold-tokens",
                              "19435", "-f", "json").stdout)  # fmt: skip
    (row,) = scenario["models"]
    assert row["fits"] and units.bytes_per_s_to_gbps(row["required_bytes_per_s"]) == pytest.approx(
        12.5, rel=0.02
    )


@pytest.mark.slow
def test_kv_cli_and_plot(tmp_path):
    figure = tmp_path / "phi.png"
    doc = json.loads(
        run("kv", "kimi-linear-48b", "minimax-m2.5", "--plot", figure, "-f", "json").stdout
    )
    assert [m["model"] for m in doc["models"]] == ["kimi-linear-48b", "minimax-m2.5"]
    assert doc["models"][0]["kv_bytes_per_token"] == 8064
    assert figure.read_bytes()[:4] == b"\x89PNG"
    assert_clean_error(run("kv", "gpt-9"), 3, "unknown model 'gpt-9'")
    assert_clean_error(run("kv", "--kv-dtype", "int3"), 3, "--kv-dtype", "int3")


# ---------------------------------------------------------------- prfaas-plan check


def test_check_passes_on_the_shipped_data():
    result = run("check", "-f", "json")
    assert result.returncode == 0, result.stdout
    doc = json.loads(result.stdout)
    assert doc["ok"] and doc["tables_checked"] >= 19 and not doc["findings"] and not doc["moved"]


def rewrite_csv(path, transform):
    header, *rows = path.read_text().splitlines()
    path.write_text("\n".join([header, *transform(rows)]) + "\n")


def scale_column(factor):
    return lambda rows: [f"{r.split(',')[0]},{float(r.split(',')[1]) * factor:g}" for r in rows]


PREFILL_H200 = "profiles/internal-1t-hybrid/prefill/h200-x8/prefill_latency.csv"
PREFILL_H20 = "profiles/internal-1t-hybrid/prefill/h20-x8/prefill_latency.csv"
KV_TABLE = "profiles/internal-1t-hybrid/kv/bf16/kv_cache_size.csv"


@pytest.mark.parametrize(
    "table, transform, cause",
    [
        (PREFILL_H20, lambda rows: [rows[1], rows[0], *rows[2:]], "must be strictly increasing"),
        (PREFILL_H200, scale_column(1000), "is the column in ms instead of s?"),
        (KV_TABLE, scale_column(2), "from the architecture estimate"),
    ],
    ids=["unsorted rows", "latency in ms", "KV table 2x"],
)
def test_check_catches_a_corrupted_table(tmp_path, table, transform, cause):
    data = data_copy(tmp_path)
    rewrite_csv(data / table, transform)
    result = run("check", data, "-f", "json")
    assert result.returncode == 8
    findings = [f["where"] + ": " + f["message"] for f in json.loads(result.stdout)["findings"]]
    assert any(str(data / table) in f and cause in f for f in findings), findings


def test_check_catches_a_plan_that_moved(tmp_path):
    """A 16% faster H20 table is physically fine, but moves the case-study threshold by > 2K."""
    data = data_copy(tmp_path)
    rewrite_csv(data / PREFILL_H20, scale_column(0.84))
    result = run("check", data, "-f", "json")
    assert result.returncode == 8
    doc = json.loads(result.stdout)
    assert not doc["findings"]
    moved = {(m["scenario"], m["key"]): m for m in doc["moved"]}
    t = moved[("case_study.yaml", "plan.threshold_tokens")]
    assert abs(t["found"] - t["expected"]) > 2000
    assert doc["changed_inputs"]["case_study.yaml"] == [PREFILL_H20]  # the cause, by name
    text = run("check", data).stdout
    assert "case_study.yaml" in text and "plan.threshold_tokens" in text and "FAIL" in text
    assert run("check", data, "--update").returncode == 0  # a deliberate change is blessed ...
    assert run("check", data).returncode == 0  # ... and then passes


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def check_findings(data):
    result = run("check", data, "-f", "json")
    doc = json.loads(result.stdout)
    return result.returncode, [f["where"] + ": " + f["message"] for f in doc["findings"]], doc


@pytest.mark.parametrize(
    "corrupt, cause",
    [
        (lambda d: write(d / "profiles/internal-1t-hybrid/decode/h20-x8/decode_step.csv",
                         "batch_size,decode_step_latency_s\n40,0.025\n20,0.02\n"),
         "batch_size must be strictly increasing"),
        (lambda d: write(d / "gpus/h200.yaml", (d / "gpus/h200.yaml").read_text().replace(
            "dense_bf16_tflops: 989", "dense_bf16_tflops: 0.989")), "dense_bf16_tflops"),
        (lambda d: rewrite_csv(d / "profiles/minimax-m2.5/prefill/h200-x8/prefill_latency.csv",
                               scale_column(0.5)), "disagrees with its derivation"),
        (lambda d: (d / "profiles/minimax-m2.5/prefill/h200-x8/kv_throughput.csv").unlink(),
         "needs the Φ_kv table it was derived from"),
        (lambda d: write(d.parent / "models.yaml", (d.parent / "models.yaml").read_text().replace(
            "{type: gqa, count: 62, kv_heads: 8, key_head_dim: 128, value_head_dim: 128}",
            "{type: gqa, count: 62, kv_heads: 8, key_head_dim: 128, value_head_dim: 128, window_tokens: 4096}")),
         "a gqa layer group has no window_tokens"),
        (lambda d: shutil.copytree(d / "profiles/internal-1t-hybrid/kv/bf16", d / "profiles/internal-1t-hybrid/kv/int4"),
         "unknown KV dtype 'int4'"),
        (lambda d: shutil.copytree(d / "profiles/internal-1t-hybrid/prefill/h200-x8",
                                   d / "profiles/internal-1t-hybrid/prefill/h200"), "<gpu>-x<gpus per instance>"),
    ],
    ids=["decode unsorted", "gpu unit slip", "derived table edited", "derivation missing",
         "mistyped layer", "unknown kv dtype", "bad folder name"],
)  # fmt: skip
def test_check_catches_more_corruptions(tmp_path, corrupt, cause):
    data = data_copy(tmp_path)
    corrupt(data)
    code, findings, _ = check_findings(data)
    assert code == 8
    assert any(cause in f for f in findings), findings


def test_check_update_merges_scenarios_and_refuses_on_broken_tables(tmp_path):
    data = data_copy(tmp_path)
    one = ROOT / "examples" / "case_study.yaml"
    kept = yaml.safe_load((data / "golden/expectations.yaml").read_text())["scenarios"]
    assert run("check", data, "--update", "--scenario", one).returncode == 0
    assert run("check", data).returncode == 0  # the other scenarios' expectations were kept
    after = yaml.safe_load((data / "golden/expectations.yaml").read_text())["scenarios"]
    # as written (instance counts stay integers, not re-read as 3.0)
    assert repr(after["histogram_workload.yaml"]) == repr(kept["histogram_workload.yaml"])
    rewrite_csv(data / PREFILL_H20, lambda rows: [rows[1], rows[0], *rows[2:]])
    before = (data / "golden/expectations.yaml").read_text()
    result = run("check", data, "--update", "-f", "json")
    assert result.returncode == 8 and json.loads(result.stdout)["update_refused"]
    assert (data / "golden/expectations.yaml").read_text() == before


def test_check_reports_a_missing_golden_scenario_and_a_bad_expectations_file(tmp_path):
    data = data_copy(tmp_path)
    expectations = data / "golden/expectations.yaml"
    document = yaml.safe_load(expectations.read_text())
    document["scenarios"]["retired.yaml"] = document["scenarios"].pop("case_study.yaml")
    expectations.write_text(yaml.safe_dump(document))
    result = run("check", data, "-f", "json")
    moved = [(m["scenario"], m["key"]) for m in json.loads(result.stdout)["moved"]]
    assert result.returncode == 8 and ("retired.yaml", "(scenario missing)") in moved
    expectations.write_text("scenarios: [a, b]\n")
    code, findings, _ = check_findings(data)
    assert code == 8 and any("expectations.yaml" in f and "scenarios" in f for f in findings)


def test_cached_catalog_reads_each_file_once_and_answers_as_the_catalog(monkeypatch):
    """A server's catalog (inputs/cached_catalog.py) reads each GPU file and link offering
    once (pricing a plan asks for every offering on each request) and gives the same values."""
    from prfaas_plan.inputs import catalog as catalog_module
    from prfaas_plan.inputs.cached_catalog import CachedCatalog

    reads: list[str] = []
    real_read = catalog_module.read_yaml

    def counted(path, what):
        reads.append(str(path))
        return real_read(path, what)

    monkeypatch.setattr(catalog_module, "read_yaml", counted)
    cached, plain = CachedCatalog.open(), catalog_module.Catalog.open()
    names = cached.link_offering_names()
    assert names == plain.link_offering_names() and len(names) >= 2
    for _ in range(3):
        assert [cached.link_offering(n) for n in names] == [plain.link_offering(n) for n in names]
        assert cached.gpu("h200") == plain.gpu("h200")
    link_reads = [r for r in reads if "/links/" in r]
    assert len(link_reads) == 3 * len(names) + len(names)  # 3 plain passes, 1 cached
    # a GPU file once per catalog, the plain one's too (Catalog.gpu)
    assert len([r for r in reads if r.endswith("gpus/h200.yaml")]) == 2


def test_the_cached_catalog_lists_a_models_prefill_gpus_once(monkeypatch):
    """A priced plan checks its prices against the GPUs with a prefill profile (a folder
    listing): the cached catalog lists it once and gives the plain catalog's answer."""
    from pathlib import Path

    from prfaas_plan.inputs.cached_catalog import CachedCatalog

    listed: list[str] = []
    real_glob = Path.glob

    def counted(self, pattern):
        listed.append(str(self))
        return real_glob(self, pattern)

    cached = CachedCatalog.open()
    model = next(iter(CATALOG.models()))
    expected = CATALOG.prefill_gpus(model, 8)
    monkeypatch.setattr(Path, "glob", counted)
    assert [cached.prefill_gpus(model, 8) for _ in range(3)] == [expected] * 3
    assert len(expected) >= 1 and len(listed) == 1


def test_the_cached_catalog_prices_its_link_offerings_once():
    """A priced plan without a named offering weighs every offering but cross-connects: the
    cached catalog prices them once (the same prices as a plain catalog's, each time); an
    error is not kept."""
    from prfaas_plan.errors import ConfigError
    from prfaas_plan.inputs.cached_catalog import CachedCatalog
    from prfaas_plan.inputs.catalog import Catalog
    from prfaas_plan.inputs.pricing import _offered_links

    cached, plain = CachedCatalog.open(), Catalog.open()
    calls: list[int] = []

    def priced(catalog):
        calls.append(1)
        return _offered_links(catalog)

    first = cached.memoised("offered links", lambda: priced(cached))
    assert cached.memoised("offered links", lambda: priced(cached)) is first
    assert first == _offered_links(plain) and len(calls) == 1
    assert plain.memoised("offered links", lambda: priced(plain)) == first and len(calls) == 2
    colocated = {n for n in plain.link_offering_names() if plain.link_offering(n).colocated}
    assert colocated and not colocated & {p.name for p in first}

    def refused():
        raise ConfigError("no")

    for _ in range(2):
        with pytest.raises(ConfigError):
            cached.memoised("refused", refused)
