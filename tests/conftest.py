"""Shared fixtures: compose the real primary config (as the CLI does), shrink it, keep everything offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import langrepr.train  # noqa: F401  (registers the ${cell:} resolver Hydra needs to compose)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "conf"


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    """One cache for the session so synthetic patents and trained vocabularies are generated once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def compose_cfg(tmp_path, shared_cache):
    """compose_cfg(*overrides) -> DictConfig from conf/train.yaml, with paths pointed at tmp dirs."""
    from hydra import compose, initialize_config_dir

    def _compose(*overrides: str, hydra: bool = False):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("train", return_hydra_config=hydra, overrides=[
                *overrides, f"paths.output_root={tmp_path / 'outputs'}",
                f"paths.output_dir={tmp_path / 'run'}", f"paths.cache_dir={shared_cache}"])

    return _compose


def run_cli(*args: str, cwd: Path = ROOT, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run `python -m <args>` the way a user would and capture both streams."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)
