"""A cell's identity and lifecycle on disk: fingerprint, data digest, status, force, resume.

One cell = one folder = one result. Its identity is what determines that result: the *resolved*
config (so `${oc.env:...}` data locations count) minus where it is written, plus a digest of the
data it reads (`langrepr.data.integrity`). `metrics.json` carries a status — running, finished,
failed (with the error line) or diverged — and a finished cell is reused only when both the
fingerprint and the data digest match. Starting a cell over moves the previous attempt aside
(`<run>/.replaced/<cell>@<time>/`, its metrics.json renamed so tables never read it) instead of
mixing old and new files; a checkpoint is resumed only into the config that wrote it.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from langrepr.callbacks import read_checkpoint_meta
from langrepr.data.integrity import source_digest
from langrepr.errors import UserError

log = logging.getLogger("langrepr.train")

# keys that say where/how a cell is written or shown, not what it computes
NOT_IDENTITY = ("ckpt_path", "force", "logger", "table", "hydra", "supported_datasets")
KEEP_ON_RESTART = (".hydra",)   # Hydra's record of the current invocation stays in place


def config_fingerprint(cfg: DictConfig) -> str:
    """Hash of the resolved config minus output locations: what defines the cell's result."""
    c = copy.deepcopy(cfg)
    with open_dict(c):
        for key in NOT_IDENTITY:
            c.pop(key, None)
        if "paths" in c:
            c.paths.output_dir, c.paths.output_root = "<cell>", "<root>"
            if "cache_dir" in c.paths:
                c.paths.cache_dir = "<cache>"
        if c.get("callbacks"):
            c.callbacks.pop("progress", None)
        if c.get("trainer"):
            c.trainer.pop("enable_progress_bar", None)
    try:
        plain = OmegaConf.to_container(c, resolve=True)
    except Exception as err:  # noqa: BLE001  (an interpolation that cannot resolve: say which)
        raise UserError(f"the config does not resolve: {' '.join(str(err).split()[:40])}") from None
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:16]


def legacy_fingerprint(cfg: DictConfig) -> str:
    """The pre-digest fingerprint (unresolved config), accepted for cells finished before it changed."""
    plain = OmegaConf.to_container(cfg, resolve=False)
    for key in ("paths", "ckpt_path", "force", "logger", "table", "supported_datasets"):
        plain.pop(key, None)
    callbacks = plain.get("callbacks") or {}
    for key in ("last_checkpoint", "non_finite"):       # added with this scheme; absent from older records
        callbacks.pop(key, None)
    if isinstance(callbacks.get("checkpoint"), dict) and callbacks["checkpoint"].get("save_last") is False:
        callbacks["checkpoint"]["save_last"] = True
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:16]


def data_nodes(cfg: DictConfig) -> list[dict[str, Any]]:
    """The resolved config nodes that read data for this stage."""
    stage = cfg.get("stage", "train")
    node = {"train": "dataset.datamodule", "stats": "stats", "pipeline": "pipeline"}.get(stage)
    value = OmegaConf.select(cfg, node) if node else None
    if value is None:
        return []
    return [OmegaConf.to_container(value, resolve=True)]


def data_digest(cfg: DictConfig) -> str | None:
    return source_digest(data_nodes(cfg))


def read_record(output_dir: Path) -> dict[str, Any] | None:
    """The cell's metrics.json, None when absent; a damaged one is named with the fix."""
    path = output_dir / "metrics.json"
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        if not isinstance(record, dict):
            raise ValueError
    except (ValueError, UnicodeDecodeError):
        raise UserError(f"{path} is damaged (not JSON): delete it or pass force=true to rerun this cell") from None
    return record


def reusable(record: dict | None, output_dir: Path, fingerprint: str, legacy: str, digest: str | None) -> bool:
    """True when the finished cell on disk is this cell's result; UserError when it belongs to other inputs."""
    if record is None or record.get("status") != "finished":
        return False
    if record.get("fingerprint") not in (fingerprint, legacy):
        raise UserError(f"{output_dir} holds a finished run of a different config; pass force=true to rerun it "
                        "(the old run is moved to .replaced/) or choose another run_id")
    recorded = record.get("data_digest")
    if recorded and digest and recorded != digest:
        raise UserError(f"the data of {output_dir} changed since it finished (digest {recorded} -> {digest}): pass "
                        "force=true to rerun it on the new data (the old run is moved to .replaced/)")
    return True


def move_aside(output_dir: Path) -> Path | None:
    """Move a previous attempt's files out of the cell folder; returns where they went (None if nothing)."""
    entries = [p for p in output_dir.iterdir() if p.name not in KEEP_ON_RESTART and not p.name.endswith(".log")]
    if not entries:
        return None
    target = output_dir.parent / ".replaced" / f"{output_dir.name}@{time.strftime('%Y%m%d-%H%M%S')}"
    target.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        name = "metrics.replaced.json" if entry.name == "metrics.json" else entry.name
        shutil.move(str(entry), str(target / name))
    log.info("Moved the previous attempt of %s to %s", output_dir, target)
    return target


def resume_point(ckpt_path: str | None, output_dir: Path, fingerprint: str) -> tuple[str | None, dict]:
    """(checkpoint to resume, its metadata); refuses a checkpoint written by a different config."""
    if ckpt_path in (None, "", "null"):
        return None, {}
    path = output_dir / "checkpoints" / "last.ckpt" if ckpt_path == "auto" else Path(ckpt_path)
    if not path.exists():
        if ckpt_path != "auto":
            raise UserError(f"checkpoint {ckpt_path} does not exist: pass an existing file, ckpt_path=auto or null")
        return None, {}
    meta = read_checkpoint_meta(path)
    if meta.get("fingerprint") not in (None, fingerprint):
        raise UserError(f"checkpoint {path} was written by a different config (fingerprint {meta['fingerprint']} "
                        f"!= {fingerprint}): pass force=true to start this cell over")
    log.info("Resuming from %s at epoch %d, step %d", path, meta["epoch"], meta["global_step"])
    return str(path), meta


def keep_csv_log(output_dir: Path, up_to_step: int) -> list[str] | None:
    """Before a resumed fit: trim the CSV curve to the checkpoint's step and move it out of Lightning's way.

    CSVLogger deletes an existing metrics.csv when it starts; `restore_csv_log` puts it back after the
    logger is created, so the resumed run appends to the pre-kill curve instead of replacing it.
    """
    path = output_dir / "csv" / "metrics.csv"
    if not path.exists():
        return None
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        header = list(reader.fieldnames or [])
        # Lightning logs a row at step = global_step - 1 of the batch (or validation) that produced it
        rows = [r for r in reader if not r.get("step") or float(r["step"]) < up_to_step]
    tmp = path.with_name(".metrics.csv.resume")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    path.unlink()
    return header


def restore_csv_log(output_dir: Path, loggers: list, header: list[str] | None) -> None:
    """Put the pre-resume curve back under the freshly created CSVLogger, which then appends to it."""
    tmp = output_dir / "csv" / ".metrics.csv.resume"
    if header is None or not tmp.exists():
        return
    for lg in loggers:
        if type(lg).__name__ == "CSVLogger":
            writer = lg.experiment                       # creates the writer (and its folder) now
            os.replace(tmp, writer.metrics_file_path)
            writer.metrics_keys = sorted(set(writer.metrics_keys) | set(header))
            return
    tmp.unlink()
