"""Optimiser + schedule wiring shared by every task (EWE §5.4: AdamW, linear decay, no warm-up)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

NO_DECAY_SUFFIXES = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")


def parameter_groups(module: nn.Module, weight_decay: float) -> list[dict]:
    """Split parameters so biases and norm gains get no weight decay (the BERT convention the papers follow)."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if name.endswith(NO_DECAY_SUFFIXES) or param.ndim == 1 else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def configure(
    module: nn.Module,
    optimizer_factory: Callable[..., torch.optim.Optimizer],
    scheduler_factory: Callable[..., object] | None,
    total_steps: int,
) -> dict:
    """Build Lightning's `configure_optimizers` answer from two Hydra partials.

    `optimizer_factory` is e.g. `partial(torch.optim.AdamW, lr=2e-5, weight_decay=0.01)`; its weight decay
    is applied through `parameter_groups`. `scheduler_factory` takes the optimizer and the total number of
    optimiser steps (known only once the trainer has seen the data) and is stepped every batch.
    """
    weight_decay = getattr(optimizer_factory, "keywords", {}).get("weight_decay", 0.0)
    optimizer = optimizer_factory(params=parameter_groups(module, weight_decay))
    if scheduler_factory is None:
        return {"optimizer": optimizer}
    scheduler = scheduler_factory(optimizer=optimizer, num_training_steps=max(1, int(total_steps)))
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
