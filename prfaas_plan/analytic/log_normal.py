"""The truncated log-normal length distribution (tokens): ln L ~ Normal(mu_log, sigma_log)
conditioned on [min_tokens, max_tokens] (not clipped), its partial moments, quantile and mesh in
closed form (analytic/normal.py), the constants of a split interned per distribution.
"""

import math
from dataclasses import dataclass, fields
from functools import cached_property, lru_cache

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, BoolArray, FloatArray
from prfaas_plan.analytic.length_distribution import MOMENT_ORDERS, LengthDistribution, mesh_of
from prfaas_plan.analytic.normal import (
    mass_between,
    normal_mass,
    small_tail,
    small_tails,
    truncated_normal_quantile,
)


@dataclass(frozen=True)
class TruncatedLogNormal(LengthDistribution):
    """ln L ~ Normal(mu_log, sigma_log), conditioned on min_tokens <= L <= max_tokens.

    E[L^k ; a < L <= b] = exp(k mu + k^2 sigma^2 / 2)
                          * [Phi((ln b - mu - k sigma^2)/sigma) - Phi((ln a - mu - k sigma^2)/sigma)] / Z
    with Z = Phi((ln max - mu)/sigma) - Phi((ln min - mu)/sigma). Quantile:
    exp(mu + sigma Φ⁻¹(Φ(z_min) + u Z)), in whichever tail holds [z_min, z_max].
    """

    mu_log: float
    sigma_log: float
    min_tokens: float
    max_tokens: float
    mesh_cells: int = 4096

    def _z(self, tokens: ArrayLike, k: int) -> FloatArray:
        with np.errstate(divide="ignore"):
            log_tokens = np.log(np.asarray(tokens, float))
        return self._z_of_log(log_tokens, k)

    def _z_of_log(self, log_tokens: FloatArray, k: int) -> FloatArray:
        """`_z` from ln(tokens) already taken (the same arithmetic)."""
        z: FloatArray = (log_tokens - self.mu_log - k * self.sigma_log**2) / self.sigma_log
        return z

    @cached_property
    def _normaliser(self) -> float:
        return float(normal_mass(self._z(self.min_tokens, 0), self._z(self.max_tokens, 0)))

    @property
    def untruncated_mass(self) -> float:
        """P(min <= L <= max) before conditioning; ~0 means the parameters miss the interval."""
        return self._normaliser

    def _scale(self, k: int) -> float:
        return math.exp(k * self.mu_log + 0.5 * k**2 * self.sigma_log**2) / self._normaliser

    def split(self, threshold_tokens: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """As the base class, with one erfc per element and order for each side (the optimiser
        calls this in its inner loop): below = (min, t], above = (t, max]. Every order in the
        same array operations (one numpy call each, not one per order: the arrays are small,
        so the calls' fixed cost is the cost); element by element the same arithmetic as
        `_z`, `small_tail` and `mass_between` per order, with mass_between's branches on the
        fixed end (min or max) decided once per distribution instead of per element."""
        # clip as min(max(.)): np.clip's dispatch costs more than the arithmetic here
        t = np.minimum(np.maximum(threshold_tokens, self.min_tokens), self.max_tokens)
        return split_at(t, self.mu_log, self.sigma_log, split_constants(self, t.ndim))

    def partial_moments(self, a: ArrayLike, b: ArrayLike, max_order: int = 2) -> FloatArray:
        lo = np.clip(np.asarray(a, float), self.min_tokens, self.max_tokens)
        hi = np.clip(np.asarray(b, float), self.min_tokens, self.max_tokens)
        # lo keeps its own shape: one erfc per distinct end (the mesh's lo is one number)
        hi = np.maximum(lo, hi)
        with np.errstate(divide="ignore"):
            return self._partial_moments_of_logs(np.log(lo), np.log(hi), max_order)

    def _partial_moments_of_logs(
        self, log_lo: FloatArray, log_hi: FloatArray, max_order: int
    ) -> FloatArray:
        """`partial_moments` from the logs of its ends, already clipped (the same arithmetic:
        `_z` takes the log of its tokens first)."""
        out = np.empty((max_order + 1, *log_hi.shape))
        orders = range(max_order + 1)
        z_lo = [self._z_of_log(log_lo, k) for k in orders]
        z_hi = [self._z_of_log(log_hi, k) for k in orders]
        tails = small_tails(*z_lo, *z_hi)  # one erfc pass for every order and both ends
        for k in orders:
            mass = mass_between(z_lo[k], tails[k], z_hi[k], tails[max_order + 1 + k])
            out[k] = self._scale(k) * mass
        return out

    def quantile(self, u: ArrayLike) -> FloatArray:
        z_lo = (math.log(self.min_tokens) - self.mu_log) / self.sigma_log
        z_hi = (math.log(self.max_tokens) - self.mu_log) / self.sigma_log
        z = truncated_normal_quantile(z_lo, z_hi, np.asarray(u, dtype=float))
        return np.clip(np.exp(self.mu_log + self.sigma_log * z), self.min_tokens, self.max_tokens)

    def mesh(self) -> tuple[FloatArray, FloatArray]:
        return _log_normal_mesh(self)

    def describe(self) -> str:
        return (
            f"truncated log-normal (mu_log={self.mu_log:g}, sigma_log={self.sigma_log:g}) "
            f"on [{self.min_tokens:g}, {self.max_tokens:g}] tokens"
        )


def truncated_log_normal(
    mu_log: float, sigma_log: float, min_tokens: float, max_tokens: float
) -> TruncatedLogNormal:
    """The TruncatedLogNormal of these parameters, one instance per parameters in a process
    (while they are among the 4,096 most recently asked for):
    what an instance memoises (its split constants, mean and normaliser) is computed once, not
    once per plan, where a server or a study plans the same workload again and again. A zero
    is kept as +0.0 (-0.0 == 0.0 shares its cache entry, so which one came first would show)."""
    return _interned_log_normal(mu_log + 0.0, sigma_log + 0.0, min_tokens + 0.0, max_tokens + 0.0)


@lru_cache(maxsize=4096)  # a sweep's block of 1,000 differing log-normals is met again and again
def _interned_log_normal(
    mu_log: float, sigma_log: float, min_tokens: float, max_tokens: float
) -> TruncatedLogNormal:
    return TruncatedLogNormal(mu_log, sigma_log, min_tokens, max_tokens)


@dataclass(frozen=True)
class SplitConstants:
    """Per moment order k (the first axis, then ones to broadcast): the scale, k sigma² (as
    `_z` subtracts it), the small tails at min and at max, 1 − the tail at min (as
    mass_between's `1.0 - lo - hi` computes it first), and whether min lies above the median or
    max below it (mass_between's branches that depend on the fixed end only)."""

    scale: FloatArray
    offset: FloatArray
    tail_min: FloatArray
    one_minus_tail_min: FloatArray
    min_above_median: BoolArray
    tail_max: FloatArray
    max_below_median: BoolArray


def split_at(
    t: FloatArray, mu_log: float | FloatArray, sigma_log: float | FloatArray, c: "SplitConstants"
) -> tuple[FloatArray, FloatArray]:
    """`TruncatedLogNormal.split` at thresholds `t` already clipped to [min, max], from the
    distribution's parameters and split constants: numbers (one distribution), or arrays that
    broadcast against `t` (one distribution per row: analytic/log_normal_rows.py), the same
    arithmetic element by element either way."""
    with np.errstate(divide="ignore"):
        centred = np.log(t) - mu_log
    z = (centred - c.offset) / sigma_log
    tail = small_tail(z)
    # mass_between(z_min, tail_min, z, tail) and mass_between(z, tail, z_max, tail_max)
    short_mass = np.where(
        z <= 0,
        tail - c.tail_min,
        np.where(c.min_above_median, c.tail_min - tail, c.one_minus_tail_min - tail),
    )
    long_mass = np.where(
        c.max_below_median,
        c.tail_max - tail,
        np.where(z >= 0, tail - c.tail_max, 1.0 - tail - c.tail_max),
    )
    return c.scale * np.maximum(short_mass, 0.0), c.scale * np.maximum(long_mass, 0.0)


# a sweep's batch of 1,000 scenarios of differing log-normals meets each distribution in five
# model calls (the search, the evaluations, the baselines, the equal-cost bases): ~150 µs each
@lru_cache(maxsize=4096)
def split_constants(d: TruncatedLogNormal, ndim: int) -> SplitConstants:
    """What `split` needs of `d` alone, shaped to broadcast against `ndim`-dimensional
    thresholds (once per process for equal parameters and dimension)."""
    column = (MOMENT_ORDERS,) + (1,) * ndim
    row = d.__dict__.get(SPLIT_CONSTANTS_KEY)  # prepared for a block (log_normal_rows.prepare)
    if row is None:
        orders = range(MOMENT_ORDERS)
        z_min = np.array([float(d._z(d.min_tokens, k)) for k in orders])
        z_max = np.array([float(d._z(d.max_tokens, k)) for k in orders])
        row = split_constants_of(d, z_min, z_max, *small_tails(z_min, z_max))
    return SplitConstants(*(getattr(row, f.name).reshape(column) for f in fields(SplitConstants)))


SPLIT_CONSTANTS_KEY = "_split_constants"  # where log_normal_rows.prepare leaves them


def split_constants_of(
    d: TruncatedLogNormal,
    z_min: FloatArray,
    z_max: FloatArray,
    tail_min: FloatArray,
    tail_max: FloatArray,
) -> SplitConstants:
    """`split_constants(d, 0)` from z at min and at max per order (`_z`) and their small
    tails."""
    orders = range(MOMENT_ORDERS)
    return split_constants_from(
        np.array([d._scale(k) for k in orders]), np.array([k * d.sigma_log**2 for k in orders]),
        z_min, z_max, tail_min, tail_max,
    )  # fmt: skip


def split_constants_from(
    scale: FloatArray,
    offset: FloatArray,
    z_min: FloatArray,
    z_max: FloatArray,
    tail_min: FloatArray,
    tail_max: FloatArray,
) -> SplitConstants:
    """The split constants of the scales and offsets per order (`_scale(k)`, k sigma²), and z
    at min and at max and their small tails: of one distribution (orders), or of many (rows
    of orders: analytic/log_normal_rows.py `prepare`), element by element the same."""
    return SplitConstants(
        scale=scale,
        offset=offset,
        tail_min=tail_min,
        one_minus_tail_min=1.0 - tail_min,
        min_above_median=z_min >= 0,
        tail_max=tail_max,
        max_below_median=z_max <= 0,
    )


@lru_cache(maxsize=16)
def _log_normal_mesh(d: TruncatedLogNormal) -> tuple[FloatArray, FloatArray]:
    """The mesh of `d`: its 4096 geometric cells' masses and first moments, by quadrature
    (`quadrature_moments`) where `quadrature_fits`, else the partial moments at the cell edges
    and their differences (two erfc an edge: ~4x the time). Computed once per process for equal
    parameters (a frozen dataclass compares by value): a server building a fresh Problem per
    request meets the same length distribution again and again. Read-only, as it is shared."""
    nodes = mesh_nodes(d.min_tokens, d.max_tokens, d.mesh_cells)
    if quadrature_fits(d, nodes):
        moments = np.stack(quadrature_moments(nodes, d.mu_log, d.sigma_log))
    else:
        log_lo, log_hi = mesh_edge_logs(d.min_tokens, d.max_tokens, d.mesh_cells)
        moments = np.diff(d._partial_moments_of_logs(log_lo, log_hi, max_order=1), axis=1)
    lengths, weights = mesh_of(moments)
    lengths.setflags(write=False)
    weights.setflags(write=False)
    return lengths, weights


# 3-point Gauss–Legendre on a cell of width 1: its nodes and weights
_GAUSS_NODES = (0.5 - 0.5 * math.sqrt(0.6), 0.5, 0.5 + 0.5 * math.sqrt(0.6))
_GAUSS_WEIGHTS = (5.0 / 18.0, 8.0 / 18.0, 5.0 / 18.0)
# its error on a cell of width w is w^7 f^(6)(ξ) (3!)^4 / (7 (6!)^3); for the standard normal
# density, |f^(6)| = |He6(u) φ(u)| <= 15/√(2π) (at u = 0): the bound per cell is w^7 times this
GAUSS_ERROR_PER_W7 = 15.0 / math.sqrt(2.0 * math.pi) * 6.0**4 / (7.0 * 720.0**3)
# a mesh is by quadrature when the bound summed over its cells is at most this much of the
# probability (and of the first moment's scale): below a double's rounding of the total, 1
QUADRATURE_MAX_ERROR = 1e-16


@dataclass(frozen=True)
class MeshNodes:
    """The quadrature nodes of a length range's mesh (`mesh_edge_logs`' cells): per node (shape
    3 x cells), its ln(tokens), its weight (the cell's width in ln tokens x the Gauss weight)
    and its length in tokens (e^node); and the widest cell's width in ln tokens. Read-only."""

    logs: FloatArray
    weights: FloatArray
    tokens: FloatArray
    widest_log: float


@lru_cache(maxsize=16)
def mesh_nodes(min_tokens: float, max_tokens: float, cells: int) -> MeshNodes:
    """The nodes of the mesh's cells on [min_tokens, max_tokens], once per range."""
    _, log_hi = mesh_edge_logs(min_tokens, max_tokens, cells)
    start, width = log_hi[:-1], np.diff(log_hi)
    logs = np.stack([start + x * width for x in _GAUSS_NODES])
    weights = np.stack([w * width for w in _GAUSS_WEIGHTS])
    tokens = np.exp(logs)
    for array in (logs, weights, tokens):
        array.setflags(write=False)
    return MeshNodes(logs, weights, tokens, float(width.max()) if width.size else 0.0)


def quadrature_fits(d: TruncatedLogNormal, nodes: MeshNodes) -> bool:
    """Whether `d`'s mesh is by quadrature: the error bound of all its cells, in units of
    its normaliser (the probability on the range, as a cell's mass is divided by it), is at
    most QUADRATURE_MAX_ERROR. Cells narrow against sigma_log: e.g. 4096 cells on [1, 131072]
    tokens, with all the mass on the range, need sigma_log >= 0.296 (real traces' are 0.5-1.5)."""
    if not (d.sigma_log > 0 and nodes.widest_log > 0):  # no cell, or no spread: the closed form
        return False
    widths = nodes.widest_log / d.sigma_log  # in standard deviations
    if not widths < 1:  # a cell a deviation wide or more: its bound alone is over 2.9e-6 (and
        return False  # widths**7 could overflow)
    bound = nodes.logs.shape[1] * GAUSS_ERROR_PER_W7 * widths**7
    return bool(bound <= QUADRATURE_MAX_ERROR * d._normaliser)


def quadrature_moments(
    nodes: MeshNodes, mu_log: float | FloatArray, sigma_log: float | FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Each cell's mass and first moment (E[L ; cell]) by 3-point Gauss–Legendre in ln(tokens):
    the density φ((y − mu)/σ) at the nodes, times their weights, summed (times the node's
    length for the moment), divided by the cells' total mass. Numbers (one distribution), or
    a distribution per row (analytic/ttft_rows.py): mu_log and sigma_log shaped (rows, 1, 1)
    against the nodes' (3, cells); the same arithmetic element by element either way, so a
    row gets its distribution's bits. A cell's mean is a positive mix of its nodes' lengths:
    inside the cell, even far out in a tail, where the closed form's differences lose every
    digit. The total is the quadrature's, not the normaliser Z = Φ(z_max) − Φ(z_min) (within
    the bound of it): on a range narrow against σ, Z's difference of tails keeps few digits
    (1.8e-9 of itself for 1 token at 1e6 tokens with σ = 10), while the sum keeps them all,
    so the masses are probabilities to the last digits."""
    # in place, one temporary: the same operations on the same numbers as
    # nodes.weights * np.exp(-0.5 * ((nodes.logs - mu_log) / sigma_log) ** 2), without an
    # array allocated (and page-faulted) per step: a block's arrays are rows x 3 x 4,096
    mass = nodes.logs - mu_log
    mass /= sigma_log
    np.multiply(mass, mass, out=mass)
    mass *= -0.5
    np.exp(mass, out=mass)
    mass *= nodes.weights
    moment = mass * nodes.tokens
    cell_mass = mass[..., 0, :] + mass[..., 1, :]
    cell_mass += mass[..., 2, :]
    cell_moment = moment[..., 0, :] + moment[..., 1, :]
    cell_moment += moment[..., 2, :]
    scale = 1.0 / np.sum(cell_mass, axis=-1, keepdims=True)
    cell_mass *= scale
    cell_moment *= scale
    return cell_mass, cell_moment


@lru_cache(maxsize=16)
def mesh_edge_logs(
    min_tokens: float, max_tokens: float, cells: int
) -> tuple[FloatArray, FloatArray]:
    """The logs of the ends `partial_moments(min_tokens, edges)` clips for the mesh's geometric
    edges: they depend on the length range alone, not on mu_log or sigma_log, so a server
    meeting a new log-normal per request on one range takes them once (the same numbers:
    the same operations on the same inputs). Read-only, as they are shared."""
    edges = np.geomspace(min_tokens, max_tokens, cells + 1)
    lo = np.clip(np.asarray(min_tokens, float), min_tokens, max_tokens)
    hi = np.maximum(lo, np.clip(edges, min_tokens, max_tokens))
    with np.errstate(divide="ignore"):
        log_lo, log_hi = np.log(lo), np.log(hi)
    log_hi.setflags(write=False)
    return log_lo, log_hi
