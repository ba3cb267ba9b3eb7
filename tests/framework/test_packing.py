"""Packing cells on one machine (PACK=N, hydra/launcher=joblib): each cell its own process, folder and record."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

CELLS = ("dataset=synthetic", "model=bert_ewe", "debug=smoke", "seed=1,2")


def records(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in out.rglob("metrics.json")}


@pytest.mark.slow  # two sequential smoke cells, then the same two in two loky workers: ~60 s on 2 busy cores
def test_two_packed_cells_give_the_records_of_two_sequential_runs(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="pip install -e .")
    sequential, packed = tmp_path / "sequential", tmp_path / "packed"
    one = run_cli("langrepr.train", "-m", *CELLS, f"paths.output_root={sequential}", timeout=600)
    assert one.returncode == 0, one.stderr[-3000:]
    two = run_cli("langrepr.train", "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *CELLS,
                  f"paths.output_root={packed}", timeout=600)
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = records(sequential), records(packed)
    assert len(a) == 2 and sorted(a) == sorted(b)          # same cell folders: the launcher keys name no cell
    assert not any("launcher" in name for name in b)
    for name in a:
        assert b[name]["status"] == a[name]["status"] == "finished"
        assert b[name]["fingerprint"] == a[name]["fingerprint"]          # same identity
        assert b[name]["metrics"] == a[name]["metrics"], name             # same numbers, to the last digit
    assert a[sorted(a)[0]]["metrics"] != a[sorted(a)[1]]["metrics"]      # two seeds: two different cells


def test_pack_adds_the_joblib_launcher_to_a_table_target():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    dry = subprocess.run(["make", "-n", "tensorcoder-table1", "PROFILE=full", "PACK=5"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    # the training sweep, and the paper-size count sweeps before it, all go through the joblib launcher
    sweeps = [part for line in dry.stdout.splitlines() for part in line.split("&&") if "langrepr.train" in part]
    (train,) = [sweep for sweep in sweeps if "ckpt_path=auto" in sweep]
    assert len(sweeps) == 3, sweeps
    for sweep in sweeps:
        assert sweep.split()[-2:] == ["hydra/launcher=joblib", "hydra.launcher.n_jobs=5"], sweep
    plain = subprocess.run(["make", "-n", "tensorcoder-table1"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "hydra/launcher" not in plain.stdout
