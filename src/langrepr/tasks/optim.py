"""Optimiser + schedule wiring shared by every task (EWE §5.4: AdamW, linear decay, no warm-up)."""

from __future__ import annotations

import inspect
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


def fusable(optimizer_factory: Callable[..., torch.optim.Optimizer], groups: list[dict]) -> bool:
    """Whether to build the optimizer with `fused=True` (one kernel per step instead of several per tensor).

    Only when it takes the argument, the config leaves it unset and every parameter is on CUDA; the update is the
    unfused one within float rounding.
    """
    target = getattr(optimizer_factory, "func", optimizer_factory)
    try:
        takes = "fused" in inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False
    params = [p for g in groups for p in g["params"]]
    return (takes and "fused" not in getattr(optimizer_factory, "keywords", {}) and bool(params)
            and all(p.is_cuda for p in params))


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
    A module with `fused_optimizer` set (the top-level switch, by `langrepr.train`) gets `fused=True` when
    `fusable`, except under fp16 with gradient clipping (Lightning cannot clip what a fused step unscales).
    """
    weight_decay = getattr(optimizer_factory, "keywords", {}).get("weight_decay", 0.0)
    groups = parameter_groups(module, weight_decay)
    trainer = getattr(module, "_trainer", None)
    # Lightning refuses gradient clipping with an optimizer that unscales fp16 gradients itself (fused AdamW)
    scaled_clipping = trainer is not None and bool(trainer.gradient_clip_val) and str(trainer.precision).startswith("16")
    fuse = getattr(module, "fused_optimizer", False) and not scaled_clipping and fusable(optimizer_factory, groups)
    optimizer = optimizer_factory(params=groups, **({"fused": True} if fuse else {}))
    if scheduler_factory is None:
        return {"optimizer": optimizer}
    scheduler = scheduler_factory(optimizer=optimizer, num_training_steps=max(1, int(total_steps)))
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
