import os
from pathlib import Path

import numpy as np
import pytest

from prfaas_plan import units
from prfaas_plan.analytic.capacity import ServingSystem
from prfaas_plan.analytic.decode_point import DecodePoint
from prfaas_plan.analytic.profiles import FittedCurve
from prfaas_plan.inputs.catalog import Catalog
from prfaas_plan.inputs.resources import default_scenario_file
from prfaas_plan.inputs.scenario import build_problem, load_scenario

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("MPLCONFIGDIR", "/tmp/prfaas-plan-mpl")


@pytest.fixture(scope="session")
def case_problem():
    path = default_scenario_file()
    return build_problem(load_scenario(path), path, Catalog.open())


def curve(coefficients, quantity="prefill_latency_s", lo=1.0, hi=1e6) -> FittedCurve:
    """A hand-made profile curve (no table) for closed-form tests."""
    return FittedCurve(
        quantity, tuple(float(c) for c in coefficients), lo, hi, 0.0, "measured", "test"
    )


def toy_system(
    prfaas=(0.5, 1e-5),
    pd=(0.6, 3e-5),
    kv=(1e8, 2e4),
    batch=10,
    step_s=0.02,
    output_tokens=500,
    bandwidth_gbps=50.0,
) -> ServingSystem:
    return ServingSystem(
        prfaas_prefill_latency=curve(prfaas),
        pd_prefill_latency=curve(pd),
        kv_cache_size=curve(kv, "kv_cache_bytes"),
        decode=DecodePoint(batch, step_s, "test"),
        output_tokens=output_tokens,
        link_bandwidth_bytes_per_s=units.gbps_to_bytes_per_s(bandwidth_gbps),
    )


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
