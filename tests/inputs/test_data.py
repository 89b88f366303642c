"""Data contract: every shipped file passes its schema and bounds, and says where it came from."""

import pytest
import yaml

from prfaas_plan import units
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.catalog_files import ProfileMeta
from prfaas_plan.inputs.resources import default_data_dir

DATA = default_data_dir()
CATALOG = Catalog.open()


def test_every_gpu_file_loads_with_a_source():
    names = [p.stem for p in (DATA / "gpus").glob("*.yaml")]
    assert {"h200", "h20"} <= set(names)
    for name in names:
        gpu = CATALOG.gpu(name)
        assert gpu.source
        assert gpu.dense_fp8_tflops > gpu.dense_bf16_tflops


FLAT_RATE_LINKS = ("metro-wave-100g", "dark-fibre-16km-100g", "colo-cross-connect-100g")


def test_every_link_offering_loads_with_its_provenance():
    """Every file of data/links/ passes the LinkOffering schema (an estimate says its basis),
    names itself, and says where its prices and RTT come from and when; the flat-rate offerings
    (a leased wavelength, dark fibre, a cross-connect) bill nothing per GB."""
    names = CATALOG.link_offering_names()
    assert {"aws-dx-100g", "aws-dx-10g", "aws-internet-egress", *FLAT_RATE_LINKS} <= set(names)
    assert "owned" not in names  # a reserved name (inputs/links.py), not a file
    for name in names:
        offering = CATALOG.link_offering(name)
        assert offering.name == name and offering.description
        for provenance in (offering.prices, offering.rtt):
            assert provenance.source and provenance.date
            assert provenance.basis == "quoted" or provenance.note
    for name in FLAT_RATE_LINKS:
        assert CATALOG.link_offering(name).usd_per_gb == 0


def test_the_flat_rate_prices_are_their_stated_derivations():
    """Each derived monthly_usd is the arithmetic its note states, recomputed here."""
    wave = CATALOG.link_offering("metro-wave-100g")
    assert wave.monthly_usd == (5_000 + 15_000) / 2  # the midpoint of the quoted 100 GbE range
    fibre = CATALOG.link_offering("dark-fibre-16km-100g")
    strands, route_miles, usd_per_strand_mile_month = 2, 10, 450  # Portsmouth VA, 2024-01-23
    optics_usd, months = 2 * 2_000, 36  # a 100G pluggable each end, amortised over 3 years
    lease = strands * route_miles * usd_per_strand_mile_month
    assert fibre.monthly_usd == round(lease + optics_usd / months)
    assert route_miles * 1.609344 == pytest.approx(16, abs=0.1)  # the name's 16 km
    # RTT: light in fibre at ~4.9 us/km each way, rounded up for the hops
    assert 2 * 16.1 * 4.9e-3 <= fibre.rtt_ms <= 2 * 2 * 16.1 * 4.9e-3
    assert CATALOG.link_offering("colo-cross-connect-100g").monthly_usd == 300


def test_every_profile_has_provenance_and_loads():
    metas = sorted(DATA.glob("profiles/*/*/*/meta.yaml"))
    assert len(metas) >= 4
    for path in metas:
        meta = ProfileMeta.model_validate(yaml.safe_load(path.read_text()))
        model, kind, key = path.parent.relative_to(DATA / "profiles").parts
        assert meta.model == model
        if meta.provenance != "measured":
            assert f"{meta.provenance.upper()}, NOT MEASURED" in meta.method
        if kind == "prefill":
            gpu, gpus = key.rsplit("-x", 1)
            curve = CATALOG.prefill_latency(model, gpu, int(gpus))
            assert curve.max_relative_residual < 0.10  # quadratic fit of a 4-8 point table
        elif kind == "kv":
            CATALOG.kv_cache_size(model, key)
        else:
            gpu, gpus = key.rsplit("-x", 1)
            CATALOG.decode_table(model, gpu, int(gpus))


def test_every_profiled_model_is_in_the_catalog():
    models = CATALOG.models()
    for folder in (DATA / "profiles").iterdir():
        assert folder.name in models


def test_prefill_never_beats_the_gpus_peak_flops():
    """Speed-of-light bound with a deliberately weak FLOP count (2 FLOP per active parameter
    per token, active params >= 1/100 of the 1T total): real prefill must be slower."""
    model = CATALOG.model("internal-1t-hybrid")
    for gpu, gpus in (("h200", 8), ("h20", 8)):
        peak_flops = units.tflops_to_flops(CATALOG.gpu(gpu).dense_fp8_tflops) * gpus
        curve = CATALOG.prefill_latency("internal-1t-hybrid", gpu, gpus)
        for tokens in (1000, 8000, 32000, 128000):
            floor_s = 2 * (model.total_params / 100) * tokens / peak_flops
            assert curve(tokens) > floor_s


def test_kv_fit_recovers_the_architecture_reading():
    """The reference reads Table 5 as ~172 MiB fixed state + ~17.5 KB/token (model-configs.md)."""
    kv = CATALOG.kv_cache_size("internal-1t-hybrid", "bf16")
    fixed_bytes, per_token_bytes = kv.coefficients
    assert units.bytes_to_mib(fixed_bytes) == pytest.approx(172, rel=0.01)
    assert per_token_bytes == pytest.approx(17_500, rel=0.01)


def test_resources_are_found_and_a_broken_install_says_where_it_looked(tmp_path, monkeypatch):
    from prfaas_plan.inputs import resources

    assert resources.default_models_file().is_file()
    assert not resources.is_installed_copy(resources.default_data_dir()) or (
        resources.resource_root().name == "_bundled"
    )
    monkeypatch.setattr(resources, "_CANDIDATE_ROOTS", (tmp_path,))
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        resources.resource_root()
