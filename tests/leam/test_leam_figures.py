"""`make leam-figures` on tiny generated run artefacts: Table 2 cells with CSV learning curves, Table 3 cells over
the window, and one LEAM run (its config and a checkpoint of an untrained tiny LEAM) for Figs. 3 and 4."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from conftest import ROOT
from tiny_data import write_agnews_test

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _cell(root: Path, name: str, model: str, seed: int, acc: float, curve: list[tuple[int, float]] | None = None,
          config: dict | None = None) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({
        "status": "finished", "seed": seed, "commit": "abc1234", "choices": {"model": model},
        "metrics": {"test/test/acc": acc}}))
    if curve:
        (run / "csv").mkdir()
        with (run / "csv" / "metrics.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["epoch", "step", "train/loss", "val/acc"])
            writer.writeheader()
            for step, value in curve:
                writer.writerow({"epoch": 0, "step": step, "train/loss": 1.0, "val/acc": ""})  # a train-only row
                writer.writerow({"epoch": 0, "step": step, "train/loss": "", "val/acc": value})
    if config is not None:
        (run / "config_resolved.yaml").write_text(yaml.safe_dump(config))
    return run


def _leam_run(run: Path, data: Path, cache: Path) -> None:
    """config_resolved.yaml of a tiny LEAM cell on the generated data, and a checkpoint of its (untrained) net."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from langrepr.models.leam import LEAM

    config = {
        "dataset": {"datamodule": {
            "_target_": "langrepr.data.classification.datamodule.TextClassificationDataModule", "name": "ag_news",
            "data_dir": str(data), "class_names": ["World", "Sports", "Business", "Science"], "batch_size": 8,
            "split_test_fraction": 0.25, "val_fraction": 0.1, "cache_dir": str(cache)}},
        "model": {"tokenizer": {"_target_": "langrepr.data.classification.vocab.WordTokenizer", "max_length": 12}},
    }
    (run / "config_resolved.yaml").write_text(yaml.safe_dump(config))
    cfg = OmegaConf.create(config)
    dm = instantiate(cfg.dataset.datamodule, tokenizer=instantiate(cfg.model.tokenizer))
    dm.setup("fit")
    net = LEAM(vocab_size=dm.tokenizer.vocab_size, num_labels=4, hidden_size=8, window=3, max_length=12)
    (run / "checkpoints").mkdir()
    torch.save({"state_dict": {f"net.{k}": v for k, v in net.state_dict().items()}}, run / "checkpoints" / "best.ckpt")


@pytest.fixture
def artefacts(tmp_path) -> Path:
    outputs = tmp_path / "outputs"
    table2, table3 = outputs / "quick" / "leam_table2", outputs / "quick" / "leam_table3"
    for seed in (1, 2):
        for model, top in (("leam", 0.9), ("swem_avg", 0.8), ("bilstm", 0.6)):
            curve = [(9, 0.3), (19, top - 0.1), (29, top)] + ([(39, top)] if seed == 1 else [])  # seed 1 logged more
            _cell(table2, f"dataset=ag_news,model={model},seed={seed}", model, seed, top, curve)
        _cell(table2, f"dataset=ag_news,model=bow_lr,seed={seed}", "bow_lr", seed, 0.85)
        _cell(table2, f"dataset=ag_news,model=leam_glove,seed={seed}", "leam_glove", seed, 0.92)
        for fraction in (0.001, 0.01):                      # Fig. 2(b): its 100% point is the Table 2 cell above
            for model, acc in (("leam_glove", 0.5 + 10 * fraction), ("swem_avg", 0.4), ("majority_class", 0.25)):
                _cell(outputs / "quick" / "leam_figure2b", f"dataset=ag_news,label_fraction={fraction},model={model},"
                      f"seed={seed}", model, seed, acc, config={"dataset": {"datamodule": {"label_fraction": fraction}}})
        for window in (1, 3, 5):
            _cell(table3, f"dataset=ag_news,leam_window={window},model=leam,seed={seed}", "leam", seed,
                  0.8 + 0.01 * window, config={"model": {"net": {"window": window}}})
    _leam_run(table2 / "dataset=ag_news,model=leam,seed=1", write_agnews_test(tmp_path / "agnews", per_class=15), tmp_path / "cache")
    return outputs


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_leam_figures_renders_every_figure_from_run_artefacts(artefacts, tmp_path):
    stamp = tmp_path / "installed"   # stands in for the venv stamp so make does not reinstall
    stamp.touch()
    result = subprocess.run(["make", "leam-figures", f"STAMP={stamp}", f"PY={sys.executable}",
                             f"ARGS=--outputs {artefacts} --docs 3"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    figures = artefacts / "figures"
    for name in ("leam_fig2a_accuracy_vs_iterations", "leam_fig2b_accuracy_vs_labelled_fraction",
                 "leam_fig2c_accuracy_vs_window", "leam_fig3_embeddings"):
        png = figures / f"{name}.quick.png"
        assert png.read_bytes()[:8] == PNG_MAGIC, name
        assert png.stat().st_size > 10_000, name   # drawn, not an empty canvas
    points = json.loads((figures / "leam_fig2b_accuracy_vs_labelled_fraction.quick.json").read_text())["lines"]
    assert [(p["fraction"], p["mean"], p["n"]) for p in points["LEAM + GloVe"]] == [(0.001, 51.0, 2), (0.01, 60.0, 2),
                                                                                  (1.0, 92.0, 2)]
    assert [p["fraction"] for p in points["SWEM-avg"]] == [0.001, 0.01, 1.0]
    page = (figures / "leam_fig4_attention.quick.html").read_text()
    assert page.count("<p><b>true:") == 3 and "seed 1 · commit abc1234" in page


def test_leam_figures_name_the_missing_runs_in_one_line_and_exit_2(tmp_path):
    script = ROOT / "scripts" / "leam_figures.py"
    result = subprocess.run([sys.executable, str(script), "--outputs", str(tmp_path), "--figures", "fig2a,fig4"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 2 and "leam_table2" in lines[0] and "Traceback" not in result.stderr
    unknown = subprocess.run([sys.executable, str(script), "--figures", "fig9"], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
    assert unknown.returncode == 2 and "unknown figure(s) fig9" in unknown.stderr


def test_val_curve_reads_only_the_validation_rows(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from leam_figures import val_curve

    run = _cell(tmp_path, "cell", "leam", 1, 0.9, [(29, 0.7), (9, 0.5)])
    assert val_curve(run) == [(9, 0.5), (29, 0.7)]
    assert val_curve(tmp_path / "no_such_run") == []
