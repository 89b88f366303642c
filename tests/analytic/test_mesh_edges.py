"""The mesh of a truncated log-normal takes its edges' logs from a per-range cache
(`mesh_edge_logs`): the same bits as the edges' partial moments computed afresh."""

import numpy as np
import pytest

from prfaas_plan.analytic.length_distribution import mesh_of
from prfaas_plan.analytic.log_normal import TruncatedLogNormal


@pytest.mark.parametrize(
    ("mu_log", "sigma_log", "min_tokens", "max_tokens"),
    [
        (9.9, 1.0, 1.0, 131072.0),  # the default scenario's shape
        (9.4, 0.8, 128.0, 131072.0),
        (10.4, 1.2, 1.0, 2000.0),  # the range lies in the lower tail
        (2.0, 0.3, 1000.0, 5000.0),  # the range lies in the upper tail
    ],
)
def test_mesh_is_the_partial_moments_of_its_edges(
    mu_log: float, sigma_log: float, min_tokens: float, max_tokens: float
) -> None:
    d = TruncatedLogNormal(mu_log, sigma_log, min_tokens, max_tokens)
    edges = np.geomspace(min_tokens, max_tokens, d.mesh_cells + 1)
    moments = d.partial_moments(min_tokens, edges, max_order=1)
    expected_lengths, expected_weights = mesh_of(np.diff(moments, axis=1))
    lengths, weights = d.mesh()
    assert lengths.tobytes() == expected_lengths.tobytes()
    assert weights.tobytes() == expected_weights.tobytes()
