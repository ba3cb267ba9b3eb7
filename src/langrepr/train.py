"""Training entry point: `python -m langrepr.train dataset=… model=… [-m]`.

`train(cfg, output_dir)` is a plain function (tests and `evaluate` reuse it); `main()` is the thin Hydra
shell around it that turns `UserError` into one line and exit code 2.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from langrepr.errors import UserError
from langrepr.scale_out import fit_batch_to_devices
from langrepr.utils import git_commit, package_versions, write_json_atomic, write_text_atomic

log = logging.getLogger("langrepr.train")

# a cell with no overrides still needs a directory name
OmegaConf.register_new_resolver("cell", lambda name: name or "defaults", replace=True)

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
CONFIG_GROUPS = ("dataset", "model", "trainer", "logger", "experiment", "profile", "debug")


# ---------------------------------------------------------------- helpers

def config_fingerprint(cfg: DictConfig) -> str:
    """Hash of what defines a cell's result (not where it is written), to tell a rerun from a changed config."""
    plain = OmegaConf.to_container(cfg, resolve=False)
    for key in ("paths", "ckpt_path", "force", "logger", "table"):
        plain.pop(key, None)
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:16]


def finished_run(output_dir: Path, fingerprint: str, force: bool) -> dict | None:
    """The finished metrics of this cell if it already ran with the same config; raise if it ran differently."""
    path = output_dir / "metrics.json"
    if force or not path.exists():
        return None
    previous = json.loads(path.read_text())
    if previous.get("status") != "finished":
        return None
    if previous.get("fingerprint") != fingerprint:
        raise UserError(f"{output_dir} holds a finished run of a different config; "
                        "delete that folder or pass force=true to overwrite it")
    return previous


def resolve_precision(trainer_cfg: DictConfig) -> DictConfig:
    """fp16 as in the papers when CUDA exists; otherwise fp32 on CPU, said out loud."""
    precision = str(trainer_cfg.get("precision", "32"))
    if precision.startswith("16") and not torch.cuda.is_available():
        log.warning("fp16 (trainer.precision=%s) needs a CUDA GPU and none was found: this run uses fp32 on "
                    "CPU. Pass trainer=cpu to choose this explicitly.", precision)
        trainer_cfg = OmegaConf.merge(trainer_cfg, {"precision": "32-true", "accelerator": "cpu"})
    return trainer_cfg


def resume_checkpoint(ckpt_path: str | None, output_dir: Path) -> str | None:
    """`ckpt_path=auto` picks this cell's own `last.ckpt`, so an interrupted cell resumes where it stopped."""
    if ckpt_path in (None, "", "null"):
        return None
    if ckpt_path == "auto":
        last = output_dir / "checkpoints" / "last.ckpt"
        if last.exists():
            log.info("Resuming from %s", last)
            return str(last)
        return None
    if not Path(ckpt_path).exists():
        raise UserError(f"checkpoint {ckpt_path} does not exist: pass an existing file, ckpt_path=auto or null")
    return ckpt_path


def parameter_counts(net: torch.nn.Module) -> dict[str, int]:
    counter = getattr(net, "embedding_parameters", None)
    return {"total": sum(p.numel() for p in net.parameters()),
            "embedding": int(counter()) if callable(counter) else 0}


def task_kwargs(dm: Any) -> dict:
    """Runtime values the task needs: a datamodule's `task_kwargs`, else the label count it gives the net."""
    if hasattr(dm, "task_kwargs"):
        return dict(dm.task_kwargs)
    return {"num_labels": dm.net_kwargs["num_labels"]} if "num_labels" in dm.net_kwargs else {}


def as_float(value: Any) -> float:
    return float(value.item() if isinstance(value, torch.Tensor) else value)


def hydra_choices() -> tuple[dict[str, str], list[str]]:
    if not HydraConfig.initialized():
        return {}, []
    hc = HydraConfig.get()
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra/") and v is not None}
    return dict(choices), list(hc.overrides.task)


def enable_wandb_offline_without_key(cfg: DictConfig) -> None:
    if "wandb" not in cfg.get("logger", {}) or os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_MODE"):
        return
    if not (Path.home() / ".netrc").exists() or "api.wandb.ai" not in (Path.home() / ".netrc").read_text():
        log.info("No wandb key configured: logging to wandb offline (sync later with `wandb sync`).")
        os.environ["WANDB_MODE"] = "offline"


def finish_wandb() -> None:
    """A Hydra multirun runs cells in one process: close the wandb run so the next cell gets its own."""
    if "wandb" in sys.modules:
        import wandb

        if wandb.run is not None:
            wandb.finish()


# ---------------------------------------------------------------- the run

def train(cfg: DictConfig, output_dir: str | Path) -> dict:
    """Seed, build datamodule/net/task/trainer, fit, test, and write `metrics.json` into `output_dir`."""
    import pytorch_lightning as pl

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = config_fingerprint(cfg)
    previous = finished_run(output_dir, fingerprint, bool(cfg.get("force", False)))
    if previous is not None:
        log.info("Skipping %s: this cell already finished (pass force=true to rerun).", output_dir)
        return previous
    write_text_atomic(output_dir / "config_resolved.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    choices, overrides = hydra_choices()
    started = time.time()
    pl.seed_everything(int(cfg.seed), workers=True)
    record: dict[str, Any] = {
        "status": "running", "run_id": cfg.run_id, "profile": cfg.profile_name, "seed": int(cfg.seed),
        "commit": git_commit(), "versions": package_versions(), "fingerprint": fingerprint,
        "choices": choices, "overrides": overrides, "deterministic": bool(cfg.trainer.get("deterministic", False)),
    }

    if cfg.get("stage", "train") == "count":
        # Table-1 style cells: build the model from config and count it, no data and no training
        net = instantiate(cfg.model.net, **cfg.get("count_net_kwargs", {}))
        record.update(params=parameter_counts(net), metrics={}, wall_time_s=time.time() - started,
                      status="finished")
        write_json_atomic(output_dir / "metrics.json", record)
        return record

    if cfg.get("stage", "train") == "stats":
        # data-statistics cells (EWE Table 2): `cfg.stats` is a function returning flat metrics
        record.update(metrics=dict(instantiate(cfg.stats)), params={}, wall_time_s=time.time() - started,
                      status="finished")
        write_json_atomic(output_dir / "metrics.json", record)
        return record

    if cfg.get("stage", "train") == "pipeline":
        # non-gradient cells (reference rows, co-occurrence embeddings, sklearn baselines): `cfg.pipeline` is
        # a function of `output_dir` (where it may leave artefacts) returning flat metrics
        metrics = instantiate(cfg.pipeline, output_dir=str(output_dir))
        record.update(metrics={k: float(v) for k, v in dict(metrics).items()}, params={},
                      wall_time_s=time.time() - started, status="finished")
        write_json_atomic(output_dir / "metrics.json", record)
        return record

    cfg, record["scale_out"] = fit_batch_to_devices(cfg)   # trainer=ddp: per-device batch × accumulation
    tokenizer = instantiate(cfg.model.tokenizer) if cfg.model.get("tokenizer") else None
    dm_kwargs = {"tokenizer": tokenizer} if tokenizer is not None else {}
    dm = instantiate(cfg.dataset.datamodule, **dm_kwargs)
    dm.prepare_data()
    dm.setup("fit")
    net = instantiate(cfg.model.net, **dm.net_kwargs)
    task = instantiate(cfg.dataset.task, net=net, optimizer=instantiate(cfg.optimizer),
                       scheduler=instantiate(cfg.scheduler) if cfg.get("scheduler") else None,
                       **task_kwargs(dm))
    task.test_split_names = list(getattr(dm, "test_splits", ["test"]))
    record["params"] = parameter_counts(net)
    record["data"] = {**getattr(dm, "data_info", {}), **getattr(dm, "encode_stats", {})}  # e.g. synthetic?
    if hasattr(dm, "save_label_vocab"):
        dm.save_label_vocab(output_dir / "labels.json")   # the label columns this run's logits mean
    log.info("Parameters: %s", record["params"])

    enable_wandb_offline_without_key(cfg)
    loggers = [instantiate(c) for c in cfg.get("logger", {}).values() if c is not None]
    callbacks = [instantiate(c) for c in cfg.get("callbacks", {}).values() if c is not None]
    trainer = instantiate(resolve_precision(cfg.trainer), logger=loggers or False, callbacks=callbacks,
                          default_root_dir=str(output_dir))
    for lg in loggers:
        if hasattr(lg, "log_hyperparams"):
            lg.log_hyperparams({"params_total": record["params"]["total"], "seed": int(cfg.seed)})

    write_json_atomic(output_dir / "metrics.json", record)
    try:
        trainer.fit(task, datamodule=dm, ckpt_path=resume_checkpoint(cfg.get("ckpt_path"), output_dir))
        metrics = {k: as_float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        best = getattr(trainer.checkpoint_callback, "best_model_path", "") if trainer.checkpoint_callback else ""
        ckpt = "best" if best and cfg.get("test_ckpt", "best") == "best" else None
        for result in trainer.test(task, datamodule=dm, ckpt_path=ckpt, verbose=False):
            metrics.update({k: as_float(v) for k, v in result.items()})
    finally:
        finish_wandb()
    extra = getattr(net, "extra_metrics", None)
    if callable(extra):
        metrics.update({k: float(v) for k, v in extra().items()})
    record.update(metrics=metrics, wall_time_s=time.time() - started, tested_on=ckpt or "last",
                  epochs=trainer.current_epoch, steps=trainer.global_step, status="finished")
    write_json_atomic(output_dir / "metrics.json", record)
    log.info("Wrote %s", output_dir / "metrics.json")
    return record


# ---------------------------------------------------------------- CLI

def check_group_choices(argv: list[str]) -> None:
    """Catch `model=no_such_model` before Hydra does, with one line that lists the valid choices."""
    for arg in argv:
        key, sep, value = arg.lstrip("+~").partition("=")
        if not sep or key not in CONFIG_GROUPS or value in ("", "null"):
            continue
        options = sorted(p.stem for p in (CONF_DIR / key).glob("*.yaml"))
        for choice in value.split(","):
            if choice.startswith(("glob(", "choice(", "range(")):
                continue
            if choice not in options:
                raise UserError(f"unknown {key} '{choice}': choose one of {', '.join(options)}")


@hydra.main(version_base="1.3", config_path="../../conf", config_name="train")
def _hydra_main(cfg: DictConfig) -> None:
    try:
        train(cfg, HydraConfig.get().runtime.output_dir)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except InstantiationException as err:
        # a constructor rejected a config value (its message names the key): show that, not Hydra's wrapper
        cause = err.__cause__ if isinstance(err.__cause__, (ValueError, UserError)) else None
        if cause is None:
            raise
        print(f"error: {cause}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    try:
        check_group_choices(sys.argv[1:])
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    _hydra_main()


if __name__ == "__main__":
    main()
