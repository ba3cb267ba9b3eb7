"""Fine-tuning a pretrained multi-hot LM: per-morpheme tagging (NER, SRL) and sentence classification (NSMC).

Tagging labels one BIO tag per MORPHEME (multi-hot LM §3.2): the tag sits on the morpheme's first input
position (a BPE-divided morpheme's other positions are ignored by the loss), and a morpheme's prediction is
read from that position. SRL appends the target predicate's word segment after the sentence ([SEP] between,
token type 1), as the paper does; only sentence positions carry tags. Sentence classification reads [CLS].
Scores: seqeval entity-level macro / micro F1 and per-type F1 (conlleval rules), accuracy for classification.

Heads are one linear layer on the encoder, as BERT's; the task trains every parameter with AdamW and a linear
warm-up/decay [inferred: the paper gives no fine-tuning settings; `finetune:` in the experiment sets them].
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn

from langrepr.data.korean.batching import SPECIAL_POS, collate_groups
from langrepr.data.korean.encoding import Encoded, MorphemeEncoder
from langrepr.data.korean.ner import OUTSIDE, TaggedSentence, morpheme_tags
from langrepr.data.korean.token_lists import SEP
from langrepr.models.multihot_lm import MultiHotLM

IGNORE = -100


# ---------------------------------------------------------------- scores

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


# ---------------------------------------------------------------- reference predictors

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


# ---------------------------------------------------------------- features

@dataclass
class TaggingInput:
    """One example as input positions; `first[i]` = position of morpheme i (None: cut off by max_len)."""

    encoded: Encoded
    labels: list[int]               # per position (IGNORE where no tag is read)
    first: list[int | None]
    sentence_positions: int         # positions before the appended predicate (all of them without one)


def tagging_input(morphemes: Sequence[tuple], tags: Sequence[str] | None, label_index: dict[str, int],
                  encoder: MorphemeEncoder, max_len: int, predicate: Sequence[tuple] | None = None) -> TaggingInput:
    """Encode a sentence (and the appended predicate segment) within max_len, tags on first positions."""
    sentence = encoder.encode([m[:2] for m in morphemes])
    extra = encoder.encode([m[:2] for m in predicate]) if predicate else None
    budget = max_len - 2 - (len(extra.groups) + 1 if extra else 0)
    if budget < 1:
        raise ValueError(f"max_len {max_len} leaves no room for the sentence after the predicate")
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
    return TaggingInput(Encoded(groups, pos, [], []), labels, first, n)


def collate_tagging(examples: Sequence[TaggingInput], max_group: int) -> dict[str, torch.Tensor]:
    """`collate_groups` plus `labels (B, L)` and token types 1 on the appended predicate."""
    batch = collate_groups([e.encoded for e in examples], max_group)
    labels = torch.full(batch["attention_mask"].shape, IGNORE, dtype=torch.long)
    types = torch.zeros_like(batch["attention_mask"])
    for b, e in enumerate(examples):
        labels[b, 1:len(e.labels) + 1] = torch.tensor(e.labels, dtype=torch.long)
        if len(e.encoded.groups) > e.sentence_positions:       # [CLS] sentence [SEP] | predicate [SEP]
            types[b, e.sentence_positions + 2:len(e.encoded.groups) + 2] = 1
    return {**batch, "labels": labels, "token_type_ids": types}


def collate_sentences(encoded: Sequence[Encoded], labels: Sequence[int], max_group: int, max_len: int
                      ) -> dict[str, torch.Tensor]:
    cut = [Encoded(e.groups[:max_len - 2], e.pos[:max_len - 2], [], []) for e in encoded]
    batch = collate_groups(cut, max_group)
    return {**batch, "token_type_ids": torch.zeros_like(batch["attention_mask"]), "labels": torch.tensor(labels)}


# ---------------------------------------------------------------- heads and the task

class TaggingHead(nn.Module):
    """Per-position label logits (B, L, C) on the encoder."""

    def __init__(self, encoder: MultiHotLM, num_labels: int, dropout: float = 0.1):
        super().__init__()
        self.encoder, self.dropout, self.out = encoder, nn.Dropout(dropout), nn.Linear(encoder.hidden_size, num_labels)

    def forward(self, ids, group_mask, pos, attention_mask, token_type_ids=None) -> torch.Tensor:
        return self.out(self.dropout(self.encoder(ids, group_mask, pos, attention_mask, token_type_ids)))


class SentenceHead(TaggingHead):
    """Sentence label logits (B, C) from the [CLS] position."""

    def forward(self, ids, group_mask, pos, attention_mask, token_type_ids=None) -> torch.Tensor:
        return super().forward(ids, group_mask, pos, attention_mask, token_type_ids)[:, 0]


class FinetuneTask(pl.LightningModule):
    """Cross-entropy on `labels` (B,) for a SentenceHead or (B, L) with IGNORE for a TaggingHead."""

    def __init__(self, net: nn.Module, lr: float = 1e-4, weight_decay: float = 0.01, warmup_steps: int = 0,
                 max_steps: int = 1000):
        super().__init__()
        self.net, self.lr, self.weight_decay = net, lr, weight_decay
        self.warmup_steps, self.max_steps = warmup_steps, max_steps

    def logits(self, batch: dict) -> torch.Tensor:
        return self.net(batch["ids"], batch["group_mask"], batch["pos"], batch["attention_mask"],
                        batch.get("token_type_ids"))

    def training_step(self, batch: dict, _: int) -> torch.Tensor:
        logits = self.logits(batch)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1),
                               ignore_index=IGNORE)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        from transformers import get_linear_schedule_with_warmup

        from langrepr.tasks.optim import parameter_groups

        optimizer = torch.optim.AdamW(parameter_groups(self.net, self.weight_decay), lr=self.lr)
        scheduler = get_linear_schedule_with_warmup(optimizer, self.warmup_steps, self.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


@torch.no_grad()
def predict_tags(task: FinetuneTask, inputs: Sequence[TaggingInput], labels: Sequence[str], max_group: int,
                 batch_size: int) -> list[list[str]]:
    """Per-morpheme tags read at each morpheme's first position (O for morphemes cut off by max_len)."""
    task.eval()
    out = []
    for start in range(0, len(inputs), batch_size):
        chunk = inputs[start:start + batch_size]
        best = task.logits(collate_tagging(chunk, max_group)).argmax(-1)
        for b, e in enumerate(chunk):
            out.append([OUTSIDE if p is None else labels[int(best[b, p + 1])] for p in e.first])
    return out


@torch.no_grad()
def predict_classes(task: FinetuneTask, encoded: Sequence[Encoded], max_group: int, max_len: int,
                    batch_size: int) -> list[int]:
    task.eval()
    out = []
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start:start + batch_size]
        out += task.logits(collate_sentences(chunk, [0] * len(chunk), max_group, max_len)).argmax(-1).tolist()
    return out


def gold_tags(analysed: Sequence[Sequence[tuple]], sentences: Sequence[TaggedSentence]) -> list[list[str]]:
    return [morpheme_tags(m, s.spans) for m, s in zip(analysed, sentences)]


def fit(task: FinetuneTask, dataset: Sequence, collate, batch_size: int, steps: int) -> tuple[float, int]:
    """Train for `steps` optimiser steps; returns (wall seconds, steps done)."""
    import time

    loader = torch.utils.data.DataLoader(list(dataset), batch_size=batch_size, shuffle=True, collate_fn=collate)
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu" if not torch.cuda.is_available() else "auto",
                         devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, gradient_clip_val=1.0)
    started = time.time()
    trainer.fit(task, train_dataloaders=loader)
    return time.time() - started, trainer.global_step
