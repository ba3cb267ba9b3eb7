"""Post-LN Transformer encoder/decoder with injected attention, for TensorCoder (arXiv 2008.01547).

The paper takes "the open-source Transformer model architecture" and replaces the attention of
every layer, "other parts remain the same" (§5). So the attention module is the only thing that
varies between rows of Tables 1-3, and it is injected: each net receives *factories*
(``functools.partial`` / Hydra ``_partial_: true`` nodes) that are called as ``factory(d_model=...)``
once per layer. Attention modules follow one call signature::

    attn(x, mask)                                   # self-attention, x (B, N, D), mask (B, N) bool
    attn(x, mask, memory=..., memory_mask=...)      # cross-attention to memory (B, M, D)

Nets:

- `MaskedLMModel`: encoder-only masked LM (Table 1), ``forward(input_ids, attention_mask)`` ->
  logits (B, N, V); BERT-style prediction head with the output matrix tied to the input embedding
  unless ``tie_embeddings=False``.
- `Seq2SeqModel`: encoder-decoder for translation (Tables 2-3) with one shared source/target
  vocabulary and tied embeddings. Cross-attention is a separate factory: dimension-wise
  attention builds S = Q^T K over one sequence, which is undefined when source and target lengths
  differ, so the default is SDPA cross-attention (``MultiHeadSDPAttention``) and
  ``TensorCoderCrossAttention`` (d x d matrix pooled over the source) is the option.
  ``decode_step`` decodes incrementally for beam search: decoder self-attentions provide
  ``forward_last(x)`` (the output at the last position), which for the masked TensorCoder attention
  is S^(T) over the prefix, O(T d^2) per step.

Both report attention GFLOPs (``extra_metrics``) counted by ``torch.utils.flop_counter`` on the
encoder attention layers at ``flops_seq_len`` (the paper's sequence length), batch 1, forward only:
``model/attn_gflops_layer`` for one layer and ``model/attn_gflops`` summed over all encoder layers
(the paper's Tables 2-3 count "the attention layers' FLOPs in encoder structure").

Constructor names follow Hugging Face (hidden_size = D, num_layers, intermediate_size = F) so the
shared ``debug=smoke`` overrides apply to every model.

Dim legend: B batch, N source/input tokens, T target tokens, D d_model, F d_ff, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

AttentionFactory = Callable[..., nn.Module]


# --------------------------------------------------------------------------- building blocks
class FeedForward(nn.Module):
    """Position-wise FFN: Linear(D, F) -> activation -> dropout -> Linear(F, D)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "gelu") -> None:
        super().__init__()
        acts = {"gelu": nn.GELU(), "relu": nn.ReLU()}
        if activation not in acts:
            raise ValueError(f"activation must be one of {sorted(acts)}, got {activation!r}")
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), acts[activation], nn.Dropout(dropout),
                                 nn.Linear(d_ff, d_model))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class TransformerEncoderLayer(nn.Module):
    """Post-LN block: x = LN(x + Attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, d_model: int, attention: nn.Module, d_ff: int, dropout: float, activation: str) -> None:
        super().__init__()
        self.attention = attention
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = self.norm1(x + self.dropout(self.attention(x, mask)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class TransformerDecoderLayer(nn.Module):
    """Post-LN block: causal self-attention, cross-attention to the encoder output, FFN."""

    def __init__(
        self, d_model: int, self_attention: nn.Module, cross_attention: nn.Module, d_ff: int,
        dropout: float, activation: str,
    ) -> None:
        super().__init__()
        self.self_attention, self.cross_attention = self_attention, cross_attention
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None, memory: Tensor, memory_mask: Tensor | None) -> Tensor:
        x = self.norm1(x + self.dropout(self.self_attention(x, mask)))
        x = self.norm2(x + self.dropout(self.cross_attention(x, mask, memory=memory, memory_mask=memory_mask)))
        return self.norm3(x + self.dropout(self.ffn(x)))

    def forward_last(self, x: Tensor, memory: Tensor, memory_mask: Tensor | None) -> Tensor:
        """The block's output at the last position of x only, (B, 1, D) (causal, so it equals forward()[:, -1:])."""
        h = self.norm1(x[:, -1:] + self.dropout(self.self_attention.forward_last(x)))
        h = self.norm2(h + self.dropout(self.cross_attention(h, None, memory=memory, memory_mask=memory_mask)))
        return self.norm3(h + self.dropout(self.ffn(h)))


class Embeddings(nn.Module):
    """Token + learned absolute position embeddings, LayerNorm, dropout."""

    def __init__(self, vocab_size: int, d_model: int, max_len: int, dropout: float, pad_token_id: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model, padding_idx=pad_token_id)
        self.positions = nn.Embedding(max_len, d_model)
        self.norm, self.dropout = nn.LayerNorm(d_model), nn.Dropout(dropout)
        self.max_len = max_len

    def forward(self, input_ids: Tensor) -> Tensor:
        n = input_ids.shape[1]
        if n > self.max_len:
            raise ValueError(f"sequence length {n} exceeds max_len={self.max_len}")
        pos = torch.arange(n, device=input_ids.device)
        return self.dropout(self.norm(self.tokens(input_ids) + self.positions(pos)))


def init_weights(module: nn.Module, std: float = 0.02) -> None:
    """BERT-style init for Linear/Embedding: N(0, 0.02), zero bias.

    Attention-specific parameters (TensorCoder filters, multi-linear cores) keep their modules' init.
    """
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=std)
            if m.padding_idx is not None:
                nn.init.zeros_(m.weight[m.padding_idx])


def _check_dims(**dims: int) -> None:
    bad = {k: v for k, v in dims.items() if not isinstance(v, int) or v <= 0}
    if bad:
        raise ValueError(f"dimensions must be positive ints, got {bad}")


def count_attention_gflops(layers: list[nn.Module], d_model: int, seq_len: int) -> dict[str, float]:
    """Forward GFLOPs of the encoder attention modules at batch 1 and length ``seq_len``.

    SDPA runs through its math backend here so its matmuls are visible to the counter (the fused
    CPU kernel is not registered with FlopCounterMode); the math is the same. Softmax and
    elementwise ops are not counted (FlopCounterMode counts matmul-like ops, 2 FLOPs per MAC).
    """
    param = next(layers[0].parameters())
    x = torch.randn(1, seq_len, d_model, device=param.device, dtype=param.dtype)
    per_layer = []
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        for layer in layers:
            with FlopCounterMode(display=False) as counter:
                layer.attention(x, None)
            per_layer.append(counter.get_total_flops() / 1e9)
    return {"model/attn_gflops_layer": per_layer[0], "model/attn_gflops": float(sum(per_layer))}


# --------------------------------------------------------------------------- nets
class MaskedLMModel(nn.Module):
    """Encoder-only masked language model (TensorCoder Table 1)."""

    def __init__(
        self,
        vocab_size: int,
        attention: AttentionFactory,
        hidden_size: int = 256,
        num_layers: int = 6,
        intermediate_size: int = 1024,
        max_len: int = 512,
        dropout: float = 0.1,
        activation: str = "gelu",
        tie_embeddings: bool = True,
        pad_token_id: int = 0,
        flops_seq_len: int = 100,
    ) -> None:
        super().__init__()
        _check_dims(vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers,
                    intermediate_size=intermediate_size, max_len=max_len, flops_seq_len=flops_seq_len)
        d_model, d_ff = hidden_size, intermediate_size
        self.vocab_size, self.d_model, self.pad_token_id = vocab_size, d_model, pad_token_id
        self.flops_seq_len = flops_seq_len
        self.embeddings = Embeddings(vocab_size, d_model, max_len, dropout, pad_token_id)
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(d_model, attention(d_model=d_model), d_ff, dropout, activation)
            for _ in range(num_layers)
        )
        # BERT-style prediction head: transform, then the (tied) output embedding.
        self.head = nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), nn.LayerNorm(d_model))
        self.decoder = nn.Linear(d_model, vocab_size)
        init_weights(self)
        if tie_embeddings:
            self.decoder.weight = self.embeddings.tokens.weight
        self.tie_embeddings = tie_embeddings

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, select: Tensor | None = None) -> Tensor:
        """Logits (B, N, V); with ``select`` (B, N) bool, only the selected positions, (K, V).

        ``select`` lets the masked-LM task project just the ~15% masked positions onto the vocabulary,
        which is most of the compute with a 10k-267k vocabulary; the encoder is unchanged.
        """
        mask = None if attention_mask is None else attention_mask.bool()
        h = self.embeddings(input_ids)  # (B, N, D)
        for layer in self.layers:
            h = layer(h, mask)
        if select is not None:
            h = h[select]  # (K, D)
        return self.decoder(self.head(h))

    def embedding_parameters(self) -> int:
        """Token + position tables, plus the output matrix when it is not tied."""
        n = sum(p.numel() for p in self.embeddings.parameters() if p.dim() == 2)
        return n + (0 if self.tie_embeddings else self.decoder.weight.numel())

    def extra_metrics(self) -> dict[str, float]:
        return count_attention_gflops(list(self.layers), self.d_model, self.flops_seq_len)


class Seq2SeqModel(nn.Module):
    """Encoder-decoder translation model (TensorCoder Tables 2-3), shared vocabulary, tied embeddings."""

    def __init__(
        self,
        vocab_size: int,
        encoder_attention: AttentionFactory,
        decoder_attention: AttentionFactory,
        cross_attention: AttentionFactory,
        hidden_size: int = 512,
        num_layers: int = 6,
        num_decoder_layers: int | None = None,
        intermediate_size: int = 2048,
        max_len: int = 256,
        dropout: float = 0.1,
        activation: str = "relu",
        pad_token_id: int = 0,
        bos_token_id: int = 1,
        eos_token_id: int = 2,
        flops_seq_len: int = 100,
    ) -> None:
        super().__init__()
        num_decoder_layers = num_layers if num_decoder_layers is None else num_decoder_layers
        _check_dims(vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers,
                    num_decoder_layers=num_decoder_layers, intermediate_size=intermediate_size, max_len=max_len,
                    flops_seq_len=flops_seq_len)
        d_model, d_ff = hidden_size, intermediate_size
        self.vocab_size, self.d_model, self.max_len = vocab_size, d_model, max_len
        self.pad_token_id, self.bos_token_id, self.eos_token_id = pad_token_id, bos_token_id, eos_token_id
        self.flops_seq_len = flops_seq_len
        self.embeddings = Embeddings(vocab_size, d_model, max_len, dropout, pad_token_id)
        self.encoder = nn.ModuleList(
            TransformerEncoderLayer(d_model, encoder_attention(d_model=d_model), d_ff, dropout, activation)
            for _ in range(num_layers)
        )
        self.decoder = nn.ModuleList(
            TransformerDecoderLayer(d_model, decoder_attention(d_model=d_model), cross_attention(d_model=d_model),
                                    d_ff, dropout, activation)
            for _ in range(num_decoder_layers)
        )
        self.output_bias = nn.Parameter(torch.zeros(vocab_size))  # output matrix = token embedding
        init_weights(self)

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Encoder states (B, N, D)."""
        mask = None if attention_mask is None else attention_mask.bool()
        h = self.embeddings(input_ids)
        for layer in self.encoder:
            h = layer(h, mask)
        return h

    def decode(
        self, decoder_input_ids: Tensor, memory: Tensor, memory_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> Tensor:
        """Next-token logits (B, T, V) for every decoder position, given encoder states."""
        mask = None if decoder_attention_mask is None else decoder_attention_mask.bool()
        memory_mask = None if memory_mask is None else memory_mask.bool()
        h = self.embeddings(decoder_input_ids)
        for layer in self.decoder:
            h = layer(h, mask, memory, memory_mask)
        return h @ self.embeddings.tokens.weight.T + self.output_bias

    def decode_step(
        self, decoder_input_ids: Tensor, memory: Tensor, memory_mask: Tensor | None, cache: list[Tensor] | None,
    ) -> tuple[Tensor, list[Tensor]]:
        """Next-token logits (B, V) for the last position, reusing ``cache`` (each layer's inputs so far).

        Causal layers never change earlier positions, so each step runs only the new position through
        the stack; self-attention looks back through the cached layer inputs (``forward_last``). Start
        with ``cache=None``; reorder the returned cache with the beams (``[c[rows] for c in cache]``).
        """
        t = decoder_input_ids.shape[1]
        pos = torch.tensor([t - 1], device=decoder_input_ids.device)
        emb = self.embeddings
        h = emb.dropout(emb.norm(emb.tokens(decoder_input_ids[:, -1:]) + emb.positions(pos)))  # (B, 1, D)
        memory_mask = None if memory_mask is None else memory_mask.bool()
        new_cache = []
        for i, layer in enumerate(self.decoder):
            x = h if cache is None else torch.cat([cache[i], h], dim=1)  # (B, t, D) inputs of layer i
            new_cache.append(x)
            h = layer.forward_last(x, memory, memory_mask)
        return (h[:, 0] @ self.embeddings.tokens.weight.T + self.output_bias), new_cache

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None, decoder_input_ids: Tensor,
        decoder_attention_mask: Tensor | None = None,
    ) -> Tensor:
        memory = self.encode(input_ids, attention_mask)
        return self.decode(decoder_input_ids, memory, attention_mask, decoder_attention_mask)

    def embedding_parameters(self) -> int:
        """Shared token table + position table (the output matrix is tied)."""
        return sum(p.numel() for p in self.embeddings.parameters() if p.dim() == 2)

    def extra_metrics(self) -> dict[str, float]:
        return count_attention_gflops(list(self.encoder), self.d_model, self.flops_seq_len)
