"""The decode step bounds (analytic/decode_physics.py) by hand, and the shipped and sample
decode tables well inside them."""

import numpy as np
import pytest

from prfaas_plan.analytic.decode_physics import DecodeInstance, implausible_step
from prfaas_plan.inputs.catalog import Catalog

# 8 x H20 (data/gpus/h20.yaml: 96 GB, 4.0 TB/s, 148 TFLOP/s BF16) and the case-study model
# (1e12 parameters, active not published: 1% of them, prefill_physics' lower bound)
H20_X8 = DecodeInstance(
    active_params=1e10,
    total_params=1e12,
    hbm_bytes=8 * 96e9,
    hbm_bytes_per_s=8 * 4.0e12,
    peak_flops_per_s=8 * 148e12,
)


def test_the_bounds_by_hand():
    # 1e10 params x 0.25 bytes / 3.2e13 bytes/s
    assert H20_X8.fastest_step_s() == pytest.approx(7.8125e-5)
    # (7.68e11 / 3.2e13 + 2 x 1e12 x 20 / 1.184e15) / 0.01 = (0.024 + 0.033784) / 0.01
    assert H20_X8.slowest_step_s(20) == pytest.approx(5.7784, rel=1e-4)
    assert Catalog.open().decode_instance("internal-1t-hybrid", "h20", 8) == H20_X8


def test_a_table_in_the_wrong_unit_is_named():
    batch = np.array([1.0, 8, 16, 20, 32])
    step_s = 0.015 + 0.0005 * batch  # the samples' step
    assert implausible_step(H20_X8, batch, step_s) is None
    in_ms = implausible_step(H20_X8, batch, step_s * 1e3)
    assert in_ms is not None and not in_ms.too_fast and in_ms.likely_unit == "milliseconds"
    # given in ms (seconds_per_unit 1e-3) but written in seconds: 1000x too fast
    in_s = implausible_step(H20_X8, batch, step_s * 1e-3, seconds_per_unit=1e-3)
    assert in_s is not None and in_s.too_fast and in_s.likely_unit == "seconds"
    assert (in_s.row, in_s.rows) == (0, 5)
    in_us = implausible_step(H20_X8, batch, step_s * 1e3, seconds_per_unit=1e-3)
    assert in_us is not None and in_us.likely_unit == "microseconds"


def test_the_shipped_table_is_far_inside():
    """The derived H20 table (0.69 ms to 0.58 s) is 8.8x above the floor at its fastest and
    40x below the ceiling at its slowest."""
    table = Catalog.open().decode_table("internal-1t-hybrid", "h20", 8)
    step, batch = table.step_latencies_s, table.batch_sizes
    assert np.min(step) / H20_X8.fastest_step_s() > 8
    assert np.min(H20_X8.slowest_step_s(batch) / step) > 40
