"""A cell's folder over its life: record reused or migrated, lock, start-over moved aside, resume, CSV log kept.

`langrepr.cell` re-exports every name here.
"""

from __future__ import annotations

import csv
import errno
import fcntl
import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langrepr.callbacks import read_checkpoint_meta
from langrepr.data.integrity import changed_files
from langrepr.errors import UserError
from langrepr.metric_versions import stale_metrics

log = logging.getLogger("langrepr.train")

KEEP_ON_RESTART = (".hydra", ".lock")   # Hydra's record of this invocation, and the lock this run holds
LOCK_FILE = ".lock"


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
