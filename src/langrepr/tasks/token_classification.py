"""Per-morpheme tagging on a pretrained multi-hot LM (multi-hot LM §3.2): NER and SRL.

One BIO tag per MORPHEME: the datamodule (`langrepr.data.korean.finetuning.TaggingDataModule`) puts each
morpheme's tag on its first input position (the other positions of a BPE-divided morpheme are ignored by the
loss) and tells the task, per test example, where each morpheme's tag is read; a morpheme cut off by max_len is
predicted O (and still scored). SRL inputs carry the target predicate's word segment after the sentence.
Scores: seqeval entity-level macro / micro F1 and per-type F1 (`test/...`), beside the all-O tagger and the
per-morpheme majority tagger fitted on the training part (`reference/all_o/...`, `reference/majority/...`).

The head is one linear layer on the encoder, as BERT's; every parameter trains [inferred: the paper gives no
fine-tuning settings; `finetune.<task>` in the experiment sets them].

`WordTaggingTask` is the same loss and scoring for a net that gives logits at every position itself (the grid's
`GridModel` with a tagging encoder) over word-tagging batches (`langrepr.data.english.tagging`: CoNLL-2003 NER):
each word's tag is read at its first position; seqeval entity-level micro / macro F1 on the dev part (`val/`,
the checkpoint monitor) and the test part (`test/`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from langrepr.downstream_scores import OUTSIDE, MajorityTagger, all_outside, tagging_scores
from langrepr.models.multihot_heads import TaggingHead
from langrepr.tasks.multihot_downstream import IGNORE, FinetuneTask, by_index


class TaggingTask(FinetuneTask):
    """Cross-entropy on per-position labels (B, L) with IGNORE where no tag is read.

    Args (from the datamodule): labels (the BIO label list, ids = positions), types (the shown entity / role
    types, each scored), test_ids / test_gold / test_morphemes (the test part), train_morphemes / train_gold
    (what the majority reference is fitted on).
    """

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None,
                 labels: Sequence[str] = (), types: Sequence[str] = (), test_ids: Sequence[str] = (),
                 test_gold: Sequence[Sequence[str]] = (), test_morphemes: Sequence[Sequence[tuple]] = (),
                 train_morphemes: Sequence[Sequence[tuple]] = (), train_gold: Sequence[Sequence[str]] = (),
                 dropout: float = 0.1, **common: Any):
        super().__init__(net, optimizer, scheduler, **common)
        self.labels, self.types = list(labels), list(types)
        self.net = TaggingHead(net, len(self.labels), dropout)
        self.test_ids, self.test_gold, self.test_morphemes = list(test_ids), list(test_gold), list(test_morphemes)
        self.train_morphemes, self.train_gold = list(train_morphemes), list(train_gold)

    def training_step(self, batch: dict, _: int) -> torch.Tensor:
        logits = self.net(*self.inputs(batch)).float()
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1), ignore_index=IGNORE)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["index"]))
        return loss

    def test_step(self, batch: dict, _: int, dataloader_idx: int = 0) -> None:
        best = self.net(*self.inputs(batch)).argmax(-1).cpu()
        for b, (index, first) in enumerate(zip(batch["index"], batch["first"])):
            tags = [OUTSIDE if p is None else self.labels[int(best[b, p])] for p in first]
            self.test_outputs.append((index, tags))

    def score_test(self, outputs: list) -> tuple[dict[str, float | None], dict]:
        predicted = by_index(outputs, len(self.test_gold), "sentences")
        metrics: dict[str, float | None] = {f"test/{k}": v for k, v in
                                            tagging_scores(self.test_gold, predicted, self.types).items()}
        references = {"all_o": all_outside(self.test_morphemes),
                      "majority": MajorityTagger(self.train_morphemes, self.train_gold)(self.test_morphemes)}
        for name, tags in references.items():
            metrics.update({f"reference/{name}/{k}": v
                            for k, v in tagging_scores(self.test_gold, tags, self.types).items()})
        return metrics, dict(zip(self.test_ids, predicted))


class WordTaggingTask(FinetuneTask):
    """Per-word BIO tagging by a net ``(input_ids, attention_mask) -> logits (B, L, K)``.

    Args (from the datamodule, `WordTaggingDataModule.task_kwargs`): labels (the tag list, ids = positions),
    types (entity types, each scored), val_gold / test_gold (the dev / test parts' gold tags, in batch index order).
    Batches carry `first` (B, W): each word's first position, -1 when the word was cut off (predicted O), and
    `words` (B,): the sentence's word count.
    """

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None,
                 labels: Sequence[str] = (), types: Sequence[str] = (), val_gold: Sequence[Sequence[str]] = (),
                 test_gold: Sequence[Sequence[str]] = (), **common: Any):
        super().__init__(net, optimizer, scheduler, **common)
        self.net, self.labels, self.types = net, list(labels), list(types)
        self.val_gold, self.test_gold = [list(t) for t in val_gold], [list(t) for t in test_gold]
        self.val_outputs: list = []

    @staticmethod
    def inputs(batch: dict) -> tuple:
        return batch["input_ids"], batch["attention_mask"]

    def training_step(self, batch: dict, _: int) -> torch.Tensor:
        logits = self.net(*self.inputs(batch)).float()
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1), ignore_index=IGNORE)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["index"]))
        return loss

    def predict_words(self, batch: dict) -> list[tuple[int, list[str]]]:
        """(sentence index, one tag per word) for a batch: the tag at each word's first position, O when cut off."""
        best = self.net(*self.inputs(batch)).argmax(-1).cpu()
        out = []
        for b, (index, first, n) in enumerate(zip(batch["index"].tolist(), batch["first"].tolist(),
                                                  batch["words"].tolist())):
            out.append((index, [OUTSIDE if p < 0 else self.labels[int(best[b, p])] for p in first[:n]]))
        return out

    def on_validation_epoch_start(self) -> None:
        self.val_outputs = []

    def validation_step(self, batch: dict, _: int) -> None:
        self.val_outputs += self.predict_words(batch)

    def scored(self, outputs: list, gold: list, what: str, limit: float | int) -> tuple[list, list, list[int]]:
        """(gold, predicted, sentence indices) of the predicted sentences.

        Every sentence, unless the trainer reads only some batches of the split (`limit_*_batches`: the sanity
        check, debug=smoke).
        """
        if limit == 1.0 or (self._trainer is None):
            predicted = by_index(outputs, len(gold), what)
            return gold, predicted, list(range(len(gold)))
        found = dict(outputs)
        order = sorted(found)
        return [gold[i] for i in order], [found[i] for i in order], order

    def on_validation_epoch_end(self) -> None:
        outputs, self.val_outputs = self.gathered(self.val_outputs), []
        limit = 0 if self.trainer.sanity_checking else self.trainer.limit_val_batches
        gold, predicted, _ = self.scored(outputs, self.val_gold, "dev sentences", limit)
        scores = tagging_scores(gold, predicted, self.types)
        self.log_dict({"val/micro_f1": scores["micro_f1"], "val/macro_f1": scores["macro_f1"]})

    def test_step(self, batch: dict, _: int, dataloader_idx: int = 0) -> None:
        self.test_outputs += self.predict_words(batch)

    def score_test(self, outputs: list) -> tuple[dict[str, float | None], dict]:
        limit = self.trainer.limit_test_batches if self._trainer is not None else 1.0
        gold, predicted, order = self.scored(outputs, self.test_gold, "sentences", limit)
        metrics = {f"test/{k}": v for k, v in tagging_scores(gold, predicted, self.types).items()}
        metrics["test/sentences"] = float(len(gold))
        return metrics, {str(i): tags for i, tags in zip(order, predicted)}
