"""The decode point of a profile table: the largest batch meeting the decode SLO (BS_max) and its
step time T_decode on one instance, from a table of batch sizes, or read at a decode context
from a table with a context column (bilinear between profiled contexts), with the sides of that
context that explain's derivatives need. Units: tokens, seconds.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray, distinct_sorted
from prfaas_plan.analytic.profiles import validate_table
from prfaas_plan.errors import InfeasibleError, RangeError


@dataclass(frozen=True)
class DecodeContextSide:
    """One side of a decode point read at context C from a table with a context column (toward
    lower or higher contexts): the two profiled contexts that side lies between, the step time
    of BS_max at them, and how far from C BS_max holds. Between two profiled contexts the step
    is linear in context (decode_point_at_context's bilinear interpolation), so with BS_max held
    ∂T_decode/∂C on this side is `step_slope_s_per_token`."""

    bracket_tokens: tuple[float, float]  # the profiled contexts around the side, ascending
    step_latency_s: tuple[float, float]  # T_decode(BS_max) at them
    plateau_end_tokens: float  # BS_max holds from C up to this context (at most to the bracket)
    # BS_max just past plateau_end_tokens: -1 smaller, +1 larger, 0 unchanged up to
    # the bracket's end (BS_max changes, if it does, in the next bracket)
    batch_change: int

    @property
    def step_slope_s_per_token(self) -> float:
        (c0, c1), (t0, t1) = self.bracket_tokens, self.step_latency_s
        return (t1 - t0) / (c1 - c0)


Sides = tuple[DecodeContextSide | None, DecodeContextSide | None]


@dataclass(frozen=True)
class DecodePoint:
    """Largest decode batch meeting the SLO and its step time on one instance."""

    batch_size: int
    step_latency_s: float
    source: str
    context_tokens: float | None = None  # the decode context it holds at, where profiled
    # where profiled by context: what computes `context_sides` when first asked for (explain
    # and the closed forms ask; a plan, a sweep's scenario or a server's request does not)
    sides_of: "Callable[[], Sides] | None" = field(default=None, compare=False, repr=False)

    @cached_property
    def context_sides(self) -> Sides | None:
        """Where profiled by context: the sides below and above `context_tokens` (None: C is
        the table's lowest, or highest, context: nothing is profiled beyond it)."""
        return None if self.sides_of is None else self.sides_of()


# a step meets the SLO's budget up to this (relative): a batch whose step is the budget to the
# last bits is not lost to rounding
STEP_BUDGET_RTOL = 1e-12


def _step_budget_s(slo_tokens_per_s: float) -> float:
    """The longest step that meets `slo_tokens_per_s`, with STEP_BUDGET_RTOL's allowance."""
    return 1.0 / slo_tokens_per_s * (1 + STEP_BUDGET_RTOL)


def decode_point_for_slo(
    batch_sizes: ArrayLike, step_latencies_s: ArrayLike, *, slo_tokens_per_s: float, source: str
) -> DecodePoint:
    """Largest profiled batch whose step time meets `1 / slo_tokens_per_s` (no extrapolation:
    a looser SLO cannot unlock batches that were never profiled)."""

    validate_table(
        batch_sizes,
        step_latencies_s,
        source=source,
        value_name="decode_step_latency_s",
        key_name="batch_size",
        min_rows=1,
    )
    batch_sizes = np.asarray(batch_sizes)
    step_latencies_s = np.asarray(step_latencies_s, dtype=float)
    max_step_s = 1.0 / slo_tokens_per_s
    ok = np.flatnonzero(step_latencies_s <= _step_budget_s(slo_tokens_per_s))
    if ok.size == 0:
        raise InfeasibleError(
            f"{source}: a decode SLO of {slo_tokens_per_s:g} tokens/s needs a step of at most "
            f"{max_step_s:g} s, but the fastest profiled step is {step_latencies_s[0]:g} s at batch "
            f"{batch_sizes[0]:g}; relax slo.decode_tokens_per_s or profile smaller batches"
        )
    best = ok[-1]
    return DecodePoint(int(batch_sizes[best]), float(step_latencies_s[best]), source)


def _step_at_batches(
    batch_sizes: FloatArray, step_latencies_s: FloatArray, batches: FloatArray
) -> FloatArray:
    """Step time at `batches` by linear interpolation between profiled batches (inf outside)."""
    inside = (batches >= batch_sizes[0]) & (batches <= batch_sizes[-1])
    steps: FloatArray = np.where(inside, np.interp(batches, batch_sizes, step_latencies_s), np.inf)
    return steps


def validate_context_table(
    context_tokens: FloatArray,
    batch_sizes: FloatArray,
    step_latencies_s: FloatArray,
    *,
    source: str,
) -> FloatArray:
    """The distinct contexts of a (context, batch, step) table, after checking each context's
    rows as a batch table (validate_table); ProfileError otherwise."""
    contexts: FloatArray = distinct_sorted(context_tokens)
    for c in contexts:
        rows = context_tokens == c
        validate_table(
            batch_sizes[rows], step_latencies_s[rows], source=f"{source} (context_tokens {c:g})",
            value_name="decode_step_latency_s", key_name="batch_size", min_rows=1,
        )  # fmt: skip
    return contexts


class ContextSteps:
    """The step time of every whole batch from 1 to the table's largest at each profiled
    context of a (context, batch, step) table (inf for batches not profiled there), each
    context's computed when first asked for and kept: a decode table's, shared by the decode
    points of every workload read on it (a sweep's block, a server's requests). Each batch's
    step is interpolated alone (`np.interp` element by element), so a batch's number is the
    same whichever others are asked for with it. Read-only arrays."""

    def __init__(self, context: FloatArray, batch: FloatArray, step: FloatArray) -> None:
        self._context, self._batch, self._step = context, batch, step
        self.candidates: FloatArray = np.arange(1.0, float(batch.max()) + 1.0)
        self._at: dict[float, FloatArray] = {}
        # the decode points of one block's contexts (`prepare_points`), by (context, SLO,
        # source): the last block's only
        self.prepared: dict[tuple[float, float, str], DecodePoint] = {}

    def at(self, context_tokens: float) -> FloatArray:
        """The step of each of `candidates` at a profiled context."""
        steps = self._at.get(context_tokens)
        if steps is None:
            rows = self._context == context_tokens
            steps = _step_at_batches(self._batch[rows], self._step[rows], self.candidates)
            steps.setflags(write=False)
            self._at[context_tokens] = steps
        return steps

    def pair(self, context_tokens: float, batch_size: int) -> FloatArray:
        """The steps of `batch_size` (one of `candidates`) and `batch_size + 1` at a profiled
        context."""
        steps = self.at(context_tokens)
        above = steps[batch_size] if batch_size < steps.size else np.inf  # past every row: inf
        return np.array([steps[batch_size - 1], above])


def _between(low: FloatArray, high: FloatArray, weight: float) -> FloatArray:
    """(1 − weight) · low + weight · high, exactly `low` at weight 0 and `high` at 1 (an
    unprofiled batch, inf at one end, is inf strictly between the ends, never 0 · inf)."""
    if weight == 0.0:
        return low
    if weight == 1.0:
        return high
    mixed: FloatArray = (1 - weight) * low + weight * high
    return mixed


def _context_side(
    steps: ContextSteps,
    *,
    bracket: tuple[float, float],
    decode_context_tokens: float,
    batch_size: int,
    max_step_s: float,
    toward_high: bool,
) -> DecodeContextSide:
    """The side of `decode_context_tokens` inside `bracket` toward its high (or low) end: the
    step of BS_max = `batch_size` at the bracket's contexts, and where BS_max stops holding.
    Along the side the steps of `batch_size` and `batch_size + 1` are linear in context, so
    BS_max holds until the first of: `batch_size` exceeds the step budget (one batch fewer
    beyond), `batch_size + 1` meets it (one more), the bracket's end (unchanged)."""
    c0, c1 = bracket
    c = decode_context_tokens
    far = c1 if toward_high else c0
    at_low, at_high = (steps.pair(x, batch_size) for x in bracket)
    here = _between(at_low, at_high, (c - c0) / (c1 - c0))
    there = at_high if toward_high else at_low
    ends: list[tuple[float, int]] = [(far, 0)]
    # batch_size fails past c where its step, linear from here to there, crosses the budget
    if there[0] > max_step_s:
        fail = 0.0 if not np.isfinite(there[0]) else (max_step_s - here[0]) / (there[0] - here[0])
        ends.append((c + max(fail, 0.0) * (far - c), -1))
    # batch_size + 1 (if profiled on this side) meets the budget where its step crosses it
    if np.isfinite(there[1]) and there[1] <= max_step_s:
        meet = 1.0 if not np.isfinite(here[1]) else (here[1] - max_step_s) / (here[1] - there[1])
        ends.append((c + min(max(meet, 0.0), 1.0) * (far - c), 1))
    end, change = min(ends, key=lambda e: (abs(e[0] - c), e[1] == 0))
    return DecodeContextSide(
        bracket_tokens=(float(c0), float(c1)),
        step_latency_s=(float(at_low[0]), float(at_high[0])),
        plateau_end_tokens=float(end),
        batch_change=change,
    )


def decode_point_at_context(
    context_tokens: ArrayLike,
    batch_sizes: ArrayLike,
    step_latencies_s: ArrayLike,
    *,
    decode_context_tokens: float,
    slo_tokens_per_s: float,
    source: str,
    contexts: FloatArray | None = None,
    context_steps: ContextSteps | None = None,
) -> DecodePoint:
    """Largest whole batch whose step at `decode_context_tokens` meets `1 / slo_tokens_per_s`,
    from a table of rows (context, batch, step); `contexts`: the table's distinct contexts where
    it is already validated (validate_context_table's answer), else it is validated here;
    `context_steps`: the table's ContextSteps where it has one (the same numbers).

    Interpolation: linear in batch within each profiled context, then linear in context between
    the two profiled contexts around `decode_context_tokens` (bilinear, exact for a roofline
    step = a + b·batch + c·context + d·batch·context). Nothing is extrapolated: the context must
    lie within the profiled contexts, and only batches profiled at both neighbouring contexts
    count (at a profiled context, the batches profiled there). The point also says how it moves
    with the context (`context_sides`: the step's slope on each side, BS_max held, and how far
    BS_max holds), which `explain` needs for the elasticities in the workload's lengths.
    A point `prepare_points` computed for `context_steps` (a sweep's block) is returned as it
    is: the same point."""
    if context_steps is not None and _preparable(decode_context_tokens, slo_tokens_per_s):
        # this table's, read where it is inside the contexts
        point = context_steps.prepared.get((decode_context_tokens, slo_tokens_per_s, source))
        if point is not None:
            return point
    context = np.asarray(context_tokens, dtype=float)
    batch = np.asarray(batch_sizes, dtype=float)
    step = np.asarray(step_latencies_s, dtype=float)
    if contexts is None:
        contexts = validate_context_table(context, batch, step, source=source)
    if not contexts[0] <= decode_context_tokens <= contexts[-1]:
        raise RangeError(
            f"{source}: the workload's mean decode context {decode_context_tokens:,.0f} tokens lies "
            f"outside the profiled contexts {contexts[0]:g}..{contexts[-1]:g} tokens; profile "
            "that context (the table is not extrapolated)"
        )
    upper = int(np.searchsorted(contexts, decode_context_tokens))
    profiled = bool(contexts[upper] == decode_context_tokens)
    low = float(contexts[upper] if profiled else contexts[upper - 1])
    high = float(contexts[upper])
    weight = 0.0 if high == low else (decode_context_tokens - low) / (high - low)
    table = ContextSteps(context, batch, step) if context_steps is None else context_steps
    steps = _between(table.at(low), table.at(high), weight)
    max_step_s = 1.0 / slo_tokens_per_s
    ok = np.flatnonzero(steps <= _step_budget_s(slo_tokens_per_s))
    if ok.size == 0:
        finite = np.isfinite(steps)
        fastest = float(steps[finite][0]) if finite.any() else float("inf")
        raise InfeasibleError(
            f"{source}: a decode SLO of {slo_tokens_per_s:g} tokens/s needs a step of at most "
            f"{max_step_s:g} s, but the fastest step at {decode_context_tokens:,.0f} context tokens "
            f"is {fastest:g} s; relax slo.decode_tokens_per_s or profile smaller batches"
        )
    best = int(ok[-1])
    return _point(
        table, contexts, upper, profiled, float(decode_context_tokens), best, float(steps[best]),
        slo_tokens_per_s, source,
    )  # fmt: skip


def _point(
    table: ContextSteps,
    contexts: FloatArray | list[float],
    upper: int,
    profiled: bool,
    decode_context_tokens: float,
    best: int,
    step_latency_s: float,
    slo_tokens_per_s: float,
    source: str,
) -> DecodePoint:
    """The decode point of batch `table.candidates[best]` at `decode_context_tokens`
    (`contexts[upper]`, the first profiled context at or above it, `profiled` if equal), with
    the sides its brackets give."""
    batch_size = int(table.candidates[best])
    # the brackets on each side of C: one bracket where C lies between two profiled contexts,
    # the two around it where C is one (None past the table's ends)
    above_index = upper + 1 if profiled else upper
    brackets = (
        (float(contexts[upper - 1]), float(contexts[upper])) if upper > 0 else None,
        (float(contexts[above_index - 1]), float(contexts[above_index]))
        if above_index < len(contexts)
        else None,
    )
    sides_of = partial(
        _context_sides, table, brackets, decode_context_tokens, batch_size,
        _step_budget_s(slo_tokens_per_s),
    )  # fmt: skip
    return DecodePoint(batch_size, step_latency_s, source, decode_context_tokens, sides_of)


def _preparable(decode_context_tokens: object, slo_tokens_per_s: float) -> bool:
    """Whether a decode point may be prepared and found by its context and SLO: floats, neither
    zero (equal keys are then equal bits: 0.0 == -0.0 but its point's context would keep the
    sign), the SLO positive (a mean decode context is above 0, an SLO is validated > 0)."""
    return (
        isinstance(decode_context_tokens, float)
        and decode_context_tokens != 0.0
        and slo_tokens_per_s > 0.0
    )


def prepare_points(
    table: ContextSteps,
    contexts: FloatArray,
    decode_contexts_tokens: Sequence[float],
    *,
    slo_tokens_per_s: float,
    source: str,
) -> None:
    """Compute `decode_point_at_context` at each of `decode_contexts_tokens` (a sweep's block:
    each scenario's mean decode context) in a few numpy calls, and keep them on `table`
    (`prepared`, replacing the last block's), where `decode_point_at_context` finds them: the
    same points, element by element the same arithmetic. A context outside the profiled ones,
    or where no batch meets the SLO, is left to `decode_point_at_context` (which says why)."""
    if not _preparable(1.0, slo_tokens_per_s):
        return
    c = np.asarray(decode_contexts_tokens, dtype=float)
    inside = (contexts[0] <= c) & (c <= contexts[-1]) & (c != 0.0)  # nan: outside
    c_inside = np.where(inside, c, contexts[0])
    upper = np.searchsorted(contexts, c_inside)
    profiled = contexts[upper] == c_inside
    low = np.where(profiled, contexts[upper], contexts[np.maximum(upper - 1, 0)])
    high = contexts[upper]
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(high == low, 0.0, (c_inside - low) / (high - low))
    steps = np.empty((c.size, table.candidates.size))
    for bracket in set(zip(low.tolist(), high.tolist(), strict=True)):
        rows = (low == bracket[0]) & (high == bracket[1])
        w = weight[rows][:, None]
        at_low, at_high = table.at(bracket[0]), table.at(bracket[1])
        # `_between`, row by row: exactly one end at a weight of 0 or 1 (where 0 · inf, an
        # unprofiled batch's, is computed but not taken)
        with np.errstate(invalid="ignore"):
            mixed = (1 - w) * at_low + w * at_high
        steps[rows] = np.where(w == 0.0, at_low, np.where(w == 1.0, at_high, mixed))
    ok = steps <= _step_budget_s(slo_tokens_per_s)
    met = ok.any(axis=1) & inside
    best = steps.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
    profiled_tokens = contexts.tolist()  # Python floats, read once (float() of each)
    table.prepared = {
        (x, slo_tokens_per_s, source): _point(
            table, profiled_tokens, u, p, x, b, s, slo_tokens_per_s, source
        )
        for x, u, p, b, s in zip(
            c[met].tolist(), upper[met].tolist(), profiled[met].tolist(), best[met].tolist(),
            steps[met, best[met]].tolist(), strict=True,
        )
    }  # fmt: skip


def _context_sides(
    table: ContextSteps,
    brackets: tuple[tuple[float, float] | None, tuple[float, float] | None],
    decode_context_tokens: float,
    batch_size: int,
    max_step_s: float,
) -> Sides:
    """The sides of a decode point (`_context_side`) in the brackets below and above it."""
    below, above = (
        None
        if bracket is None
        else _context_side(
            table, bracket=bracket, decode_context_tokens=decode_context_tokens,
            batch_size=batch_size, max_step_s=max_step_s, toward_high=high_side,
        )
        for bracket, high_side in zip(brackets, (False, True), strict=True)
    )  # fmt: skip
    return below, above


def mean_decode_context_tokens(
    mean_input_times_output: float, mean_output_tokens: float, mean_output_squared: float
) -> float:
    """Context a decode step sees on average: a request of output length o holds a slot for o
    steps at contexts l_in .. l_in + o, so slots are occupied in proportion to o and
    C = (E[L_in·L_out] + E[L_out²]/2) / E[L_out]; with independent lengths
    E[L_in·L_out] = E[L_in]·E[L_out], and for a constant output C = E[L_in] + L_out/2."""
    return (mean_input_times_output + mean_output_squared / 2.0) / mean_output_tokens
