"""Word-level baselines LEAM compares against (ACL 2018, Tables 2 and 4), built from torch layers.

- `SWEM` (Shen et al., ACL 2018): average, max or concat (avg ++ max) pooling of word vectors.
- `KimCNN` (Kim, EMNLP 2014): one conv layer with several filter widths, max over time.
- `BiLSTM`: a bidirectional LSTM over packed sequences; final forward and backward states.

All map ``(input_ids, attention_mask) -> logits (B, K)`` and share LEAM's word-vector init and
head (`models/leam.py`), so a row of the table differs from LEAM only in how it composes words.
Bi-BloSAN, fastText, HAN and the deep CNNs of the paper's table are not built here.

Widths use the project's shared names (so `debug=smoke` shrinks them): ``hidden_size`` = P, the word-vector
width; ``intermediate_size`` = the 2-layer head's width (SWEM), the filters per width (CNN) or the
LSTM width (BiLSTM); ``num_layers`` = head layers (SWEM, CNN) or LSTM layers (BiLSTM).

Dim legend: B batch, L tokens, P word-vector width, F filters per width, D LSTM width.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from langrepr.errors import UserError
from langrepr.models.leam import WordEmbedding, make_head

POOLINGS = ("avg", "max", "concat")


def masked_mean(v: Tensor, mask: Tensor) -> Tensor:
    """Average of the real word vectors: (B, L, P), (B, L) -> (B, P)."""
    m = mask.unsqueeze(-1).to(v.dtype)
    return (v * m).sum(1) / m.sum(1).clamp(min=1.0)


def masked_max(v: Tensor, mask: Tensor) -> Tensor:
    """Elementwise max over the real positions: (B, L, P), (B, L) -> (B, P) (0 for an empty text)."""
    out = v.masked_fill(mask.unsqueeze(-1) == 0, float("-inf")).max(1).values
    return torch.nan_to_num(out, neginf=0.0)


class SWEM(nn.Module):
    """Simple word-embedding model: pooled word vectors -> head."""

    def __init__(self, vocab_size: int, num_labels: int, hidden_size: int = 300, pooling: str = "concat",
                 num_layers: int = 2, intermediate_size: int = 300, dropout: float = 0.5, init_scale: float = 0.001,
                 pad_id: int = 0):
        super().__init__()
        if pooling not in POOLINGS:
            raise UserError(f"model.net.pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.pooling = pooling
        self.embedding = WordEmbedding(vocab_size, hidden_size, init_scale, pad_id)
        self.head = make_head(hidden_size * (2 if pooling == "concat" else 1), num_labels, num_layers,
                              intermediate_size, dropout)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        v = self.embedding(input_ids)
        if self.pooling == "avg":
            z = masked_mean(v, attention_mask)
        elif self.pooling == "max":
            z = masked_max(v, attention_mask)
        else:
            z = torch.cat([masked_mean(v, attention_mask), masked_max(v, attention_mask)], dim=-1)
        return self.head(z)

    def embedding_parameters(self) -> int:
        return self.embedding.weight.numel()


class KimCNN(nn.Module):
    """One-layer word CNN: Conv1d per width (ReLU) -> max over real positions -> concat -> head."""

    def __init__(self, vocab_size: int, num_labels: int, hidden_size: int = 300,
                 widths: Sequence[int] = (3, 4, 5), intermediate_size: int = 100, num_layers: int = 1,
                 dropout: float = 0.5, init_scale: float = 0.001, pad_id: int = 0):
        super().__init__()
        filters = intermediate_size
        self.embedding = WordEmbedding(vocab_size, hidden_size, init_scale, pad_id)
        self.convs = nn.ModuleList(nn.Conv1d(hidden_size, filters, w, padding=w // 2) for w in widths)
        self.head = make_head(filters * len(widths), num_labels, num_layers, filters, dropout)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        x = self.embedding(input_ids).transpose(1, 2)   # (B, P, L)
        pooled = []
        for conv in self.convs:
            h = torch.relu(conv(x))[..., : input_ids.shape[1]].transpose(1, 2)   # (B, L, F), even widths trimmed
            pooled.append(masked_max(h, attention_mask))
        return self.head(torch.cat(pooled, dim=-1))

    def embedding_parameters(self) -> int:
        return self.embedding.weight.numel()


class BiLSTM(nn.Module):
    """Bidirectional LSTM over the real tokens (packed); [h_forward_last ; h_backward_first] -> head."""

    def __init__(self, vocab_size: int, num_labels: int, hidden_size: int = 300, intermediate_size: int = 300,
                 num_layers: int = 1, dropout: float = 0.5, init_scale: float = 0.001, pad_id: int = 0):
        super().__init__()
        self.embedding = WordEmbedding(vocab_size, hidden_size, init_scale, pad_id)
        self.lstm = nn.LSTM(hidden_size, intermediate_size, num_layers=num_layers, batch_first=True,
                            bidirectional=True)
        self.head = make_head(2 * intermediate_size, num_labels, 1, intermediate_size, dropout)   # linear

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        lengths = attention_mask.sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(input_ids), lengths, batch_first=True,
                                                   enforce_sorted=False)
        _, (h, _) = self.lstm(packed)            # h: (layers * 2, B, D)
        return self.head(torch.cat([h[-2], h[-1]], dim=-1))

    def embedding_parameters(self) -> int:
        return self.embedding.weight.numel()
