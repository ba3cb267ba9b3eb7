"""Classification tasks with LEAM's label regulariser (eq. 9) added to the training loss.

Why a subclass and not `tasks/classification.py`: the regulariser needs the net's label
embeddings pushed through its head (`net.label_logits()`), and the label embeddings must start
from the class-name words the datamodule knows (`dm.label_word_ids`). Both are hooks around the
shared tasks; the tasks themselves are unchanged. A net without `label_logits` (SWEM, CNN,
BiLSTM) trains exactly as with the plain task, so one dataset config serves every model.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torchmetrics import Metric, MetricCollection

from langrepr.metrics import MACRO_F1, MacroAUROC, MacroF1, MicroAUROC
from langrepr.models.leam import head_output_bias, label_targets
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
            # dataset.datamodule.word_vectors (GloVe), or GloVe trained on the training split (word_init: trained_glove,
            # `langrepr.pipelines.trained_glove.TrainedGloveStart` sets it before this hook)
            vectors = getattr(datamodule, "word_vectors_file", None)
            if vectors is not None and hasattr(self.net, "glove_path"):
                self.net.glove_path = str(vectors)
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


class PrecisionAtK(Metric):
    """P@k (Mullenbach et al. 2018): the share of each document's k highest-scored labels that are true, averaged."""

    def __init__(self, k: int = 5):
        super().__init__()
        self.k = k
        self.add_state("hits", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("docs", default=torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, scores: torch.Tensor, labels: torch.Tensor) -> None:
        top = scores.topk(min(self.k, scores.shape[-1]), dim=-1).indices
        self.hits += labels.float().gather(-1, top).sum() / top.shape[-1]
        self.docs += scores.shape[0]

    def compute(self) -> torch.Tensor:
        return self.hits / self.docs.clamp(min=1.0)


class LabelRegularisedMultilabelTask(_LabelRegularised, MultilabelClassificationTask):
    """Multi-label (sigmoid BCE, eq. 8) with the label regulariser.

    Metrics: the shared micro F1/P/R and micro AUROC plus LEAM Table 5's macro F1, macro/micro AUC and P@5,
    in CAML's conventions (`langrepr.metrics`, the same code as the label-prior reference row):
    `auc_micro` is one exact ROC over every (document, label) cell (equal to `auroc`); `auc_macro` averages
    the labels that have both positive and negative documents (CAML's macro skips the others);
    `f1_macro` at sigmoid > threshold is `macro_f1: caml` (default: harmonic mean of macro P and macro R,
    the convention behind the numbers Table 5 cites) or `per_label_mean` (mean of per-label F1).

    `output_bias_init="prior"` (quick profiles; default zero) starts the output bias at the training labels'
    log-odds for LEAM and for the baselines whose head is `make_head`'s (CNN, BiLSTM, SWEM: the last
    `head` layer's bias, `models.leam.head_output_bias`), so every row of a table gets the same start.
    """

    multilabel = True

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None,
                 num_labels: int = 1328, threshold: float = 0.3, output_bias_init: str = "zero",
                 label_prior: list[float] | None = None, macro_f1: str = "caml"):
        # the shared task starts nets exposing output_bias(); the make_head baselines are started here
        bias = head_output_bias(net) if output_bias_init == "prior" and not hasattr(net, "output_bias") else None
        super().__init__(net, optimizer, scheduler, num_labels=num_labels, threshold=threshold,
                         output_bias_init="zero" if bias is not None else output_bias_init, label_prior=label_prior)
        if bias is not None:
            if label_prior is None:
                raise ValueError("dataset.task.output_bias_init=prior needs a datamodule giving label_prior; "
                                 "use output_bias_init=zero")
            prior = torch.tensor(label_prior, dtype=torch.float32).clamp(1e-4, 1 - 1e-4)
            with torch.no_grad():
                bias.copy_(torch.log(prior / (1 - prior)))
        if macro_f1 not in MACRO_F1:
            raise ValueError(f"dataset.task.macro_f1={macro_f1!r}: choose {' or '.join(MACRO_F1)}")
        self.macro_f1 = macro_f1

    def make_metrics(self) -> MetricCollection:
        metrics = super().make_metrics()
        metrics.add_metrics({"f1_macro": MacroF1(self.num_labels, self.threshold, self.macro_f1),
                             "auc_macro": MacroAUROC(), "auc_micro": MicroAUROC(), "p@5": PrecisionAtK(5)})
        return metrics
