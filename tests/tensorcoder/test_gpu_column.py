"""The one-call GPU PTB column (scripts/gpu_ptb_column.sh) and its carry (scripts/prepare_gpu_carry.sh), on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import ROOT


def sh(script: str, *args: str, env: dict | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(["bash", str(ROOT / "scripts" / script), *args], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=timeout)


def test_column_without_a_prepared_carry_is_one_line(tmp_path):
    run = sh("gpu_ptb_column.sh", env={"GPU_CARRY": str(tmp_path / "none"), "OUT": str(tmp_path / "out")})
    assert run.returncode == 2 and run.stderr.strip().splitlines() == [
        f"error: no prepared carry at {tmp_path / 'none'}/ (hydra + data/ptb): run scripts/prepare_gpu_carry.sh here first"]
    bad = sh("gpu_ptb_column.sh", "--full", env={"OUT": str(tmp_path / "out")})
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown argument '--full'")


def test_carry_without_ptb_data_is_one_line(tmp_path):
    run = sh("prepare_gpu_carry.sh", "--dest", str(tmp_path / "carry"), env={"LANGREPR_DATA_DIR": str(tmp_path)})
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "no PTB copy" in run.stderr
    assert not (tmp_path / "carry").exists()


@pytest.mark.slow  # copies ~8 MiB, then two packed PTB cells of 2 CPU steps (tokenising PTB): ~40 s on 2 busy cores
def test_tiny_column_runs_packed_from_the_carry_and_tars_what_comes_back(tmp_path):
    data = os.environ.get("LANGREPR_DATA_DIR")
    if not data or not (Path(data) / "ptb" / "ptb.train.txt").exists():
        pytest.skip("needs LANGREPR_DATA_DIR with ptb/")
    carry, out = tmp_path / "carry", tmp_path / "out"
    prep = sh("prepare_gpu_carry.sh", "--dest", str(carry))
    assert prep.returncode == 0, prep.stderr
    assert f'carry=["{carry}"], timeout_s=600' in prep.stdout
    for pkg in ("hydra", "omegaconf", "antlr4", "hydra_plugins/hydra_joblib_launcher"):
        assert (carry / "site-packages" / pkg).is_dir()
    assert not (carry / "site-packages" / "hydra_plugins" / "__init__.py").exists()   # a namespace: ours join it
    run = sh("gpu_ptb_column.sh", "--tiny", env={"GPU_CARRY": str(carry), "OUT": str(out)}, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + (out / "train.log").read_text()[-3000:]
    log = (out / "column.log").read_text()
    assert "sweep finished" in log and "hydra/launcher=joblib hydra.launcher.n_jobs=2" in log
    with tarfile.open(out / "ptb_column_runs.tar.gz") as tar:
        names = tar.getnames()
    records = [n for n in names if n.endswith("/metrics.json")]
    assert len(records) == 2 and not any("checkpoints" in n or n.endswith(".ckpt") for n in names)
    assert any("model=transformer_1head" in n for n in records) and any("model=tensorcoder_1conv" in n for n in records)
    table = json.loads(next(out.glob("tensorcoder_table1*.json")).read_text())
    assert table["rows"]
    assert len([p for p in out.iterdir() if p.is_file()]) <= 8       # what a device call brings back
