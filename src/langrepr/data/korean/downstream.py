"""Downstream examples of the multi-hot LM (multi-hot LM §3.2) as input positions: tagging and sentence inputs.

Tagging labels one BIO tag per MORPHEME: the tag sits on the morpheme's first input position (a BPE-divided
morpheme's other positions are ignored by the loss), and a morpheme's prediction is read from that position. SRL
appends the target predicate's word segment after the sentence ([SEP] between, token type 1), as the paper does;
only sentence positions carry tags. Sentence classification (NSMC) reads [CLS]. The tagging data sets split into
train / test by a hash of each sentence id (`test_fraction`), the same on every machine and run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from langrepr.data.korean.batching import SPECIAL_POS, collate_groups
from langrepr.data.korean.encoding import Encoded, MorphemeEncoder
from langrepr.data.korean.ner import (
    KLUE_TYPES,
    MODU_TYPES,
    TaggedSentence,
    read_klue_ner,
    read_modu_ner,
    shown_types,
)
from langrepr.data.korean.srl import SRL_TYPES, read_modu_srl
from langrepr.data.korean.token_lists import SEP
from langrepr.errors import UserError

IGNORE = -100       # label of a position the loss skips
READERS = {"klue": (read_klue_ner, tuple(KLUE_TYPES)), "modu_ner": (read_modu_ner, MODU_TYPES),
           "modu_srl": (read_modu_srl, SRL_TYPES)}


def in_test_part(example_id: str, test_fraction: float) -> bool:
    """A stable split by the example id's hash (the same on every machine and run)."""
    return int(hashlib.sha256(example_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < test_fraction


def load_tagged(data: dict) -> tuple[dict[str, list[TaggedSentence]], list[str]]:
    """Train / test sentences of a tagging data set and its (shown) types."""
    source = data.get("source")
    if source not in READERS:
        raise UserError(f"unknown tagging source '{source}': use {', '.join(READERS)}")
    reader, default_types = READERS[source]
    types = tuple(data.get("types") or default_types)
    sentences = reader(data["path"], {t: KLUE_TYPES.get(t, t) for t in types} if source == "klue" else types)
    parts: dict[str, list[TaggedSentence]] = {"train": [], "test": []}
    for s in sentences:
        key = s.id.split("#", 1)[0]                 # SRL: all predicates of a sentence stay in one part
        parts["test" if in_test_part(key, data.get("test_fraction", 0.2)) else "train"].append(s)
    for part, limit in (("train", data.get("max_train")), ("test", data.get("max_test"))):
        parts[part] = parts[part][:limit] if limit else parts[part]
        if not parts[part]:
            raise UserError(f"{data['path']}: the {part} part is empty; use a test_fraction "
                            "strictly between 0 and 1, or a larger file")
    return parts, shown_types(types)


@dataclass
class TaggingInput:
    """One example as input positions; `first[i]` = position of morpheme i (None: cut off by max_len)."""

    encoded: Encoded
    labels: list[int]               # per position (IGNORE where no tag is read)
    first: list[int | None]
    sentence_positions: int         # positions before the appended predicate (all of them without one)
    index: int = 0                  # the example's place in its part (predictions are read back by it)


def tagging_input(morphemes: Sequence[tuple], tags: Sequence[str] | None, label_index: dict[str, int],
                  encoder: MorphemeEncoder, max_len: int, predicate: Sequence[tuple] | None = None,
                  index: int = 0) -> TaggingInput:
    """Encode a sentence (and the appended predicate segment) within max_len, tags on first positions."""
    sentence = encoder.encode([m[:2] for m in morphemes])
    extra = encoder.encode([m[:2] for m in predicate]) if predicate else None
    budget = max_len - 2 - (len(extra.groups) + 1 if extra else 0)
    if budget < 1:
        raise UserError(f"max_len {max_len} leaves no room for the sentence after the predicate: raise "
                        "model.net.max_positions")
    n = min(budget, len(sentence.groups))
    first: list[int | None] = [None] * len(morphemes)
    labels = [IGNORE] * n
    for p in range(n):
        m = sentence.morpheme_of[p]
        if first[m] is None:
            first[m] = p
            if tags is not None:
                labels[p] = label_index[tags[m]]
    groups, pos = sentence.groups[:n], sentence.pos[:n]
    if extra:
        groups, pos = [*groups, [SEP], *extra.groups], [*pos, SPECIAL_POS, *extra.pos]
        labels += [IGNORE] * (len(extra.groups) + 1)
    return TaggingInput(Encoded(groups, pos, [], []), labels, first, n, index)


def collate_tagging(examples: Sequence[TaggingInput], max_group: int) -> dict:
    """`collate_groups` plus `labels (B, L)` and token types 1 on the appended predicate.

    Per example also its `index` and the `first` position of each morpheme (where its tag is read, past [CLS]).
    """
    batch = collate_groups([e.encoded for e in examples], max_group)
    labels = torch.full(batch["attention_mask"].shape, IGNORE, dtype=torch.long)
    types = torch.zeros_like(batch["attention_mask"])
    for b, e in enumerate(examples):
        labels[b, 1:len(e.labels) + 1] = torch.tensor(e.labels, dtype=torch.long)
        if len(e.encoded.groups) > e.sentence_positions:       # [CLS] sentence [SEP] | predicate [SEP]
            types[b, e.sentence_positions + 2:len(e.encoded.groups) + 2] = 1
    return {**batch, "labels": labels, "token_type_ids": types, "index": [e.index for e in examples],
            "first": [[None if p is None else p + 1 for p in e.first] for e in examples]}


def collate_sentences(encoded: Sequence[Encoded], labels: Sequence[int], max_group: int, max_len: int,
                      index: Sequence[int] | None = None) -> dict:
    """[CLS] sentence [SEP] cut to max_len, with the sentence `labels (B,)` and each example's `index`."""
    cut = [Encoded(e.groups[:max_len - 2], e.pos[:max_len - 2], [], []) for e in encoded]
    batch = collate_groups(cut, max_group)
    return {**batch, "token_type_ids": torch.zeros_like(batch["attention_mask"]), "labels": torch.tensor(labels),
            "index": list(index if index is not None else range(len(encoded)))}
