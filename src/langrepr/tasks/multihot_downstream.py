"""Fine-tuning a pretrained multi-hot LM (multi-hot LM §3): what the downstream tasks share, and NSMC.

A fine-tuning cell is a train cell like any other (`langrepr.train`): the datamodule of its task
(`langrepr.data.korean.finetuning`) finds the pretraining cell it starts from and hands the task that cell's
checkpoint (`encoder_checkpoint`: the encoder's weights are loaded before training), the pretraining's held-out
scores (`pretraining_metrics`, recorded again in this cell: Table 2's full cells read them beside KorQuAD) and
the gold data of the test part. The task trains every parameter with the configured optimizer and schedule
(`optimizer:` / `scheduler:`, set from `finetune.<task>` by the experiment) for `trainer.max_steps`, then scores
the test part once, its own predictions and the reference predictors' alike
(`langrepr.downstream_scores` / `references`): model scores are `test/...`, references
`reference/<name>/...` or `baseline/...`. Under DDP every rank predicts its share of the test part and the
predictions are gathered before scoring. Predictions go to `<cell>/predictions.json`.

`SentenceClassificationTask` (NSMC) lives here; span QA (`tasks.span_qa`) and tagging
(`tasks.token_classification`) build on the same base.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn

from langrepr.downstream_scores import accuracy, majority_class
from langrepr.errors import UserError
from langrepr.models.multihot_heads import SentenceHead
from langrepr.tasks.optim import configure
from langrepr.utils import write_json_atomic

TASKS = ("korquad", "ner", "srl", "nsmc")   # the `downstream` choices (one task per fine-tuning cell)
IGNORE = -100                               # label of a position the loss skips


def load_encoder(net: nn.Module, checkpoint: str | Path) -> None:
    """Load the encoder weights (`net.*`) of a pretraining cell's Lightning checkpoint into `net`."""
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
    encoder = {k[len("net."):]: v for k, v in state.items() if k.startswith("net.")}
    try:
        net.load_state_dict(encoder)
    except RuntimeError as err:
        first = " ".join(str(err).split())[:160]
        raise UserError(f"the pretraining checkpoint {checkpoint} does not fit model.net ({first}): the pretraining "
                        "cell was built with another model config; rerun it with this one") from None


class FinetuneTask(pl.LightningModule):
    """Base of the multi-hot fine-tuning tasks: encoder weights, optimizer wiring, test outputs and logging.

    A subclass sets `self.net` (a head on the encoder), its loss in `training_step`, collects
    `self.test_outputs` in `test_step` and scores them in `score_test(outputs) -> (metrics, predictions)`.
    """

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None,
                 encoder_checkpoint: str | None = None, pretraining_metrics: dict | None = None):
        super().__init__()
        if encoder_checkpoint:
            load_encoder(net, encoder_checkpoint)
        mlm_head = getattr(net, "mlm_head", None)
        if mlm_head is not None:      # the MLM output layer takes no part in fine-tuning: not trained (as BERT drops it;
            mlm_head.requires_grad_(False)   # DDP refuses parameters that get no gradient)
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.pretraining_metrics = {k: float(v) for k, v in (pretraining_metrics or {}).items()}
        self.test_split_names: list[str] = ["test"]
        self.test_outputs: list = []

    @staticmethod
    def inputs(batch: dict) -> tuple:
        return batch["ids"], batch["group_mask"], batch["pos"], batch["attention_mask"], batch.get("token_type_ids")

    def on_test_epoch_start(self) -> None:
        self.test_outputs = []

    def gathered(self, items: list) -> list:
        """Every rank's items (DDP: each rank predicted its share of the test part); one process: the items."""
        if self.trainer.world_size <= 1 or not torch.distributed.is_initialized():
            return items
        parts: list[Any] = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(parts, items)
        return [x for part in parts for x in part]

    def score_test(self, outputs: list) -> tuple[dict[str, float | None], dict]:
        raise NotImplementedError

    def on_test_epoch_end(self) -> None:
        metrics, predictions = self.score_test(self.gathered(self.test_outputs))
        self.test_outputs = []
        # an undefined metric (an empty subset) is not logged: None in the table, never NaN (NaN = diverged)
        self.log_dict({**self.pretraining_metrics, **{k: float(v) for k, v in metrics.items() if v is not None}})
        if self.trainer.is_global_zero and self.trainer.default_root_dir:
            write_json_atomic(Path(self.trainer.default_root_dir) / "predictions.json", predictions)

    def configure_optimizers(self) -> dict:
        return configure(self, self.optimizer_factory, self.scheduler_factory,
                         self.trainer.estimated_stepping_batches)


def by_index(outputs: Sequence[tuple], n: int, what: str) -> list:
    """Predictions `(index, value)` in example order (DDP may score an example twice: the same value)."""
    found = dict(outputs)
    missing = [i for i in range(n) if i not in found]
    if missing:
        raise RuntimeError(f"{len(missing)} test {what} got no prediction (e.g. #{missing[0]})")
    return [found[i] for i in range(n)]


class SentenceClassificationTask(FinetuneTask):
    """NSMC: cross-entropy on the [CLS] logits; accuracy, beside the training majority class.

    Args (from the datamodule): train_labels (the majority reference), test_labels, test_ids.
    """

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None,
                 train_labels: Sequence[int] = (), test_labels: Sequence[int] = (), test_ids: Sequence[str] = (),
                 num_labels: int = 2, dropout: float = 0.1, **common: Any):
        super().__init__(net, optimizer, scheduler, **common)
        self.net = SentenceHead(net, num_labels, dropout)
        self.train_labels, self.test_labels, self.test_ids = list(train_labels), list(test_labels), list(test_ids)

    def training_step(self, batch: dict, _: int) -> torch.Tensor:
        loss = F.cross_entropy(self.net(*self.inputs(batch)).float(), batch["labels"])
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["labels"]))
        return loss

    def test_step(self, batch: dict, _: int, dataloader_idx: int = 0) -> None:
        predicted = self.net(*self.inputs(batch)).argmax(-1).tolist()
        self.test_outputs += list(zip(batch["index"], predicted))

    def score_test(self, outputs: list) -> tuple[dict[str, float | None], dict]:
        predicted = by_index(outputs, len(self.test_labels), "reviews")
        majority = majority_class(self.train_labels)
        metrics = {"test/accuracy": accuracy(self.test_labels, predicted),
                   "reference/majority/accuracy": accuracy(self.test_labels, [majority] * len(self.test_labels))}
        return metrics, dict(zip(self.test_ids, predicted))
