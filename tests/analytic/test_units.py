import pytest

from prfaas_plan import units


def test_link_rate_is_decimal_bits():
    # 100 Gbps = 100e9 bit/s = 12.5e9 bytes/s
    assert units.gbps_to_bytes_per_s(100) == 12.5e9
    assert units.bytes_per_s_to_gbps(12.5e9) == 100


def test_mib_is_binary():
    assert units.mib_to_bytes(1) == 1_048_576
    assert units.bytes_to_mib(units.mib_to_bytes(190.8)) == pytest.approx(190.8)


def test_other_edges():
    assert units.gib_to_bytes(1) == 2**30
    assert units.bytes_to_gib(3 * 2**30) == 3
    assert units.gb_to_bytes(141) == 141e9
    assert units.tflops_to_flops(989) == 989e12
    assert units.tbytes_per_s_to_bytes_per_s(4.8) == 4.8e12
    assert units.ms_to_s(25) == pytest.approx(0.025)
    assert units.s_to_ms(0.025) == pytest.approx(25)
    assert units.tokens_to_ktokens(19_400) == pytest.approx(19.4)
    assert units.ktokens_to_tokens(19.4) == pytest.approx(19_400)


def test_table5_kv_throughput_in_paper_units():
    """Φ_kv = S_kv / T_prefill reproduces the paper's Table 5 Gbps column (MiB and Gbps as
    the paper uses them); the gaps come from T being printed with two decimals."""
    rows = [(190.8, 0.44, 3.61), (308.9, 0.72, 3.59), (701.3, 1.84, 3.19), (2316.3, 7.40, 2.62)]
    for size_mib, latency_s, gbps in rows:
        phi = units.bytes_per_s_to_gbps(units.mib_to_bytes(size_mib) / latency_s)
        assert phi == pytest.approx(gbps, rel=0.012)


def test_one_token_convention_in_every_view():
    """K tokens = 1,000 tokens everywhere (units.py); a length that is not a round number of
    thousands is printed whole, never as a fractional K."""
    from tests.cli.test_cli import run

    assert units.tokens_to_ktokens(19_400) == 19.4
    for args in (["egress"], ["egress", "--format", "markdown"]):
        out = run(*args).stdout
        assert "32,768 tokens" in out and "32.768K" not in out
