"""Dimension-wise attention of TensorCoder (Zhang et al., arXiv 2008.01547).

Provides the pure functions of the paper's equations and three modules:

- `TensorCoderAttention`: encoder self-attention, eqs. (4), (6)-(7), (12). ``n_filters=1`` is
  "TensorCoder-1conv", ``n_filters=8`` is "TensorCoder-8conv" (8 filters on one tensor, outputs
  concatenated and projected, §3.4).
- `MaskedTensorCoderAttention`: causal decoder self-attention, eqs. (10)-(12).
- `TensorCoderCrossAttention`: a dimension-wise cross-attention of our own (the paper gives none;
  see its docstring). Optional; the default cross-attention is SDPA (`baseline_attention.py`).

Two identities (METHODS.md §3.1, §3.2, §3.6) keep the cost at O(N d^2) and mean the N x d x d
tensor X of eq. (7) is never built:

- eq. (12) over eq. (7): ``O_ij = sum_m W_jm f(S)_jm V_im``, i.e. ``O = V (W * f(S))^T``;
- eq. (10) with the upper-triangular M is the prefix sum over tokens of the outer products
  ``Q_n^T K_n``; we compute it chunk by chunk (a small triangular matmul inside a chunk, a running
  sum across chunks), so no N x N mask and no O(N^2 d^2) work.

Decisions the paper leaves open [inferred, configurable]:

- f = softmax over the *last* index k (over j, eq. (8) would collapse to V); ``normalize="scale"``
  is the paper's other option ("scaled factor" only).
- S sums over N tokens, so it is scaled before f: ``scale`` in {sqrt_n, n, sqrt_d, none}, default
  1/sqrt(N) with N = the number of real (non-padding) tokens, per position in the causal case.
- Padding rows of Q and K are zeroed before S, so padding never enters any real token's output.
- Filters start at W = 1 (+ small noise): W = 1 is exactly the paper's implicit representation
  (eq. 9), which gives a well-scaled output from the first step.

Dim legend: B batch, N tokens (T for the decoder), M source tokens, D d_model, d attention width
(d_head), C filters (1conv / 8conv).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

SCALES = ("sqrt_n", "n", "sqrt_d", "none")
NORMALIZERS = ("softmax", "scale")


# --------------------------------------------------------------------------- pure functions
def score_scale(n_tokens: Tensor, d: int, scale: str, dtype: torch.dtype = torch.float32) -> Tensor:
    """Multiplier applied to S before f; ``n_tokens`` is any shape of token counts (>= 1).

    Computed in ``dtype`` (the scores' dtype; half precision is promoted to float32), so float64 callers
    get float64-exact factors rather than float32-rounded ones.
    """
    n = n_tokens.clamp(min=1).to(torch.promote_types(dtype, torch.float32))
    if scale == "sqrt_n":
        return n.rsqrt()
    if scale == "n":
        return n.reciprocal()
    if scale == "sqrt_d":
        return torch.full_like(n, 1.0 / math.sqrt(d))
    if scale == "none":
        return torch.ones_like(n)
    raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")


def normalize_scores(s: Tensor, normalize: str) -> Tensor:
    """f(S) of eq. (7): softmax over the last index k, or the scaled scores unchanged."""
    if normalize == "softmax":
        return s.softmax(dim=-1)
    if normalize == "scale":
        return s
    raise ValueError(f"normalize must be one of {NORMALIZERS}, got {normalize!r}")


def dimensionwise_scores(q: Tensor, k: Tensor, mask: Tensor | None = None, scale: str = "sqrt_n") -> Tensor:
    """Scaled S = Q^T K (eq. 4), shape (B, d, d); padding rows (mask False) are zeroed first."""
    if mask is not None:
        m = mask.to(q.dtype).unsqueeze(-1)  # (B, N, 1)
        q, k = q * m, k * m
        n_tokens = mask.sum(dim=1)
    else:
        n_tokens = torch.full(q.shape[:1], q.shape[1], device=q.device)
    s = torch.einsum("bnj,bnk->bjk", q, k)  # (B, d, d)
    return s * score_scale(n_tokens, q.shape[-1], scale, s.dtype).to(s.dtype)[:, None, None]


def dimensionwise_mix(v: Tensor, attn: Tensor, filters: Tensor) -> Tensor:
    """Eq. (12) over eq. (7) without building X: O^c = V (W^c * f(S))^T, shape (B, N, C, d).

    Args:
        v: (B, N, d) values.
        attn: (B, d, d) f(S).
        filters: (C, d, d) the "convolution" filters W^c.
    """
    weighted = filters.unsqueeze(0) * attn.unsqueeze(1)  # (B, C, d, d)
    return torch.einsum("bnm,bcjm->bncj", v, weighted)


def causal_dimensionwise_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    filters: Tensor,
    mask: Tensor | None = None,
    scale: str = "sqrt_n",
    normalize: str = "softmax",
    chunk_size: int = 32,
) -> Tensor:
    """Masked dimension-wise attention, eqs. (10)-(12), chunk by chunk; (B, T, C, d).

    S^(t) = sum_{n<=t} Q_n^T K_n, scaled by the number of real tokens up to t, then
    O^c_t = sum_m W^c_jm f(S^(t))_jm V_tm. Inside a chunk of L positions the prefix sums are one
    matmul with the L x L triangular mask (eq. 10's M, with the per-position scale folded into its
    rows), which on CPU is several times faster than ``cumsum`` over a (B, L, d, d) tensor; the running
    S carries across chunks. Time O(T d^2 L), memory O(T d^2) for autograd (O(L d^2) without grad).
    """
    b, t_len, d = q.shape
    if mask is not None:
        m = mask.to(q.dtype).unsqueeze(-1)
        q, k = q * m, k * m
        counts = mask.long().cumsum(dim=1)  # (B, T) real tokens seen so far
    else:
        counts = torch.arange(1, t_len + 1, device=q.device).expand(b, t_len)
    factor = score_scale(counts, d, scale, q.dtype).to(q.dtype)  # (B, T)
    state = None  # unscaled S at the end of the previous chunk, (B, d, d)
    outputs = []
    for start in range(0, t_len, chunk_size):
        end = min(start + chunk_size, t_len)
        qc, kc, f = q[:, start:end], k[:, start:end], factor[:, start:end]
        tri = torch.ones(end - start, end - start, dtype=q.dtype, device=q.device).tril()  # M^T: n <= t
        s = torch.einsum("btn,bnj,bnk->btjk", tri * f[:, :, None], qc, kc)  # (B, L, d, d), scaled S^(t)
        if state is not None:
            s = s + f[:, :, None, None] * state.unsqueeze(1)
        if end < t_len:
            chunk_sum = torch.einsum("bnj,bnk->bjk", qc, kc)
            state = chunk_sum if state is None else state + chunk_sum
        av = normalize_scores(s, normalize) * v[:, start:end].unsqueeze(2)  # f(S^(t))_jm V_tm
        outputs.append(torch.einsum("bljm,cjm->blcj", av, filters))
    return torch.cat(outputs, dim=1)


# --------------------------------------------------------------------------- modules
class _DimensionwiseBase(nn.Module):
    """Shared parameters: Q/K/V projections to width d, C filters, concat + output projection."""

    def __init__(
        self,
        d_model: int,
        d_head: int | None = None,
        n_filters: int = 1,
        scale: str = "sqrt_n",
        normalize: str = "softmax",
        dropout: float = 0.0,
        bias: bool = True,
        filter_init_std: float = 0.02,
    ) -> None:
        super().__init__()
        d_head = d_model if d_head is None else d_head
        if d_model <= 0 or d_head <= 0 or n_filters <= 0:
            raise ValueError("d_model, d_head and n_filters must be positive")
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
        if normalize not in NORMALIZERS:
            raise ValueError(f"normalize must be one of {NORMALIZERS}, got {normalize!r}")
        self.d_model, self.d_head, self.n_filters = d_model, d_head, n_filters
        self.scale, self.normalize = scale, normalize
        self.q_proj = nn.Linear(d_model, d_head, bias=bias)
        self.k_proj = nn.Linear(d_model, d_head, bias=bias)
        self.v_proj = nn.Linear(d_model, d_head, bias=bias)
        # W^c of eq. (12); W = 1 is the implicit representation of eq. (9).
        self.filters = nn.Parameter(1.0 + filter_init_std * torch.randn(n_filters, d_head, d_head))
        self.out_proj = nn.Linear(n_filters * d_head, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def _project_out(self, o: Tensor) -> Tensor:
        return self.out_proj(o.flatten(start_dim=-2))  # (B, N, C*d) -> (B, N, D)


class TensorCoderAttention(_DimensionwiseBase):
    """Encoder dimension-wise self-attention (TensorCoder-1conv / -8conv).

    ``forward(x, mask)``: x (B, N, D), mask (B, N) with True/1 for real tokens -> (B, N, D).
    """

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, N, d)
        mask = None if mask is None else mask.bool()
        s = dimensionwise_scores(q, k, mask, self.scale)  # (B, d, d)
        a = self.dropout(normalize_scores(s, self.normalize))
        return self._project_out(dimensionwise_mix(v, a, self.filters))


class MaskedTensorCoderAttention(_DimensionwiseBase):
    """Causal dimension-wise self-attention for the decoder, eqs. (10)-(11).

    Output at position t depends only on tokens <= t. The scale uses the number of real tokens up
    to t (the paper's prefix sums grow with t; METHODS.md §3.2). Dropout acts on the filter outputs
    (B, T, C, d), not on the T x d x d weights f(S^(t)): d times cheaper, and those weights are
    already the dominant cost of the decoder.
    """

    def __init__(self, d_model: int, *args, chunk_size: int = 32, **kwargs) -> None:
        super().__init__(d_model, *args, **kwargs)
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        self.chunk_size = chunk_size

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        o = causal_dimensionwise_attention(
            q, k, v, self.filters, None if mask is None else mask.bool(), self.scale, self.normalize,
            self.chunk_size,
        )
        return self._project_out(self.dropout(o))

    def forward_last(self, x: Tensor) -> Tensor:
        """Output at the last position only, (B, 1, D), for incremental decoding (no padding in x).

        S^(T) sums over all T positions, so this is eq. (10)-(12) at t = T in O(T d^2).
        """
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x[:, -1:])
        a = normalize_scores(dimensionwise_scores(q, k, None, self.scale), self.normalize)
        return self._project_out(self.dropout(dimensionwise_mix(v, a, self.filters)))


class TensorCoderCrossAttention(_DimensionwiseBase):
    """Dimension-wise cross-attention (ours; the paper defines none).

    S = Q^T K needs Q and K over the same tokens, which fails when source length M differs from
    target length T. Here the d x d matrix is pooled over the source only,
    S = K_src^T V_src (M tokens, scaled by M), and applied to the decoder queries:
    O^c = Q_tgt (W^c * f(S))^T. Cost O((M + T) d^2); causal-safe since S has no target tokens.

    ``forward(x, mask, memory, memory_mask)``: x (B, T, D) decoder states, memory (B, M, D).
    """

    def forward(
        self, x: Tensor, mask: Tensor | None = None, memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        if memory is None:
            raise ValueError("TensorCoderCrossAttention needs `memory` (the encoder output)")
        q = self.q_proj(x)
        k, v = self.k_proj(memory), self.v_proj(memory)  # (B, M, d)
        s = dimensionwise_scores(k, v, None if memory_mask is None else memory_mask.bool(), self.scale)
        a = self.dropout(normalize_scores(s, self.normalize))
        return self._project_out(dimensionwise_mix(q, a, self.filters))
