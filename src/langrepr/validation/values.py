"""Values: counts, rates and limits of the composed config, the trainer's settings and the hardware they need."""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig, OmegaConf

from langrepr.errors import UserError
from langrepr.validation.keys import PRECISIONS

# ---------------------------------------------------------------- values

def _get(cfg: DictConfig, key: str) -> Any:
    try:
        return OmegaConf.select(cfg, key, throw_on_missing=False)
    except Exception:  # noqa: BLE001  (an interpolation that cannot resolve here, e.g. ${hydra:...})
        return None


def _int(cfg: DictConfig, key: str, minimum: int, allow: tuple = ()) -> None:
    value = _get(cfg, key)
    if value is None or value in allow:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{key}={value!r} is not an integer: pass a whole number >= {minimum}")
    if value < minimum:
        extra = f" (or {', '.join(map(str, allow))})" if allow else ""
        raise UserError(f"{key}={value} is out of range: pass a whole number >= {minimum}{extra}")


def _positive_float(cfg: DictConfig, key: str) -> None:
    value = _get(cfg, key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{key}={value!r} is not a number: pass a positive float such as 2e-5")
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{key}={value} is out of range: pass a positive, finite float such as 2e-5")


def _number(cfg: DictConfig, key: str, low: float, high: float = math.inf, example: str = "1.0") -> None:
    """A finite number in [low, high] (None allowed: the callee's default)."""
    value = _get(cfg, key)
    if value is None:
        return
    bound = f"between {low:g} and {high:g}" if math.isfinite(high) else f">= {low:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{key}={value!r} is not a number: pass a number {bound} such as {example}")
    if not math.isfinite(value) or not low <= value <= high:
        raise UserError(f"{key}={value} is out of range: pass a finite number {bound} such as {example}")


def _batches_limit(cfg: DictConfig, key: str) -> None:
    """Lightning's limit_*_batches / overfit_batches: a fraction in [0, 1] or a whole number of batches."""
    value = _get(cfg, key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
            isinstance(value, float) and not 0 <= value <= 1):
        raise UserError(f"{key}={value!r} is not a batch limit: pass a fraction between 0.0 and 1.0 or a whole "
                        "number of batches")


def check_trainer_values(cfg: DictConfig) -> None:
    """Types and ranges of the Trainer arguments people set (before Lightning fails on them after the data load)."""
    _int(cfg, "trainer.accumulate_grad_batches", 1)
    _number(cfg, "trainer.gradient_clip_val", 0.0)
    algorithm = _get(cfg, "trainer.gradient_clip_algorithm")
    if algorithm not in (None, "norm", "value"):
        raise UserError(f"trainer.gradient_clip_algorithm={algorithm!r}: choose norm or value")
    for split in ("train", "val", "test", "predict"):
        _batches_limit(cfg, f"trainer.limit_{split}_batches")
    _batches_limit(cfg, "trainer.overfit_batches")
    _int(cfg, "trainer.log_every_n_steps", 1)
    _int(cfg, "trainer.check_val_every_n_epoch", 1)
    _int(cfg, "trainer.num_sanity_val_steps", 0, allow=(-1,))
    _int(cfg, "trainer.min_epochs", 0)
    _int(cfg, "trainer.min_steps", 0, allow=(-1,))


def check_hardware(cfg: DictConfig) -> None:
    """precision/accelerator/devices against what this machine has."""
    import torch

    precision = str(_get(cfg, "trainer.precision") or "32-true")
    if precision not in PRECISIONS:
        raise UserError(f"trainer.precision={precision!r} is not a precision: choose one of "
                        f"{', '.join(PRECISIONS[:4])}")
    accelerator = str(_get(cfg, "trainer.accelerator") or "auto")
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise UserError(f"trainer.accelerator={accelerator} but this machine has no CUDA GPU: pass trainer=cpu "
                        "(or trainer.accelerator=auto)")
    if accelerator == "mps" and not torch.backends.mps.is_available():
        raise UserError("trainer.accelerator=mps but MPS is not available here: pass trainer=cpu")
    if accelerator not in ("auto", "cpu", "gpu", "cuda", "mps", "tpu"):
        raise UserError(f"trainer.accelerator={accelerator!r} is not an accelerator: choose auto, cpu or gpu")
    devices = _get(cfg, "trainer.devices")
    if accelerator in ("gpu", "cuda") and isinstance(devices, int) and devices > torch.cuda.device_count():
        raise UserError(f"trainer.devices={devices} but only {torch.cuda.device_count()} GPU(s) are visible: "
                        "lower trainer.devices")
    if precision.startswith("bf16") and accelerator in ("gpu", "cuda") and not torch.cuda.is_bf16_supported():
        raise UserError(f"trainer.precision={precision} needs a GPU with bf16 support: use 16-mixed or 32-true")


def check_canine_length(cfg: DictConfig) -> None:
    """CANINE downsamples by 4: the sequence length (EWE: tokenizer.u, ORIG: max_length) must divide."""
    if _get(cfg, "model.net.arch") != "canine":
        return
    rate = 4   # CanineConfig.downsampling_rate default, which hf_backbone keeps
    for key in ("model.tokenizer.u", "model.tokenizer.max_length", "model.net.embedding.u"):
        value = _get(cfg, key)
        if isinstance(value, int) and value % rate:
            raise UserError(f"{key}={value} is not divisible by CANINE's downsampling rate {rate}: pass a multiple "
                            f"of {rate} (e.g. {value - value % rate or rate})")
