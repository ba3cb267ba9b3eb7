"""Smoke test of every Bit Cipher table target: the commands `make bitcipher-tableN PROFILE=quick` runs (read
from `make -n`, so the test follows the Makefile) run on tiny generated text, and every table renders with all
of its cells, including the rows it reads from other tables' sweeps."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from test_bit_cipher_pipeline import write_tiny_data_dir

from conftest import run_cli
from langrepr.confpaths import group_options

ROOT = Path(__file__).resolve().parents[2]
TABLES = [t for t in group_options("experiment") if t.startswith("bitcipher_table")]
TINY = ["++hydra.sweeper.params.seed=1", "pipeline.probe.epochs=2", "pipeline.probe.hidden=16",
        "bitcipher.corpus.shard_tokens=300", "bitcipher.workers=1"]


def make_commands(target: str) -> list[list[str]]:
    """The `python -m langrepr.{train,tables} ...` commands of a make target, in order (module and arguments)."""
    dry = subprocess.run(["make", "-n", target, "PROFILE=quick"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert dry.returncode == 0, dry.stderr
    commands = []
    for line in dry.stdout.splitlines():
        for part in line.split("&&"):
            words = shlex.split(part)
            if "-m" in words and words[words.index("-m") + 1].startswith("langrepr."):
                commands.append(words[words.index("-m") + 1:])
    return commands


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_every_table_has_a_make_target():
    assert TABLES, "no Bit Cipher experiments found"
    for table in TABLES:
        assert any(c[0] == "langrepr.tables" and c[1] == table
                   for c in make_commands(table.replace("_", "-"))), table


@pytest.mark.slow   # 8 sweeps, 20 tiny cells: ~2 CPU-minutes (make test-all)
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_bitcipher_table_targets_run_and_render_on_tiny_text(tmp_path):
    data = write_tiny_data_dir(tmp_path / "data")
    out = tmp_path / "outputs"
    env = {"LANGREPR_DATA_DIR": str(data)}
    paths = [f"paths.output_root={out}", f"paths.cache_dir={tmp_path / 'cache'}"]
    runs, renders = [], []
    for table in TABLES:
        for command in make_commands(table.replace("_", "-")):
            target = runs if command[0] == "langrepr.train" else renders
            if command not in target:   # shared sweeps (references, the grid's centre) run once
                target.append(command)
    for command in runs:
        run = run_cli(*command, *TINY, *paths, env=env, timeout=600)
        assert run.returncode == 0, f"{command}: {run.stderr[-3000:]}"
    for command in renders:
        render = run_cli(*command, "--outputs", str(out), env=env)
        assert render.returncode == 0, render.stderr[-3000:]
        table = command[1]
        result = json.loads((out / "tables" / f"{table}.quick.json").read_text())
        # every test word of the tiny probe data occurs in its training split: the unseen-word accuracies are
        # undefined there (recorded as None, not NaN, so that NaN can mean diverged), so those columns may be empty
        missing = [row["key"] for row in result["rows"] for name, c in row["cells"].items()
                   if c["ours"] is None and "unseen" not in name]
        assert not missing, f"{table}: rows of the smoke sweep did not run: {missing}"
