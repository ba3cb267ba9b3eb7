"""The cipher warm start of Bit Cipher Fig. 4, as a callback: cipher vectors of the LM's own training text.

Why a callback beside the Bit Cipher pipeline and not code in the causal-LM task: the vectors are the pipeline's
(`langrepr.pipelines.bitcipher.cipher_embedding`), and a task imports no pipeline. The task keeps the spec it
was configured with (`warm_start`, part of the cell's identity) and a `load_warm_start(matrix)` hook;
`langrepr.train` adds this callback to a cell whose task has a spec. Before training (stage "fit"), it reads the
datamodule's training split as one stream of ids, builds (or reads from `cache_dir`) the cipher vectors with
bits = the model width, and hands them to the task, which then keeps the embedding frozen for its
`freeze_embedding_steps`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytorch_lightning as pl

from langrepr.errors import UserError
from langrepr.lm_targets import training_stream
from langrepr.pipelines.bitcipher.cipher_embedding import cached_cipher_embedding


def cipher_matrix(spec: dict, stream: np.ndarray, vocab_size: int, width: int) -> np.ndarray:
    """The (vocab_size, width) cipher vectors of `stream` for a warm-start `spec` (bits must equal the width)."""
    spec = dict(spec)
    cache_dir = spec.pop("cache_dir", None)
    if int(spec.get("bits", width)) != width:
        raise UserError(f"warm_start.bits={spec['bits']} but the model width is {width}: the cipher vectors "
                        "enter the embedding as they are, so set bits = model.net.hidden_size")
    spec["bits"] = width
    return cached_cipher_embedding(cache_dir, stream, vocab_size, **spec)


class CipherWarmStart(pl.Callback):
    """Overwrite the task's input embedding with cipher vectors before fit (once; a resumed run's checkpoint wins)."""

    def __init__(self, spec: dict) -> None:
        self.spec = dict(spec)

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        if stage != "fit" or getattr(pl_module, "_warm_started", False):
            return
        vocab_size, width = pl_module.net.input_embedding.weight.shape
        matrix = cipher_matrix(self.spec, training_stream(trainer.datamodule), vocab_size, width)
        pl_module.load_warm_start(matrix)
