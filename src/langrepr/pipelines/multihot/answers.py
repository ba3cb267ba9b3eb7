"""Table 4 cell (multi-hot LM §3.3), the model-free part: which KorQuAD test answers each token list divides.

Per token list: the test questions whose answer is (not) divided (at least one of the answer's morphemes split
into several positions or a multi-hot group), and the first-sentence reference reader's EM within each part,
scored by KorQuAD v1.0's official evaluation. The fine-tuned EM per part comes from Table 3's KorQuAD cells
(`langrepr.tasks.span_qa`), which split their test questions the same way.
"""

from __future__ import annotations

from langrepr.data.korean.encoding import MorphemeEncoder
from langrepr.data.korean.korquad import load_korquad
from langrepr.data.korean.korquad_features import answer_divided
from langrepr.data.korean.morphemes import cached_analysis
from langrepr.data.korean.prepare import token_lists
from langrepr.downstream_scores import first_sentence, score


def korquad_answer_pipeline(output_dir: str, korquad: dict, corpus: dict, sizes: dict, cache_dir: str,
                            workers: int = 2, max_group: int = 16) -> dict[str, float | None]:
    """Per token list: test questions whose answer is (not) divided, and the reference's EM within each part."""
    questions = load_korquad(korquad.get("data_dir"), "test", korquad.get("test_fraction", 0.3))
    answers = cached_analysis("korquad_test_answers", [q.answers[0] for q in questions], cache_dir, workers)
    baseline = {q.id: first_sentence(q.context) for q in questions}
    metrics: dict[str, float | None] = {f"baseline/{k}": v for k, v in score(baseline, questions).items()}
    metrics["test/questions"] = len(questions)
    for kind, token_list in token_lists(corpus, sizes, cache_dir, workers).items():
        encoder = MorphemeEncoder(token_list, max_group)
        divided = [answer_divided(encoder, m) for m in answers]
        for part, flag in (("divided", True), ("not_divided", False)):
            subset = [q for q, d in zip(questions, divided) if d == flag]
            metrics[f"{kind}/{part}/questions"] = len(subset)
            # an empty part: undefined (None), not NaN (NaN means diverged)
            metrics[f"{kind}/{part}/baseline_em"] = score(baseline, subset)["em"] if subset else None
    return metrics
