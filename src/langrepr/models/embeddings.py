"""Elementwise embedding (EWE) input modules.

Paper: "Elementwise Language Representation", arXiv 2302.13475, §4.2 (reshape, then focus) and §6.2
(gradient-based tokenization-free variant). Method notes: METHODS.md §1.1 and §1.3.

A material (token) is the horizontal concatenation of `v` element (byte) embeddings of width `c = w / v`,
so the parent transformer sees `u` materials of width `w` while reading `u * v` bytes. Both modules
return `(B, u, w)` tensors that a wrapper feeds to an unchanged HF model through `inputs_embeds`.

Dim legend: B batch, u materials, v elements per material, c element width, w = v * c material width,
N = u * v flat element positions.
"""

from __future__ import annotations

import torch
from torch import nn

FOCUS_INDEX = ("flat", "paper_literal")
LOCAL_FOCUS = ("material", "within_word")
VGRAM_WINDOW = ("forward", "centered")


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not supported; allowed values: {', '.join(allowed)}")


def _check_dims(width: int, v: int, u: int, num_elements: int) -> int:
    """Validate the shared size arguments and return the element width c."""
    for key, val in (("width", width), ("v", v), ("u", u), ("num_elements", num_elements)):
        if val < 1:
            raise ValueError(f"embedding.{key} must be >= 1, got {val}")
    if width % v:
        raise ValueError(
            f"embedding.width ({width}) must be a multiple of embedding.v ({v}) so that c = width / v is an "
            "integer; for BERT/CANINE width = model hidden_size, for ALBERT width = embedding_size"
        )
    return width // v


def _check_input(input_ids: torch.Tensor, u: int, v: int) -> None:
    if input_ids.dim() != 3 or input_ids.shape[-1] != v or input_ids.shape[1] > u:
        raise ValueError(f"expected byte ids of shape (B, u'<= {u}, {v}), got {tuple(input_ids.shape)}")


class ElementwiseEmbedding(nn.Module):
    """EWE with focus embeddings: `e^(i) = Reshape_(1,w)[{e^(i)[j] + g^(p)}_j] + f^(i)` (paper §4.2).

    Args:
        width: material width w (BERT/CANINE hidden_size, ALBERT embedding_size).
        v: elements (bytes) per material; the paper sets the parent's heads h = v.
        u: maximum number of materials; sizes the focus tables.
        focus: add the global (g) and local (f) focus embeddings; False is the Table 4 ablation.
        focus_index: "flat" uses p = i*v + j (0-based position of the byte in the sentence, what the text
            describes); "paper_literal" uses the printed p = (i*j) + j with 1-based i, j (not injective,
            METHODS §1.1), kept for comparison.
        local_focus: "material" gives f a (u, w) table indexed by material i, as the notation does;
            "within_word" gives it a (v, c) table indexed by the byte position j, shared by all materials.
        dropout: dropout probability applied after the focus embeddings.
        layer_norm: apply LayerNorm(w) after dropout (the paper says both "can be applied").
        num_elements: element table rows; 256 = one per UTF-8 byte value (byte 0 is the pad).
        focus_init_std: std of the normal init of both focus tables. The paper gives no init; None keeps
            PyTorch's N(0, 1), the same scale as the elements, so the two position tables add twice the
            content's variance at start. 0.02 (BERT's initializer_range, the scale of BERT's own position
            table) lets the bytes dominate at start [inferred, configurable].
    """

    def __init__(
        self,
        width: int,
        v: int,
        u: int,
        focus: bool = True,
        focus_index: str = "flat",
        local_focus: str = "material",
        dropout: float = 0.1,
        layer_norm: bool = True,
        num_elements: int = 256,
        focus_init_std: float | None = None,
    ) -> None:
        super().__init__()
        _check_choice("embedding.focus_index", focus_index, FOCUS_INDEX)
        _check_choice("embedding.local_focus", local_focus, LOCAL_FOCUS)
        self.c = _check_dims(width, v, u, num_elements)
        self.width, self.v, self.u = width, v, u
        self.focus, self.focus_index, self.local_focus = focus, focus_index, local_focus

        # No padding_idx: the pad byte 0 after a short word is a learned "end of word" element.
        self.elements = nn.Embedding(num_elements, self.c)
        if focus:
            i = torch.arange(u).unsqueeze(1)  # (u, 1)
            j = torch.arange(v).unsqueeze(0)  # (1, v)
            if focus_index == "flat":
                p = i * v + j  # (u, v), a bijection onto [0, u*v)
            else:
                p = (i + 1) * (j + 1) + (j + 1)  # printed formula with 1-based i, j; max v*(u+1)
            self.register_buffer("global_index", p, persistent=False)
            self.global_focus = nn.Embedding(int(p.max()) + 1, self.c)  # g: (u*v, c) for "flat"
            rows, cols = (u, width) if local_focus == "material" else (v, self.c)
            self.local_focus_table = nn.Embedding(rows, cols)  # f
            if focus_init_std is not None:
                if focus_init_std <= 0:
                    raise ValueError(f"embedding.focus_init_std must be > 0 or null, got {focus_init_std}")
                nn.init.normal_(self.global_focus.weight, std=focus_init_std)
                nn.init.normal_(self.local_focus_table.weight, std=focus_init_std)
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(width) if layer_norm else nn.Identity()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Embed byte ids (B, u', v) with u' <= u into materials (B, u', w)."""
        _check_input(input_ids, self.u, self.v)
        batch, n_mat, v = input_ids.shape
        e = self.elements(input_ids)  # (B, u', v, c)
        if self.focus:
            e = e + self.global_focus(self.global_index[:n_mat])  # g^(p) added per element
            if self.local_focus == "within_word":
                e = e + self.local_focus_table.weight  # (v, c) broadcast over materials
        e = e.reshape(batch, n_mat, v * self.c)  # row-major: material i = concat of its v elements
        if self.focus and self.local_focus == "material":
            e = e + self.local_focus_table.weight[:n_mat]  # f^(i): (u', w)
        return self.norm(self.dropout(e))

    def embedding_parameters(self) -> int:
        """Parameters counted as "Embedding" in paper Table 1: the element table only (focus excluded)."""
        return self.elements.weight.numel()


class VGramElementwiseEmbedding(nn.Module):
    """Tokenization-free EWE with softmax-weighted v-gram pooling (paper §6.2 "Gradient", METHODS §1.3).

    The printed pooling equation collapses a material to one c-vector and cannot be reshaped to (u, w), so
    we use the sliding reading: on the flat byte stream, element t is replaced by
    `sum_k alpha_k e[t+k]` over a window of v elements with `alpha = softmax_k(e[t+k] . s)` and
    `s` a learned c -> 1 projection (a simplified Charformer block score). Pad bytes (0), and positions
    past either end of the stream, are masked out of the softmax; a window holding only pads yields 0.
    No focus embeddings: the paper drops them for this variant because v-grams already carry position.

    Args:
        width: material width w.
        v: elements per material and window length (the paper uses v = h = 8, c = 96 here).
        u: maximum number of materials.
        window: "forward" pools t .. t+v-1; "centered" pools t - v//2 .. t + (v-1) - v//2.
        dropout: dropout probability after pooling.
        layer_norm: apply LayerNorm(w) after dropout.
        num_elements: element table rows (256 UTF-8 byte values, 0 = pad).
    """

    def __init__(
        self,
        width: int,
        v: int,
        u: int,
        window: str = "forward",
        dropout: float = 0.1,
        layer_norm: bool = True,
        num_elements: int = 256,
    ) -> None:
        super().__init__()
        _check_choice("embedding.window", window, VGRAM_WINDOW)
        self.c = _check_dims(width, v, u, num_elements)
        self.width, self.v, self.u, self.window = width, v, u, window
        self.elements = nn.Embedding(num_elements, self.c)
        self.score = nn.Linear(self.c, 1, bias=False)  # s in R^c
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(width) if layer_norm else nn.Identity()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Embed byte ids (B, u', v) into v-gram pooled materials (B, u', w)."""
        _check_input(input_ids, self.u, self.v)
        batch, n_mat, v = input_ids.shape
        ids = input_ids.reshape(batch, n_mat * v)  # (B, N) flat byte stream
        e = self.elements(ids)  # (B, N, c)
        scores = self.score(e).squeeze(-1)  # (B, N): e . s

        left = v // 2 if self.window == "centered" else 0
        right = v - 1 - left
        e_pad = nn.functional.pad(e, (0, 0, left, right))  # (B, N + v - 1, c)
        s_win = nn.functional.pad(scores, (left, right)).unfold(1, v, 1)  # (B, N, v): score of e[t-left+k]
        valid = nn.functional.pad(ids != 0, (left, right), value=False).unfold(1, v, 1)  # (B, N, v)
        any_valid = valid.any(-1, keepdim=True)  # (B, N, 1)
        # Mask pads; an all-pad window gets dummy finite logits and zero weights (no NaN in fwd or bwd).
        s_win = s_win.masked_fill(~valid, float("-inf")).masked_fill(~any_valid, 0.0)
        alpha = torch.softmax(s_win, dim=-1) * any_valid  # (B, N, v)
        n = ids.shape[1]
        # A loop over the v offsets avoids materialising a (B, N, v, c) tensor.
        pooled = sum(alpha[..., k : k + 1] * e_pad[:, k : k + n] for k in range(v))  # (B, N, c)
        pooled = pooled.reshape(batch, n_mat, v * self.c)  # (B, u', w)
        return self.norm(self.dropout(pooled))

    def embedding_parameters(self) -> int:
        """Parameters counted as "Embedding": the element table only (the scorer s is excluded)."""
        return self.elements.weight.numel()
