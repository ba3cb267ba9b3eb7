"""`dataset=synthetic`: the patent datamodule over SYNTHETIC patents it generates itself on first use.

Lets every EWE model train and test end to end with no export, no network and no GPU; the generator
(`synthetic_patents.generate`) is deterministic, so the same arguments give the same files.
"""

from __future__ import annotations

from typing import Any

from langrepr.data.patents.synthetic import generate
from langrepr.data.patents.uspto import PatentDataModule


class SyntheticPatentDataModule(PatentDataModule):
    """PatentDataModule whose `data_dir` is filled by the synthetic generator when it is missing."""

    def __init__(self, data_dir: str, n_train: int = 4000, n_test: int = 500, n_subclasses: int = 64,
                 generator_seed: int = 0, **kwargs: Any):
        super().__init__(data_dir=data_dir, **kwargs)
        self.generator_args = {"n_train": n_train, "n_test": n_test, "n_subclasses": n_subclasses,
                               "seed": generator_seed}

    def _build(self) -> None:
        if not self._splits:
            generate(self.data_dir, **self.generator_args)   # returns at once when already generated
        super()._build()
