"""Reference predictors of the multi-hot LM tables: what a reader, tagger or classifier that learns nothing gets.

Each is scored by `langrepr.pipelines.multihot.scores` on the same test part as the model rows: the fine-tuning
tasks record them in the same cell (`reference/<name>/...`, `baseline/...`), Table 4's answer-split cell
(`langrepr.pipelines.multihot.answers`) per divided / not-divided part. Imports no data, task or model code.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

OUTSIDE = "O"                                      # the BIO tag of a morpheme outside every span
SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


def first_sentence(context: str) -> str:
    """KorQuAD reference reader: the first sentence of the paragraph."""
    return SENTENCE_END.split(context.strip(), maxsplit=1)[0]


def all_outside(morphemes: Sequence[Sequence[tuple]]) -> list[list[str]]:
    """The gazetteer-free floor: every morpheme O."""
    return [[OUTSIDE] * len(m) for m in morphemes]


class MajorityTagger:
    """Each (form, POS) morpheme gets the tag it carried most often in training; unseen morphemes get O."""

    def __init__(self, morphemes: Sequence[Sequence[tuple]], tags: Sequence[Sequence[str]]):
        counts: dict[tuple, Counter] = {}
        for sentence, sentence_tags in zip(morphemes, tags):
            for m, tag in zip(sentence, sentence_tags):
                counts.setdefault(tuple(m[:2]), Counter())[tag] += 1
        self.best = {m: c.most_common(1)[0][0] for m, c in counts.items()}

    def __call__(self, morphemes: Sequence[Sequence[tuple]]) -> list[list[str]]:
        return [[self.best.get(tuple(m[:2]), OUTSIDE) for m in sentence] for sentence in morphemes]


def majority_class(labels: Sequence[int]) -> int:
    """The training part's most frequent label (NSMC reference row)."""
    return Counter(labels).most_common(1)[0][0]
