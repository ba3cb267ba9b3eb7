"""Classification tasks: multilabel (EWE patents, BCE + threshold) and single-label (CE + accuracy).

One LightningModule per task type, never per model: the net is injected and only has to map
`(input_ids, attention_mask)` to logits.
"""

from __future__ import annotations

from collections.abc import Callable

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MaxMetric, MetricCollection
from torchmetrics.classification import (
    MulticlassAccuracy,
    MultilabelF1Score,
    MultilabelPrecision,
    MultilabelRecall,
)

from langrepr.metrics import MicroAUROC
from langrepr.tasks.optim import configure
from langrepr.tasks.trackers import KeepsTrackers


class _ClassificationTask(KeepsTrackers, pl.LightningModule):
    """Shared loop: loss, per-split metric collections, best-validation tracking, optimiser wiring."""

    monitor: str  # the validation metric whose best value is recorded as `val/<monitor>_best`
    tracked = ("val_best",)   # carried through checkpoints, so val/<monitor>_best is identical after a resume

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None):
        super().__init__()
        self.net = net
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.test_split_names: list[str] = ["test"]
        self.val_best = MaxMetric()

    # subclasses: loss(logits, labels) and make_metrics()
    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def make_metrics(self) -> MetricCollection:
        raise NotImplementedError

    def setup(self, stage: str) -> None:
        # metrics are built here because the number of test splits is known only at the call site
        if not hasattr(self, "val_metrics"):
            self.val_metrics = self.make_metrics()
            self.test_metrics = nn.ModuleList(self.make_metrics() for _ in self.test_split_names)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.net(input_ids=input_ids, attention_mask=attention_mask)

    def _step(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self(batch["input_ids"], batch["attention_mask"])
        return self.loss(logits, batch["labels"]), logits

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss, _ = self._step(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["labels"].shape[0])
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, logits = self._step(batch)
        self.val_metrics.update(logits.float(), batch["labels"])
        self.log("val/loss", loss, prog_bar=True, batch_size=batch["labels"].shape[0])

    def on_validation_epoch_end(self) -> None:
        values = self.val_metrics.compute()
        self.val_metrics.reset()
        self.log_dict({f"val/{k}": v for k, v in values.items()}, prog_bar=True)
        if not self.trainer.sanity_checking:
            self.val_best.update(values[self.monitor])
            self.log(f"val/{self.monitor}_best", self.val_best.compute())

    def test_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        loss, logits = self._step(batch)
        self.test_metrics[dataloader_idx].update(logits.float(), batch["labels"])
        name = self.test_split_names[dataloader_idx]
        self.log(f"test/{name}/loss", loss, batch_size=batch["labels"].shape[0], add_dataloader_idx=False)

    def on_test_epoch_end(self) -> None:
        for name, metrics in zip(self.test_split_names, self.test_metrics):
            values = metrics.compute()
            metrics.reset()
            self.log_dict({f"test/{name}/{k}": v for k, v in values.items()}, add_dataloader_idx=False)

    def configure_optimizers(self) -> dict:
        return configure(self, self.optimizer_factory, self.scheduler_factory,
                         self.trainer.estimated_stepping_batches)


class MultilabelClassificationTask(_ClassificationTask):
    """EWE §5.4–5.5: BCE on logits, predict a label when sigmoid > threshold, micro P/R/F1 over all labels.

    Also micro AUROC (threshold-free), so that learning shows before the rare labels cross the threshold:
    one exact ROC over every (document, label) cell, the same `langrepr.metrics.micro_auroc` the reference
    rows use (sorting, O(cells) memory; no binned thresholds x cells matrix).

    `output_bias_init="prior"` starts the classifier bias at the training labels' log-odds (not in the
    paper, whose HF heads start at zero): a small from-scratch model then spends no steps learning the
    label prior (README, EWE quick profile); the net must expose `output_bias()`.
    """

    monitor = "f1"

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None,
                 num_labels: int = 1328, threshold: float = 0.3, output_bias_init: str = "zero",
                 label_prior: list[float] | None = None):
        super().__init__(net, optimizer, scheduler)
        if output_bias_init not in ("zero", "prior"):
            raise ValueError(f"dataset.task.output_bias_init={output_bias_init!r}: choose zero or prior")
        self.num_labels = num_labels
        self.threshold = threshold
        if output_bias_init == "prior":
            if label_prior is None or not hasattr(net, "output_bias"):
                raise ValueError("dataset.task.output_bias_init=prior needs a datamodule giving label_prior and a "
                                 "net with output_bias(); use output_bias_init=zero")
            prior = torch.tensor(label_prior, dtype=torch.float32).clamp(1e-4, 1 - 1e-4)
            with torch.no_grad():
                net.output_bias().copy_(torch.log(prior / (1 - prior)))

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logits.float(), labels.float())

    def make_metrics(self) -> MetricCollection:
        # micro averaging = sum TP/FP/FN over all labels first (the paper's "Score = Σ_l Score_l")
        kw = {"num_labels": self.num_labels, "threshold": self.threshold, "average": "micro"}
        return MetricCollection({"f1": MultilabelF1Score(**kw), "precision": MultilabelPrecision(**kw),
                                 "recall": MultilabelRecall(**kw), "auroc": MicroAUROC()})

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, logits = self._step(batch)
        # torchmetrics applies the sigmoid itself when given logits outside [0, 1]; pass probabilities to be explicit
        self.val_metrics.update(torch.sigmoid(logits.float()), batch["labels"].long())
        self.log("val/loss", loss, prog_bar=True, batch_size=batch["labels"].shape[0])

    def test_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        loss, logits = self._step(batch)
        self.test_metrics[dataloader_idx].update(torch.sigmoid(logits.float()), batch["labels"].long())
        name = self.test_split_names[dataloader_idx]
        self.log(f"test/{name}/loss", loss, batch_size=batch["labels"].shape[0], add_dataloader_idx=False)


class SingleLabelClassificationTask(_ClassificationTask):
    """Single-label classification (sentiment, topic): CE loss, accuracy."""

    monitor = "acc"

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None,
                 num_labels: int = 2):
        super().__init__(net, optimizer, scheduler)
        self.num_labels = num_labels

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float(), labels.long())

    def make_metrics(self) -> MetricCollection:
        return MetricCollection({"acc": MulticlassAccuracy(num_classes=self.num_labels, average="micro")})
