"""The unloaded TTFT summaries (analytic/ttft.py `unloaded_ttfts`) of many truncated log-normal
workloads at once, each at its own thresholds and links (a sweep's block of scenarios that
differ in their input lengths): the meshes of a few dozen distributions in one 2-D numpy pass
(distributions x cells), and each length's TTFT, the splits and the percentiles likewise.

Every number is computed by the same float operations, in the same order, as the one-workload
code: elementwise ufuncs give an element the same bits whatever the array's shape (so does
analytic/erfc.py). A percentile's cell, which the one-workload code finds on the sequential
cumulative sum of the weights, is found from block sums and certified to be that cell
(`cumulative_crossings`), or else found as that code finds it. A workload whose mesh drops a
cell (one without mass) takes the one-workload code. Units: seconds, tokens, bytes, bytes/s.
"""

from collections.abc import Sequence

import numpy as np

from prfaas_plan.analytic.arrays import FloatArray, IntArray
from prfaas_plan.analytic.capacity import ServingSystem
from prfaas_plan.analytic.log_normal import (
    MeshNodes,
    TruncatedLogNormal,
    mesh_edge_logs,
    mesh_nodes,
    quadrature_fits,
    quadrature_moments,
)
from prfaas_plan.analytic.log_normal_rows import LogNormalRows
from prfaas_plan.analytic.normal import mass_between, small_tail
from prfaas_plan.analytic.ttft import (
    PERCENTILES,
    TtftSummary,
    unloaded_ttfts,
)

# distributions meshed in one pass (their meshes' quadrature nodes, 3 x 4,096 a row: ~1.5 MB
# an array), and (workload, threshold) rows in one pass (each row's TTFTs over its workload's
# mesh: ~8 MB an array at most); a workload with more thresholds than that is computed alone
# (`unloaded_ttfts`). 16 rows, not 64: with two sweep processes at once on the 2-core machine
# (a Dask cluster, or --workers 2), a chunk ran ~5% faster (two chunks at once, alternated:
# ~2,350 against ~2,230 per CPU s), smaller arrays sharing the caches; one process alone ~2%
# slower (2,362 against 2,415, within noise)
ROWS_PER_PASS = 16
THRESHOLD_ROWS_PER_PASS = 256


def mesh_moments(distributions: Sequence[TruncatedLogNormal]) -> tuple[FloatArray, FloatArray]:
    """(mass, first moment) of each mesh cell of each distribution, shape (rows, cells): what
    `_log_normal_mesh` computes for distributions of one `mesh_cells`, element by element the
    same arithmetic: by quadrature for those that `quadrature_fits` (in one pass), from the
    partial moments at the cell edges for the others."""
    nodes = [mesh_nodes(d.min_tokens, d.max_tokens, d.mesh_cells) for d in distributions]
    fits = [quadrature_fits(d, n) for d, n in zip(distributions, nodes, strict=True)]
    by_quadrature = [i for i, f in enumerate(fits) if f]
    by_closed_form = [i for i, f in enumerate(fits) if not f]
    mass = np.empty((len(distributions), distributions[0].mesh_cells))
    moment = np.empty_like(mass)
    if by_quadrature:
        mass[by_quadrature], moment[by_quadrature] = _quadrature(
            [distributions[i] for i in by_quadrature], [nodes[i] for i in by_quadrature]
        )
    if by_closed_form:
        mass[by_closed_form], moment[by_closed_form] = _closed_form(
            [distributions[i] for i in by_closed_form]
        )
    return mass, moment


def _column(values: list[float], ndim: int) -> FloatArray:
    """Per-distribution numbers as a column against `ndim` - 1 more axes."""
    out: FloatArray = np.array(values, float).reshape((-1,) + (1,) * (ndim - 1))
    return out


def _quadrature(
    distributions: list[TruncatedLogNormal], nodes: list[MeshNodes]
) -> tuple[FloatArray, FloatArray]:
    """`quadrature_moments` of each distribution, as rows: one range's nodes shared, or
    each distribution's own."""
    stacked = nodes[0]
    if any(n is not stacked for n in nodes):  # (rows, 3, cells): each row its range's nodes
        stacked = MeshNodes(
            logs=np.stack([n.logs for n in nodes]),
            weights=np.stack([n.weights for n in nodes]),
            tokens=np.stack([n.tokens for n in nodes]),
            widest_log=max(n.widest_log for n in nodes),
        )
    return quadrature_moments(
        stacked,
        _column([d.mu_log for d in distributions], 3),
        _column([d.sigma_log for d in distributions], 3),
    )


def _closed_form(distributions: list[TruncatedLogNormal]) -> tuple[FloatArray, FloatArray]:
    """The partial moments at each distribution's cell edges (`mesh_edge_logs`), differenced:
    one row of edges shared by all when they share their range, else a row each."""
    first = distributions[0]
    if all(
        (d.min_tokens, d.max_tokens) == (first.min_tokens, first.max_tokens) for d in distributions
    ):
        log_lo, log_hi = mesh_edge_logs(first.min_tokens, first.max_tokens, first.mesh_cells)
    else:
        edges = [mesh_edge_logs(d.min_tokens, d.max_tokens, d.mesh_cells) for d in distributions]
        log_lo = np.array([lo for lo, _ in edges])[:, None]
        log_hi = np.stack([hi for _, hi in edges])
    mu = _column([d.mu_log for d in distributions], 2)
    sigma = _column([d.sigma_log for d in distributions], 2)
    moments = []
    for k in range(2):
        offset = _column([k * d.sigma_log**2 for d in distributions], 2)  # as `_z` computes it
        z_lo = (log_lo - mu - offset) / sigma
        z_hi = (log_hi - mu - offset) / sigma
        tail_lo, tail_hi = small_tail(z_lo), small_tail(z_hi)
        mass = mass_between(z_lo, tail_lo, z_hi, tail_hi)
        scaled = _column([d._scale(k) for d in distributions], 2) * mass
        moments.append(scaled[:, 1:] - scaled[:, :-1])  # np.diff along the edges
    return moments[0], moments[1]


def unloaded_ttfts_rows(
    system: ServingSystem,
    workloads: Sequence[TruncatedLogNormal],
    thresholds_tokens: Sequence[Sequence[float]],
    links_bytes_per_s: Sequence[Sequence[float]],
) -> list[list[TtftSummary]]:
    """`unloaded_ttfts(system, workloads[i], thresholds_tokens[i], links_bytes_per_s[i])` for
    each i, the same summaries to the last bit, a few dozen workloads per numpy pass (at most
    ROWS_PER_PASS workloads and THRESHOLD_ROWS_PER_PASS thresholds in all)."""
    out: list[list[TtftSummary]] = [[] for _ in workloads]
    by_mesh: dict[int, list[int]] = {}  # meshes of one size, whatever their length ranges
    for i, d in enumerate(workloads):
        by_mesh.setdefault(d.mesh_cells, []).append(i)
    # the split constants of all of them, stacked once (the block's, which its search and
    # evaluations stacked already) and taken for each pass, not stacked again for each pass
    # (~3 µs a scenario of a Latin-hypercube sweep)
    every = LogNormalRows.of(workloads)

    def run(chosen: list[int]) -> None:
        found = _pass(
            system, [workloads[i] for i in chosen], every.take(chosen),
            [thresholds_tokens[i] for i in chosen], [links_bytes_per_s[i] for i in chosen],
        )  # fmt: skip
        for i, summaries in zip(chosen, found, strict=True):
            out[i] = summaries

    for members in by_mesh.values():
        chosen: list[int] = []
        rows = 0
        for i in members:
            count = len(thresholds_tokens[i])
            if count > THRESHOLD_ROWS_PER_PASS:
                out[i] = unloaded_ttfts(
                    system, workloads[i], thresholds_tokens[i], links_bytes_per_s[i]
                )
                continue
            if len(chosen) == ROWS_PER_PASS or rows + count > THRESHOLD_ROWS_PER_PASS:
                run(chosen)
                chosen, rows = [], 0
            chosen.append(i)
            rows += count
        if chosen:
            run(chosen)
    return out


def _pass(
    system: ServingSystem,
    workloads: Sequence[TruncatedLogNormal],
    distributions: LogNormalRows,
    thresholds_tokens: Sequence[Sequence[float]],
    links_bytes_per_s: Sequence[Sequence[float]],
) -> list[list[TtftSummary]]:
    """`unloaded_ttfts_rows` of workloads whose meshes have one size (`distributions`: their
    rows, in order)."""
    mass, moment = mesh_moments(workloads)
    full = np.all(mass > 0, axis=1)  # mesh_of keeps every cell
    out: list[list[TtftSummary]] = [[] for _ in workloads]
    for i in np.flatnonzero(~full).tolist():
        out[i] = unloaded_ttfts(system, workloads[i], thresholds_tokens[i], links_bytes_per_s[i])
    kept: list[int] = np.flatnonzero(full).tolist()
    if not kept:
        return out
    if len(kept) < len(workloads):
        mass, moment = mass[kept], moment[kept]
    lengths, weights = moment / mass, mass  # mesh_of
    # one row per (workload, threshold): its workload's row of the mesh
    counts = [len(thresholds_tokens[i]) for i in kept]
    rows: IntArray = np.repeat(np.arange(len(kept)), counts)
    t: FloatArray = np.array([x for i in kept for x in thresholds_tokens[i]], np.float64)
    links: FloatArray = np.array([x for i in kept for x in links_bytes_per_s[i]], np.float64)
    transfer_s_per_byte = 1.0 / links
    short, long = distributions.take(np.asarray(kept)[rows]).split(t)
    local_totals = system.pd_prefill_latency.expectation(short)
    offloaded_totals = (
        system.prfaas_prefill_latency.expectation(long)
        + system.kv_cache_size.expectation(long) * transfer_s_per_byte
    )
    prefill_remote, kv_bytes = system.prfaas_prefill_latency(lengths), system.kv_cache_size(lengths)
    local = system.pd_prefill_latency(lengths)
    if len(set(counts)) == 1:  # as many thresholds per workload: broadcast, no row copies
        shape = (len(kept), counts[0], lengths.shape[1])
        per_byte = transfer_s_per_byte.reshape(shape[:2])
        bits = per_byte.view(np.int64)
        if np.all(bits == bits[:, :1]):  # one link per workload (a plan and its baselines):
            remote = (prefill_remote + kv_bytes * per_byte[:, :1])[:, None, :]  # its TTFTs once
        else:
            remote = prefill_remote[:, None, :] + kv_bytes[:, None, :] * per_byte[:, :, None]
        above = lengths[:, None, :] > t.reshape(shape[:2])[:, :, None]
        ttft = np.where(above, remote, local[:, None, :]).reshape(-1, shape[2])
    else:
        remote = prefill_remote[rows] + kv_bytes[rows] * transfer_s_per_byte[:, None]
        ttft = np.where(lengths[rows] > t[:, None], remote, local[rows])
    percentiles = _percentiles(ttft, weights, rows)
    short_mass, long_mass = short[0], long[0]
    with np.errstate(divide="ignore", invalid="ignore"):  # read only where the mass is > 0
        local_means = local_totals / short_mass
        offloaded_means = offloaded_totals / long_mass
    means = (local_totals + offloaded_totals) / (short_mass + long_mass)  # as unloaded_ttfts
    # Python floats, read once (the same values as each element's float())
    means_list, percentiles_list = means.tolist(), percentiles.tolist()
    local_list = np.where(short_mass > 0, local_means, np.nan).tolist()
    offloaded_list = np.where(long_mass > 0, offloaded_means, np.nan).tolist()
    for e, row in enumerate(rows.tolist()):
        p50, p90, p99 = percentiles_list[e]
        summary = TtftSummary(
            mean_s=means_list[e], p50_s=p50, p90_s=p90, p99_s=p99,
            local_mean_s=local_list[e], offloaded_mean_s=offloaded_list[e],
        )  # fmt: skip
        out[kept[row]].append(summary)
    return out


def _percentiles(ttft: FloatArray, weights: FloatArray, rows: IntArray) -> FloatArray:
    """`_weighted_percentiles(ttft[e], weights[rows[e]], PERCENTILES, cumulative)` of each row
    e (its workload's cumulative weights in mesh order, as `unloaded_ttfts` passes them), shape
    (rows, 3): a row in order (non-decreasing, no nan) at its workload's crossings of the
    cumulative weights, one in another order at the crossings of its weights sorted by TTFT
    (a stable sort, as `_weighted_percentiles` sorts them). The crossings are
    `cumulative_crossings`', the same indices as the cumulative sums'."""
    quantiles = np.asarray(PERCENTILES) / 100.0
    last = ttft.shape[1] - 1
    index = np.minimum(cumulative_crossings(weights, quantiles), last)
    out = np.take_along_axis(ttft, index[rows], axis=1)
    ascending = np.all(ttft[:, 1:] >= ttft[:, :-1], axis=1)  # no nan either
    unordered = np.flatnonzero(~ascending)
    if unordered.size:
        values = ttft[unordered]
        order = np.argsort(values, axis=1, kind="stable")
        starts = (rows[unordered] * weights.shape[1])[:, None]  # the rows' in the flat weights
        order += starts  # a flat index: one 1-D take, ~3x faster than weights[rows, order]
        index = np.minimum(cumulative_crossings(np.take(weights, order), quantiles), last)
        cells = np.take_along_axis(order, index, axis=1) - starts
        out[unordered] = np.take_along_axis(values, cells, axis=1)
    return out


# cells a block of `cumulative_crossings`: a row's crossing is found among its blocks' sums,
# then among its block's cells
CROSSING_BLOCK_CELLS = 64
_BLOCK_OFFSETS = np.arange(CROSSING_BLOCK_CELLS)
_LARGEST_TOTAL, _SMALLEST_SHARE = 2.0**1020, 2.0**-1000


def cumulative_crossings(weights: FloatArray, quantiles: FloatArray) -> IntArray:
    """For each row of `weights` (rows, cells), `np.searchsorted(c, quantiles, side="left")`
    where `c = np.cumsum(row); c /= c[-1]` (`_weighted_percentiles`'): the first cell whose
    cumulative share reaches each quantile in (0, 1). Shape (rows, quantiles). The weights must
    be positive and finite (a mesh's masses).

    Found without the cumulative sum of every cell, a sequential chain of additions (~3 ns a
    cell, most of a percentile's time): each block of CROSSING_BLOCK_CELLS cells is summed,
    the blocks' sums accumulated, and only the block where the crossing lies is accumulated
    cell by cell. These sums P differ from the sequential ones S in their rounding: for
    positive terms, any order of summation is within G = γ_k = k u / (1 − k u) of the exact
    sum E, relatively (u = 2^-53, k the additions on the way, at most cells + blocks + 2 x
    block here), as long as nothing overflows and q and q P_T are normal numbers. So where
    P_j ≥ q P_T (1 + δ) and P_(j−1) < q P_T (1 − δ), with δ ≥ 4G + 6u (δ is 1e-9 here, and
    more for meshes of over ~10^6 cells), the sequential shares satisfy c_j ≥ q > c_(j−1),
    and j is the answer (c does not decrease). A crossing that is not that clear (a share
    within δ of q, as in equal weights whose shares hit q exactly), or a row past those
    bounds (a total above 2^1020, q or q P_T below 2^-1000), is found from the row's
    sequential cumulative sum, as `_weighted_percentiles` finds it."""
    rows, cells = weights.shape
    q = np.asarray(quantiles, float)
    size = CROSSING_BLOCK_CELLS
    blocks = -(-cells // size)
    if cells % size == 0:
        sums = np.einsum("ijk->ij", weights.reshape(rows, blocks, size))
    else:
        sums = np.add.reduceat(weights, np.arange(0, cells, size), axis=1)
    ends = np.cumsum(sums, axis=1)  # the blocks' cumulative sums
    target = ends[:, -1:] * q  # (rows, quantiles)
    block = np.count_nonzero(ends[:, None, :] < target[:, :, None], axis=2)
    np.minimum(block, blocks - 1, out=block)
    first = block * size
    starts = np.arange(rows)[:, None] * cells  # each row's first cell in the flat weights
    flat = first[..., None] + (starts[..., None] + _BLOCK_OFFSETS)
    if cells % size:  # the last block is short: its missing cells weigh nothing
        beyond = flat >= (starts + cells)[..., None]
        flat[beyond] = 0
    within = weights.reshape(-1)[flat]  # (rows, quantiles, size): the block's weights
    if cells % size:
        within[beyond] = 0.0
    before = ends.reshape(-1)[np.arange(rows)[:, None] * blocks + block - 1]
    before[block == 0] = 0.0
    np.cumsum(within, axis=2, out=within)
    within += before[..., None]  # P at the block's cells
    position = np.count_nonzero(within < target[..., None], axis=2)
    index: IntArray = first + position
    # the certificate: P at the crossing and at the cell before it, clear of q P_T by δ
    delta = max(1e-9, 16.0 * (cells + blocks + 2 * size + 2) * 2.0**-53)
    p = position.reshape(-1)
    each = np.arange(p.size)
    flat_within = within.reshape(-1, size)
    at = flat_within[each, np.minimum(p, size - 1)]
    previous = np.where(p > 0, flat_within[each, p - 1], before.reshape(-1))
    total = np.repeat(ends[:, -1], q.size)
    t = target.reshape(-1)
    # the bound is relative: no sum may overflow (the total below 2^1020), and the shares and
    # q P_T must be normal numbers (q and q P_T at least 2^-1000)
    clear = (p < size) & (index.reshape(-1) < cells) & (total <= _LARGEST_TOTAL)
    clear &= (t >= _SMALLEST_SHARE) & (np.tile(q, rows) >= _SMALLEST_SHARE)
    clear &= (at >= t * (1.0 + delta)) & (previous < t * (1.0 - delta))
    for r, k in zip(*np.nonzero(~clear.reshape(rows, q.size)), strict=True):
        cumulative = np.cumsum(weights[r])
        cumulative /= cumulative[-1]
        index[r, k] = np.searchsorted(cumulative, q[k], side="left")
    return index
