"""Lightning callbacks and the checkpoint writer that make a run safe to stop, resume and trust.

- `NonFiniteGuard`: a NaN/inf training loss or validation metric stops the run with one line (step, value,
  learning rate) instead of training on and recording a meaningless "finished" cell; a training loss is checked
  on the device and read back at logging steps, step checkpoints and epoch ends (no per-step host sync).
- `LastCheckpoint`: writes `last.ckpt` at the end of every epoch (and every N steps when asked),
  whatever the monitored metric does, stamped with the cell's fingerprint, the wall time spent so far
  and the RNG states (global torch/numpy/python and the training sampler's own generator) that make
  a resume from an epoch boundary bit-identical to an uninterrupted run.
- `AtomicCheckpointIO`: every checkpoint is written to a temporary file and renamed into place, so a
  kill or a full disk never leaves a truncated `best.ckpt`/`last.ckpt`.

A mid-epoch checkpoint (every N steps) also records the RNG states of its epoch's start and how many
batches the epoch had consumed; the resume rebuilds that epoch's iterator from them and skips those
batches, so it continues with the same data order and dropout masks as an uninterrupted run. A step
checkpoint whose step is followed by a validation is written after that validation, so a kill during it
cannot make the resume skip it.

An epoch-end checkpoint is resumed as the start of the next epoch (`start_next_epoch`). Lightning restores
one as "restarting at the epoch's end" and, in a run bounded by `trainer.max_steps` whose epoch end is not a
validation point, then trains one extra batch from a fresh iterator before that next epoch (issue 33: a grid
cell killed after its epoch-1 checkpoint gave test acc 0.854 instead of 0.856).

`LastCheckpoint` and the resume state it writes and reads live in `langrepr.last_checkpoint` (re-exported here).
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from pytorch_lightning.callbacks import RichProgressBar

from langrepr.errors import Diverged, UserError, write_failure
from langrepr.last_checkpoint import (  # noqa: F401
    META_KEY,
    LastCheckpoint,
    _sampler_generators,
    _saved_at_epoch_end,
    _validation_follows,
    _zero,
    read_checkpoint_meta,
    rng_state,
    set_rng_state,
    start_next_epoch,
)

# ---------------------------------------------------------------- atomic checkpoint files

def _free_space(folder: Path) -> str:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if free < 1024 or unit == "GiB":
            return f"{free:.0f} {unit}" if unit == "B" else f"{free:.1f} {unit}"
        free /= 1024
    return "unknown"   # pragma: no cover


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save into `.<name>.tmp` in the same folder, then os.replace: readers see old or new, never torn.

    A write that fails (a full disk: torch raises RuntimeError, not OSError; a quota; a read-only folder)
    removes the temporary file and becomes one line (UserError) that says how to resume: the previous
    checkpoint of that name is untouched.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            with open(tmp, "wb") as fh:
                torch.save(checkpoint, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException as err:
            tmp.unlink(missing_ok=True)
            reason = write_failure(err) if isinstance(err, (OSError, RuntimeError)) else None
            if reason is None:
                raise
            raise UserError(f"cannot write checkpoint {path}: {reason} ({_free_space(path.parent)} free there); free "
                            f"disk space or point paths.output_root at a writable folder, then {_resume_advice(path)}"
                            ) from None


def _resume_advice(path: Path) -> str:
    last = path.parent / "last.ckpt"
    if last.exists():
        return f"rerun the same command with ckpt_path=auto (it resumes from {last}, which is intact)"
    return "rerun the same command (no checkpoint of this cell was complete yet, so it starts over)"


# ---------------------------------------------------------------- divergence

def _configured_lr(trainer: pl.Trainer) -> float | None:
    """The learning rate the config asked for (a scheduler's `initial_lr`), not the decayed current one."""
    try:
        group = trainer.optimizers[0].param_groups[0]
        return float(group.get("initial_lr", group["lr"]))
    except (IndexError, KeyError, AttributeError):
        return None


class NonFiniteGuard(pl.Callback):
    """Stop with `Diverged` at a non-finite training loss or validation metric.

    Reading a CUDA tensor on the host waits for the GPU to drain its queue, so checking every step's loss would
    stall every step. The guard instead ORs "this loss is not finite" into a flag on the loss's device and reads
    it back only every `every_n_steps` optimiser steps (default: the trainer's `log_every_n_steps`, when
    Lightning reads the logged values back anyway) and at each epoch end, before the checkpoint of that epoch.
    So the step in the message is the check at which the divergence was seen (it began at most `every_n_steps`
    steps earlier); the value is the first non-finite loss. `every_n_steps=1` checks every step.
    """

    def __init__(self, every_n_steps: int | None = None) -> None:
        if every_n_steps is not None and every_n_steps < 1:
            raise ValueError(f"callbacks.non_finite.every_n_steps={every_n_steps}: use null or a positive number")
        self.every_n_steps = every_n_steps
        self._bad: torch.Tensor | None = None      # device flag: a non-finite loss since the last check
        self._value: torch.Tensor | None = None    # the first such loss (mean over its elements)
        self._checked_step = -1

    lr_key = "optimizer.lr"   # the key this cell's learning rate is set with (train.py: `mlm.lr` for multi-hot)

    def _stop(self, trainer: pl.Trainer, what: str, value: float) -> None:
        """The advice names the key the cell sets and never suggests a setting it already has (issue 33)."""
        lr = _configured_lr(trainer)
        hint = f"lower {self.lr_key} (it is {lr:g})" if lr is not None else f"lower {self.lr_key}"
        clip = getattr(trainer, "gradient_clip_val", None)
        hint += (f" (gradients are already clipped at trainer.gradient_clip_val={clip:g})" if clip
                 else " or add trainer.gradient_clip_val=1.0")
        raise Diverged(f"training diverged: {what} = {value} at step {trainer.global_step} (epoch "
                       f"{trainer.current_epoch}); {hint}, then rerun with force=true")

    def _check(self, trainer: pl.Trainer) -> None:
        """Read the device flag back (the only host-device synchronisation the guard makes)."""
        if self._bad is not None and bool(self._bad):
            self._stop(trainer, "train loss", float(self._value))
        self._bad = self._value = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor):
            loss = loss.detach()
            bad = ~torch.isfinite(loss).all()
            value = loss.float().mean()
            if self._bad is None:
                self._bad, self._value = bad, value
            else:   # keep the first non-finite value: later steps of a diverged run are NaN anyway
                self._value = torch.where(self._bad, self._value, value)
                self._bad = self._bad | bad
        if self._due(trainer):
            self._check(trainer)

    def _due(self, trainer: pl.Trainer) -> bool:
        """A check step: every `every_n_steps`, and before any step checkpoint (no NaN weights in last.ckpt)."""
        step = trainer.global_step
        if step == self._checked_step:          # gradient accumulation: several batches end on one step
            return False
        periods = [self.every_n_steps or max(1, int(trainer.log_every_n_steps))]
        periods += [getattr(cb, "every_n_train_steps", None) or getattr(cb, "_every_n_train_steps", None)
                    for cb in trainer.checkpoint_callbacks]
        if any(p and step % p == 0 for p in periods):
            self._checked_step = step
            return True
        return False

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._check(trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._check(trainer)              # mid-epoch validation (val_check_interval): before its checkpoint
        for name, value in trainer.callback_metrics.items():
            v = float(value) if isinstance(value, torch.Tensor) and value.numel() == 1 else value
            if name.startswith("val/") and isinstance(v, float) and not math.isfinite(v):
                self._stop(trainer, name, v)


class ProgressBar(RichProgressBar):
    """Lightning's Rich bar, whose shown metrics are refreshed every `every_n_steps` steps, not every batch.

    Rich reads the bar's metrics (`train/loss`, logged with prog_bar=True) on the host after every batch: on a
    GPU that is one synchronisation per step. Here they are read every `every_n_steps` optimiser steps (default:
    the trainer's `log_every_n_steps`, when Lightning reads them anyway); the step counter still moves every batch.
    """

    def __init__(self, every_n_steps: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.every_n_steps = every_n_steps

    def _update_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        every = self.every_n_steps or max(1, int(trainer.log_every_n_steps))
        if not trainer.training or trainer.global_step % every == 0:
            super()._update_metrics(trainer, pl_module)
