"""Multi-hot batches as ids (B, L, G) with a group mask, and BERT-style masking per input position.

A position holds a group of token ids (one id unless multi-hot). Masking picks 15% of the non-special
positions; 80% become [MASK], 10% a random single token, 10% stay; a masked group is replaced as ONE position
(slot 0 = the replacement, the other slots emptied). The answer of a masked position is its original group.
Next-sentence prediction (the paper trains with it) pairs packed chunks as BERT does (`pack_pairs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from langrepr.data.korean.encoding import POS_INDEX, Encoded
from langrepr.data.korean.token_lists import CLS, MASK, PAD, SEP, SPECIALS

SPECIAL_POS = POS_INDEX["[SPECIAL]"]


def pack_sentences(encoded: Sequence[Encoded], max_len: int) -> list[Encoded]:
    """Concatenate consecutive sentences into sequences of ≤ max_len − 2 positions ([CLS] … [SEP] added later).

    A sentence longer than the budget is cut (its tail dropped), as BERT's pretraining data does.
    """
    budget, out, groups, pos = max_len - 2, [], [], []
    for enc in encoded:
        if groups and len(groups) + len(enc.groups) > budget:
            out.append(Encoded(groups, pos, [], []))
            groups, pos = [], []
        groups, pos = groups + enc.groups[:budget], pos + enc.pos[:budget]
        groups, pos = groups[:budget], pos[:budget]
    if groups:
        out.append(Encoded(groups, pos, [], []))
    return out


def collate_groups(sequences: Sequence[Encoded], max_group: int) -> dict[str, torch.Tensor]:
    """[CLS] groups [SEP] per sequence, padded to the longest: ids/group_mask (B, L, G), pos/attention (B, L)."""
    length = max(len(s.groups) for s in sequences) + 2
    width = min(max_group, max(len(g) for s in sequences for g in s.groups)) if any(s.groups for s in sequences) else 1
    B = len(sequences)
    ids = torch.full((B, length, width), PAD, dtype=torch.long)
    pos = torch.full((B, length), SPECIAL_POS, dtype=torch.long)
    attention = torch.zeros(B, length, dtype=torch.long)
    for b, seq in enumerate(sequences):
        rows = [[CLS], *(g[:width] for g in seq.groups), [SEP]]
        for position, group in enumerate(rows):
            ids[b, position, :len(group)] = torch.tensor(group)
        pos[b, 1:len(seq.pos) + 1] = torch.tensor(seq.pos, dtype=torch.long)
        attention[b, :len(rows)] = 1
    return {"ids": ids, "group_mask": ids != PAD, "pos": pos, "attention_mask": attention}


def mask_positions(batch: dict[str, torch.Tensor], vocab_size: int, generator: torch.Generator,
                   mask_prob: float = 0.15, mask_share: float = 0.8, random_share: float = 0.1
                   ) -> dict[str, torch.Tensor]:
    """BERT masking per position; adds `masked (B, L)`, `target_ids (M, G)`, `target_mask (M, G)`."""
    ids, group_mask = batch["ids"], batch["group_mask"]
    candidates = batch["attention_mask"].bool() & (ids[..., 0] != CLS) & (ids[..., 0] != SEP)
    draw = torch.rand(candidates.shape, generator=generator)
    masked = candidates & (draw < mask_prob)
    if candidates.any() and not masked.any():            # every sequence batch trains on something
        first = candidates.float().flatten().argmax()
        masked.view(-1)[first] = True
    action = torch.rand(candidates.shape, generator=generator)
    to_mask = masked & (action < mask_share)
    to_random = masked & (action >= mask_share) & (action < mask_share + random_share)
    new_ids, new_mask = ids.clone(), group_mask.clone()
    replaced = to_mask | to_random
    new_ids[replaced] = PAD
    new_mask[replaced] = False
    new_mask[..., 0] |= replaced
    new_ids[..., 0][to_mask] = MASK
    random_ids = torch.randint(len(SPECIALS), vocab_size, candidates.shape, generator=generator)
    new_ids[..., 0][to_random] = random_ids[to_random]
    return {**batch, "ids": new_ids, "group_mask": new_mask, "masked": masked,
            "target_ids": ids[masked], "target_mask": group_mask[masked]}


@dataclass
class SentencePair:
    """Two packed chunks for next-sentence prediction: `is_random` = B is not the chunk that followed A."""

    first: Encoded
    second: Encoded
    is_random: int


def pack_pairs(encoded: Sequence[Encoded], max_len: int, generator: torch.Generator) -> list[SentencePair]:
    """BERT's NSP pairs: chunks of ≤ (max_len − 3) / 2 positions; half the time B is the next chunk, else random."""
    chunks = pack_sentences(encoded, (max_len - 3) // 2 + 2)
    pairs = []
    for i in range(len(chunks) - 1):
        if len(chunks) > 2 and torch.rand(1, generator=generator).item() < 0.5:
            j = int(torch.randint(len(chunks) - 1, (1,), generator=generator))
            j = j if j < i + 1 else j + 1          # any chunk but the true next one
            pairs.append(SentencePair(chunks[i], chunks[j], 1))
        else:
            pairs.append(SentencePair(chunks[i], chunks[i + 1], 0))
    return pairs


def collate_pairs(pairs: Sequence[SentencePair], max_group: int) -> dict[str, torch.Tensor]:
    """[CLS] A [SEP] B [SEP] with token types 0 / 1 and `nsp_labels` (1 = B is random)."""
    joined = [Encoded([*p.first.groups, [SEP], *p.second.groups], [*p.first.pos, SPECIAL_POS, *p.second.pos], [], [])
              for p in pairs]
    batch = collate_groups(joined, max_group)
    types = torch.zeros_like(batch["attention_mask"])
    for b, p in enumerate(pairs):
        start = len(p.first.groups) + 2
        types[b, start:start + len(p.second.groups) + 1] = 1
    return {**batch, "token_type_ids": types, "nsp_labels": torch.tensor([p.is_random for p in pairs])}
