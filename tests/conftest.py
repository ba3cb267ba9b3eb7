"""Shared fixtures: compose the real primary config (as the CLI does), shrink it, keep everything offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from langrepr.confpaths import CONF_DIR

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    """Register the ${cell:} resolver Hydra needs to compose, where tests run: not in pytest-xdist's controller
    (`make test` runs two workers), which runs no test and would hold torch's ~0.4 GB for nothing."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    import langrepr.train  # noqa: F401


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


def run_main(argv: list[str]) -> int:
    """`python -m langrepr.train <argv>` in this process; the exit code."""
    import langrepr.train as entry

    saved = sys.argv
    sys.argv = ["langrepr.train", *argv]
    entry.FAILED_CELLS.clear()
    try:
        entry.main()
        return 0
    except SystemExit as exit_:
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 1
    finally:
        sys.argv = saved


def the_line(err: str) -> str:
    """The one `error: ...` line of a run (no traceback, no second error line), without its prefix."""
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err[-3000:]
    return lines[0][len("error: "):]


def fails_with(capfd, argv: list[str], code: int = 2) -> str:
    """Run argv; assert the exit code; return the one error line."""
    got = run_main(argv)
    err = capfd.readouterr().err
    assert got == code, (got, err[-3000:])
    return the_line(err)


class WordLengthTokenizer:
    """The patent tokenizer contract (prepare / cache_key / encode) with 8 word-length ids per document, for tests
    of what a datamodule does with documents and labels rather than with their text."""

    vocab_size = 16

    def __init__(self, key: str = "fake-word-length"):
        self.key = key

    def prepare(self, texts, cache_dir):
        pass

    def cache_key(self):
        return self.key

    def encode(self, texts):
        import torch
        ids = torch.tensor([[1 + len(w) % 15 for w in (t.split() + [""] * 8)[:8]] for t in texts])
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}



@pytest.fixture
def own_digest_cache(tmp_path, monkeypatch):
    """Each case its own digest cache, so no earlier test's digest of a same-named tmp file answers."""
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))


@pytest.fixture
def fresh_root_logger(monkeypatch):
    """The CLIs' logging.basicConfig writes to this test's stderr, not to an earlier test's closed capture, and our
    loggers are not left disabled by an earlier in-process Hydra run (its logging config disables existing ones)."""
    import logging

    monkeypatch.setattr(logging.root, "handlers", [])
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.startswith("langrepr") and isinstance(logger, logging.Logger):
            monkeypatch.setattr(logger, "disabled", False)


@pytest.fixture
def ptb_root(tmp_path, monkeypatch) -> Path:
    """A tiny PTB folder (train / valid / test) under tmp_path/data, with its own digest cache."""
    ptb = tmp_path / "data" / "ptb"
    ptb.mkdir(parents=True)
    for name, n in [("ptb.train.txt", 120), ("ptb.valid.txt", 30), ("ptb.test.txt", 30)]:
        (ptb / name).write_text("".join(f"the w{i % 13} of w{i % 7} N\n" for i in range(n)))
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    return tmp_path / "data"


# the bad-input and fault cases' tiny inputs (tests/bad_inputs.py), copied fresh for each case
@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict:
    from langrepr.data.patents.synthetic import generate

    root = tmp_path_factory.mktemp("pristine")
    generate(root / "export", n_train=60, n_test=12, n_subclasses=6, seed=1, shard_rows=32)
    generate(root / "export_other", n_train=60, n_test=12, n_subclasses=6, seed=2, shard_rows=32)
    ptb = root / "data" / "ptb"
    ptb.mkdir(parents=True)
    for name, n in [("ptb.train.txt", 120), ("ptb.valid.txt", 30), ("ptb.test.txt", 30)]:
        (ptb / name).write_text("".join(f"the w{i % 13} of w{i % 7} N\n" for i in range(n)))
    return {"root": root}


@pytest.fixture
def paths(pristine, tmp_path, monkeypatch) -> dict:
    shutil.copytree(pristine["root"] / "export", tmp_path / "export")
    shutil.copytree(pristine["root"] / "data", tmp_path / "data")
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    return {"export": tmp_path / "export", "export_other": pristine["root"] / "export_other",
            "ptb_root": tmp_path / "data", "ptb": tmp_path / "data" / "ptb", "cell": tmp_path / "out" / "cell",
            "tmp": tmp_path}
