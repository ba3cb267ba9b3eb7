"""Small run-bookkeeping helpers shared by train.py and tables.py: atomic JSON, git commit, versions."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def write_json_atomic(path: str | Path, payload: Any) -> None:
    """Write JSON so that a crash never leaves a half-written file (readers see old or new, never torn)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Atomic text write (same reason as `write_json_atomic`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
