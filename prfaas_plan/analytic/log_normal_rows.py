"""Many truncated log-normal length distributions at once, one per row of a batch (a sweep's
scenarios that differ in mu_log, sigma_log or the bounds): `split` at one threshold per row (or
a row of thresholds per row) in the same few numpy calls as one distribution's.

Each distribution's split constants (analytic/log_normal.py `split_constants`: normaliser,
scales, tails at the bounds) are computed by the scalar code once per distinct distribution
(or for a whole block by `prepare`, element by element the same arithmetic) and stacked, and
`split` runs the scalar `split_at` on the stacked arrays, so a row's numbers are the same to
the last bit as its distribution's own `split`. `interval_masses`: each one's mass on given
intervals (a plan's range notes), likewise. Units: tokens.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import cached_property, lru_cache

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray, IntArray
from prfaas_plan.analytic.length_distribution import MOMENT_ORDERS
from prfaas_plan.analytic.log_normal import (
    SPLIT_CONSTANTS_KEY,
    SplitConstants,
    TruncatedLogNormal,
    split_at,
    split_constants,
    split_constants_from,
)
from prfaas_plan.analytic.normal import mass_between, small_tail


@dataclass(frozen=True)
class LogNormalRows:
    """Row i's length distribution is ln L ~ Normal(mu_log[i], sigma_log[i]) on
    [min_tokens[i], max_tokens[i]]: parameters of shape (rows,) (or (rows, 1) once `column`ed),
    split constants of shape (orders, *that). Rows taken from others (`take`, `repeat`) keep
    the distinct rows they came from (`distinct`, shape (distinct,)) and each one's index
    there (`source`): `split` at thresholds shared by every row computes each distinct row
    once (an optimiser's coarse grid, where each distribution has a row per PD split and
    mode)."""

    mu_log: FloatArray
    sigma_log: FloatArray
    min_tokens: FloatArray
    max_tokens: FloatArray
    given_constants: SplitConstants | None  # None: `distinct`'s at `source`, when first read
    distinct: "LogNormalRows | None" = None
    source: IntArray | None = None

    @cached_property
    def constants(self) -> SplitConstants:
        """The rows' split constants: given, or taken from the distinct rows' when first read
        (an optimiser's rows, a distribution's for each PD split, are split once per distinct
        distribution, so most never read theirs: taking them for every row was ~2% of a
        Latin-hypercube sweep's time). The same numbers as taking them row by row."""
        if self.given_constants is not None:
            return self.given_constants
        assert self.distinct is not None and self.source is not None
        # the distinct rows' constants at `source`, with a column's axis where these have it
        at = (slice(None), self.source) + (None,) * (self.mu_log.ndim - self.distinct.mu_log.ndim)
        return SplitConstants(
            *(getattr(self.distinct.constants, f.name)[at] for f in fields(SplitConstants))
        )

    @classmethod
    def of(cls, distributions: Sequence[TruncatedLogNormal]) -> "LogNormalRows":
        """The rows of `distributions` (one per row; the constants once per distinct instance:
        equal distributions are one instance, truncated_log_normal interns them)."""
        # distinct by identity (interned instances: a dict of ids hashes no parameters)
        position: dict[int, int] = {}
        rows = np.array([position.setdefault(id(d), len(position)) for d in distributions], int)
        distinct = _Distinct(list({id(d): d for d in distributions}.values()))
        return _distinct_rows(distinct).take(rows)

    def take(self, rows: ArrayLike) -> "LogNormalRows":
        """The distributions of `rows` (indices or a mask over the rows)."""
        index = np.asarray(rows)
        if self.distinct is None:  # these rows are distinct: the taken ones come from them
            distinct, source = self, np.arange(self.mu_log.shape[0])[index]
        else:
            assert self.source is not None  # rows with distinct ones know where they come from
            distinct, source = self.distinct, self.source[index]
        return LogNormalRows(
            self.mu_log[index], self.sigma_log[index], self.min_tokens[index],
            self.max_tokens[index], None, distinct, source,
        )  # fmt: skip

    def repeat(self, times: int) -> "LogNormalRows":
        """Each row `times` times in a row (a deployment's distribution for each of its splits)."""
        rows: IntArray = np.repeat(np.arange(self.mu_log.size), times)
        return self.take(rows)

    def column(self) -> "LogNormalRows":
        """The rows as a column, to broadcast against a row of thresholds per row."""
        given = self.given_constants
        return LogNormalRows(
            self.mu_log[:, None], self.sigma_log[:, None], self.min_tokens[:, None],
            self.max_tokens[:, None],
            None if given is None else SplitConstants(
                *(getattr(given, f.name)[..., None] for f in fields(SplitConstants))
            ),
            self.distinct, self.source,
        )  # fmt: skip

    def split(self, threshold_tokens: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """(short, long) partial moments (k = 0, 1, 2) of each row's distribution at its
        threshold(s): `threshold_tokens` of the rows' shape, or broadcasting against it. A
        column of rows at one row of thresholds (the same for every row), or at a row each that
        is the same for the rows of one distribution, is split once per distinct distribution:
        each element is the same arithmetic on the same numbers."""
        d, source = self.distinct, self.source
        if (
            d is not None and source is not None and self.mu_log.ndim == 2
            and np.ndim(threshold_tokens) == 2 and d.mu_log.shape[0] < source.shape[0]
        ):  # fmt: skip
            t = np.asarray(threshold_tokens, float)
            if t.shape[0] == 1:
                short, long = d.column().split(t)
                return short[:, source], long[:, source]
            # a row of thresholds per row that is its distribution's (an optimiser's coarse grid
            # over differing length ranges): each distinct distribution split once as well
            if t.shape[0] == source.shape[0]:
                present, first = np.unique(source, return_index=True)
                at = np.searchsorted(present, source)
                if np.array_equal(t[first][at], t):
                    short, long = d.take(present).column().split(t[first])
                    return short[:, at], long[:, at]
        t = np.minimum(np.maximum(threshold_tokens, self.min_tokens), self.max_tokens)
        return split_at(t, self.mu_log, self.sigma_log, self.constants)


class _Distinct:
    """Distinct distributions, equal to another list of the very same instances (compared and
    hashed by identity: no parameter is hashed); holding them keeps their ids theirs."""

    __slots__ = ("_hash", "ids", "items")

    def __init__(self, items: list[TruncatedLogNormal]) -> None:
        self.items = items
        self.ids = tuple(map(id, items))
        self._hash = hash(self.ids)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Distinct) and self.ids == other.ids


# a sweep's block asks for the rows of its 1,000 distributions (or of one pass's 64) in its
# search, evaluations, baselines, equal-cost bases and TTFTs: stacked once (~4 ms a block)
@lru_cache(maxsize=8)
def _distinct_rows(distinct: _Distinct) -> LogNormalRows:
    """The rows of distinct distributions: each one's split constants (`prepare`'s, or
    split_constants(d, 0)) and parameters, stacked (read-only: shared)."""
    items = distinct.items
    per_distinct = [d.__dict__.get(SPLIT_CONSTANTS_KEY) or split_constants(d, 0) for d in items]
    stacked = SplitConstants(  # (orders, distinct): np.array of the rows, transposed and
        *(  # copied, takes a third of np.stack's time on a block's 1,000 rows of 3
            np.ascontiguousarray(np.array([getattr(c, f.name) for c in per_distinct]).T)
            for f in fields(SplitConstants)
        )
    )

    def parameter(name: str) -> FloatArray:
        values: FloatArray = np.array([getattr(d, name) for d in items], float)
        return values

    rows = LogNormalRows(
        parameter("mu_log"), parameter("sigma_log"), parameter("min_tokens"),
        parameter("max_tokens"), stacked,
    )  # fmt: skip
    for array in (rows.mu_log, rows.sigma_log, rows.min_tokens, rows.max_tokens):
        array.setflags(write=False)
    for f in fields(SplitConstants):
        getattr(stacked, f.name).setflags(write=False)
    return rows


def prepare(distributions: Sequence[TruncatedLogNormal]) -> None:
    """Compute what each distribution memoises (its normaliser, mean and split constants) for
    all of them in a few numpy calls instead of a few dozen per distribution, element by
    element the same arithmetic as the distribution's own (`_z`, `small_tails`,
    `mass_between`, `_scale`): a sweep's block of differing log-normals. A distribution whose
    numbers are not all finite is left alone: its own code computes them when asked (and
    raises or warns as it does); one whose split constants cannot be computed (`_scale`
    overflows, or no mass) gets only its normaliser, the value its own code gives."""
    distinct = {id(d): d for d in distributions}.values()  # equal instances each prepared
    todo = [d for d in distinct if "_normaliser" not in d.__dict__]
    if not todo:
        return
    mu = np.array([d.mu_log for d in todo], float)
    sigma = np.array([d.sigma_log for d in todo], float)
    with np.errstate(all="ignore"):
        log_min = np.log(np.array([d.min_tokens for d in todo], float))
        log_max = np.log(np.array([d.max_tokens for d in todo], float))
        orders = range(MOMENT_ORDERS)
        offsets = [np.array([k * d.sigma_log**2 for d in todo], float) for k in orders]
        z_min = np.stack([(log_min - mu - offsets[k]) / sigma for k in orders], axis=1)
        z_max = np.stack([(log_max - mu - offsets[k]) / sigma for k in orders], axis=1)
        tail_min, tail_max = small_tail(z_min), small_tail(z_max)
        # partial_moments(-inf, inf) clips its ends to [min, max]: the same z and tails
        masses = mass_between(z_min, tail_min, z_max, tail_max)  # (distributions, orders)
    finite = np.isfinite(z_min).all(axis=1) & np.isfinite(z_max).all(axis=1)
    finite &= np.isfinite(masses).all(axis=1)
    scaled: list[int] = []  # the distributions whose split constants are computed
    scales: list[list[float]] = []
    for i in np.flatnonzero(finite).tolist():
        d = todo[i]
        d.__dict__["_normaliser"] = float(masses[i, 0])
        try:
            scales.append([d._scale(k) for k in orders])
        except ArithmeticError:  # _scale: math.exp overflows, or no mass: left to its own code
            continue
        scaled.append(i)
    if not scaled:
        return
    # split_constants_of's arrays for every distribution at once; each one's constants are its
    # rows of them
    block = split_constants_from(
        np.array(scales, float), np.stack(offsets, axis=1)[scaled], z_min[scaled], z_max[scaled],
        tail_min[scaled], tail_max[scaled],
    )  # fmt: skip
    columns = [getattr(block, f.name) for f in fields(SplitConstants)]
    for array in columns:
        array.setflags(write=False)  # shared by the distributions' constants
    with np.errstate(all="ignore"):
        moments = block.scale[:, :2] * masses[scaled, :2]  # partial_moments(-inf, inf, 1)
        means = (moments[:, 1] / moments[:, 0]).tolist()
    for j, i in enumerate(scaled):
        d = todo[i]
        if math.isfinite(means[j]):
            d.__dict__["mean_tokens"] = means[j]
        d.__dict__[SPLIT_CONSTANTS_KEY] = SplitConstants(*(array[j] for array in columns))


def interval_masses(
    distributions: Sequence[TruncatedLogNormal], a: FloatArray, b: FloatArray
) -> FloatArray:
    """`d.partial_moments(a, b, max_order=0)[0]` of each distribution (a row each), the same
    arithmetic element by element (the ends clipped to each one's bounds); a row that is not
    all finite is nan (its distribution's own code then answers, raising as it does)."""
    minimum = np.array([d.min_tokens for d in distributions], float)[:, None]
    maximum = np.array([d.max_tokens for d in distributions], float)[:, None]
    mu = np.array([d.mu_log for d in distributions], float)[:, None]
    sigma = np.array([d.sigma_log for d in distributions], float)[:, None]
    with np.errstate(all="ignore"):
        lo = np.clip(np.asarray(a, float)[None, :], minimum, maximum)
        hi = np.maximum(lo, np.clip(np.asarray(b, float)[None, :], minimum, maximum))
        z_lo = (np.log(lo) - mu) / sigma  # `_z` at order 0 (its offset 0 * sigma² is +0.0)
        z_hi = (np.log(hi) - mu) / sigma
        mass = mass_between(z_lo, small_tail(z_lo), z_hi, small_tail(z_hi))
        scale = np.array([_scale_or_nan(d, 0) for d in distributions])
        out: FloatArray = scale[:, None] * mass
    out[~np.isfinite(out).all(axis=1)] = np.nan
    return out


def _scale_or_nan(d: TruncatedLogNormal, k: int) -> float:
    """`d._scale(k)`, nan where it cannot be computed (no mass, or math.exp overflows)."""
    try:
        return d._scale(k)
    except ArithmeticError:
        return math.nan
