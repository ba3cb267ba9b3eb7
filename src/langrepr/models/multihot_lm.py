"""Multi-hot LM (multi-hot LM §2.1-2.2): a morpheme is one input position, even when it is a group of syllables.

Eq. 1: O = Σ_i T_i ⊙ TP_i over the token ids of a position's group (T: token embedding, TP: learned embedding of
the slot inside the group). Eq. 2: Input = O + Pos + P, Pos the POS-tag embedding and P BERT's own position
embedding, added by the `transformers` BertModel that receives `inputs_embeds` (built from config, random init).
The MLM output is a separate linear layer over the token list (untied from T, as the paper says); the
fine-tuning and NSP heads are in `langrepr.models.multihot_heads`.

Dims: B batch, L positions, G group slots, H hidden, V token list size.

[inferred, configurable]: TP initialised to ones (`tp_init`; BERT's N(0, 0.02) would shrink T ⊙ TP to ~4e-4);
single-token positions use T ⊙ TP_1 like any group (`single_tokens=product`) or bypass TP (`plain`);
token-type embeddings are kept (NSP segments).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertModel


def multi_hot_sum(token_emb: torch.Tensor, slot_emb: torch.Tensor, group_mask: torch.Tensor) -> torch.Tensor:
    """Eq. 1: Σ_g T[b,l,g] ⊙ TP[g] over the filled slots. token_emb (B,L,G,H), slot_emb (G,H), mask (B,L,G)."""
    return (token_emb * slot_emb * group_mask.unsqueeze(-1)).sum(2)


class MultiHotEmbedding(nn.Module):
    """Token groups + POS tags → the O + Pos part of eq. 2 (BERT adds P, type embeddings and LayerNorm)."""

    def __init__(self, vocab_size: int, hidden_size: int, max_group: int, num_pos_tags: int,
                 tp_init: str = "ones", single_tokens: str = "product", init_std: float = 0.02):
        super().__init__()
        if tp_init not in ("ones", "normal"):
            raise ValueError(f"tp_init must be ones or normal, got {tp_init!r}")
        if single_tokens not in ("product", "plain"):
            raise ValueError(f"single_tokens must be product or plain, got {single_tokens!r}")
        self.token = nn.Embedding(vocab_size, hidden_size, padding_idx=0)
        self.slot = nn.Embedding(max_group, hidden_size)
        self.pos_tag = nn.Embedding(num_pos_tags, hidden_size)
        self.single_tokens = single_tokens
        for emb in (self.token, self.pos_tag):
            nn.init.normal_(emb.weight, std=init_std)
        if tp_init == "ones":
            nn.init.ones_(self.slot.weight)
        else:
            nn.init.normal_(self.slot.weight, std=init_std)

    def forward(self, ids: torch.Tensor, group_mask: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        G = ids.shape[-1]
        if G > self.slot.num_embeddings:
            raise ValueError(f"batch has {G} group slots, the model has max_group={self.slot.num_embeddings}")
        tokens = self.token(ids)                                              # (B,L,G,H)
        out = multi_hot_sum(tokens, self.slot.weight[:G], group_mask)
        if self.single_tokens == "plain":
            single = group_mask.sum(-1, keepdim=True) == 1
            out = torch.where(single, tokens[:, :, 0], out)
        return out + self.pos_tag(pos)


class MultiHotLM(nn.Module):
    """BERT encoder over multi-hot positions, with an untied MLM output layer."""

    def __init__(self, vocab_size: int, hidden_size: int = 256, num_layers: int = 4, num_heads: int = 4,
                 intermediate_size: int = 1024, max_positions: int = 256, max_group: int = 16,
                 num_pos_tags: int = 64, dropout: float = 0.1, tp_init: str = "ones",
                 single_tokens: str = "product"):
        super().__init__()
        self.vocab_size, self.max_group = vocab_size, max_group
        self.embed = MultiHotEmbedding(vocab_size, hidden_size, max_group, num_pos_tags, tp_init, single_tokens)
        config = BertConfig(vocab_size=1, hidden_size=hidden_size, num_hidden_layers=num_layers,  # T lives above
                            num_attention_heads=num_heads, intermediate_size=intermediate_size,
                            max_position_embeddings=max_positions, hidden_dropout_prob=dropout,
                            attention_probs_dropout_prob=dropout, type_vocab_size=2)
        self.bert = BertModel(config, add_pooling_layer=False)
        # inputs arrive as `inputs_embeds`: BERT's own word table (1 x H) is never used, so it is not trained
        # (DDP refuses parameters that get no gradient)
        self.bert.embeddings.word_embeddings.requires_grad_(False)
        self.mlm_head = nn.Linear(hidden_size, vocab_size)
        self.hidden_size = hidden_size

    def forward(self, ids, group_mask, pos, attention_mask, token_type_ids=None) -> torch.Tensor:
        """Hidden states (B, L, H)."""
        embeds = self.embed(ids, group_mask, pos)
        return self.bert(inputs_embeds=embeds, attention_mask=attention_mask,
                         token_type_ids=token_type_ids).last_hidden_state

    def mlm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.mlm_head(hidden)

    def embedding_parameters(self) -> int:
        return sum(p.numel() for p in self.embed.parameters())

