"""`LastCheckpoint`: `last.ckpt` at every epoch end (and every N steps) with what makes a resume bit-identical.

It carries the cell's fingerprint, the wall time so far and the RNG states (global and the training sampler's);
see `langrepr.callbacks` for the whole story of a safe stop and resume.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint
from pytorch_lightning.trainer.states import TrainerFn

from langrepr.errors import UserError

META_KEY = "langrepr"

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
