"""Prefill latency vs input length from the TTFTs of single requests, robust for small runs.
Units: tokens and seconds.

A request's TTFT carries timing jitter (~1% on a quiet server). A fixed-length sweep (many
requests per length) takes the median of each length; a run of random lengths has one request
per distinct length, so one bin per length made a curve that falls wherever two neighbouring
requests' jitter exceeds their length difference, and a 48-prompt run was refused as "too noisy"
where the same run with 300 prompts was accepted. Here:

- bins by quantile: the requests sorted by length are cut, only between distinct lengths, into
  bins of at least `min_requests` each (MIN_BIN_REQUESTS, or n / MAX_BINS when that is more;
  fewer for a run too small for MIN_PREFILL_BINS such bins); a fixed-length sweep with at least
  that many requests per length keeps one bin per length. A bin's length is its median length,
  its latency its median TTFT (robust to a slow request);
- a monotone fit by pooling adjacent violators: where a bin's median TTFT falls below the one
  before by at most MAX_JITTER_FALL, the two bins are pooled (their requests' medians taken
  again) until the curve rises; a larger fall is a real non-monotone curve (queueing, or a
  mislabelled column) and is refused, naming both points and the requests behind them.

Every point reports how many requests it rests on.
"""

import math
from dataclasses import dataclass

import numpy as np

from prfaas_plan.errors import ConfigError

MIN_BIN_REQUESTS = 4
MAX_BINS = 64
MIN_PREFILL_BINS = 3  # the quadratic fit's coefficients
# a fall of the median TTFT from one bin to the next by at most this share is jitter (medians of
# >= 4 requests with 1% jitter differ by ~1%; a queued or mislabelled run falls by tens of %)
MAX_JITTER_FALL = 0.05


@dataclass(frozen=True)
class PrefillBins:
    input_tokens: np.ndarray  # median length of each bin
    latency_s: np.ndarray  # median TTFT of each bin
    requests: np.ndarray  # requests behind each bin
    min_requests: int  # the least a bin was cut to hold
    pooled: int  # bins pooled into a neighbour as jitter

    def describe(self) -> str:
        return (
            f"{int(self.requests.sum())} requests in {self.requests.size} points (quantile bins "
            f"of at least {self.min_requests} request(s) each; {int(self.requests.min())} to "
            f"{int(self.requests.max())} per point)"
            + (
                f"; {self.pooled} bin(s) pooled into a neighbour where the median TTFT fell by "
                f"<= {MAX_JITTER_FALL:.0%} (jitter)"
                if self.pooled
                else ""
            )
        )


def _cuts(lengths: np.ndarray, per_bin: int) -> list[int]:
    """Bin ends (exclusive indices into the sorted lengths): each bin holds >= per_bin
    requests and ends between two distinct lengths; a short last bin joins the one before."""
    _, counts = np.unique(lengths, return_counts=True)
    ends, held, position = [], 0, 0
    for count in counts:
        position += int(count)
        held += int(count)
        if held >= per_bin:
            ends.append(position)
            held = 0
    if held:
        if ends:
            ends[-1] = position
        else:
            ends.append(position)
    return ends


def bin_requests(
    lengths: np.ndarray, ttft_s: np.ndarray, where: str, *, min_requests: int = MIN_BIN_REQUESTS
) -> PrefillBins:
    """Median length and TTFT per quantile bin, made monotone (module docstring); a
    ConfigError naming `where` for too few lengths or a curve that really falls."""
    order = np.argsort(lengths, kind="stable")
    lengths, ttft_s = lengths[order], ttft_s[order]
    n = lengths.size
    per_bin = max(min_requests, math.ceil(n / MAX_BINS))
    per_bin = max(1, min(per_bin, n // MIN_PREFILL_BINS))
    distinct = np.unique(lengths).size
    bounds = [0, *_cuts(lengths, per_bin)]
    pooled = 0

    def medians(i: int) -> tuple[float, float]:
        part = slice(bounds[i], bounds[i + 1])
        return float(np.median(ttft_s[part])), float(np.round(np.median(lengths[part])))

    latency = [medians(i)[0] for i in range(len(bounds) - 1)]
    i = 0
    while i < len(latency) - 1:
        if latency[i + 1] >= latency[i]:
            i += 1
            continue
        if latency[i + 1] < latency[i] * (1 - MAX_JITTER_FALL):
            (_, a), (_, b) = medians(i), medians(i + 1)
            na, nb = bounds[i + 1] - bounds[i], bounds[i + 2] - bounds[i + 1]
            raise ConfigError(
                f"{where}: median TTFT falls from {latency[i]:.4g} s at {a:g} tokens "
                f"({na} request(s)) to {latency[i + 1]:.4g} s at {b:g} ({nb}), by "
                f"{1 - latency[i + 1] / latency[i]:.0%}, more than the {MAX_JITTER_FALL:.0%} "
                "jitter pooled: queued or mislabelled requests; measure prefill with "
                "--max-concurrency 1"
            )
        del bounds[i + 1]  # pool bins i and i + 1, then look back: the pooled median may fall
        latency[i : i + 2] = [medians(i)[0]]
        pooled += 1
        i = max(i - 1, 0)
    if len(latency) < MIN_PREFILL_BINS:
        raise ConfigError(
            f"{where}: input_lens has {distinct} distinct length(s) in {len(latency)} bin(s); "
            f"the quadratic prefill fit needs at least {MIN_PREFILL_BINS}: sweep the input length"
        )
    tokens = np.array([medians(i)[1] for i in range(len(latency))])
    return PrefillBins(tokens, np.array(latency), np.diff(bounds), per_bin, pooled)
