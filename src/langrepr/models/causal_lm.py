"""A small causal transformer LM built from a `transformers` config, for Bit Cipher's LM warm start (Figure 4).

Paper (Bit Cipher, arXiv 2311.11012, §5 "Cipher with language models"): a standard transformer LM trained from
scratch, cold (every weight random) or warm (the input embedding replaced by cipher vectors, frozen first and
unfrozen later). The paper gives no architecture beyond "standard transformers", and bits = 2^7 implies a model
width of 128. We wrap `GPT2LMHeadModel` built from a `GPT2Config` (random init, never downloaded weights).

Dims: B = batch, T = sequence length, V = vocabulary, d = hidden_size (= cipher bits for a warm start).

[inferred, configurable]
- GPT-2 block (pre-LN, learned positions), `num_layers` / `num_heads` / `intermediate_size` free.
- `tie_word_embeddings=False` by default: with tied weights, freezing the cipher input embedding would also
  freeze the output layer, which the paper does not say; set it true to tie.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn
from transformers import GPT2Config, GPT2LMHeadModel


class CausalTransformerLM(nn.Module):
    """GPT-2-style LM over word ids: (B, T) ids + mask -> (B, T, V) next-token logits.

    Args:
        vocab_size, pad_token_id, max_len: from the datamodule's `net_kwargs`.
        hidden_size: model width d (a warm start needs d = cipher bits).
        num_layers, num_heads, intermediate_size: GPT-2 block sizes.
        dropout: residual, embedding and attention dropout.
        tie_word_embeddings: share the input embedding with the output layer (see the module docstring).
        initializer_range: std of GPT-2's normal init (also the scale a warm start can match).
    """

    def __init__(self, vocab_size: int, max_len: int = 1024, pad_token_id: int = 0, hidden_size: int = 128,
                 num_layers: int = 2, num_heads: int = 2, intermediate_size: int = 512, dropout: float = 0.1,
                 tie_word_embeddings: bool = False, initializer_range: float = 0.02, **_: object) -> None:
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size={hidden_size} is not divisible by num_heads={num_heads}")
        self.config = GPT2Config(
            vocab_size=vocab_size, n_positions=max_len, n_embd=hidden_size, n_layer=num_layers, n_head=num_heads,
            n_inner=intermediate_size, resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
            pad_token_id=pad_token_id, bos_token_id=pad_token_id, eos_token_id=pad_token_id,
            tie_word_embeddings=tie_word_embeddings, initializer_range=initializer_range)
        self.model = GPT2LMHeadModel(self.config)
        self.vocab_size, self.hidden_size = vocab_size, hidden_size

    @property
    def input_embedding(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    def load_input_embedding(self, matrix: np.ndarray | Tensor) -> None:
        """Copy a (V, d) matrix into the input embedding (the warm start)."""
        weight = self.input_embedding.weight
        matrix = torch.as_tensor(np.asarray(matrix), dtype=weight.dtype)
        if tuple(matrix.shape) != tuple(weight.shape):
            raise ValueError(f"embedding matrix {tuple(matrix.shape)} does not match the model's {tuple(weight.shape)}"
                             " (rows = vocabulary, columns = hidden_size = cipher bits)")
        with torch.no_grad():
            weight.copy_(matrix)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits
