"""Prefix-cache-aware routing for the simulator (reference prfaas-model.md §8). Units: tokens.

Each cluster keeps a prefix cache of KV blocks (`block_tokens` tokens each, identified by the
trace's `hash_ids`). A request's cached prefix in a cluster is its longest run of leading
blocks present there, so l_prfaas and l_pd are block multiples (capped at l_total − 1: at least
one token is always prefilled). With t the routing threshold:

- scarce bandwidth: prefill on PD-P if l_total − l_pd <= t, else on PrfaaS (PrfaaS reuses its
  own prefix l_prfaas);
- abundant bandwidth: with l_prefix = max(l_prfaas, l_pd), prefill on PD-P if
  l_total − l_prefix <= t, else on PrfaaS; when the longer prefix lives in the other cluster it
  is moved there first, and the chosen cluster prefills only l_total − l_prefix tokens.

Bytes follow the affine KV size S_kv(l) = state + per-token KV, counting the request-level
linear-attention state once per move: an offloaded request ships S_kv(l_total − l_pd) to PD (the
tail PD lacks, plus the state); a prefix move of the missing l tokens ships S_kv(l).

Modelling choices (the paper gives none of these numbers):
- a cache is an LRU set of blocks with `cache_blocks` capacity per cluster (None: unbounded);
- a cluster caches the blocks of the requests it prefilled, and the blocks moved into it;
  PD also keeps the blocks of offloaded requests if `pd_caches_offloaded` (their KV arrives
  there for decode);
- blocks become reusable when the request is routed, not when its prefill ends (slightly
  optimistic for near-simultaneous requests sharing a prefix);
- routing depends on the caches only, so it is computed in arrival order before the queues
  are simulated.
"""

from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from prfaas_plan.analytic.capacity import Configuration
from prfaas_plan.errors import ConfigError
from prfaas_plan.sim.arrivals import MOONCAKE_BLOCK_TOKENS, PrefixBlocks
from prfaas_plan.sim.policies import Job, Policy, Progress, Schedule
from prfaas_plan.sim.stages import fixed_routes


class BandwidthRegime(StrEnum):
    SCARCE = "scarce"
    ABUNDANT = "abundant"


@dataclass(frozen=True)
class PrefixAwareThreshold:
    """Threshold routing on the uncached length, with the paper's two bandwidth regimes."""

    regime: BandwidthRegime = BandwidthRegime.SCARCE
    block_tokens: int = MOONCAKE_BLOCK_TOKENS
    cache_blocks: int | None = None  # LRU capacity per cluster, None = unbounded
    pd_caches_offloaded: bool = False

    def __post_init__(self) -> None:
        if self.block_tokens < 1:
            raise ConfigError(f"prefix cache: block_tokens must be >= 1, got {self.block_tokens}")
        if self.cache_blocks is not None and self.cache_blocks < 1:
            raise ConfigError(
                f"prefix cache: cache_blocks must be >= 1 or None, got {self.cache_blocks}"
            )

    def for_configuration(self, configuration: Configuration) -> Policy:
        return self

    def schedule(self, job: Job, progress: Progress | None) -> Schedule:
        """Routes from the prefix caches (in arrival order), then the fixed-route stages."""
        if job.prefix_blocks is None:
            raise ConfigError(
                "prefix-aware routing needs the requests' prefix blocks (a trace's hash_ids)"
            )
        threshold = job.configuration.threshold_tokens
        routes = route_with_prefix_cache(job.input_tokens, job.prefix_blocks, threshold, self)
        return fixed_routes(
            job,
            routes.offloaded,
            routes.prefill_tokens,
            routes.to_pd_tokens,
            routes.move_to_pd_tokens,
            routes.move_to_prfaas_tokens,
            progress,
        )


class _BlockCache:
    """LRU set of block ids (unbounded when capacity is None)."""

    def __init__(self, capacity: int | None):
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def match(self, blocks: list[int]) -> int:
        """Number of leading `blocks` present (those are touched as recently used)."""
        cached = self.blocks
        matched = 0
        for block in blocks:
            if block not in cached:
                break
            matched += 1
        if self.capacity is not None:
            for block in blocks[:matched]:
                cached.move_to_end(block)
        return matched

    def insert(self, blocks: list[int]) -> None:
        cached = self.blocks
        for block in blocks:
            cached[block] = None
            if self.capacity is not None:
                cached.move_to_end(block)
        if self.capacity is not None:
            while len(cached) > self.capacity:
                cached.popitem(last=False)


@dataclass(frozen=True, eq=False)
class PrefixRoutes:
    """Per-request routing outcome (token counts as float arrays, input order)."""

    offloaded: np.ndarray  # bool: prefilled on PrfaaS
    cached_prfaas_tokens: np.ndarray  # l_prfaas at routing time
    cached_pd_tokens: np.ndarray  # l_pd at routing time
    prefill_tokens: np.ndarray  # tokens actually prefilled (l_total − reused prefix)
    to_pd_tokens: np.ndarray  # tokens whose KV crosses the link to PD for decode (offloaded)
    move_to_pd_tokens: np.ndarray  # prefix moved PrfaaS -> PD before a PD-P prefill
    move_to_prfaas_tokens: np.ndarray  # prefix moved PD -> PrfaaS before a PrfaaS prefill


def route_with_prefix_cache(
    input_tokens: np.ndarray,
    prefix_blocks: PrefixBlocks,
    threshold_tokens: float,
    policy: PrefixAwareThreshold,
) -> PrefixRoutes:
    """Route every request in arrival order by the rules of the module docstring."""
    n = input_tokens.size
    if prefix_blocks.requests != n:
        raise ConfigError(
            f"prefix blocks are given for {prefix_blocks.requests} requests, expected {n}"
        )
    prfaas, pd = _BlockCache(policy.cache_blocks), _BlockCache(policy.cache_blocks)
    block = float(policy.block_tokens)
    abundant = policy.regime is BandwidthRegime.ABUNDANT
    out = {
        name: np.zeros(n)
        for name in (
            "cached_prfaas_tokens",
            "cached_pd_tokens",
            "prefill_tokens",
            "to_pd_tokens",
            "move_to_pd_tokens",
            "move_to_prfaas_tokens",
        )
    }
    offloaded = np.zeros(n, dtype=bool)
    values, offsets = prefix_blocks.values.tolist(), prefix_blocks.offsets.tolist()
    for i, total in enumerate(input_tokens.tolist()):
        blocks = values[offsets[i] : offsets[i + 1]]
        cap = max(total - 1.0, 0.0)
        k_prfaas, k_pd = prfaas.match(blocks), pd.match(blocks)
        l_prfaas, l_pd = min(k_prfaas * block, cap), min(k_pd * block, cap)
        prefix = max(l_prfaas, l_pd) if abundant else l_pd
        remote = total - prefix > threshold_tokens
        move_to_pd = move_to_prfaas = 0.0
        if remote:
            reused = prefix if abundant else l_prfaas
            if abundant and l_pd > l_prfaas:
                move_to_prfaas = l_pd - l_prfaas
                prfaas.insert(blocks[:k_pd])
            prfaas.insert(blocks)
            if policy.pd_caches_offloaded:
                pd.insert(blocks)
            out["to_pd_tokens"][i] = total - l_pd
        else:
            reused = prefix
            if abundant and l_prfaas > l_pd:
                move_to_pd = l_prfaas - l_pd
            pd.insert(blocks)
        offloaded[i] = remote
        out["cached_prfaas_tokens"][i] = l_prfaas
        out["cached_pd_tokens"][i] = l_pd
        out["prefill_tokens"][i] = total - reused
        out["move_to_pd_tokens"][i] = move_to_pd
        out["move_to_prfaas_tokens"][i] = move_to_prfaas
    return PrefixRoutes(offloaded=offloaded, **out)
