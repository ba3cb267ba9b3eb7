"""DataLoader construction shared by the datamodules: worker settings, seeded batch sampling, split hooks."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler


def make_loader(dataset: Any, num_workers: int, **kwargs: Any) -> DataLoader:
    """A DataLoader whose workers (if any) persist across epochs."""
    return DataLoader(dataset, num_workers=num_workers, persistent_workers=num_workers > 0, **kwargs)


def batch_loader(dataset: Dataset, batch_size: int, shuffle: bool, seed: int, num_workers: int) -> DataLoader:
    """Whole batches of indices handed to a dataset that gathers a batch at once (``dataset[list_of_indices]``).

    Shuffled with a generator seeded by ``seed``, so the order does not depend on the global RNG.
    """
    sampler = (RandomSampler(dataset, generator=torch.Generator().manual_seed(seed)) if shuffle
               else SequentialSampler(dataset))
    return make_loader(dataset, num_workers, sampler=BatchSampler(sampler, batch_size, drop_last=False),
                       batch_size=None)


class SplitLoaders:
    """train/val/test dataloader hooks over one ``_loader(split, shuffle)``; put it before LightningDataModule."""

    val_split = "validation"

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        raise NotImplementedError

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_split, shuffle=False)

    def test_dataloader(self) -> list[DataLoader]:
        return [self._loader("test", shuffle=False)]
