"""KorQuAD v1.0 span QA on a pretrained multi-hot LM (multi-hot LM §3.1) and Table 4's answer split.

Start/end cross-entropy over input positions (BERT's SQuAD head, `models.multihot_heads.SpanQAHead`) on question
windows whose answer spans sit at morpheme units (`langrepr.data.korean.korquad_features`). A question's answer
is the best span over its windows (start ≤ end < start + `max_answer` positions, inside the paragraph), mapped
back to raw text through the morphemes' character offsets and scored by KorQuAD v1.0's official EM and character
F1 (`langrepr.downstream_scores`): `test/em`, `test/f1`; the paragraph's first sentence, scored the same
way, is the reference (`baseline/em`, `baseline/f1`). Table 4 reads EM on the test answers this cell's token list
divides and those it does not (`<token_list>/divided/finetuned_em`, `<token_list>/not_divided/finetuned_em`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from langrepr.downstream_scores import first_sentence, score
from langrepr.models.multihot_heads import SpanQAHead
from langrepr.tasks.multihot_downstream import FinetuneTask


def best_span(start_logits: torch.Tensor, end_logits: torch.Tensor, context: torch.Tensor,
              char_spans: Sequence[tuple[int, int] | None], max_answer: int
              ) -> tuple[float, tuple[int, int] | None]:
    """Highest start+end score over paragraph positions with start ≤ end < start + max_answer.

    `context (L,)` marks the paragraph's positions, `char_spans[p]` their character spans; returns (score,
    (first character, end character)), or (-inf, None) when the window holds no paragraph position.
    """
    n = len(char_spans)
    inside = context[:n].bool()
    s_log = start_logits[:n].float().masked_fill(~inside, float("-inf"))
    e_log = end_logits[:n].float().masked_fill(~inside, float("-inf"))
    scores = s_log[:, None] + e_log[None, :]
    ones = torch.ones(n, n, dtype=torch.bool, device=scores.device)
    allowed = torch.triu(ones) & ~torch.triu(ones, diagonal=max_answer)
    scores = scores.masked_fill(~allowed, float("-inf"))
    flat = int(scores.argmax())
    best = float(scores.view(-1)[flat])
    if best == float("-inf"):
        return best, None
    s, e = divmod(flat, n)
    return best, (char_spans[s][0], char_spans[e][1])


class SpanQATask(FinetuneTask):
    """Span QA on KorQuAD windows.

    Args (from the datamodule): questions (the test questions: `.id`, `.context`, `.answers`), divided (per test
    question: does the token list divide its answer?), token_list (names Table 4's keys), max_answer (positions).
    """

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None,
                 questions: Sequence = (), divided: Sequence[bool] = (), token_list: str = "", max_answer: int = 30,
                 **common: Any):
        super().__init__(net, optimizer, scheduler, **common)
        self.net = SpanQAHead(net)
        self.questions, self.divided = list(questions), list(divided)
        self.token_list, self.max_answer = token_list, max_answer

    def span_logits(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        start, end = self.net(*self.inputs(batch))
        padding = batch["attention_mask"] == 0
        return start.float().masked_fill(padding, -1e4), end.float().masked_fill(padding, -1e4)

    def training_step(self, batch: dict, _: int) -> torch.Tensor:
        start, end = self.span_logits(batch)
        loss = (F.cross_entropy(start, batch["start"]) + F.cross_entropy(end, batch["end"])) / 2
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["qid"]))
        return loss

    def test_step(self, batch: dict, _: int, dataloader_idx: int = 0) -> None:
        start, end = self.span_logits(batch)
        for b, (qid, spans) in enumerate(zip(batch["qid"], batch["char_spans"])):
            value, span = best_span(start[b], end[b], batch["context_mask"][b], spans, self.max_answer)
            if span is not None:
                self.test_outputs.append((qid, value, span))

    def score_test(self, outputs: list) -> tuple[dict[str, float | None], dict]:
        best: dict[str, tuple[float, tuple[int, int]]] = {}
        for qid, value, span in outputs:
            if value > best.get(qid, (float("-inf"), None))[0]:
                best[qid] = (value, span)
        contexts = {q.id: q.context for q in self.questions}
        predictions = {qid: contexts[qid][span[0]:span[1]] for qid, (_, span) in best.items()}
        metrics: dict[str, float | None] = {f"test/{k}": v for k, v in score(predictions, self.questions).items()}
        for part, flag in (("divided", True), ("not_divided", False)):
            subset = [q for q, d in zip(self.questions, self.divided) if d == flag]
            metrics[f"{self.token_list}/{part}/finetuned_em"] = score(predictions, subset)["em"] if subset else None
        baseline = {q.id: first_sentence(q.context) for q in self.questions}
        metrics.update({f"baseline/{k}": v for k, v in score(baseline, self.questions).items()})
        return metrics, predictions
