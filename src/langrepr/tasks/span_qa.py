"""KorQuAD v1.0 scoring and the answer analysis of Table 4 (multi-hot LM §3.3).

`exact_match` / `f1` follow KorQuAD v1.0's official evaluation (the SQuAD v1.1 script with Korean symbol
removal and CHARACTER-level F1, because Korean word segments carry particles); no installed library provides
it (torchmetrics' SQuAD F1 is whitespace-token level). Scores are against the raw answer texts, max over the
gold answers, x100.

`korquad_answer_pipeline` is the model-free part of Table 4: which test answers a token list divides (at least one
of the answer's morphemes is split into several positions or a multi-hot group), per list, and a first-sentence
heuristic baseline scored by the same evaluation (the reference row). Fine-tuned EM needs fine-tuning cells.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

from langrepr.data.korean.encoding import MorphemeEncoder
from langrepr.data.korean.korquad import Question, load_korquad
from langrepr.data.korean.morphemes import cached_analysis
from langrepr.data.korean.prepare import token_lists

KORQUAD_SYMBOLS = re.compile(r"['\"《》<>〈〉()‘’]")
PUNCTUATION = set(string.punctuation)
SENTENCE_END = re.compile(r"(?<=[.?!])\s+")


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


def score(predictions: dict[str, str], questions: Iterable[Question]) -> dict[str, float]:
    """EM and F1 (x100) over `questions`, max over each question's gold answers; missing predictions score 0."""
    em = f = n = 0.0
    for q in questions:
        pred = predictions.get(q.id, "")
        em += max(exact_match(pred, a) for a in q.answers)
        f += max(f1(pred, a) for a in q.answers)
        n += 1
    return {"em": 100 * em / max(n, 1), "f1": 100 * f / max(n, 1)}


def first_sentence(question: Question) -> str:
    """Reference predictor: the first sentence of the paragraph."""
    return SENTENCE_END.split(question.context.strip(), maxsplit=1)[0]


def answer_divided(encoder: MorphemeEncoder, morphemes: Sequence[tuple[str, str]]) -> bool:
    """Table 4's split: does the token list divide at least one morpheme of the answer?"""
    return any(encoder.encode(morphemes).divided)


def korquad_answer_pipeline(output_dir: str, korquad: dict, corpus: dict, sizes: dict, cache_dir: str,
                            workers: int = 2, max_group: int = 16) -> dict[str, float]:
    """Per token list: test questions whose answer is (not) divided, and the baseline's EM within each part."""
    questions = load_korquad(korquad.get("data_dir"), "test", korquad.get("test_fraction", 0.3))
    answers = cached_analysis("korquad_test_answers", [q.answers[0] for q in questions], cache_dir, workers)
    baseline = {q.id: first_sentence(q) for q in questions}
    metrics = {f"baseline/{k}": v for k, v in score(baseline, questions).items()}
    metrics["test/questions"] = len(questions)
    for kind, token_list in token_lists(corpus, sizes, cache_dir, workers).items():
        encoder = MorphemeEncoder(token_list, max_group)
        divided = [answer_divided(encoder, m) for m in answers]
        for part, flag in (("divided", True), ("not_divided", False)):
            subset = [q for q, d in zip(questions, divided) if d == flag]
            metrics[f"{kind}/{part}/questions"] = len(subset)
            metrics[f"{kind}/{part}/baseline_em"] = score(baseline, subset)["em"] if subset else float("nan")
    return metrics
