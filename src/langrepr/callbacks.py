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
"""

from __future__ import annotations

import logging
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from pytorch_lightning.callbacks import Checkpoint, RichProgressBar
from pytorch_lightning.trainer.states import TrainerFn

from langrepr.errors import Diverged, UserError, write_failure

log = logging.getLogger("langrepr.train")
META_KEY = "langrepr"


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


# ---------------------------------------------------------------- last checkpoint + resume state

def _sampler_generators(trainer: pl.Trainer) -> list[torch.Generator]:
    """The torch.Generator objects the training data order draws from (sampler or batch sampler)."""
    loader = trainer.train_dataloader
    loaders = loader if isinstance(loader, (list, tuple)) else [loader]
    found: list[torch.Generator] = []
    for dl in loaders:
        sampler, batch_sampler = getattr(dl, "sampler", None), getattr(dl, "batch_sampler", None)
        for obj in (getattr(dl, "generator", None), sampler, getattr(sampler, "sampler", None), batch_sampler,
                    getattr(batch_sampler, "sampler", None)):
            gen = obj if isinstance(obj, torch.Generator) else getattr(obj, "generator", None)
            if isinstance(gen, torch.Generator) and all(gen is not g for g in found):
                found.append(gen)
    return found


def rng_state() -> dict[str, Any]:
    """Global RNG states as tensors and plain lists (loadable with torch.load(weights_only=True))."""
    np_state = np.random.get_state()
    py_state = random.getstate()
    state = {"torch": torch.get_rng_state(),
             "numpy": [str(np_state[0]), torch.from_numpy(np_state[1].astype(np.int64)), *map(int, np_state[2:4]),
                       float(np_state[4])],
             "python": [py_state[0], list(py_state[1]), py_state[2]]}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), int(pos), int(has_gauss), float(cached)))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _saved_at_epoch_end(fit_loop: dict) -> bool:
    """Whether a checkpoint's fit-loop state is the one of `on_train_epoch_end` (processed, not yet completed)."""
    total = fit_loop.get("epoch_progress", {}).get("total", {})
    return (bool(total) and total.get("ready") == total.get("started") == total.get("processed")
            and total.get("completed") == total.get("processed", 0) - 1)


def _zero(progress: Any) -> None:
    """Set every counter of a Lightning progress dict to 0 (in place)."""
    for key, value in progress.items():
        if isinstance(value, dict):
            _zero(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            progress[key] = 0


def start_next_epoch(loops: dict) -> bool:
    """Turn the loop state of an epoch-end checkpoint into the state at the start of the next epoch (in place).

    The epoch counts as completed, the training epoch loop's per-epoch counters ("current") start at zero and
    the last-batch flag is cleared, as Lightning leaves them when an uninterrupted run starts that epoch; the
    running totals (global step, batches, scheduler steps) are kept. Returns whether the state was of an epoch end.
    """
    fit = loops.get("fit_loop") if isinstance(loops, dict) else None
    if not isinstance(fit, dict) or not _saved_at_epoch_end(fit):
        return False
    for part in ("total", "current"):
        fit["epoch_progress"][part]["completed"] = fit["epoch_progress"][part]["processed"]
    for key, state in fit.items():
        if not key.startswith("epoch_loop.") or not isinstance(state, dict):
            continue
        if key == "epoch_loop.val_loop.batch_progress":
            _zero(state.get("total", {}))         # counts the validation batches of one training epoch
            continue
        for name, sub in list(state.items()):
            if name == "current" and isinstance(sub, dict):
                _zero(sub)
            elif name == "is_last_batch":
                state[name] = False
            elif isinstance(sub, dict):           # optimizer -> step / zero_grad -> current
                for inner in sub.values():
                    if isinstance(inner, dict) and isinstance(inner.get("current"), dict):
                        _zero(inner["current"])
    return True


class LastCheckpoint(Checkpoint):
    """`<dirpath>/last.ckpt` every epoch end (after validation) and every N training steps, atomically.

    A `Checkpoint` subclass so that Lightning runs it after ModelCheckpoint: the best-model state it
    stores is then the one of this epoch.

    Every checkpoint the trainer writes (best.ckpt too) carries `checkpoint["langrepr"]`: the cell
    fingerprint, the data digest and the cumulative wall time, so `train.py` can refuse to resume a
    checkpoint into a different config and can add up the time of interrupted processes.
    """

    def __init__(self, dirpath: str, every_n_train_steps: int | None = None, filename: str = "last"):
        self.dirpath, self.every_n_train_steps, self.filename = Path(dirpath), every_n_train_steps, filename
        self.fingerprint: str | None = None     # set by train.py before fit
        self.data_digest: str | None = None
        self.wall_offset = 0.0                  # seconds spent by earlier processes of this cell
        self.started = time.time()
        self._pending: dict[str, Any] | None = None
        self._saved_step = -1
        self._epoch_start: dict[str, Any] | None = None   # RNG states before this epoch's first batch
        self._batches_done = 0                            # batches of the current epoch behind the checkpoint
        self._after_validation: int | None = None         # a step checkpoint waiting for its step's validation
        self._next_epoch = False                          # resuming an epoch-end checkpoint (start_next_epoch)

    @property
    def path(self) -> Path:
        return self.dirpath / f"{self.filename}.ckpt"

    def wall_time(self) -> float:
        return self.wall_offset + (time.time() - self.started)

    # state written into every checkpoint
    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        checkpoint[META_KEY] = {"fingerprint": self.fingerprint, "data_digest": self.data_digest,
                                "wall_time_s": self.wall_time(), "rng": rng_state(),
                                "sampler_generators": [g.get_state() for g in _sampler_generators(trainer)],
                                "epoch_start": self._epoch_start, "batches_done": self._batches_done}

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        """Keep our resume state; an epoch-end checkpoint's loops resume at the next epoch's start.

        Lightning reads `checkpoint["loops"]` after the callbacks have seen the checkpoint, so the loop state
        is rewritten here, before it is restored (in memory: the file is unchanged).
        """
        self._pending = checkpoint.get(META_KEY)
        self._next_epoch = (trainer.state.fn == TrainerFn.FITTING
                            and start_next_epoch(checkpoint.get("loops") or {}))

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for cb in trainer.checkpoint_callbacks:
            # ModelCheckpoint restores best_model_path but not best_k_models, so its first check after a
            # resume would overwrite best.ckpt with a worse model; give it back its best entry
            path = getattr(cb, "best_model_path", "")
            if path and not getattr(cb, "best_k_models", {1: 1}) and cb.best_model_score is not None:
                cb.best_k_models = {path: cb.best_model_score}
                cb.kth_best_model_path, cb.kth_value = path, cb.best_model_score

    def _restore(self, trainer: pl.Trainer, state: dict[str, Any], new_iterator: bool) -> None:
        if state.get("rng"):
            set_rng_state(state["rng"])
        for gen, gen_state in zip(_sampler_generators(trainer), state.get("sampler_generators", [])):
            gen.set_state(gen_state)
        fetcher = getattr(trainer.fit_loop, "_data_fetcher", None)
        if new_iterator and fetcher is not None:
            iter(fetcher)

    def _capture_epoch_start(self, trainer: pl.Trainer, iterator_follows: bool) -> None:
        self._epoch_start = {"rng": rng_state(), "iterator_follows": iterator_follows,
                             "sampler_generators": [g.get_state() for g in _sampler_generators(trainer)]}

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Resume from a mid-epoch checkpoint: replay the epoch's data order up to where it stopped.

        Lightning does not call `on_train_epoch_start` then; this runs after the training iterator exists
        and before the first batch. From an epoch-end checkpoint nothing of the next epoch has run: its
        epoch loop starts afresh instead of "restarting" (which would treat its first batch position as
        the saved one, e.g. skipping a validation due there).
        """
        if self._next_epoch:
            trainer.fit_loop.epoch_loop.restarting = False
            self._next_epoch = False
        pending = self._pending
        if not pending or not pending.get("batches_done") or not pending.get("epoch_start"):
            return
        start = pending["epoch_start"]
        self._restore(trainer, start, new_iterator=start["iterator_follows"])
        self._epoch_start = start
        iterator = trainer.fit_loop._data_fetcher.iterator
        for _ in range(int(pending["batches_done"])):
            next(iterator)                        # the batches the checkpoint has already trained on
        set_rng_state(pending["rng"])             # dropout etc. continue from the checkpoint's moment
        self._batches_done = int(pending["batches_done"])
        self._pending = None

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Record the epoch-start RNG states; first epoch after an epoch-end resume: restore them first.

        An uninterrupted run creates the training iterator at each epoch start after this hook (epoch 0:
        before it), where the DataLoader draws its base seed from the global RNG; samplers draw their
        order lazily, at the first batch.
        """
        self._batches_done = 0
        if self._pending:
            self._restore(trainer, self._pending, new_iterator=False)
            self._capture_epoch_start(trainer, iterator_follows=True)
            fetcher = getattr(trainer.fit_loop, "_data_fetcher", None)
            if fetcher is not None:
                iter(fetcher)
            self._pending = None
            return
        self._capture_epoch_start(trainer, iterator_follows=trainer.current_epoch > 0)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        n = self.every_n_train_steps
        self._batches_done = batch_idx + 1
        last_batch = self._batches_done >= trainer.num_training_batches   # the epoch-end checkpoint follows
        if n and not last_batch and trainer.global_step % n == 0 and trainer.global_step != self._saved_step:
            if _validation_follows(trainer):
                self._after_validation = trainer.global_step   # on_validation_end writes it
            else:
                trainer.save_checkpoint(self.path)
                self._saved_step = trainer.global_step

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Write the step checkpoint of a step that validates, after its validation (and after best.ckpt).

        Written before it, a kill during that validation left a checkpoint from which Lightning resumes past
        the validation: its point of the curve, and a best model it may have found, were lost.
        """
        if trainer.sanity_checking or self._after_validation != trainer.global_step:
            return
        self._after_validation = None
        trainer.save_checkpoint(self.path)
        self._saved_step = trainer.global_step

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._batches_done = 0                    # the next resume starts a fresh epoch
        trainer.save_checkpoint(self.path)
        self._saved_step = trainer.global_step


def _validation_follows(trainer: pl.Trainer) -> bool:
    """Whether the training step that just ended is followed by a validation (Lightning's own rule)."""
    loop = trainer.fit_loop.epoch_loop
    should_check = getattr(loop, "_should_check_val_fx", None)
    fetcher = getattr(trainer.fit_loop, "_data_fetcher", None)
    if should_check is None or fetcher is None:
        return False
    try:
        return bool(should_check(fetcher))
    except Exception:  # noqa: BLE001  (a private API of another Lightning version: write the checkpoint now)
        return False


def read_checkpoint_meta(path: Path) -> dict[str, Any]:
    """`checkpoint["langrepr"]` of a checkpoint file; UserError naming the file when it cannot be read."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001  (truncated zip, pickle error, ...)
        raise UserError(f"checkpoint {path} cannot be read ({type(err).__name__}; truncated or damaged): delete it "
                        "or pass force=true to start this cell over") from None
    meta = ckpt.get(META_KEY) if isinstance(ckpt, dict) else None
    return dict(meta or {}) | {"global_step": int(ckpt.get("global_step", 0)), "epoch": int(ckpt.get("epoch", 0))}
