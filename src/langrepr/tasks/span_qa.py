"""KorQuAD v1.0 scoring and the answer analysis of Table 4 (multi-hot LM §3.3).

`exact_match` / `f1` follow KorQuAD v1.0's official evaluation (the SQuAD v1.1 script with Korean symbol
removal and CHARACTER-level F1, because Korean word segments carry particles); no installed library provides
it (torchmetrics' SQuAD F1 is whitespace-token level). Scores are against the raw answer texts, max over the
gold answers, x100.

`korquad_answer_pipeline` is the model-free part of Table 4: which test answers a token list divides (at least one
of the answer's morphemes is split into several positions or a multi-hot group), per list, and a first-sentence
heuristic baseline scored by the same evaluation (the reference row). `korquad_finetune_pipeline` fine-tunes
a pretrained multi-hot LM (reused from `langrepr.tasks.multihot_mlm`) and scores the test part the same way.
"""

from __future__ import annotations

import re
import string
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from langrepr.data.korean.encoding import MorphemeEncoder
from langrepr.data.korean.korquad import Question, load_korquad
from langrepr.data.korean.korquad_features import Window, best_span, collate_windows, question_windows
from langrepr.data.korean.morphemes import cached_analysis
from langrepr.data.korean.prepare import token_lists
from langrepr.data.korean.token_lists import TokenList
from langrepr.models.multihot_lm import SpanQAHead
from langrepr.tasks.multihot_mlm import load_pretrained, plain, pretrained_checkpoint
from langrepr.utils import write_json_atomic

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
            metrics[f"{kind}/{part}/baseline_em"] = score(baseline, subset)["em"] if subset else None
    return metrics


# ---------------------------------------------------------------- fine-tuning a pretrained multi-hot LM

class SpanQATask(pl.LightningModule):
    """Start/end cross-entropy over input positions (BERT's SQuAD head) on a pretrained encoder."""

    def __init__(self, net: SpanQAHead, lr: float = 5e-4, weight_decay: float = 0.01, warmup_steps: int = 0,
                 max_steps: int = 1000):
        super().__init__()
        self.net, self.lr, self.weight_decay = net, lr, weight_decay
        self.warmup_steps, self.max_steps = warmup_steps, max_steps

    def span_logits(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        start, end = self.net(batch["ids"], batch["group_mask"], batch["pos"], batch["attention_mask"],
                              batch["token_type_ids"])
        padding = batch["attention_mask"] == 0
        return start.masked_fill(padding, -1e4), end.masked_fill(padding, -1e4)

    def training_step(self, batch: dict, _: int) -> torch.Tensor:
        start, end = self.span_logits(batch)
        loss = (F.cross_entropy(start, batch["start"]) + F.cross_entropy(end, batch["end"])) / 2
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        from transformers import get_linear_schedule_with_warmup

        from langrepr.tasks.optim import parameter_groups

        optimizer = torch.optim.AdamW(parameter_groups(self.net, self.weight_decay), lr=self.lr)
        scheduler = get_linear_schedule_with_warmup(optimizer, self.warmup_steps, self.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


@torch.no_grad()
def predict(task: SpanQATask, windows: Sequence[Window], questions: Sequence[Question], max_group: int,
            batch_size: int, max_answer: int) -> dict[str, str]:
    """Best span per question over its windows, as raw context text."""
    task.eval()
    best: dict[str, tuple[float, tuple[int, int] | None]] = {}
    for first in range(0, len(windows), batch_size):
        chunk = windows[first:first + batch_size]
        start, end = task.span_logits(collate_windows(chunk, max_group))
        for i, window in enumerate(chunk):
            score_, span = best_span(start[i], end[i], window, max_answer)
            if span is not None and score_ > best.get(window.qid, (float("-inf"), None))[0]:
                best[window.qid] = (score_, span)
    contexts = {q.id: q.context for q in questions}
    return {qid: contexts[qid][span[0]:span[1]] for qid, (_, span) in best.items() if span}


def korquad_windows(questions: Sequence[Question], encoder: MorphemeEncoder, name: str, cache_dir: str,
                    workers: int, max_len: int, stride: int) -> list[Window]:
    contexts = list(dict.fromkeys(q.context for q in questions))
    analysed = dict(zip(contexts, cached_analysis(f"{name}_contexts", contexts, cache_dir, workers, offsets=True)))
    asked = cached_analysis(f"{name}_questions", [q.question for q in questions], cache_dir, workers)
    return [w for q, qm in zip(questions, asked)
            for w in question_windows(q, qm, analysed[q.context], encoder, max_len, stride)]


def korquad_finetune_pipeline(output_dir: str, korquad: Any, corpus: Any, sizes: Any, token_list: str, model: Any,
                              mlm: Any, finetune: Any, cache_dir: str, checkpoint_root: str, seed: int,
                              workers: int = 2) -> dict[str, float]:
    """Pretrain (or reuse) this config's multi-hot LM, fine-tune it on KorQuAD's train part, score the test part.

    Metrics: EM/F1 overall, EM on answers the list divides / does not divide, the first-sentence reference, and
    the pretraining's MLM metrics.
    """
    korquad, finetune = plain(korquad), plain(finetune)
    folder, record = pretrained_checkpoint(corpus, sizes, token_list, model, mlm, cache_dir, checkpoint_root, seed,
                                           workers)
    encoder_net, config = load_pretrained(folder)
    tl = TokenList.load(folder / "token_list.json")
    encoder = MorphemeEncoder(tl, config["model"]["max_group"])
    max_len, max_group = config["model"]["max_positions"], config["model"]["max_group"]
    split = korquad.get("test_fraction", 0.3)
    train_q = load_korquad(korquad.get("data_dir"), "train", split)[:finetune["max_train_questions"]]
    test_q = load_korquad(korquad.get("data_dir"), "test", split)[:finetune["max_test_questions"]]
    train_w = korquad_windows(train_q, encoder, "korquad_train", cache_dir, workers, max_len, finetune["stride"])
    test_w = korquad_windows(test_q, encoder, "korquad_test", cache_dir, workers, max_len, finetune["stride"])
    pl.seed_everything(seed, workers=True)
    task = SpanQATask(SpanQAHead(encoder_net), finetune["lr"], finetune["weight_decay"], finetune["warmup_steps"],
                      finetune["steps"])
    loader = torch.utils.data.DataLoader(train_w, batch_size=finetune["batch_size"], shuffle=True,
                                         collate_fn=lambda ws: collate_windows(ws, max_group))
    started = time.time()
    pl.Trainer(max_steps=finetune["steps"], accelerator="cpu" if not torch.cuda.is_available() else "auto",
               devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
               enable_model_summary=False, gradient_clip_val=1.0).fit(task, train_dataloaders=loader)
    predictions = predict(task, test_w, test_q, max_group, finetune["batch_size"], finetune["max_answer_positions"])
    write_json_atomic(Path(output_dir) / "predictions.json", predictions)
    metrics = {f"test/{k}": v for k, v in score(predictions, test_q).items()}
    answers = cached_analysis("korquad_test_answers", [q.answers[0] for q in test_q], cache_dir, workers)
    divided = [answer_divided(encoder, m) for m in answers]
    for part, flag in (("divided", True), ("not_divided", False)):
        subset = [q for q, d in zip(test_q, divided) if d == flag]
        metrics[f"{token_list}/{part}/finetuned_em"] = score(predictions, subset)["em"] if subset else None
    baseline = {q.id: first_sentence(q) for q in test_q}
    metrics.update({f"baseline/{k}": v for k, v in score(baseline, test_q).items()})
    mlm_metrics = {k: v for k, v in record.items() if isinstance(v, (int, float)) and k.startswith("val/")}
    return {**metrics, **mlm_metrics, "pretrain/nsp": float(record.get("nsp", False)), "pretrain/wall_s": record["wall_s"], "finetune/wall_s": time.time() - started,
            "finetune/train_windows": len(train_w), "finetune/test_questions": len(test_q)}
