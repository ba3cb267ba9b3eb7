"""BERT / ALBERT / CANINE sequence classifiers built from config, with an optional EWE input swap.

Paper: "Elementwise Language Representation", arXiv 2302.13475, §5.2 and Table 1: the six models are the
HF `*ForSequenceClassification` classes at BERT-base size, randomly initialised and trained from scratch.
ORIG models read token ids through the parent's own table; EWE models replace that table by an
elementwise embedding whose (B, u, width) output enters through `inputs_embeds` (METHODS §1.4, §1.5).

The HF classes are wrapped, never forked. For EWE the parent's token table is removed (set to None) so
that parameter counts are honest; the parent's position/type embeddings, LayerNorm and dropout are kept,
as the paper's counts imply (METHODS §1.1).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import (
    AlbertConfig,
    AlbertForSequenceClassification,
    BertConfig,
    BertForSequenceClassification,
    CanineConfig,
    CanineForSequenceClassification,
)

ARCHS = ("bert", "albert", "canine")
DEFAULT_VOCAB = {"bert": 30522, "albert": 30000}  # BERT-base uncased WordPiece, ALBERT SentencePiece


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of distinct parameters (shared ALBERT weights are counted once)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


class HFSequenceClassifier(nn.Module):
    """A `transformers` *ForSequenceClassification model (random init) with an optional EWE input.

    Args:
        arch: "bert", "albert" or "canine".
        num_labels: classifier outputs (1,328 for the relabelled USPTO subclasses); the paper's Table 1
            totals include this head (METHODS §1.5).
        hidden_size, num_layers, num_heads, intermediate_size: transformer size (BERT-base defaults).
            EWE models set num_heads = v so that head n sees byte n (paper §4.1).
        embedding_size: ALBERT's factorised embedding width E (128 when None); ignored by BERT/CANINE.
        max_position_embeddings: rows of the parent's position table for BERT/ALBERT and for CANINE EWE
            (the paper's "1M" CANINE_EWE embedding count is not exactly reproducible, METHODS §1.5: 1024
            gives 0.81M, 2048 = u*v gives 1.60M). CANINE ORIG keeps HF's 16,384-row table (sized by
            num_hash_buckets), so there it only bounds the sequence length.
        vocab_size: token table rows for BERT/ALBERT ORIG (30522 / 30000 when None); must exceed every id
            the tokenizer emits. Unused by CANINE and by EWE models.
        embedding: None for ORIG; else an input module mapping input_ids to (B, u, width), with
            width = hidden_size (BERT, CANINE) or embedding_size (ALBERT). It must expose `width` and
            `embedding_parameters()` (see `langrepr.models.embeddings`).
        dropout: hidden and attention-probability dropout of the parent (also ALBERT's classifier
            dropout; ALBERT's HF default of 0 is overridden so all six models follow BERT-base).
        pooling: "first" (paper: the HF classifier reads its pooler over the first position — [CLS] for
            ORIG, the first material for EWE, which the paper gives no [CLS]) or "mean" (masked mean of the
            last hidden states; not in the paper). A from-scratch 2-layer model learns far faster from the
            mean (measured in the quick profile, README), so the quick profile uses it and says so.
    """

    def __init__(
        self,
        arch: str,
        num_labels: int,
        hidden_size: int = 768,
        num_layers: int = 12,
        num_heads: int = 12,
        intermediate_size: int = 3072,
        embedding_size: int | None = None,
        max_position_embeddings: int = 512,
        vocab_size: int | None = None,
        embedding: nn.Module | None = None,
        dropout: float = 0.1,
        pooling: str = "first",
    ) -> None:
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"model.net.arch={arch!r} is not supported; allowed values: {', '.join(ARCHS)}")
        if pooling not in ("first", "mean"):
            raise ValueError(f"model.net.pooling={pooling!r} is not supported; allowed values: first, mean")
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        if hidden_size % num_heads:
            raise ValueError(
                f"model.net.hidden_size ({hidden_size}) must be a multiple of model.net.num_heads ({num_heads})"
            )
        self.arch = arch
        self.embedding = embedding
        self.pooling = pooling
        common = dict(
            hidden_size=hidden_size,
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            intermediate_size=intermediate_size,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
            num_labels=num_labels,
        )
        # EWE builds the nominal table too (keeps the HF config self-consistent) and drops it below.
        table_rows = vocab_size or DEFAULT_VOCAB.get(arch, 0)

        if arch == "bert":
            config = BertConfig(
                vocab_size=table_rows, max_position_embeddings=max_position_embeddings, **common
            )
            self.model = BertForSequenceClassification(config)
            self._check_width(hidden_size, "model.net.hidden_size")
            if embedding is not None:
                self.model.bert.embeddings.word_embeddings = None
        elif arch == "albert":
            embedding_size = 128 if embedding_size is None else embedding_size
            config = AlbertConfig(
                vocab_size=table_rows,
                embedding_size=embedding_size,
                max_position_embeddings=max_position_embeddings,
                classifier_dropout_prob=dropout,
                **common,
            )
            self.model = AlbertForSequenceClassification(config)
            # ALBERT's factorised width E feeds embedding_hidden_mapping_in (E -> hidden), which is kept.
            self._check_width(embedding_size, "model.net.embedding_size")
            if embedding is not None:
                self.model.albert.embeddings.word_embeddings = None
        else:  # canine
            config = CanineConfig(max_position_embeddings=max_position_embeddings, **common)
            self.model = CanineForSequenceClassification(config)
            self._check_width(hidden_size, "model.net.hidden_size")
            if embedding is not None:
                emb = self.model.canine.char_embeddings
                for i in range(config.num_hash_functions):  # the hash-bucket codepoint tables
                    setattr(emb, f"HashBucketCodepointEmbedder_{i}", None)
                # HF sizes the position table by num_hash_buckets (16,384); shrink it to the positions used.
                emb.char_position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
                nn.init.normal_(emb.char_position_embeddings.weight, std=config.initializer_range)

    def _check_width(self, expected: int, key: str) -> None:
        if self.embedding is None:
            return
        width = getattr(self.embedding, "width", None)
        if width != expected:
            raise ValueError(
                f"model.net.embedding.width ({width}) must equal {key} ({expected}) for arch={self.arch}"
            )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, num_labels) from ids (B, T) for ORIG or byte ids (B, u, v) for EWE; mask is (B, T|u)."""
        rate = getattr(self.model.config, "downsampling_rate", 1)
        if input_ids.shape[1] % rate:
            # HF CANINE pools the mask to T // rate molecules but builds 1 + (T - 1) // rate of them.
            raise ValueError(
                f"CANINE needs a sequence length divisible by its downsampling rate {rate}, got {input_ids.shape[1]}:"
                " set embedding.u (EWE) or tokenizer.max_length (ORIG) to a multiple of it"
            )
        inputs = {"input_ids": input_ids} if self.embedding is None else {"inputs_embeds": self.embedding(input_ids)}
        if self.pooling == "first":
            return self.model(attention_mask=attention_mask, **inputs).logits
        base = getattr(self.model, self.model.base_model_prefix)
        hidden = base(attention_mask=attention_mask, **inputs).last_hidden_state       # (B, T, H)
        mask = (torch.ones(hidden.shape[:2], device=hidden.device) if attention_mask is None
                else attention_mask.to(hidden.dtype)).unsqueeze(-1)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.model.classifier(self.model.dropout(pooled))

    def output_bias(self) -> torch.Tensor:
        """The classifier's bias (num_labels,), which a task may start at the label prior's log-odds."""
        return self.model.classifier.bias

    def embedding_parameters(self) -> int:
        """The paper's Table 1 "Embedding" column, counted the way the paper did (METHODS §1.5).

        BERT/ALBERT: the token table (ORIG) or the element table (EWE); focus embeddings excluded.
        CANINE ORIG: the whole char_embeddings module (hash tables + position table + type + LayerNorm).
        CANINE EWE: the element table plus what remains of char_embeddings (positions, type, LayerNorm).
        """
        if self.arch == "canine":
            rest = count_parameters(self.model.canine.char_embeddings)
            return rest + (self.embedding.embedding_parameters() if self.embedding is not None else 0)
        if self.embedding is not None:
            return self.embedding.embedding_parameters()
        backbone = self.model.bert if self.arch == "bert" else self.model.albert
        return backbone.embeddings.word_embeddings.weight.numel()
