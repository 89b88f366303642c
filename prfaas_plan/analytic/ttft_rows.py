"""The unloaded TTFT summaries (analytic/ttft.py `unloaded_ttfts`) of many truncated log-normal
workloads at once, each at its own thresholds and links (a sweep's block of scenarios that
differ in their input lengths): the meshes of a few dozen distributions in one 2-D numpy pass
(distributions x cells), and each length's TTFT, the splits and the percentiles likewise.

Every number is computed by the same float operations, in the same order, as the one-workload
code: elementwise ufuncs give an element the same bits whatever the array's shape (so does
analytic/erfc.py), a cumulative sum along a row adds in the row's order, and a percentile's
cell is found by `np.searchsorted` on each workload's row. A workload whose mesh drops a cell
(one without mass) takes the one-workload code. Units: seconds, tokens, bytes, bytes/s.
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
    _weighted_percentiles,
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

    def run(chosen: list[int]) -> None:
        found = _pass(
            system, [workloads[i] for i in chosen], [thresholds_tokens[i] for i in chosen],
            [links_bytes_per_s[i] for i in chosen],
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
    thresholds_tokens: Sequence[Sequence[float]],
    links_bytes_per_s: Sequence[Sequence[float]],
) -> list[list[TtftSummary]]:
    """`unloaded_ttfts_rows` of workloads whose meshes have one size."""
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
    short, long = LogNormalRows.of([workloads[i] for i in kept]).take(rows).split(t)
    local_totals = system.pd_prefill_latency.expectation(short)
    offloaded_totals = (
        system.prfaas_prefill_latency.expectation(long)
        + system.kv_cache_size.expectation(long) * transfer_s_per_byte
    )
    prefill_remote, kv_bytes = system.prfaas_prefill_latency(lengths), system.kv_cache_size(lengths)
    local = system.pd_prefill_latency(lengths)
    cumulative = np.cumsum(weights, axis=1)
    cumulative /= cumulative[:, -1:]
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
    ascending = np.all(ttft[:, 1:] >= ttft[:, :-1], axis=1)  # no nan either
    quantiles = np.asarray(PERCENTILES) / 100.0
    index = np.array([np.searchsorted(c, quantiles, side="left") for c in cumulative])
    in_order = np.take_along_axis(ttft, np.minimum(index, lengths.shape[1] - 1)[rows], axis=1)
    short_mass, long_mass = short[0], long[0]
    with np.errstate(divide="ignore", invalid="ignore"):  # read only where the mass is > 0
        local_means = local_totals / short_mass
        offloaded_means = offloaded_totals / long_mass
    means = (local_totals + offloaded_totals) / (short_mass + long_mass)  # as unloaded_ttfts
    # Python floats, read once (the same values as each element's float())
    means_list, in_order_list = means.tolist(), in_order.tolist()
    local_list = np.where(short_mass > 0, local_means, np.nan).tolist()
    offloaded_list = np.where(long_mass > 0, offloaded_means, np.nan).tolist()
    for e, (row, is_ascending) in enumerate(zip(rows.tolist(), ascending.tolist(), strict=True)):
        if is_ascending:
            p50, p90, p99 = in_order_list[e]
        else:
            p50, p90, p99 = _weighted_percentiles(ttft[e], weights[row], PERCENTILES).tolist()
        summary = TtftSummary(
            mean_s=means_list[e], p50_s=p50, p90_s=p90, p99_s=p99,
            local_mean_s=local_list[e], offloaded_mean_s=offloaded_list[e],
        )  # fmt: skip
        out[kept[row]].append(summary)
    return out
