"""Profile tables as functions of input length (tokens -> seconds or bytes).

Representation: an ordinary least-squares polynomial in the input length, fixed overhead +
linear + quadratic attention term for prefill latency (degree 2), fixed state + per-token KV for
KV size (degree 1). The reference (prfaas-model.md §5) shows why: the quadratic fit through the
paper's four H200 points reproduces its PrfaaS throughput, piecewise-linear interpolation
under-estimates mid-range latency by ~4%. A polynomial also makes conditional expectations exact:
E[T(L) | L in A] = sum_k c_k E[L^k | L in A], see `workload.partial_moments`.

Outside its table's length range a curve is the same fitted polynomial (extrapolation); callers
decide whether that is allowed (see `choices.RangePolicy`) and report it.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray
from prfaas_plan.errors import ProfileError

PREFILL_LATENCY_DEGREE = 2
KV_CACHE_SIZE_DEGREE = 1


# numpy.polynomial's polyfit, polyval and polymul, as they compute (each checked bit for bit
# against them by tests/analytic/test_profiles.py) without importing numpy.polynomial: 9M
# instructions at every start, for the three functions a plan uses of it


def horner(coefficients: Sequence[float] | FloatArray, tokens: ArrayLike) -> FloatArray:
    """Σ_k coefficients[k] · x^k by Horner's rule as numpy's `polyval` computes it (c_n + 0·x,
    then c_k + y·x)."""
    x = np.asarray(tokens, dtype=float)
    values: FloatArray = coefficients[-1] + x * 0
    for coefficient in coefficients[-2::-1]:
        values = coefficient + values * x
    return values


def _least_squares(tokens: FloatArray, values: FloatArray, degree: int) -> tuple[FloatArray, int]:
    """numpy's `polyfit`: least squares on the Vandermonde matrix (powers by repeated
    products), its columns scaled to unit norm, singular values below rows·ε dropped; with the
    matrix's numerical rank (below degree + 1, where polyfit warns, the fit is not determined)."""
    tokens, values = tokens + 0.0, values + 0.0  # as polyfit: a copy, -0 read as 0
    vander = np.empty((degree + 1, tokens.size))
    vander[0] = tokens * 0 + 1
    if degree > 0:
        vander[1] = tokens
    for power in range(2, degree + 1):
        vander[power] = vander[power - 1] * tokens
    scale = np.sqrt(np.square(vander).sum(1))
    scale[scale == 0] = 1
    rcond = tokens.size * np.finfo(float).eps
    solution, _, rank, _ = np.linalg.lstsq(vander.T / scale, values, rcond)
    coefficients: FloatArray = solution / scale
    return coefficients, int(rank)


def _trimmed(coefficients: FloatArray) -> FloatArray:
    """Without trailing zero coefficients (at least one kept), as numpy's `trimseq`."""
    nonzero = np.flatnonzero(coefficients)
    return coefficients[: nonzero[-1] + 1 if nonzero.size else 1]


def squared(coefficients: Sequence[float]) -> list[float]:
    """The coefficients of y² from y's: numpy's `polymul(c, c)` (a self-convolution)."""
    c = _trimmed(np.asarray(coefficients, float))
    result: list[float] = _trimmed(np.convolve(c, c)).tolist()
    return result


def _weighted_sum(coefficients: Sequence[float], moments: FloatArray) -> FloatArray:
    """Σ_k coefficients[k] · moments[k] (moments stacked on the first axis)."""
    total = np.zeros(moments.shape[1:])
    for k, c in enumerate(coefficients):
        total = total + c * moments[k]
    return total


@dataclass(frozen=True)
class FittedCurve:
    """y(l) = sum_k coefficients[k] * l**k, fitted to a validated profile table.

    `quantity` names y with its unit (e.g. `prefill_latency_s`, `kv_cache_bytes`); `source`
    is where the table came from (a file path) and is used in messages.
    """

    quantity: str
    coefficients: tuple[float, ...]
    table_min_tokens: float
    table_max_tokens: float
    max_relative_residual: float
    provenance: str
    source: str

    def __call__(self, tokens: ArrayLike) -> FloatArray:
        """y at `tokens` (`horner`: numpy's `polyval` without its per-call set-up; the
        optimiser evaluates curves on a few dozen lengths at a time)."""
        return horner(self.coefficients, tokens)

    def expectation(self, moments: FloatArray) -> FloatArray:
        """E[y(L); A] = Σ_k c_k m_k from partial moments m_k = E[L^k; A] (stacked on the
        first axis)."""
        return _weighted_sum(self.coefficients, moments)

    def second_moment(self, moments: FloatArray) -> FloatArray:
        """E[y(L)²; A] from partial moments m_k = E[L^k; A], k up to 2·degree: the
        coefficients of y² are the self-convolution of y's."""
        return _weighted_sum(squared(self.coefficients), moments)

    @property
    def degree(self) -> int:
        return len(self.coefficients) - 1


def validate_table(
    tokens: ArrayLike,
    values: ArrayLike,
    *,
    source: str,
    value_name: str,
    key_name: str = "input_tokens",
    min_rows: int = 2,
) -> None:
    """Raise ProfileError unless keys (lengths, batch sizes) are strictly increasing and values
    finite, positive and non-decreasing (a longer prompt never costs less time or memory)."""
    tokens = np.asarray(tokens, dtype=float)
    values = np.asarray(values, dtype=float)
    if tokens.size < min_rows:
        raise ProfileError(f"{source}: needs at least {min_rows} data rows, found {tokens.size}")
    for name, column in ((key_name, tokens), (value_name, values)):
        bad = np.flatnonzero(~np.isfinite(column) | (column <= 0))
        if bad.size:
            raise ProfileError(
                f"{source}: {name} must be finite and > 0, found {column[bad[0]]:g} "
                f"in data row {bad[0] + 1}"
            )
    steps = np.diff(tokens)
    if np.any(steps <= 0):
        row = int(np.flatnonzero(steps <= 0)[0]) + 2
        raise ProfileError(
            f"{source}: {key_name} must be strictly increasing (sorted, no duplicates), "
            f"found {tokens[row - 1]:g} after {tokens[row - 2]:g} in data row {row}"
        )
    drops = np.diff(values)
    if np.any(drops < 0):
        row = int(np.flatnonzero(drops < 0)[0]) + 2
        raise ProfileError(
            f"{source}: {value_name} must not decrease with {key_name}, found "
            f"{values[row - 1]:g} at {key_name} {tokens[row - 1]:g} after {values[row - 2]:g} "
            f"at {tokens[row - 2]:g} (data row {row})"
        )


def fit_curve(
    tokens: ArrayLike,
    values: ArrayLike,
    *,
    degree: int,
    quantity: str,
    provenance: str,
    source: str,
    check_up_to_tokens: float | None = None,
) -> FittedCurve:
    """Least-squares polynomial of `degree` through a validated table.

    The fit must stay positive and non-decreasing from 0 to `check_up_to_tokens` (default: the
    table's maximum); otherwise the table cannot be represented physically and we refuse.
    """
    validate_table(tokens, values, source=source, value_name=quantity)
    tokens = np.asarray(tokens, dtype=float)
    values = np.asarray(values, dtype=float)
    if tokens.size <= degree:
        raise ProfileError(
            f"{source}: a degree-{degree} fit needs at least {degree + 1} rows, found {tokens.size}"
        )
    coefficients, rank = _least_squares(tokens, values, degree)
    if rank < degree + 1:
        raise ProfileError(
            f"{source}: the lengths do not determine a degree-{degree} fit of {quantity} "
            f"(numerical rank {rank} of {degree + 1}: rows too close together for their size); "
            "check the table for a wrong row or unit"
        )
    fitted = horner(coefficients, tokens)
    relative = np.abs(fitted - values) / values
    upper = max(check_up_to_tokens or 0.0, tokens[-1])
    grid = np.linspace(0.0, upper, 512)
    on_grid = horner(coefficients, grid)
    if np.any(on_grid <= 0) or np.any(np.diff(on_grid) < 0):
        raise ProfileError(
            f"{source}: the degree-{degree} least-squares fit of {quantity} is not positive and "
            f"non-decreasing on [0, {upper:g}] tokens (coefficients {coefficients.tolist()}); "
            "check the table for a wrong row or unit"
        )
    return FittedCurve(
        quantity=quantity,
        coefficients=tuple(float(c) for c in coefficients),
        table_min_tokens=float(tokens[0]),
        table_max_tokens=float(tokens[-1]),
        max_relative_residual=float(relative.max()),
        provenance=provenance,
        source=source,
    )
