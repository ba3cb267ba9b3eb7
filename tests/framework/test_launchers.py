"""Launchers that run cells in other processes propagate failure: the cell's line on this console, exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import run_cli, run_main
from langrepr.scale_out import FailedCell, report_failed_cells

HERE = Path(__file__).parent


def nan_for_seed_2(output_dir: str, seed: int) -> dict:
    """A pipeline cell that finishes for seed 1 and diverges for seed 2."""
    return {"x": float("nan") if seed == 2 else 1.0}


def two_cells(out: Path, launcher: str, *extra: str) -> tuple:
    return ("langrepr.train", "-m", f"hydra/launcher={launcher}", *extra, "experiment=bitcipher_table1", "model=none",
            "bitcipher_vectors=majority", "~pipeline", f"+pipeline={{_target_: {__name__}.nan_for_seed_2, seed: ${{seed}}}}",
            "seed=1,2", f"paths.output_root={out}")


ENV = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]), "PYTHONWARNINGS": "ignore"}


def job(folder: str, value) -> SimpleNamespace:
    """A Hydra JobReturn as a launcher hands it back: the cell's folder and what its task returned."""
    runtime = SimpleNamespace(output_dir=f"/x/{folder}")
    return SimpleNamespace(_return_value=value, hydra_cfg=SimpleNamespace(hydra=SimpleNamespace(runtime=runtime)))


def test_failed_cells_returned_by_a_launch_are_one_line_each_and_exit_2(capsys):
    report_failed_cells([job("seed=1", None), job("seed=3", None)])            # all finished: nothing, no exit
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as exit_:
        report_failed_cells([job("seed=1", None), job("seed=2", FailedCell("training diverged at step 3"))])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "error: seed=2: training diverged at step 3" and err[1].startswith("error: 1 of 2 cells failed")


def test_submitit_slurm_without_slurm_is_one_line(tmp_path, monkeypatch, capfd):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install -e '.[cluster]'")
    monkeypatch.setenv("PATH", str(tmp_path))                 # no sbatch, no srun
    code = run_main(["-m", "hydra/launcher=submitit_slurm", "experiment=ewe_table1", "model=bert_orig",
                     f"paths.output_root={tmp_path / 'out'}"])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-3000:]
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "needs SLURM" in line and "sbatch or srun" in line and "hydra/launcher=joblib" in line


@pytest.mark.slow  # two loky workers import torch and Lightning: ~20 s on 2 busy cores
def test_joblib_a_diverged_cell_reaches_the_console_and_exits_2(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="pip install -e .")
    out = tmp_path / "out"
    run = run_cli(*two_cells(out, "joblib", "hydra.launcher.n_jobs=2"), env=ENV, timeout=300)
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    lines = [x for x in run.stderr.splitlines() if x.startswith("error: ") and "seed=2" in x]
    assert len(lines) == 1 and "diverged: x = nan" in lines[0], run.stderr[-3000:]
    records = {p.parent.name: json.loads(p.read_text()) for p in out.rglob("metrics.json")}
    status = {("seed=2" if "seed=2" in k else "seed=1"): r["status"] for k, r in records.items()}
    assert status == {"seed=1": "finished", "seed=2": "diverged"}             # the other cell still ran


@pytest.mark.slow  # two submitit jobs import torch and Lightning: ~30 s
def test_submitit_local_a_diverged_cell_reaches_the_console_and_exits_2(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install -e '.[cluster]'")
    out = tmp_path / "out"
    run = run_cli(*two_cells(out, "submitit_local"), env=ENV, timeout=300)
    assert run.returncode == 2, run.stderr[-3000:]      # before: 0, and the line only in .submitit/<job>/*.err
    lines = [x for x in run.stderr.splitlines() if x.startswith("error: ") and "seed=2" in x]
    assert len(lines) == 1 and "diverged: x = nan" in lines[0], run.stderr[-3000:]
