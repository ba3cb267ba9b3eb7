"""What the tasks share.

A net trained with two Hydra partials (optimiser, schedule), best-so-far trackers that survive a resume, and for the language-model tasks the token-weighted validation and test NLL.
"""

from __future__ import annotations

from collections.abc import Callable

import pytorch_lightning as pl
from torch import Tensor, nn
from torchmetrics import MeanMetric

from langrepr.tasks.optim import configure
from langrepr.tasks.trackers import KeepsTrackers


def log_test_nll(task: pl.LightningModule) -> None:
    """Log and reset each test split's token-weighted NLL and its perplexity (masked and causal LM tasks)."""
    for name, metric in zip(task.test_split_names, task.test_nll):
        nll = metric.compute()
        metric.reset()
        task.log_dict({f"test/{name}/nll": nll, f"test/{name}/ppl": nll.exp()}, add_dataloader_idx=False)


class NetTask(KeepsTrackers, pl.LightningModule):
    """A task over ``net``; ``optimizer`` / ``scheduler`` are the Hydra partials `tasks/optim.configure` takes."""

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None) -> None:
        super().__init__()
        self.net = net
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.test_split_names: list[str] = ["test"]

    def configure_optimizers(self) -> dict:
        return configure(self, self.optimizer_factory, self.scheduler_factory,
                         self.trainer.estimated_stepping_batches)


class NLLTask(NetTask):
    """A language-model task: ``val_nll`` (set by the subclass) and one ``test_nll`` per test split, token-weighted."""

    val_nll: MeanMetric

    def setup(self, stage: str) -> None:
        if not hasattr(self, "test_nll"):
            self.test_nll = nn.ModuleList(MeanMetric() for _ in self.test_split_names)

    def log_val_nll(self) -> Tensor:
        """Log and reset `val/nll` and `val/ppl`; the NLL."""
        nll = self.val_nll.compute()
        self.val_nll.reset()
        self.log_dict({"val/nll": nll, "val/ppl": nll.exp()}, prog_bar=True)
        return nll

    def on_test_epoch_end(self) -> None:
        log_test_nll(self)
