"""KVCache size of one request from a model's architecture (bytes, tokens).

Per layer type (restating shared/reference/model-configs.md, "Conventions"):
- full attention, GQA/MHA: kv_heads × (key_head_dim + value_head_dim) × kv_bytes per token;
- full attention, MLA: (kv_lora_rank + qk_rope_head_dim) × kv_bytes per token;
- sliding window (SWA): as GQA, but only the last `window_tokens` tokens are kept;
- linear attention (KDA, GDN, Lightning): a fixed recurrent state heads × d_k × d_v × state_bytes
  plus a short-conv state conv_channels × (conv_kernel − 1) × 2 bytes (bf16), independent of length.

S_kv(l) = fixed_state_bytes + per_token_bytes × l + swa_bytes_per_token × min(l, window).
The paper's convention (which reproduces its Table 5): bf16 KV, fp32 recurrent state, and the
state counted in S_kv.
"""

from dataclasses import dataclass

import numpy as np

from prfaas_plan.analytic.arrays import ArrayLike, FloatArray

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
CONV_STATE_DTYPE = "bf16"  # the short-conv state stays at model precision whatever the KV dtype


@dataclass(frozen=True)
class LayerGroup:
    """`count` layers of one attention type; unused dimensions are 0."""

    type: str  # gqa | mla | swa | linear
    count: int
    kv_heads: int = 0
    key_head_dim: int = 0
    value_head_dim: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    window_tokens: int = 0
    heads: int = 0  # linear-attention heads
    conv_channels: int = 0
    conv_kernel: int = 0
    variant: str = ""  # kda | gdn | lightning (linear), for display

    def kv_elements_per_token(self) -> int:
        """KV elements one layer of this group stores per token (0 for linear layers)."""
        if self.type == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        if self.type in ("gqa", "swa"):
            return self.kv_heads * (self.key_head_dim + self.value_head_dim)
        return 0


@dataclass(frozen=True)
class KvFootprint:
    """KV size of one request as a function of length, for one dtype convention."""

    per_token_bytes: float  # full-attention layers
    fixed_state_bytes: float  # linear-attention recurrent + conv state
    swa_bytes_per_token: float  # sliding-window layers, up to `swa_window_tokens`
    swa_window_tokens: int

    def size_bytes(self, tokens: ArrayLike) -> FloatArray:
        """S_kv(l) in bytes."""
        tokens = np.asarray(tokens, dtype=float)
        window = np.minimum(tokens, self.swa_window_tokens)
        size: FloatArray = (
            self.fixed_state_bytes
            + self.per_token_bytes * tokens
            + self.swa_bytes_per_token * window
        )
        return size


def kv_footprint(layers: tuple[LayerGroup, ...], kv_dtype: str, state_dtype: str) -> KvFootprint:
    kv_bytes, state_bytes = DTYPE_BYTES[kv_dtype], DTYPE_BYTES[state_dtype]
    conv_bytes = DTYPE_BYTES[CONV_STATE_DTYPE]
    per_token = fixed = swa = 0.0
    windows = {g.window_tokens for g in layers if g.type == "swa"}
    for g in layers:
        if g.type in ("gqa", "mla"):
            per_token += g.count * g.kv_elements_per_token() * kv_bytes
        elif g.type == "swa":
            swa += g.count * g.kv_elements_per_token() * kv_bytes
        elif g.type == "linear":
            fixed += g.count * g.heads * g.key_head_dim * g.value_head_dim * state_bytes
            fixed += g.count * g.conv_channels * max(g.conv_kernel - 1, 0) * conv_bytes
    if len(windows) > 1:  # models.yaml validation refuses this; guard direct callers
        raise ValueError(f"SWA layers with different windows are not supported: {sorted(windows)}")
    return KvFootprint(per_token, fixed, swa, windows.pop() if windows else 0)


def all_full_attention(layers: tuple[LayerGroup, ...], kv_dtype: str) -> KvFootprint:
    """The same depth with every layer a full-attention layer of the model's own full type:
    what the hybrid design saves."""
    full = [g for g in layers if g.type in ("gqa", "mla")]
    if not full:
        raise ValueError("model has no full-attention layer to extrapolate from")
    total_layers = sum(g.count for g in layers)
    per_layer = full[0].kv_elements_per_token() * DTYPE_BYTES[kv_dtype]
    return KvFootprint(total_layers * per_layer, 0.0, 0.0, 0)
