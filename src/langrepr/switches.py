"""Precision and the training-step switches (docs/framework.md): checked, given to what they act on, recorded."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from langrepr.build import build_cell, task_kwargs  # noqa: F401  (task_kwargs: imported from here)
from langrepr.callbacks import NonFiniteGuard, ProgressBar
from langrepr.errors import UserError

log = logging.getLogger("langrepr.train")


# ---------------------------------------------------------------- helpers

def cpu_has_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX); elsewhere bf16 autocast is emulated and slow."""
    try:
        flags = Path(cpuinfo).read_text()
    except OSError:
        return False
    return any(flag in flags.split() for flag in ("avx512_bf16", "amx_bf16"))


def resolve_precision(trainer_cfg: DictConfig, cpuinfo: str = "/proc/cpuinfo") -> DictConfig:
    """fp16 as in the papers when CUDA exists; otherwise fp32 on CPU, said out loud.

    bf16 (`trainer.precision=bf16-mixed`) runs on a CPU that has AVX512-BF16 or AMX (measured 1.3-2.5x faster per
    BERT step at widths 96-768, slower at d_model 64: see docs/framework.md); on one without, it falls back to fp32
    with one log line.
    """
    precision = str(trainer_cfg.get("precision", "32"))
    if torch.cuda.is_available():
        return trainer_cfg
    if precision.startswith("16"):
        log.warning("fp16 (trainer.precision=%s) needs a CUDA GPU and none was found: this run uses fp32 on "
                    "CPU (metrics.json: precision 32-true, precision_requested %s). Pass trainer=cpu to choose "
                    "this explicitly.", precision, precision)
        trainer_cfg = OmegaConf.merge(trainer_cfg, {"precision": "32-true", "accelerator": "cpu"})
    elif precision.startswith("bf16") and not cpu_has_bf16(cpuinfo):
        log.warning("bf16 (trainer.precision=%s) needs a CPU with AVX512-BF16 or AMX and this one has neither: "
                    "this run uses fp32.", precision)
        trainer_cfg = OmegaConf.merge(trainer_cfg, {"precision": "32-true"})
    return trainer_cfg


def precision_ran(requested: Any, trainer: Any) -> dict[str, str]:
    """What metrics.json says about precision: the one that ran, and the one asked for when that differs.

    `trainer.precision=16-mixed` on a CPU runs fp32; the folder and config_resolved.yaml keep what was asked
    (they address the command, on any machine), the record says what ran (issue 33 finding 10).
    """
    unified = {"16": "16-mixed", "bf16": "bf16-mixed", "32": "32-true", "64": "64-true"}
    asked = unified.get(str(requested), str(requested))
    ran = str(getattr(trainer, "precision", asked))
    return {"precision": ran} if ran == asked or requested is None else {"precision": ran, "precision_requested": asked}


# ---------------------------------------------------------------- training-step switches (docs/framework.md)

COMPILE_MODES = ("none", "default", "reduce-overhead")
MATMUL_PRECISIONS = ("highest", "high", "medium")


def step_switches(cfg: DictConfig) -> dict[str, Any]:
    """The training-step switches of conf/train.yaml, checked (one line for a bad value).

    They change how fast a step runs, not what it computes (each has a CPU equivalence test), so they are not
    part of a cell's identity (`cell.NOT_IDENTITY`); the record keeps them (`step_switches` in metrics.json).
    """
    switches = {"compile": cfg.get("compile") or "none", "sync_free": cfg.get("sync_free", True),
                "pad_to_fixed": cfg.get("pad_to_fixed", False), "fused_optimizer": cfg.get("fused_optimizer", True),
                "matmul_precision": cfg.get("matmul_precision", "high")}
    if switches["compile"] not in COMPILE_MODES:
        raise UserError(f"compile={switches['compile']}: choose one of {', '.join(COMPILE_MODES)}")
    if switches["matmul_precision"] not in MATMUL_PRECISIONS:
        raise UserError(f"matmul_precision={switches['matmul_precision']}: choose one of "
                        f"{', '.join(MATMUL_PRECISIONS)}")
    for key in ("sync_free", "pad_to_fixed", "fused_optimizer"):
        if not isinstance(switches[key], bool):
            raise UserError(f"{key}={switches[key]}: choose true or false")
    return switches


def apply_step_switches(switches: dict[str, Any], dm: Any, task: Any, callbacks: list) -> None:
    """Hand the switches to the objects they act on (before fit; the datamodule before its first loader)."""
    if switches["pad_to_fixed"]:
        if hasattr(dm, "pad_to_fixed"):
            dm.pad_to_fixed = True
        else:
            log.info("pad_to_fixed: %s has no such switch (its batches keep their shapes)", type(dm).__name__)
    if not switches["sync_free"]:
        for cb in callbacks:
            if isinstance(cb, (NonFiniteGuard, ProgressBar)) and cb.every_n_steps is None:
                cb.every_n_steps = 1                          # as before issue 32: read back every step
        if hasattr(task, "sync_free"):
            task.sync_free = False
    task.fused_optimizer = switches["fused_optimizer"]        # tasks/optim.configure: only when all on CUDA
    if switches["matmul_precision"] != "highest" and torch.cuda.is_available():
        torch.set_float32_matmul_precision(switches["matmul_precision"])   # TF32 for fp32 matmuls on tensor cores
    if switches["compile"] != "none":
        # in place (nn.Module.compile): the state_dict keys, hence checkpoints, stay those of the eager net
        task.net.compile(mode=switches["compile"])
