"""Classification tasks with LEAM's label regulariser (eq. 9) added to the training loss.

Why a subclass and not `tasks/classification.py`: the regulariser needs the net's label
embeddings pushed through its head (`net.label_logits()`), and the label embeddings must start
from the class-name words the datamodule knows (`dm.label_word_ids`). Both are hooks around the
shared tasks; the tasks themselves are unchanged. A net without `label_logits` (SWEM, CNN,
BiLSTM) trains exactly as with the plain task, so one dataset config serves every model.
"""

from __future__ import annotations

import torch

from langrepr.models.leam import label_targets
from langrepr.tasks.classification import MultilabelClassificationTask, SingleLabelClassificationTask


class _LabelRegularised:
    """Mixin: training loss = task loss + net.label_penalty * task loss of f_2(C) against the identity."""

    multilabel = False

    def setup(self, stage: str) -> None:
        super().setup(stage)
        prepare = getattr(self.net, "prepare_embeddings", None)
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if stage == "fit" and callable(prepare) and not getattr(self, "_embeddings_prepared", False):
            # GloVe rows and class-name label init; a resumed run then loads its trained weights over these
            tokenizer = getattr(datamodule, "tokenizer", None)
            prepare(getattr(tokenizer, "vocab", None), getattr(datamodule, "label_word_ids", None))
            self._embeddings_prepared = True

    def label_regulariser(self) -> torch.Tensor | None:
        penalty = float(getattr(self.net, "label_penalty", 0.0))
        if penalty == 0.0 or not hasattr(self.net, "label_logits"):
            return None
        logits = self.net.label_logits()
        return penalty * self.loss(logits, label_targets(logits.shape[0], self.multilabel, logits.device))

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss, _ = self._step(batch)
        size = batch["labels"].shape[0]
        regulariser = self.label_regulariser()
        if regulariser is not None:
            self.log("train/label_reg", regulariser, batch_size=size)
            loss = loss + regulariser
        self.log("train/loss", loss, prog_bar=True, batch_size=size)
        return loss


class LabelRegularisedSingleLabelTask(_LabelRegularised, SingleLabelClassificationTask):
    """Single-label (softmax CE, eq. 7) with the label regulariser; accuracy as the metric."""


class LabelRegularisedMultilabelTask(_LabelRegularised, MultilabelClassificationTask):
    """Multi-label (sigmoid BCE, eq. 8) with the label regulariser; micro F1/P/R as the metric."""

    multilabel = True
