"""The mesh of a truncated log-normal (4096 geometric cells: each cell's mass and mean length):
by 3-point Gauss–Legendre quadrature of the density where its error bound allows it, checked
against 40-digit mpmath cell by cell; else the partial moments at the edges (`mesh_edge_logs`,
a per-range cache), the same bits as computed afresh. The bound's constant is checked against
mpmath on single cells."""

import math

import mpmath
import numpy as np
import pytest

from prfaas_plan.analytic.length_distribution import mesh_of
from prfaas_plan.analytic.log_normal import (
    _GAUSS_NODES,
    _GAUSS_WEIGHTS,
    GAUSS_ERROR_PER_W7,
    QUADRATURE_MAX_ERROR,
    TruncatedLogNormal,
    mesh_edge_logs,
    mesh_nodes,
    quadrature_fits,
)

mpmath.mp.dps = 40
SQRT2 = mpmath.sqrt(2)


def normal_mass(a: mpmath.mpf, b: mpmath.mpf) -> mpmath.mpf:
    """P(a < Z <= b), each end's tail taken where it is small (no cancellation of the tails)."""
    if b <= 0:
        return (mpmath.erfc(-b / SQRT2) - mpmath.erfc(-a / SQRT2)) / 2
    if a >= 0:
        return (mpmath.erfc(a / SQRT2) - mpmath.erfc(b / SQRT2)) / 2
    return 1 - (mpmath.erfc(-a / SQRT2) + mpmath.erfc(b / SQRT2)) / 2


def exact_cells(d: TruncatedLogNormal, cells: list[int]) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """(mass, E[L ; cell]) of mesh cells of `d`, between the mesh's own (double) edges."""
    _, log_hi = mesh_edge_logs(d.min_tokens, d.max_tokens, d.mesh_cells)
    mu, sigma = mpmath.mpf(d.mu_log), mpmath.mpf(d.sigma_log)

    def u(i: int, k: int) -> mpmath.mpf:
        return (mpmath.mpf(float(log_hi[i])) - mu - k * sigma**2) / sigma

    z = normal_mass(u(0, 0), u(d.mesh_cells, 0))
    scale = mpmath.exp(mu + sigma**2 / 2) / z
    return [
        (normal_mass(u(i, 0), u(i + 1, 0)) / z, scale * normal_mass(u(i, 1), u(i + 1, 1)))
        for i in cells
    ]


BY_QUADRATURE = [
    (9.9, 1.0, 1.0, 131072.0),  # the default scenario's shape
    (9.4, 0.8, 128.0, 131072.0),
    (10.4, 1.2, 1.0, 2000.0),  # the range lies in the lower tail
    (8.5, 0.5, 1.0, 131072.0),  # a sweep's narrowest
    (10.5, 1.5, 1.0, 131072.0),
    (9.0, 0.3, 1.0, 131072.0),  # just inside the bound
]


@pytest.mark.parametrize(("mu_log", "sigma_log", "min_tokens", "max_tokens"), BY_QUADRATURE)
def test_mesh_by_quadrature_is_each_cells_mass_and_mean(
    mu_log: float, sigma_log: float, min_tokens: float, max_tokens: float
) -> None:
    """Every 61st cell and the last: its mass within 1e-16 of the probability (and 1e-13 of
    itself where it holds more than 1e-9), its mean length within 1e-13; every cell's mean
    inside its cell."""
    d = TruncatedLogNormal(mu_log, sigma_log, min_tokens, max_tokens)
    assert quadrature_fits(d, mesh_nodes(min_tokens, max_tokens, d.mesh_cells))
    lengths, weights = d.mesh()
    assert lengths.size == d.mesh_cells  # no cell without mass
    cells = [*range(0, d.mesh_cells, 61), d.mesh_cells - 1]
    for i, (mass, moment) in zip(cells, exact_cells(d, cells), strict=True):
        assert abs(weights[i] - mass) <= 1e-16, i
        if mass > 1e-9:
            assert abs(weights[i] - mass) <= 1e-13 * mass, i
            assert abs(lengths[i] - moment / mass) <= 1e-13 * lengths[i], i
    edges = np.geomspace(min_tokens, max_tokens, d.mesh_cells + 1)
    assert np.all(lengths >= edges[:-1] * (1 - 1e-15)) and np.all(
        lengths <= edges[1:] * (1 + 1e-15)
    )
    assert abs(weights.sum() - 1.0) <= 1e-13


@pytest.mark.parametrize(
    ("mu_log", "sigma_log", "min_tokens", "max_tokens"),
    [
        (math.log(1e6) - 10.0, 10.0, 1e6, 1e6 + 1.0),  # Z = 2.4e-8: its tails' difference
        (5.0, 1.0, 1e5, 1e5 + 2.0),  # Z = 4.9e-15, in the upper tail
        (9.9, 1.0, 1000.0, 1001.0),
    ],
)
def test_a_narrow_ranges_masses_are_probabilities_to_the_last_digits(
    mu_log: float, sigma_log: float, min_tokens: float, max_tokens: float
) -> None:
    """A range narrow against sigma_log: its normaliser Z, a difference of two close tails,
    keeps few digits (1.8e-9 of itself in the first case), so masses divided by Z would sum
    to 1 only as closely; divided by their own total they are within 1e-14 of 40-digit mpmath
    cell by cell and sum to 1 within 1e-15."""
    d = TruncatedLogNormal(mu_log, sigma_log, min_tokens, max_tokens)
    assert quadrature_fits(d, mesh_nodes(min_tokens, max_tokens, d.mesh_cells))
    lengths, weights = d.mesh()
    assert abs(weights.sum() - 1.0) <= 1e-15
    cells = [*range(0, d.mesh_cells, 97), d.mesh_cells - 1]
    for i, (mass, moment) in zip(cells, exact_cells(d, cells), strict=True):
        assert abs(weights[i] - mass) <= 1e-14 * mass, i
        assert abs(lengths[i] - moment / mass) <= 1e-14 * lengths[i], i


@pytest.mark.parametrize(
    ("mu_log", "sigma_log", "min_tokens", "max_tokens"),
    [
        (9.9, 0.29, 1.0, 131072.0),  # just outside the bound: cells too wide for its sigma
        (5.0, 0.05, 128.0, 131072.0),  # narrow: a few cells hold it all
        (2.0, 0.3, 1000.0, 5000.0),  # the range in the far upper tail: Z ~ 1e-60
    ],
)
def test_mesh_outside_the_bound_is_the_partial_moments_of_its_edges(
    mu_log: float, sigma_log: float, min_tokens: float, max_tokens: float
) -> None:
    d = TruncatedLogNormal(mu_log, sigma_log, min_tokens, max_tokens)
    assert not quadrature_fits(d, mesh_nodes(min_tokens, max_tokens, d.mesh_cells))
    edges = np.geomspace(min_tokens, max_tokens, d.mesh_cells + 1)
    moments = d.partial_moments(min_tokens, edges, max_order=1)
    expected_lengths, expected_weights = mesh_of(np.diff(moments, axis=1))
    lengths, weights = d.mesh()
    assert lengths.tobytes() == expected_lengths.tobytes()
    assert weights.tobytes() == expected_weights.tobytes()


@pytest.mark.parametrize(
    ("mu_log", "sigma_log", "min_tokens", "max_tokens", "cells"),
    [
        (5.0, 1.0, 100.0, 100.0, 4096),  # no range
        (5.0, 1.0, 1e6, 1.0, 4096),  # the bounds reversed
        (5.0, 0.0, 1.0, 1e6, 4096),  # no spread
        (5.0, -1.0, 1.0, 1e6, 4096),
        (5.0, 1e-300, 1.0, 1e6, 4096),  # cells of 1e300 deviations: widths**7 overflows
        (9.0, 1.0, 128.0, 131072.0, 0),  # no cell
    ],
)
def test_parameters_no_scenario_can_hold_go_to_the_closed_form(
    mu_log: float, sigma_log: float, min_tokens: float, max_tokens: float, cells: int
) -> None:
    """Parameters a scenario refuses (sigma_log in [1e-3, 10], max > min), given directly to
    the library: quadrature is not tried (the closed form answers, or fails, as it did
    before quadrature), and asking does not raise."""
    d = TruncatedLogNormal(mu_log, sigma_log, min_tokens, max_tokens, cells)
    assert not quadrature_fits(d, mesh_nodes(min_tokens, max_tokens, cells))


def test_the_bound_is_where_the_cells_error_sum_reaches_its_limit() -> None:
    """On [1, 131072] tokens with all the mass on it, the widest sigma_log that fits is where
    4096 cells' bound is QUADRATURE_MAX_ERROR: sigma_log = 0.2958."""
    nodes = mesh_nodes(1.0, 131072.0, 4096)
    widest = (QUADRATURE_MAX_ERROR / (4096 * GAUSS_ERROR_PER_W7)) ** (1 / 7)
    sigma = nodes.widest_log / widest
    assert 0.2957 < sigma < 0.2959
    assert quadrature_fits(TruncatedLogNormal(9.9, sigma * 1.001, 1.0, 131072.0), nodes)
    assert not quadrature_fits(TruncatedLogNormal(9.9, sigma * 0.999, 1.0, 131072.0), nodes)


@pytest.mark.parametrize("width", [0.01, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("start", [-8.0, -1.0, -0.05, 0.0, 0.3, 2.5, 6.0])
def test_the_error_bound_holds_on_a_cell(width: float, start: float) -> None:
    """Gauss–Legendre on one cell of the standard normal density, in 40-digit arithmetic (no
    rounding of doubles): its error is within GAUSS_ERROR_PER_W7 x width^7, and the bound is
    tight at the density's peak (within 2x of the error of a narrow cell on 0)."""
    a, w = mpmath.mpf(start), mpmath.mpf(width)
    density = lambda x: mpmath.exp(-(x**2) / 2) / mpmath.sqrt(2 * mpmath.pi)  # noqa: E731
    quadrature = w * sum(
        mpmath.mpf(g) * density(a + mpmath.mpf(x) * w)
        for x, g in zip(_GAUSS_NODES, _GAUSS_WEIGHTS, strict=True)
    )
    error = abs(quadrature - normal_mass(a, a + w))
    bound = GAUSS_ERROR_PER_W7 * width**7
    assert error <= bound * (1 + 1e-9)
    if width <= 0.1 and start == -0.05:  # a cell centred on the peak
        assert error >= bound / 2
    assert math.isfinite(float(error))
