"""What the multi-hot datamodules (pretraining and fine-tuning) share.

The vocabulary the net is built with, and shuffled training batches of their ``train_items`` through their ``collate``.
"""

from __future__ import annotations

import pytorch_lightning as pl
from torch.utils.data import DataLoader

from langrepr.data.loaders import make_loader


class MultiHotDataModule(pl.LightningDataModule):
    """Subclasses set ``vocab_size``, ``train_items``, ``batch_size``, ``num_workers`` and a ``collate``."""

    @property
    def net_kwargs(self) -> dict:
        return {"vocab_size": self.vocab_size}

    def train_dataloader(self) -> DataLoader:
        return make_loader(self.train_items, self.num_workers, batch_size=self.batch_size, shuffle=True,
                           collate_fn=self.collate)
