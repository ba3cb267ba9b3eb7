"""Faults in a cell's own files and in its training (damaged record or checkpoint, changed data or config after a
finished run, divergence, a full disk, wandb refusing): one line, exit 2, nothing half-written or lost."""

from __future__ import annotations

import json

import pytest
import torch

from bad_inputs import USPTO, Case, half_written, run_case, swap_export, then, train_once, write_cell_file
from conftest import run_main

IN_CELL = [*USPTO, "dataset.datamodule.data_dir={export}", "hydra.run.dir={cell}"]
FAULTS = [
    Case("damaged-metrics-json", IN_CELL, ["metrics.json is damaged", "force=true"],
         setup=write_cell_file("metrics.json", b'{"status": "fini')),
    Case("truncated-last-ckpt", [*IN_CELL, "ckpt_path=auto"], ["last.ckpt cannot be read", "force=true"],
         setup=write_cell_file("checkpoints/last.ckpt", b"PK\x03\x04 truncated")),
    Case("data-changed-after-finish", IN_CELL, ["data of", "changed", "force=true"],
         setup=then(train_once, swap_export)),
    Case("config-changed-after-finish", [*IN_CELL, "seed=2"], ["different config", "force=true"], setup=train_once),
    Case("diverged", [*IN_CELL, "optimizer.lr=1e20"], ["training diverged", "nan", "lower optimizer.lr"]),
    Case("diverged-clipped", [*IN_CELL, "optimizer.lr=1e20", "trainer.gradient_clip_val=1.0"],
         ["training diverged", "lower optimizer.lr", "already clipped at trainer.gradient_clip_val=1"]),
]


@pytest.mark.parametrize("case", FAULTS, ids=lambda c: c.id)
def test_bad_input_gives_one_line(case: Case, paths: dict, capfd, monkeypatch):
    run_case(case, paths, capfd, monkeypatch)


def test_diverged_cell_is_recorded_as_diverged(paths, capfd):
    code = run_main([*USPTO, f"dataset.datamodule.data_dir={paths['export']}", f"hydra.run.dir={paths['cell']}",
                     "optimizer.lr=1e20", f"paths.output_root={paths['tmp'] / 'out'}",
                     f"paths.cache_dir={paths['tmp'] / 'cache'}"])
    assert code == 2
    record = json.loads((paths["cell"] / "metrics.json").read_text())
    assert record["status"] == "diverged" and "step" in record["error"]
    assert "metrics" not in record


def test_disk_full_while_checkpointing_leaves_no_partial_file(paths, capfd, monkeypatch):
    import langrepr.callbacks as callbacks

    def full_disk(obj, fh, *args, **kwargs):
        fh.write(b"partial")
        raise OSError(28, "No space left on device", getattr(fh, "name", "?"))

    real_save = torch.save

    def save(obj, f, *args, **kwargs):      # only checkpoint files (written through a handle) hit the full disk
        return full_disk(obj, f) if hasattr(f, "write") else real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(callbacks.torch, "save", save)
    code = run_main([*USPTO, f"dataset.datamodule.data_dir={paths['export']}", f"hydra.run.dir={paths['cell']}",
                     f"paths.output_root={paths['tmp'] / 'out'}", f"paths.cache_dir={paths['tmp'] / 'cache'}"])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "No space left on device" in line and "paths.output_root" in line
    assert not list((paths["cell"] / "checkpoints").glob("*.ckpt")) and not half_written(paths["tmp"])
    assert json.loads((paths["cell"] / "metrics.json").read_text())["status"] == "failed"


def test_wandb_login_failure_is_one_line(paths, capfd, monkeypatch):
    wandb = pytest.importorskip("wandb")
    from pytorch_lightning.loggers import WandbLogger

    def refuse(*args, **kwargs):
        raise wandb.errors.AuthenticationError("API key must be 40 characters long, yours was 3")

    monkeypatch.setattr(WandbLogger, "log_hyperparams", refuse)
    code = run_main([*USPTO, "logger=wandb", f"dataset.datamodule.data_dir={paths['export']}",
                     f"hydra.run.dir={paths['cell']}", f"paths.output_root={paths['tmp'] / 'out'}",
                     f"paths.cache_dir={paths['tmp'] / 'cache'}"])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "wandb could not start" in line and "WANDB_MODE=offline" in line
