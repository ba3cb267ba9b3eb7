"""Smoke tests of the LEAM table targets: each experiment's quick sweep runs at a tiny size and renders.

Same shape as `test_make_targets.py`: the CLI a user runs (`langrepr.train -m experiment=... profile=quick`),
then `langrepr.tables`. Data: a generated AG-News-like test.csv in a tmp LANGREPR_DATA_DIR.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run_cli
from langrepr.confpaths import option_files
from tiny_data import write_agnews_test


def _fake_agnews(root: Path) -> Path:
    write_agnews_test(root / "agnews", per_class=40)
    return root


def _sweep(table: str, first_model: str = "leam") -> list[str]:
    """The quick sweep's model/dataset lists, given explicitly (LEAM first) so the CLI's config check composes
    a model and data set that the shrinking overrides below apply to."""
    params = {}
    for path in (option_files("experiment")[table], option_files("experiment_profile")[f"{table}_quick"]):
        params.update(yaml.safe_load(path.read_text())["hydra"]["sweeper"]["params"])
    models = str(params["model"]).split(",")
    models = [first_model] + [m for m in models if m != first_model]
    return [f"model={','.join(models)}", f"dataset={params['dataset']}"]


def _render(out: Path, table: str) -> dict:
    render = run_cli("langrepr.tables", table, "--profile", "quick", "--outputs", str(out))
    assert render.returncode == 0, render.stderr[-3000:]
    return json.loads((out / "tables" / f"{table}.quick.json").read_text())


def test_leam_table2_target_runs_and_renders_at_smoke_size(tmp_path):
    out, data = tmp_path / "outputs", _fake_agnews(tmp_path / "data")
    run = run_cli("langrepr.train", "-m", "experiment=leam_table2", "profile=quick", *_sweep("leam_table2"),
                  "++hydra.sweeper.params.seed=1", "debug=leam_smoke", f"paths.output_root={out}", f"paths.cache_dir={tmp_path / 'cache'}",
                  env={"LANGREPR_DATA_DIR": str(data), "OMP_NUM_THREADS": "1"}, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = _render(out, "leam_table2")
    ag = {row["key"]: row["cells"]["AG News"]["ours"] for row in result["rows"]}
    assert all(v is not None for v in ag.values()), ag
    assert ag["Majority class"] == 25.0
    assert all(row["cells"]["Yahoo"]["ours"] is None for row in result["rows"]), "quick runs AG News only"
    # make leam-figures: the attention page from this sweep's LEAM run
    (run_dir,) = (out / "quick" / "leam_table2").glob("*model=leam,*")
    page = tmp_path / "figures" / "leam_fig4_attention.quick.html"
    fig = subprocess.run([sys.executable, str(ROOT / "scripts" / "leam_figures.py"), "--run", str(run_dir),
                          "--figures", "fig4", "--docs", "2", "--out-dir", str(page.parent)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "LANGREPR_DATA_DIR": str(data)})
    assert fig.returncode == 0, fig.stderr[-3000:]
    assert page.read_text().count("<span style=") > 2


@pytest.mark.slow   # the same code path as Table 2 with another sweep; ~20 s of CLI start-up on 2 idle cores
def test_leam_table3_target_runs_and_renders_at_smoke_size(tmp_path):
    out, data = tmp_path / "outputs", _fake_agnews(tmp_path / "data")
    run = run_cli("langrepr.train", "-m", "experiment=leam_table3", "profile=quick", *_sweep("leam_table3"),
                  "++hydra.sweeper.params.seed=1", "leam_window=1,3", "debug=leam_smoke",
                  f"paths.output_root={out}", f"paths.cache_dir={tmp_path / 'cache'}",
                  env={"LANGREPR_DATA_DIR": str(data), "OMP_NUM_THREADS": "1"}, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = _render(out, "leam_table3")
    ran = {row["key"] for row in result["rows"] if row["cells"]["AG News"]["ours"] is not None}
    assert ran == {"window 1 (r = 0)"}   # window 3 ran too but is not a row of the table


@pytest.mark.slow   # ~14 s of CLI start-up; the same make-target path as Table 2
def test_leam_table4_target_runs_and_renders_at_smoke_size(tmp_path):
    out = tmp_path / "outputs"
    run = run_cli("langrepr.train", "-m", "experiment=leam_table4", "profile=quick", *_sweep("leam_table4"),
                  "++hydra.sweeper.params.seed=1", "debug=leam_smoke", "pipeline.vocab_size=50",
                  "pipeline.length=60", "pipeline.iterations=1", "pipeline.warmup=0", f"paths.output_root={out}",
                  f"paths.cache_dir={tmp_path / 'cache'}", env={"OMP_NUM_THREADS": "1"}, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = _render(out, "leam_table4")
    rows = {row["key"]: row["cells"] for row in result["rows"]}
    assert rows["LEAM (paper eqs.)"]["Time ratio to LEAM"]["ours"] == 1.0
    assert all(c["ours"] is not None for cells in rows.values() for c in cells.values())


@pytest.mark.slow   # the multi-label path is also covered in-process by test_leam_data.py / test_leam_model.py
def test_leam_table5_target_runs_and_renders_at_smoke_size(tmp_path):
    out = tmp_path / "outputs"
    run = run_cli("langrepr.train", "-m", "experiment=leam_table5", "profile=quick", *_sweep("leam_table5"),
                  "++hydra.sweeper.params.seed=1", "debug=leam_smoke", "dataset.datamodule.n_train=200",
                  "dataset.datamodule.n_test=60", "dataset.datamodule.n_subclasses=8", f"paths.output_root={out}",
                  f"paths.cache_dir={tmp_path / 'cache'}", env={"OMP_NUM_THREADS": "1"}, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = _render(out, "leam_table5")
    rows = {row["key"]: row["cells"] for row in result["rows"]}
    assert all(c["ours"] is not None for cells in rows.values() for c in cells.values()), rows
    assert rows["Label prior"]["Macro AUC"]["ours"] == 0.5
    assert all(claim["holds"] is None for claim in result["claims"])
