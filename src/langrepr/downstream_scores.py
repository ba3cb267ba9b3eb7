"""Scores of the multi-hot LM's downstream tasks and the predictors that learn nothing, one definition each.

Why one module under both tasks and pipelines: a table sets a model row (scored by its task) beside a reference
row (scored in the same cell, or by a pipeline such as Table 4's answer split) cell by cell, so both must be
scored, and the references predicted, by the same code; and neither layer may import the other.

`exact_match` / `f1` follow KorQuAD v1.0's official evaluation (the SQuAD v1.1 script with Korean symbol
removal and CHARACTER-level F1, because Korean word segments carry particles); no installed library provides
it (torchmetrics' SQuAD F1 is whitespace-token level). Scores are against the raw answer texts, max over the
gold answers, x100. Tagging: seqeval entity-level macro / micro F1 and per-type F1 (conlleval rules), x100.
Classification: accuracy, x100. References: the paragraph's first sentence (KorQuAD), every morpheme O and the
per-morpheme majority tag (NER), the training part's majority class (NSMC). Imports no data, task or model code.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

KORQUAD_SYMBOLS = re.compile(r"['\"《》<>〈〉()‘’]")
PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """KorQuAD v1.0 normalisation: symbols to spaces, lower case, ASCII punctuation removed, spaces collapsed."""
    text = KORQUAD_SYMBOLS.sub(" ", text).lower()
    text = "".join(ch for ch in text if ch not in PUNCTUATION)
    return " ".join(text.split())


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1(prediction: str, truth: str) -> float:
    """Character-level F1 of the normalised strings (spaces removed), as KorQuAD v1.0 scores it."""
    pred = list(normalize_answer(prediction).replace(" ", ""))
    gold = list(normalize_answer(truth).replace(" ", ""))
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def score(predictions: Mapping[str, str], questions: Iterable) -> dict[str, float]:
    """EM and F1 (x100) over `questions` (`.id`, `.answers`), max over each question's gold answers.

    A question without a prediction scores 0.
    """
    em = f = n = 0.0
    for q in questions:
        pred = predictions.get(q.id, "")
        em += max(exact_match(pred, a) for a in q.answers)
        f += max(f1(pred, a) for a in q.answers)
        n += 1
    return {"em": 100 * em / max(n, 1), "f1": 100 * f / max(n, 1)}


def tagging_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]], types: Sequence[str]
                   ) -> dict[str, float]:
    """Entity-level macro / micro F1 by seqeval (x100) and per-type F1 for every type of the tag set (0 when absent)."""
    from seqeval.metrics import classification_report, f1_score

    gold, predicted = [list(s) for s in gold], [list(s) for s in predicted]
    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    out = {"micro_f1": 100 * f1_score(gold, predicted, average="micro", zero_division=0),
           "macro_f1": 100 * f1_score(gold, predicted, average="macro", zero_division=0)}
    for kind in types:
        out[f"f1_{kind}"] = 100 * report.get(kind, {}).get("f1-score", 0.0)
        out[f"support_{kind}"] = report.get(kind, {}).get("support", 0)
    return out


def accuracy(gold: Sequence[int], predicted: Sequence[int]) -> float:
    return 100 * sum(g == p for g, p in zip(gold, predicted)) / max(len(gold), 1)


# ---------------------------------------------------------------- references: predictors that learn nothing
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
