"""One cell on several GPUs (`trainer=ddp`) with the paper's batch size kept as the effective batch.

The papers trained with one batch size on one GPU. On W = devices × num_nodes processes, each optimiser step sees
per_device × W × accumulation examples, so keeping the paper's batch B means per_device = B / (W × accumulation).
`trainer.effective_batch` (set by conf/trainer/ddp.yaml) holds B and an optional per-device cap; `train.py` calls
`fit_batch_to_devices` once, which writes per_device into `dataset.datamodule.batch_size`, accumulation into
`trainer.accumulate_grad_batches`, logs the derivation and returns it for `metrics.json`.

Launch, two ways:
- on one machine, `ddp_spawn` starts the W worker processes from inside the running cell, so it works inside a
  Hydra multirun (every `make <paper>-table<N>` target) and only the cell's own process runs train.py's bookkeeping;
- under SLURM (`hydra/launcher=submitit_slurm` with `tasks_per_node` = `trainer.devices`, or `srun`), SLURM has
  already started one process per GPU and each runs train.py. `launched_ranks` reads the ranks as Lightning's
  SLURMEnvironment (or TorchElasticEnvironment, for torchrun) sees them; the world is then SLURM's task count, the
  strategy becomes plain `ddp` (spawning would start W more processes per task), and only global rank 0 writes
  the cell's files (`write_record`, `is_writer`). Lightning's own re-launching `ddp` without a cluster launcher is
  not supported: it would start Hydra again in every rank.
"""

from __future__ import annotations

import copy
import csv
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig, open_dict
from pytorch_lightning.loggers import CSVLogger

from langrepr.errors import UserError
from langrepr.utils import write_json_atomic

log = logging.getLogger("langrepr.scale_out")


def world_size(devices: Any, num_nodes: int = 1) -> int:
    """Processes of a run: devices per node (int, list of ids, or auto/-1 = all GPUs visible) × nodes."""
    if isinstance(devices, (list, tuple)) or (hasattr(devices, "__len__") and not isinstance(devices, str)):
        per_node = len(devices)
    elif str(devices) in ("auto", "-1"):
        import torch

        per_node = max(torch.cuda.device_count(), 1)
    elif isinstance(devices, str) and "," in devices:
        per_node = len([d for d in devices.split(",") if d.strip()])
    else:
        per_node = int(devices)
    return per_node * int(num_nodes or 1)


def per_device_batch(effective: int, world: int, max_per_device: int | None = None) -> tuple[int, int]:
    """(per-device batch, gradient accumulation) with per_device × world × accumulation == effective.

    The fewest accumulation steps whose per-device batch is whole and fits the cap: accumulation only costs time.
    """
    if effective < world:
        raise UserError(f"the effective batch {effective} is smaller than the {world} processes: lower "
                        "trainer.devices / trainer.num_nodes or raise trainer.effective_batch.size")
    for accumulation in range(1, effective // world + 1):
        if effective % (world * accumulation):
            continue
        per_device = effective // (world * accumulation)
        if max_per_device is None or per_device <= max_per_device:
            return per_device, accumulation
    raise UserError(f"no whole per-device batch gives the effective batch {effective} on {world} processes"
                    f"{f' with at most {max_per_device} per device' if max_per_device else ''}: choose "
                    "trainer.devices (× num_nodes) dividing it, or change trainer.effective_batch.max_per_device")


def fit_batch_to_devices(cfg: DictConfig) -> tuple[DictConfig, dict | None]:
    """Apply `trainer.effective_batch` (if any) to the datamodule and trainer; return the new cfg and the record."""
    spec = cfg.trainer.get("effective_batch")
    if spec is None:
        return cfg, None
    effective = int(spec.size)  # read before batch_size changes: it usually interpolates the dataset's batch
    world = world_size(cfg.trainer.get("devices", 1), cfg.trainer.get("num_nodes", 1))
    launched = launched_ranks()
    if launched is not None and launched["world_size"] != world:
        raise UserError(
            f"{launched['launcher']} started {launched['world_size']} process(es) but trainer.devices × "
            f"trainer.num_nodes = {world}: start one task per GPU (hydra.launcher.tasks_per_node = trainer.devices, "
            "hydra.launcher.nodes = trainer.num_nodes, or srun --ntasks-per-node) or change trainer.devices")
    per_device, accumulation = per_device_batch(effective, world, spec.get("max_per_device"))
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        del cfg.trainer["effective_batch"]
        cfg.dataset.datamodule.batch_size = per_device
        cfg.trainer.accumulate_grad_batches = accumulation
        if launched is not None and world > 1 and "spawn" in str(cfg.trainer.get("strategy")):
            cfg.trainer.strategy = "ddp"   # the processes exist already: spawning would start W more per task
    record = {"effective_batch": effective, "world_size": world, "per_device_batch": per_device,
              "accumulate_grad_batches": accumulation, "strategy": str(cfg.trainer.get("strategy"))}
    if launched is not None:
        record["launcher"] = launched["launcher"]
    log.info("Effective batch %d = %d process(es) × %d per device × %d accumulation step(s) (strategy %s)",
             effective, world, per_device, accumulation, record["strategy"])
    return cfg, record


def launched_ranks() -> dict | None:
    """This process's place when a cluster launcher started one process per device, else None.

    Read the way Lightning will read them when the Trainer starts, so the derived batch and the one writer agree
    with Lightning: torchrun's variables first (Lightning gives TorchElastic priority, also inside SLURM), then
    SLURM's (SLURM_NTASKS / SLURM_PROCID / SLURM_LOCALID / SLURM_NODEID, unless the job is named `bash` or
    `interactive`, which Lightning treats as "not launched by SLURM").
    """
    from lightning_fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

    if TorchElasticEnvironment.detect():
        env, launcher = TorchElasticEnvironment(), "torchrun"
    elif "SLURM_NTASKS" in os.environ and SLURMEnvironment.job_name() not in ("bash", "interactive"):
        env, launcher = SLURMEnvironment(), "SLURM"
    else:
        return None
    return {"launcher": launcher, "world_size": env.world_size(), "global_rank": env.global_rank(),
            "local_rank": env.local_rank(), "node_rank": env.node_rank()}


def is_writer() -> bool:
    """Whether this process writes the cell's files: always, except a launched DDP process of global rank > 0."""
    launched = launched_ranks()
    return launched is None or launched["global_rank"] == 0


def write_record(path: Path | str, record: dict) -> None:
    """`write_json_atomic` for `metrics.json`, done by the cell's one writer (global rank 0) only."""
    if is_writer():
        write_json_atomic(path, record)


class ReportProgress(pl.Callback):
    """In a DDP worker: put the step/epoch counters where Lightning carries results back to the cell's process."""

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        trainer.callback_metrics["trainer/global_step"] = torch.tensor(float(trainer.global_step))
        trainer.callback_metrics["trainer/current_epoch"] = torch.tensor(float(trainer.current_epoch))


class SpawnedDDPTrainer(pl.Trainer):
    """A Trainer whose spawned (or forked) workers' step counts and CSV columns reach the cell's process.

    Module-level so that spawned workers can unpickle it.
    """

    @property
    def global_step(self) -> int:
        reported = self.callback_metrics.get("trainer/global_step")
        return int(reported) if reported is not None else super().global_step

    @property
    def current_epoch(self) -> int:
        reported = self.callback_metrics.get("trainer/current_epoch")
        return int(reported) if reported is not None else super().current_epoch

    def test(self, *args: Any, **kwargs: Any) -> Any:
        self.restore_csv_columns()
        return super().test(*args, **kwargs)

    def restore_csv_columns(self) -> None:
        """The parent's logger never saw the fit's columns: give them back (rank 0 only, which owns the file).

        Under SLURM every rank calls `test`; the loggers of ranks > 0 hold a dummy experiment without a file.
        """
        if not self.is_global_zero:
            return
        for logger in self.loggers:
            if isinstance(logger, CSVLogger) and Path(logger.experiment.metrics_file_path).exists():
                writer = logger.experiment
                with open(writer.metrics_file_path, newline="") as fh:
                    header = next(csv.reader(fh), [])
                writer.metrics_keys = sorted(set(writer.metrics_keys) | set(header))


def ddp_trainer(effective_batch: Any = None, **trainer_kwargs: Any) -> SpawnedDDPTrainer:
    """`_target_` of conf/trainer/ddp.yaml: a `SpawnedDDPTrainer` for spawned (or forked) DDP workers.

    The trainer node may carry `effective_batch` (applied by `fit_batch_to_devices` before the Trainer is built,
    ignored here); every other key is a Trainer argument, checked by Trainer itself. Two things the workers know
    are carried back to the cell's process, which records them: the step/epoch counters (through the callback
    metrics, which Lightning returns from rank 0) and the CSV log's columns (the parent's copy of the logger never
    saw the fit's columns; without them the test stage's workers cannot rewrite the file's header).
    """
    callbacks = [*(trainer_kwargs.pop("callbacks", None) or []), ReportProgress()]
    return SpawnedDDPTrainer(callbacks=callbacks, **trainer_kwargs)


# ---------------------------------------------------------------- launchers that run cells in other processes


class FailedCell(str):
    """What a multirun cell returns when it failed with a one-line reason (a `str`, so it pickles anywhere).

    Under a launcher that runs the cell in another process (joblib's loky workers, submitit jobs) the cell's
    `error: ...` line and the sweep's exit code would stay in that process; the launcher reads this back instead.
    """


def report_failed_cells(returns: Any) -> None:
    """After a launch: one `error: <cell>: <reason>` line per failed cell on this console, then exit 2.

    Called once every job of the launch has finished, so a failed cell never costs the others their run.
    """
    failed = []
    for job in returns or []:
        value = getattr(job, "_return_value", None)
        if isinstance(value, FailedCell):
            folder = Path(str(job.hydra_cfg.hydra.runtime.output_dir)).name if job.hydra_cfg else "a cell"
            failed.append(f"{folder}: {value}")
    for line in failed:
        print(f"error: {line}", file=sys.stderr, flush=True)
    if failed:
        print(f"error: {len(failed)} of {len(returns)} cells failed (their lines above; each cell's metrics.json "
              "keeps its status); rerun with ckpt_path=auto to resume the others' finished work", file=sys.stderr)
        sys.exit(2)
