"""Training entry point: `python -m langrepr.train dataset=… model=… [-m]`.

`train(cfg, output_dir)` is a plain function (tests and `evaluate` reuse it); `main()` is the thin Hydra
shell around it that turns `UserError` into one line and exit code 2.

The precision and training-step switches live in `langrepr.switches`, the command line's own checks and the
errors a user can act on in `langrepr.train_cli`, the cell's datamodule, net and task in `langrepr.build`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from langrepr import cell
from langrepr.build import build_cell, task_kwargs  # noqa: F401  (task_kwargs: imported from here)
from langrepr.callbacks import AtomicCheckpointIO, LastCheckpoint, NonFiniteGuard
from langrepr.confpaths import CONF_DIR
from langrepr.data import integrity
from langrepr.errors import Diverged, UserError, one_line
from langrepr.metric_versions import METRIC_VERSIONS
from langrepr.pipelines.bitcipher.warm_start import CipherWarmStart
from langrepr.pipelines.trained_glove import TrainedGloveStart
from langrepr.scale_out import FailedCell, fit_batch_to_devices, is_writer, write_record
from langrepr.switches import (  # noqa: F401
    COMPILE_MODES,
    MATMUL_PRECISIONS,
    apply_step_switches,
    cpu_has_bf16,
    precision_ran,
    resolve_precision,
    step_switches,
)
from langrepr.train_cli import (  # noqa: F401
    CONFIG_GROUPS,
    HUB_ERRORS,
    _causes,
    _target_of,
    check_group_choices,
    check_options,
    hydra_options,
    user_message,
)
from langrepr.utils import git_commit, package_versions, write_text_atomic
from langrepr.validation import canonical_overrides, check_command_line, setting_key, validate_config

log = logging.getLogger("langrepr.train")


def parameter_counts(net: torch.nn.Module) -> dict[str, int]:
    counter = getattr(net, "embedding_parameters", None)
    return {"total": sum(p.numel() for p in net.parameters()),
            "embedding": int(counter()) if callable(counter) else 0}


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
    """Validate, skip or resume or start this cell over, run it, and keep `metrics.json` true at every moment.

    The status in `metrics.json` is "running" while it runs, then "finished", "diverged" (non-finite loss or
    result) or "failed" (with the error line); the exception is re-raised for the caller. One cell runs in one
    process at a time: a second run of a running cell refuses with one line (`cell.lock`).
    """
    output_dir = Path(output_dir)
    choices, overrides = hydra_choices()
    dry_sized(cfg)                                       # debug=dry only
    validate_config(cfg, choices)                        # before any data is read
    step_switches(cfg)
    stage = cfg.get("stage", "train")
    if stage in ("train", "count") and OmegaConf.select(cfg, "model.net._target_", default=None) is None:
        raise UserError(f"stage={stage} builds a network but model.net names none (model={choices.get('model', '?')}): "
                        "choose a model, e.g. model=bert_ewe")
    fingerprint, legacy = cell.cell_fingerprint(cfg), cell.legacy_fingerprints(cfg)
    digest = cell.data_digest(cfg)
    force = bool(cfg.get("force", False))
    output_dir.mkdir(parents=True, exist_ok=True)
    with cell.lock(output_dir) if is_writer() else contextlib.nullcontext():
        previous = None if force else cell.read_record(output_dir)
        if cell.reusable(previous, output_dir, fingerprint, legacy, digest, lambda: cell.data_contents(cfg)):
            log.info("Skipping %s: this cell already finished (pass force=true to rerun).", output_dir)
            return cell.migrate(previous, output_dir, fingerprint) if is_writer() else previous
        resume, meta = (None, {}) if force else cell.resume_point(cfg.get("ckpt_path"), output_dir, fingerprint)
        if resume is None:
            if is_writer():                              # in a SLURM/torchrun DDP cell, global rank 0 only
                cell.move_aside(output_dir)              # a fresh start never mixes with an older attempt
        elif digest and meta.get("data_digest") not in (None, digest):
            raise UserError(f"checkpoint {resume} was trained on different data (digest {meta['data_digest']} -> "
                            f"{digest}): pass force=true to start this cell over")
        if is_writer():
            write_text_atomic(output_dir / "config_resolved.yaml", OmegaConf.to_yaml(cfg, resolve=True))
        started = time.time()
        record: dict[str, Any] = {
            "status": "running", "run_id": cfg.run_id, "profile": cfg.profile_name, "seed": int(cfg.seed),
            "commit": git_commit(), "versions": package_versions(), "fingerprint": fingerprint,
            "data_digest": digest, "choices": choices, "overrides": overrides,
            "deterministic": bool(cfg.trainer.get("deterministic", False)),
            "metric_versions": dict(METRIC_VERSIONS),   # the metric definitions its values follow (stale_metrics)
        }
        write_record(output_dir / "metrics.json", record)
        try:
            try:
                return run_cell(cfg, output_dir, record, started, resume, meta)
            except Exception as err:
                missing = dry_missing_data(cfg, err)
                if missing is None:
                    raise
                # a dry run (debug=dry) stops a cell whose data has no local copy with one line and goes on
                record.update(status="dry", dry={"missing_data": missing}, wall_time_s=time.time() - started)
                write_record(output_dir / "metrics.json", record)
                log.warning("dry run: %s: no data: %s", output_dir, missing)
                return record
        except BaseException as err:
            interrupted = isinstance(err, (KeyboardInterrupt, SystemExit))
            record.update(status="diverged" if isinstance(err, Diverged) else "failed",
                          error="interrupted" if interrupted else one_line(err),
                          wall_time_s=meta.get("wall_time_s", 0.0) + time.time() - started)
            try:
                write_record(output_dir / "metrics.json", record)
            except OSError:
                pass                                     # e.g. the disk is full: the original error says so
            if type(err).__name__ == "SIGTERMException":
                # Lightning turns SIGTERM (a scheduler's stop, `kill`) into a SystemExit with no code: the process
                # then exited 0 although the cell did not finish; a stopped cell exits as a killed process does
                print(f"error: {output_dir} was stopped by SIGTERM before it finished; rerun the same command with "
                      "ckpt_path=auto to resume from its last checkpoint", file=sys.stderr)
                raise SystemExit(128 + 15) from None
            raise


def run_cell(cfg: DictConfig, output_dir: Path, record: dict, started: float, resume: str | None,
             meta: dict) -> dict:
    """Run the cell's stage while recording the data files it reads; returns the finished record.

    Every stage leaves `metrics` (and `params`, `wall_time_s`) in the record; here the files it read and their
    digest are added, and a non-finite pipeline or stats result becomes "diverged" instead of "finished" (a
    train cell's guard is `NonFiniteGuard`, during training; its test metrics may be undefined, e.g. an AUROC
    over a label with no positives).
    """
    import pytorch_lightning as pl

    pl.seed_everything(int(cfg.seed), workers=True)
    stage = cfg.get("stage", "train")
    if is_dry(cfg) and stage not in DRY_STAGES:
        record.update(metrics={}, params={}, dry={"skipped": f"stage={stage} has no dry mode: its steps and "
                                                             "data are its pipeline's own settings"})
        log.warning("dry run: %s: not run (stage=%s has no dry mode)", output_dir, stage)
    with integrity.recording_reads(*cell.data_roots(cfg, output_dir)) as reads:
        if not record.get("dry"):
            STAGES[stage](cfg, output_dir, record, started=started, resume=resume, meta=meta, reads=reads)
    record["data_files"] = reads.digests()
    if record["data_digest"] is None and record["data_files"]:
        record["data_digest"] = integrity.combined_digest(record["data_files"])
    record.setdefault("wall_time_s", time.time() - started)
    if stage in ("pipeline", "stats"):
        check_finite(stage, record.get("metrics") or {})
    record["status"] = "dry" if is_dry(cfg) else "finished"   # a dry record is never reused nor a table value
    write_record(output_dir / "metrics.json", record)
    log.info("Wrote %s", output_dir / "metrics.json")
    return record


DRY_STAGES = ("train", "count")   # the stages a dry run (debug=dry) runs; pipeline/stats cells are only recorded


def is_dry(cfg: DictConfig) -> bool:
    """A dry run at full size (conf/debug/dry.yaml): its record's status is "dry", never "finished"."""
    return bool(OmegaConf.select(cfg, "dry", default=False))


def dry_sized(cfg: DictConfig) -> None:
    """debug=dry: the datamodule's `batch_size` / `eval_batch_size` set to `dry_batch_size` (micro-batches of 1-2).

    Set on the datamodule node itself, so a size fed by an interpolation (multi-hot's `${mlm.batch_size}`) is
    replaced too; the sequence length stays the paper's.
    """
    size = OmegaConf.select(cfg, "dry_batch_size", default=None)
    dm = OmegaConf.select(cfg, "dataset.datamodule", default=None)
    if not is_dry(cfg) or size is None or not isinstance(dm, DictConfig):
        return
    for key in ("batch_size", "eval_batch_size"):
        if key in dm:
            dm[key] = int(size)


def dry_missing_data(cfg: DictConfig, err: BaseException) -> str | None:
    """In a dry run, the one line naming data that has no local copy (hub unreachable, file absent); else None."""
    if not is_dry(cfg):
        return None
    chain = _causes(err) + ([err.__context__] if err.__context__ is not None else [])
    if not any(isinstance(e, (FileNotFoundError, ConnectionError)) or type(e).__name__ in HUB_ERRORS
               or (isinstance(e, UserError) and re.search(r"LANGREPR_DATA_DIR|not found|no such file|does not exist|"
                                                          r"Hugging Face Hub|export", str(e), re.I))
               for e in chain if e is not None):
        return None
    return " ".join((user_message(err) or one_line(err)).split())


def check_finite(stage: str, metrics: dict[str, float | None]) -> None:
    """A NaN or inf result is a divergence, not a number to put in a table (None = undefined, e.g. an empty subset)."""
    bad = {k: v for k, v in metrics.items() if v is not None and not math.isfinite(v)}
    if not bad:
        return
    name, value = next(iter(bad.items()))
    more = f" (and {len(bad) - 1} more non-finite metrics)" if len(bad) > 1 else ""
    raise Diverged(f"{stage} cell diverged: {name} = {value}{more}; where it trains (e.g. mlm.lr of the multi-hot "
                   "pretraining) lower the learning rate, then rerun with force=true")


# ---------------------------------------------------------------- one function per stage

def run_count(cfg: DictConfig, output_dir: Path, record: dict, **_: Any) -> None:
    """Table-1 style cells: build the model from config and count it, no data and no training.

    A net that counts more than its parameters (`extra_metrics`: TensorCoder's attention GFLOPs) records them too,
    by the same call a train cell makes after training, so a count at a size no cell trains at (the paper's N and
    d, `+paper_size=`) is the cells' own count.
    """
    net = instantiate(cfg.model.net, **cfg.get("count_net_kwargs", {}))
    extra = getattr(net, "extra_metrics", None)
    record.update(params=parameter_counts(net),
                  metrics={k: float(v) for k, v in extra().items()} if callable(extra) else {})


def run_stats(cfg: DictConfig, output_dir: Path, record: dict, **_: Any) -> None:
    """Data-statistics cells (EWE Table 2): `cfg.stats` is a function returning flat metrics."""
    record.update(metrics=flat_metrics(instantiate(cfg.stats)), params={})


def run_pipeline(cfg: DictConfig, output_dir: Path, record: dict, **_: Any) -> None:
    """Non-gradient cells (reference rows, co-occurrence embeddings, sklearn baselines).

    `cfg.pipeline` is a function of `output_dir` (where it may leave artefacts) returning flat metrics.
    """
    record.update(metrics=flat_metrics(instantiate(cfg.pipeline, output_dir=str(output_dir))), params={})


def flat_metrics(metrics: Any) -> dict[str, float | None]:
    """Floats by name; None stays None (a metric undefined for this data, e.g. on an empty subset)."""
    return {k: None if v is None else float(v) for k, v in dict(metrics).items()}


def run_training(cfg: DictConfig, output_dir: Path, record: dict, *, started: float, resume: str | None,
                 meta: dict, reads: integrity.Reads) -> None:
    """Gradient cells: datamodule, net, task, loggers, callbacks and the one Trainer; fit, then test."""
    cfg, record["scale_out"] = fit_batch_to_devices(cfg)   # trainer=ddp: per-device batch × accumulation

    def same_data(dm: Any) -> None:
        if record["data_digest"] is None:                    # generated on first use (synthetic), or not listed by
            record["data_digest"] = cell.data_digest(cfg)     # the config: the files read so far
            if record["data_digest"] is None and reads.files:
                record["data_digest"] = integrity.combined_digest(reads.digests())
            if resume and meta.get("data_digest") not in (None, record["data_digest"]):
                raise UserError(f"checkpoint {resume} was trained on different data (digest {meta['data_digest']} -> "
                                f"{record['data_digest']}): pass force=true to start this cell over")

    dm, net, task = build_cell(cfg, data_ready=same_data)
    record["params"] = parameter_counts(net)
    record["data"] = {**getattr(dm, "data_info", {}), **getattr(dm, "encode_stats", {})}  # e.g. synthetic?
    if hasattr(dm, "save_label_vocab") and is_writer():
        dm.save_label_vocab(output_dir / "labels.json")   # the label columns this run's logits mean
    log.info("Parameters: %s", record["params"])

    enable_wandb_offline_without_key(cfg)
    loggers = [instantiate(c) for c in cfg.get("logger", {}).values() if c is not None]
    callbacks = [instantiate(c) for c in cfg.get("callbacks", {}).values() if c is not None]
    if getattr(task, "warm_start", None):   # Bit Cipher Fig. 4: cipher vectors of the training text, before fit
        callbacks.append(CipherWarmStart(task.warm_start))
    if getattr(net, "word_init", None) == "trained_glove":   # LEAM: GloVe trained on the training split, before fit
        callbacks.append(TrainedGloveStart())
    for guard in (c for c in callbacks if isinstance(c, NonFiniteGuard)):   # its advice names the key this cell sets
        guard.lr_key = setting_key(cfg, "optimizer.lr")
    record["step_switches"] = step_switches(cfg)
    apply_step_switches(record["step_switches"], dm, task, callbacks)
    last = next((c for c in callbacks if isinstance(c, LastCheckpoint)), None)
    if last is not None:
        last.fingerprint, last.data_digest = record["fingerprint"], record["data_digest"]
        last.wall_offset, last.started = float(meta.get("wall_time_s", 0.0)), started
    csv_header = cell.keep_csv_log(output_dir, meta["global_step"]) if resume else None
    trainer = instantiate(resolve_precision(cfg.trainer), logger=loggers or False, callbacks=callbacks,
                          default_root_dir=str(output_dir), plugins=[AtomicCheckpointIO()])
    record.update(precision_ran(cfg.trainer.get("precision"), trainer))
    cell.restore_csv_log(output_dir, loggers, csv_header)
    log_hyperparams(loggers, {"params_total": record["params"]["total"], "seed": int(cfg.seed)})

    write_record(output_dir / "metrics.json", record)
    try:
        trainer.fit(task, datamodule=dm, ckpt_path=resume)
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
    wall = last.wall_time() if last is not None else time.time() - started
    record.update(metrics=metrics, wall_time_s=wall, tested_on=ckpt or "last", resumed_from_step=meta.get("global_step"),
                  epochs=trainer.current_epoch, steps=trainer.global_step)


# the stages, chosen by the config's `stage:` (validation refuses any other name before this is reached)
STAGES = {"train": run_training, "pipeline": run_pipeline, "stats": run_stats, "count": run_count}


def log_hyperparams(loggers: list, params: dict) -> None:
    """Log run facts; a wandb that cannot log in (bad key, no network) becomes one line, not a traceback."""
    for lg in loggers:
        if not hasattr(lg, "log_hyperparams"):
            continue
        try:
            lg.log_hyperparams(params)
        except Exception as err:
            if not type(err).__module__.startswith("wandb"):
                raise
            raise UserError(f"wandb could not start ({' '.join(str(err).split())[:160]}): check WANDB_API_KEY "
                            "(`wandb login`) or run offline with WANDB_MODE=offline") from None


FAILED_CELLS: list[str] = []   # a multirun records failed cells here and goes on with the others
@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def _hydra_main(cfg: DictConfig) -> FailedCell | None:
    from hydra.types import RunMode

    output_dir = HydraConfig.get().runtime.output_dir
    try:
        if is_writer():   # a cell nested by a '/' in an override value (before issue 33) moves into its one folder
            cell.adopt_legacy_folder(Path(output_dir), HydraConfig.get().job.override_dirname)
        train(cfg, output_dir)
    except Exception as err:
        message = user_message(err)
        if message is None:
            raise
        print(f"error: {' '.join(message.split())}", file=sys.stderr)
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            sys.exit(2)
        FAILED_CELLS.append(Path(output_dir).name)   # the other cells of the sweep still run
        return FailedCell(" ".join(message.split()))  # for a launcher whose cells run in other processes (scale_out)


def main() -> None:
    FAILED_CELLS.clear()   # this invocation's failures only (tests and notebooks call main() more than once)
    try:
        check_options(sys.argv[1:])
        check_group_choices(sys.argv[1:])
        sys.argv[1:] = canonical_overrides(sys.argv[1:])   # optimizer.lr=1e-3 and 0.001 name one cell
        check_command_line(sys.argv[1:])                    # compose + validate before Hydra runs anything
    except UserError as err:
        head, _, detail = str(err).partition("\n")   # one line to read; a long option list on its own line
        print(f"error: {' '.join(head.split())}" + (f"\n{detail}" if detail else ""), file=sys.stderr)
        sys.exit(2)
    _hydra_main()
    if FAILED_CELLS:
        sys.exit(2)


if __name__ == "__main__":
    main()
