"""Token-wise baselines of TensorCoder's Tables 1-3 (arXiv 2008.01547, §5).

- `MultiHeadSDPAttention`: "Transformer-1head" / "-8head" (Vaswani et al. 2017) through
  ``torch.nn.functional.scaled_dot_product_attention``; also the encoder-decoder cross-attention.
  ``full_width_heads=True`` gives every head the full width d_model (8 heads -> 8 d_model
  concatenated, then projected), which is what the paper's 8head/1head FLOPs ratio of ~8.1 implies
  and what matches TensorCoder-8conv's 8 full-width outputs (METHODS.md §3.4). False is the usual
  split (d_model / n_heads per head).
- `MultiLinearAttention`: the Tensorized Transformer's multi-linear attention (Ma et al. 2019,
  arXiv 1906.09777; METHODS.md §3.5), the language-model form of the authors' code: a block-term
  tensor with a diagonal core, ``T_ijk = sum_h g_h Q_ih K_jh V_kh`` (N x N x N per sequence),
  averaged over ``n_cores`` cores and flattened over (j, k) into a ``Linear(max_len^2, d_model)``.
  It needs a fixed maximum length and costs O(N^3 d); it has no causal form, so it is an encoder
  attention only (as TensorCoder §4 notes). The cores share Q, K, V as in the authors' code, so the
  average over cores equals one core with the averaged weights; we keep ``n_cores`` for fidelity of
  the parameter count. Transformer-XL's relative-position term is dropped: our encoders use
  absolute position embeddings.

Dim legend: B batch, N query tokens, M key tokens, D d_model, H heads, h head width, L max_len.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class MultiHeadSDPAttention(nn.Module):
    """Scaled dot-product multi-head attention (eq. 2-3 of the TensorCoder paper).

    ``forward(x, mask, memory=None, memory_mask=None)``: self-attention over x when memory is
    None, otherwise cross-attention from x to memory. Masks are (B, N) / (B, M), True for real
    tokens; ``causal`` adds the decoder's triangular mask.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int = 1,
        full_width_heads: bool = False,
        causal: bool = False,
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if d_model <= 0 or n_heads <= 0:
            raise ValueError("d_model and n_heads must be positive")
        if not full_width_heads and d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads, self.causal, self.dropout = n_heads, causal, dropout
        self.d_head = d_model if full_width_heads else d_model // n_heads
        inner = n_heads * self.d_head
        self.q_proj = nn.Linear(d_model, inner, bias=bias)
        self.k_proj = nn.Linear(d_model, inner, bias=bias)
        self.v_proj = nn.Linear(d_model, inner, bias=bias)
        self.out_proj = nn.Linear(inner, d_model, bias=bias)

    def _split(self, t: Tensor) -> Tensor:
        return t.unflatten(-1, (self.n_heads, self.d_head)).transpose(1, 2)  # (B, H, N, h)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        kv, key_mask = (x, mask) if memory is None else (memory, memory_mask)
        q, k, v = self._split(self.q_proj(x)), self._split(self.k_proj(kv)), self._split(self.v_proj(kv))
        n, m = q.shape[-2], k.shape[-2]
        attn_mask, is_causal = None, False
        if key_mask is not None:
            attn_mask = key_mask.bool()[:, None, None, :]  # (B, 1, 1, M)
            if self.causal:
                attn_mask = attn_mask & torch.ones(n, m, dtype=torch.bool, device=x.device).tril()
        elif self.causal:
            is_causal = True
        o = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal,
            dropout_p=self.dropout if self.training else 0.0,
        )  # (B, H, N, h)
        return self.out_proj(o.transpose(1, 2).flatten(start_dim=-2))

    def forward_last(self, x: Tensor) -> Tensor:
        """Self-attention output at the last position only, (B, 1, D), for incremental decoding.

        The last query sees every position, so the causal mask is not needed (no padding in x).
        """
        q = self._split(self.q_proj(x[:, -1:]))
        k, v = self._split(self.k_proj(x)), self._split(self.v_proj(x))
        o = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(o.transpose(1, 2).flatten(start_dim=-2))


class MultiLinearAttention(nn.Module):
    """Tensorized Transformer's multi-linear (block-term, diagonal core) attention, encoder only.

    ``forward(x, mask)``: x (B, N, D) with N <= max_len, mask (B, N) True for real tokens.
    """

    def __init__(
        self,
        d_model: int,
        max_len: int,
        d_head: int | None = None,
        n_cores: int = 2,
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        d_head = d_model if d_head is None else d_head
        if min(d_model, max_len, d_head, n_cores) <= 0:
            raise ValueError("d_model, max_len, d_head and n_cores must be positive")
        self.max_len, self.d_head = max_len, d_head
        self.q_proj = nn.Linear(d_model, d_head, bias=bias)
        self.k_proj = nn.Linear(d_model, d_head, bias=bias)
        self.v_proj = nn.Linear(d_model, d_head, bias=bias)
        # Diagonal core weights g, initialised as softmax of random values (authors' code), trained.
        self.cores = nn.Parameter(torch.randn(n_cores, d_head).softmax(dim=-1))
        self.out_proj = nn.Linear(max_len * max_len, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        n = x.shape[1]
        if n > self.max_len:
            raise ValueError(f"sequence length {n} exceeds MultiLinearAttention.max_len={self.max_len}")
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, N, h)
        if mask is not None:
            m = mask.to(x.dtype).unsqueeze(-1)
            k, v = k * m, v * m
        pad = self.max_len - n  # zero key/value rows up to max_len: the flattened index is positional
        k, v = F.pad(k, (0, 0, 0, pad)), F.pad(v, (0, 0, 0, pad))  # (B, L, h)
        qg = q * self.cores.mean(dim=0)  # mean over cores == averaging the core tensors
        t = torch.einsum("bih,bjh,bkh->bijk", qg, k, v)  # (B, N, L, L), O(N^3 h)
        return self.out_proj(self.dropout(t.flatten(start_dim=2)))
