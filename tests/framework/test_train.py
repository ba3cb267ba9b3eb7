"""train(cfg) end to end on synthetic patents at smoke size; the CLI's multirun, skip and resume behaviour."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from langrepr.errors import UserError
from langrepr.train import train

SIX = ["bert_ewe", "bert_orig", "albert_ewe", "albert_orig", "canine_ewe", "canine_orig"]


@pytest.mark.parametrize("model", SIX + ["bert_ewe_bytes", "bert_ewe_vgram"])
def test_smoke_trains_and_tests_every_model(compose_cfg, tmp_path, model):
    cfg = compose_cfg("dataset=synthetic", f"model={model}", "debug=smoke")
    record = train(cfg, tmp_path / "run")
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert written["status"] == "finished" and record["status"] == "finished"
    for split in ("2015A", "2015B"):
        for metric in ("f1", "precision", "recall"):
            assert 0.0 <= written["metrics"][f"test/{split}/{metric}"] <= 1.0
    assert "val/f1_best" in written["metrics"]
    assert written["params"]["total"] > written["params"]["embedding"] > 0
    assert written["seed"] == 1 and written["commit"] and written["versions"]["torch"]
    assert written["wall_time_s"] > 0
    assert (tmp_path / "run" / "config_resolved.yaml").exists()


def test_finished_cell_is_skipped_and_changed_config_refused(compose_cfg, tmp_path):
    cfg = compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke")
    first = train(cfg, tmp_path / "run")
    again = train(cfg, tmp_path / "run")
    assert again["wall_time_s"] == first["wall_time_s"]   # read back, not rerun
    changed = compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke", "seed=2")
    with pytest.raises(UserError, match="different config"):
        train(changed, tmp_path / "run")


def test_fp16_without_cuda_falls_back_to_fp32(compose_cfg, tmp_path, caplog):
    cfg = compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke", "trainer.precision=16-mixed",
                      "trainer.accelerator=auto")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: fp16 runs as asked")
    with caplog.at_level("WARNING", logger="langrepr.train"):
        train(cfg, tmp_path / "run")
    assert "uses fp32 on CPU" in caplog.text
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())   # what ran, not what was asked
    assert (written["precision"], written["precision_requested"]) == ("32-true", "16-mixed")


def test_the_record_names_the_precision_asked_only_when_another_ran():
    from types import SimpleNamespace

    from langrepr.train import precision_ran

    assert precision_ran("16-mixed", SimpleNamespace(precision="16-mixed")) == {"precision": "16-mixed"}
    assert precision_ran(32, SimpleNamespace(precision="32-true")) == {"precision": "32-true"}
    assert precision_ran("bf16", SimpleNamespace(precision="32-true")) == {"precision": "32-true",
                                                                         "precision_requested": "bf16-mixed"}


def test_cli_multirun_two_cells_then_skip_and_resume(tmp_path):
    out = tmp_path / "outputs"
    args = ("langrepr.train", "-m", "dataset=synthetic", "model=bert_ewe,albert_ewe", "debug=smoke",
            f"paths.output_root={out}", f"paths.cache_dir={tmp_path / 'cache'}", "run_id=cli", "ckpt_path=auto")
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    cells = sorted(p.parent.name for p in (out / "full" / "cli").glob("*/metrics.json"))
    assert cells == ["dataset=synthetic,model=albert_ewe", "dataset=synthetic,model=bert_ewe"]
    for cell in cells:
        assert (out / "full" / "cli" / cell / "checkpoints" / "last.ckpt").exists()
    second = run_cli(*args)
    assert second.returncode == 0
    assert (second.stdout + second.stderr).count("already finished") == 2
    # an interrupted cell (metrics not finished, last.ckpt present) resumes from its checkpoint
    metrics = out / "full" / "cli" / cells[1] / "metrics.json"
    metrics.write_text(json.dumps({"status": "running"}))
    third = run_cli(*args[:3], "model=bert_ewe", *args[4:])
    assert third.returncode == 0, third.stderr[-2000:]
    assert "Resuming from" in third.stdout + third.stderr
