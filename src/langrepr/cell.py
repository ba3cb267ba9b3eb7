"""A cell's identity and lifecycle on disk: fingerprint, data digest, lock, status, force, resume.

One cell = one folder = one result. Its identity is what its stage reads, nothing else:

- a train cell: the *resolved* config (so `${oc.env:...}` data locations count) minus where it is written;
- a pipeline / stats cell: its `pipeline:` / `stats:` node (resolved, so whatever it interpolates counts), its
  seed and its stage; a count cell: `model.net`, `count_net_kwargs`, seed and stage. Editing one paper's model
  or the trainer therefore never invalidates another paper's pipeline cells;
- plus the content of the data it read: a digest of the files its config lists (`langrepr.data.integrity`) and
  the sha256 of every file it opened under its data roots (`data_files` in metrics.json).

`metrics.json` carries a status — running, finished, failed (with the error line) or diverged — and a finished
cell is reused only when its fingerprint matches and its data is unchanged. A record written under an earlier
fingerprint scheme (the whole resolved config, or the unresolved one before that) is still recognised and is
rewritten with the current fingerprint on its first match (`migrate`), so no finished cell has to be re-run.
Starting a cell over moves the previous attempt aside (`<run>/.replaced/<cell>@<time>/`, its metrics.json
renamed so tables never read it) instead of mixing old and new files; a checkpoint is resumed only into the
config that wrote it; one cell runs in one process at a time (`lock`).
"""

from __future__ import annotations

import copy
import csv
import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

import langrepr
from langrepr.callbacks import read_checkpoint_meta
from langrepr.confpaths import CONF_DIR
from langrepr.data.integrity import changed_files, source_contents, source_digest
from langrepr.errors import UserError
from langrepr.metric_versions import stale_metrics

log = logging.getLogger("langrepr.train")

# keys that say where/how a cell is written or shown, not what it computes
# the training-step switches (conf/train.yaml, train.step_switches): how fast a step runs, not what it computes
STEP_SWITCHES = ("compile", "pad_to_fixed", "sync_free", "fused_optimizer", "matmul_precision")
NOT_IDENTITY = ("ckpt_path", "force", "logger", "table", "hydra", "supported_datasets", "seeds", *STEP_SWITCHES)
KEEP_ON_RESTART = (".hydra", ".lock")   # Hydra's record of this invocation, and the lock this run holds
# what each non-train stage reads from the config (besides its seed); a train cell reads all of it
STAGE_NODES = {"pipeline": ("pipeline",), "stats": ("stats",), "count": ("model.net", "count_net_kwargs")}
LOCK_FILE = ".lock"


def _hash(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _resolved(node: Any) -> Any:
    try:
        return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    except Exception as err:  # noqa: BLE001  (an interpolation that cannot resolve: say which)
        raise UserError(f"the config does not resolve: {' '.join(str(err).split()[:40])}") from None


def _without_locations(cfg: DictConfig) -> DictConfig:
    """A copy of the config minus where and how the cell is written or shown (not what it computes)."""
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
    return c


def config_fingerprint(cfg: DictConfig) -> str:
    """Hash of the whole resolved config minus output locations: a train cell's identity.

    For the other stages it is the previous scheme's fingerprint (accepted as legacy). Validation also calls it
    to check that every interpolation resolves.
    """
    return _hash(_resolved(_without_locations(cfg)))


def stage_reads(cfg: DictConfig) -> dict[str, Any]:
    """What the cell's stage reads from the config, resolved (locations as placeholders): its identity."""
    stage = cfg.get("stage", "train")
    c = _without_locations(cfg)
    if stage not in STAGE_NODES:
        return _resolved(c)
    reads = {"stage": stage, "seed": c.get("seed")}
    for key in STAGE_NODES[stage]:
        reads[key] = _resolved(OmegaConf.select(c, key, default=None))
    return reads


def cell_fingerprint(cfg: DictConfig) -> str:
    """The cell's identity: the hash of what its stage reads (`stage_reads`).

    For a train cell that is `config_fingerprint` itself, so train cells and their checkpoints keep theirs.
    """
    if cfg.get("stage", "train") not in STAGE_NODES:
        return config_fingerprint(cfg)
    return _hash(stage_reads(cfg))


# Entry points that moved (old `_target_` -> new): a cell recorded under the old name is still this cell, so its
# finished record is recognised (and migrated) instead of refused. Add a line when a `_target_` moves.
MOVED_TARGETS = {
    # multi-hot LM non-gradient cells, data/ and tasks/ -> pipelines/multihot/ (issue 20 item 3)
    "langrepr.data.korean.prepare.table1_pipeline": "langrepr.pipelines.multihot.token_lists.table1_pipeline",
    "langrepr.tasks.span_qa.korquad_answer_pipeline": "langrepr.pipelines.multihot.answers.korquad_answer_pipeline",
}


def with_old_targets(cfg: DictConfig) -> list[DictConfig]:
    """The config as it was written before its `_target_`s moved (`MOVED_TARGETS`); [] when none moved."""
    old_names: dict[str, list[str]] = {}
    for old, new in MOVED_TARGETS.items():
        old_names.setdefault(new, []).append(old)
    moved: list[tuple[str, list[str]]] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, DictConfig):
            target = node._get_node("_target_") if "_target_" in node else None
            if target is not None and not target._is_interpolation() and target._value() in old_names:
                moved.append((f"{path}_target_", old_names[target._value()]))
            for key in node:
                if key != "hydra":
                    walk(node._get_node(key), f"{path}{key}.")

    walk(cfg, "")
    variants = []
    for key, names in moved:
        for name in names:
            c = copy.deepcopy(cfg)
            OmegaConf.update(c, key, name, force_add=True)
            variants.append(c)
    return variants


def legacy_fingerprints(cfg: DictConfig) -> set[str]:
    """Fingerprints earlier schemes gave this cell: a finished record carrying one is still this cell's.

    The earlier schemes of this config, and every scheme (the current one too) of the config with its moved
    `_target_`s under their old names. A scheme that cannot hash a config (a pipeline cell whose unused nodes
    no longer resolve) gives none.
    """
    found = set()
    for variant, schemes in [(cfg, (config_fingerprint, legacy_fingerprint))] + [
            (old, (cell_fingerprint, config_fingerprint, legacy_fingerprint)) for old in with_old_targets(cfg)]:
        for scheme in schemes:
            try:
                found.add(scheme(variant))
            except Exception:  # noqa: BLE001  (then no record can carry that scheme's fingerprint either)
                continue
    return found - {cell_fingerprint(cfg)}


def legacy_fingerprint(cfg: DictConfig) -> str:
    """The pre-digest fingerprint (unresolved config), accepted for cells finished before it changed."""
    plain = OmegaConf.to_container(cfg, resolve=False)
    for key in ("paths", "ckpt_path", "force", "logger", "table", "supported_datasets", *STEP_SWITCHES):
        plain.pop(key, None)
    callbacks = plain.get("callbacks") or {}
    for key in ("last_checkpoint", "non_finite"):       # added with this scheme; absent from older records
        callbacks.pop(key, None)
    if isinstance(callbacks.get("progress"), dict) and callbacks["progress"].get("_target_") == "langrepr.callbacks.ProgressBar":
        callbacks["progress"] = {"_target_": "pytorch_lightning.callbacks.RichProgressBar"}   # how it was written then
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
    """Digest of the files the config lists (EWE / TensorCoder datamodules); None when it lists none."""
    return source_digest(data_nodes(cfg))


def data_contents(cfg: DictConfig) -> list[str]:
    """sha256 of the files the config lists, sorted (the same data at another path has the same ones)."""
    return source_contents(data_nodes(cfg))


def data_roots(cfg: DictConfig, output_dir: Path) -> tuple[list[Path], list[Path]]:
    """(roots, excluded): where this cell's data lives, for recording which files it reads.

    The roots are `paths.data_dir` and every existing path the config names (a string with a '/'), except
    folders that hold code; excluded are the cell's outputs, the derived caches and the code.
    """
    c = copy.deepcopy(cfg)
    with open_dict(c):
        if "paths" in c:
            c.paths.output_dir = str(output_dir)
    code = [Path(langrepr.__file__).resolve().parent, CONF_DIR, Path(sys.prefix), Path(sys.base_prefix)]
    excluded = [Path(output_dir), *code]
    for key in ("paths.output_root", "paths.cache_dir"):
        value = OmegaConf.select(c, key, default=None, throw_on_resolution_failure=False)
        if value:
            excluded.append(Path(str(value)))
    try:
        plain = OmegaConf.to_container(c, resolve=True)
    except Exception:  # noqa: BLE001  (unresolvable parts: then only the data folder is a root)
        plain = {"paths": {"data_dir": OmegaConf.select(c, "paths.data_dir", default=None,
                                                        throw_on_resolution_failure=False)}}
    roots = []
    for value in _strings(plain):
        if ("/" in value or value == (plain.get("paths") or {}).get("data_dir")) and os.path.exists(value):
            root = Path(value).resolve()
            if not any(root == c_ or root in c_.resolve().parents for c_ in code):   # "." or "/" hold code
                roots.append(root)
    return sorted(set(roots)), excluded


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


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


def reusable(record: dict | None, output_dir: Path, fingerprint: str, legacy: set[str] | str,
             digest: str | None, contents: Callable[[], Sequence[str]] | None = None) -> bool:
    """True when the finished cell on disk is this cell's result; UserError when it belongs to other inputs.

    `contents` gives the sha256 of the data files the cell reads now: when the digest differs only because the
    files are at another path (a moved checkout), every file the record says it read is here with the same bytes
    and the cell is still this cell's result.
    """
    if record is None or record.get("status") != "finished":
        return False
    accepted = {fingerprint, *([legacy] if isinstance(legacy, str) else legacy)}
    if record.get("fingerprint") not in accepted:
        raise UserError(f"{output_dir} holds a finished run of a different config; pass force=true to rerun it "
                        "(the old run is moved to .replaced/) or choose another run_id")
    recorded, files = record.get("data_digest"), record.get("data_files") or {}
    moved: Sequence[str] = ()
    if recorded and digest and recorded != digest:
        moved = contents() if contents else ()
        if not files or not set(files.values()) <= set(moved):       # every file it read is here, same bytes
            raise UserError(f"the data of {output_dir} changed since it finished (digest {recorded} -> {digest}): pass "
                            "force=true to rerun it on the new data (the old run is moved to .replaced/)")
        log.info("%s read the same data at another path (%d files, same contents): reused", output_dir, len(moved))
    changed, missing = changed_files(files)
    missing = [p for p in missing if files[p] not in moved]     # moved, not gone
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        raise UserError(f"the data of {output_dir} changed since it finished ({changed[0]}{more}): pass force=true "
                        "to rerun it on the new data (the old run is moved to .replaced/)")
    if missing:
        log.warning("%s read %s, which is no longer there: its finished result is kept, unchecked", output_dir,
                    missing[0] if len(missing) == 1 else f"{len(missing)} files (e.g. {missing[0]})")
    stale = stale_metrics(record)
    if stale:  # scored under an older metric definition: re-score (from its last checkpoint when one is kept)
        log.warning("%s was scored under an older definition of %s: running it again", output_dir, ", ".join(stale))
        return False
    return True


def migrate(record: dict, output_dir: Path, fingerprint: str) -> dict:
    """Rewrite a record found under an earlier fingerprint scheme with the current fingerprint (once)."""
    if record.get("fingerprint") == fingerprint:
        return record
    from langrepr.scale_out import write_record

    record = {**record, "fingerprint": fingerprint, "migrated_from": record.get("fingerprint")}
    write_record(output_dir / "metrics.json", record)
    log.info("Recognised %s under its earlier fingerprint %s; recorded it as %s", output_dir,
             record["migrated_from"], fingerprint)
    return record


@contextmanager
def lock(output_dir: Path) -> Iterator[None]:
    """Hold the cell's lock (`<cell>/.lock`, an OS lock: a killed run never leaves it held); refuse if taken."""
    path = Path(output_dir) / LOCK_FILE
    fh = open(path, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = " ".join(fh.read().split()) or "another process"
        fh.close()
        raise UserError(f"{output_dir} is running now ({holder}): wait for that run to end, or stop it, before "
                        "starting this cell again") from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        fh.flush()
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def _cannot_move(entry: Path, why: str, target: Path | None = None, what: str = "the previous attempt's") -> UserError:
    moved = f"; what was already moved is in {target}" if target is not None else ""
    return UserError(f"cannot move {what} {entry} aside ({why}): make it writable (chmod -R u+w {entry}) or move it "
                     f"out of the cell folder yourself, then rerun{moved}")


def _rename(entry: Path, dest: Path, target: Path, what: str = "the previous attempt's") -> None:
    """Rename (atomic, nothing copied; copied only to another file system); a refusal is one line with the fix."""
    try:
        os.rename(entry, dest)
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise _cannot_move(entry, err.strerror or type(err).__name__, target, what) from None
        shutil.move(str(entry), str(dest))


def move_aside(output_dir: Path) -> Path | None:
    """Move a previous attempt's files out of the cell folder; returns where they went (None if nothing).

    Each entry is renamed (atomic, nothing copied): a read-only folder such as a `wandb/` left by another user
    used to fail halfway through shutil.move's copy-then-delete, with a traceback and the folder in two places
    (issue 33 finding 10). A directory moves to another parent only when it is writable, so that is checked
    first and said in one line.
    """
    entries = [p for p in output_dir.iterdir() if p.name not in KEEP_ON_RESTART and not p.name.endswith(".log")]
    if not entries:
        return None
    stuck = next((p for p in entries if p.is_dir() and not p.is_symlink() and not os.access(p, os.W_OK)), None)
    if stuck is not None:
        raise _cannot_move(stuck, "it is read-only")
    target = output_dir.parent / ".replaced" / f"{output_dir.name}@{time.strftime('%Y%m%d-%H%M%S')}"
    target.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        _rename(entry, target / ("metrics.replaced.json" if entry.name == "metrics.json" else entry.name), target)
    log.info("Moved the previous attempt of %s to %s", output_dir, target)
    return target


def adopt_legacy_folder(output_dir: Path, override_dirname: str | None) -> Path | None:
    """Move a cell recorded in its old nested folder into its one folder, once; returns the old folder (or None).

    Before issue 33 a '/' in an override value nested the cell (`confpaths.legacy_cell_dir_name`); its finished
    record, checkpoints and logs move into today's folder, so the cell is reused, resumed or moved aside as any
    other and a table never counts it twice. The old folder keeps only Hydra's record and log of that invocation.
    """
    from langrepr.confpaths import legacy_cell_dir_name

    old = Path(legacy_cell_dir_name(override_dirname)) if override_dirname is not None else None
    if old is None or old.is_absolute() or ".." in old.parts:
        return None
    legacy = output_dir.parent / old
    if legacy == output_dir or not (legacy / "metrics.json").is_file() or (output_dir / "metrics.json").exists():
        return None
    with lock(legacy):                                   # not while an older checkout still runs it there
        for entry in sorted(legacy.iterdir()):
            if entry.name not in KEEP_ON_RESTART and not (output_dir / entry.name).exists():
                _rename(entry, output_dir / entry.name, output_dir, "the nested cell's")
    log.warning("Moved the cell recorded in %s (nested by a '/' in an override, before issue 33) to %s", legacy,
                output_dir)
    return legacy


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
