"""Heads on the multi-hot LM encoder (multi-hot LM §2.2 pretraining, §3 fine-tuning): one linear layer each, as BERT's.

- `NSPHead`: next-sentence prediction on [CLS] (pretraining only: the saved encoder is the same with or without it).
- `SpanQAHead`: start / end logits over input positions (KorQuAD, BERT's SQuAD head).
- `TaggingHead`: per-position label logits (NER, SRL: one BIO tag per morpheme, read at its first position).
- `SentenceHead`: sentence label logits from [CLS] (NSMC).

Plain `nn.Module`s over a `MultiHotLM`; the batch layout (ids, group_mask, pos, attention_mask, token_type_ids)
comes from the datamodules, the losses and scores from the tasks. Dims: B batch, L positions, H hidden, C labels.
"""

from __future__ import annotations

import torch
from torch import nn

from langrepr.models.multihot_lm import MultiHotLM


class NSPHead(nn.Module):
    """Two logits (is-next, random) from the [CLS] hidden state (B, L, H) -> (B, 2)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.out = nn.Linear(hidden_size, 2)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.out(hidden[:, 0])


class SpanQAHead(nn.Module):
    """Start/end logits over input positions (KorQuAD): one linear layer on the encoder, as BERT does."""

    def __init__(self, encoder: MultiHotLM):
        super().__init__()
        self.encoder = encoder
        self.qa = nn.Linear(encoder.hidden_size, 2)

    def forward(self, ids, group_mask, pos, attention_mask, token_type_ids=None) -> tuple[torch.Tensor, torch.Tensor]:
        start, end = self.qa(self.encoder(ids, group_mask, pos, attention_mask, token_type_ids)).unbind(-1)
        return start, end


class TaggingHead(nn.Module):
    """Per-position label logits (B, L, C) on the encoder."""

    def __init__(self, encoder: MultiHotLM, num_labels: int, dropout: float = 0.1):
        super().__init__()
        self.encoder, self.dropout, self.out = encoder, nn.Dropout(dropout), nn.Linear(encoder.hidden_size, num_labels)

    def forward(self, ids, group_mask, pos, attention_mask, token_type_ids=None) -> torch.Tensor:
        return self.out(self.dropout(self.encoder(ids, group_mask, pos, attention_mask, token_type_ids)))


class SentenceHead(TaggingHead):
    """Sentence label logits (B, C) from the [CLS] position."""

    def forward(self, ids, group_mask, pos, attention_mask, token_type_ids=None) -> torch.Tensor:
        return super().forward(ids, group_mask, pos, attention_mask, token_type_ids)[:, 0]
