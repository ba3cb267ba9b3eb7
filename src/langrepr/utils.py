"""Small run-bookkeeping helpers shared by training and rendering (langrepr.tables): atomic JSON, git commit, versions."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def current_umask() -> int:
    """The process umask, read without changing it where Linux shows it (os.umask sets it while reading)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def open_mode(fd: int) -> None:
    """Give a `tempfile.mkstemp` file the mode `open()` would (0666 minus the umask) instead of mkstemp's 0600.

    Results renamed into place from a temporary file must be readable by whoever the user's umask lets read
    the rest of the run folder (the group on a shared machine), not by the owner alone.
    """
    os.fchmod(fd, 0o666 & ~current_umask())


def _name_the_file(err: BaseException, path: Path) -> None:
    """A write error on a file descriptor has no file name; give it the file being written (the error line names it)."""
    if isinstance(err, OSError) and err.filename is None:
        err.filename = str(path)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write text so that a crash never leaves a half-written file (readers see old or new, never torn)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        open_mode(fd)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        _name_the_file(err, path)
        raise


def write_json_atomic(path: str | Path, payload: Any) -> None:
    """Atomic JSON write (indented, non-JSON values as their str, one trailing newline)."""
    write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")


def git_commit(short: bool = True) -> str:
    """The commit the code ran at, with `+dirty` when the tree had local changes ('unknown' outside git)."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"] if short else ["git", "rev-parse", "HEAD"],
            cwd=PROJECT_ROOT, capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            # rendered tables and reports under outputs/ are results, not code: they never make a run dirty
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)outputs"],
            cwd=PROJECT_ROOT, capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
        return f"{sha}+dirty" if dirty else sha
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    """Versions of the libraries whose behaviour changes results, recorded with every run."""
    out = {}
    for name in ("langrepr", "torch", "pytorch-lightning", "transformers", "tokenizers", "datasets",
                 "torchmetrics", "hydra-core", "sacrebleu"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def data_root() -> Path | None:
    """`LANGREPR_DATA_DIR`: a folder laid out like shared/data (local copies replacing hub downloads)."""
    value = os.environ.get("LANGREPR_DATA_DIR")
    return Path(value) if value else None
