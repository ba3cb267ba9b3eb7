"""logger=wandb mirrors the table: an offline run's file holds the group, tags, column-name summary and table."""

from __future__ import annotations

import json

import pytest
import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf, open_dict

from langrepr.train import train
from langrepr.wandb_tables import cells_of_run, offline_run_summary, run_tags, table_rows, table_stem

SPEC = {"columns": [{"name": "F1", "metric": "test/f1", "scale": 100}, {"name": "Params", "metric": "params.total"}],
        "rows": [{"key": "A", "match": {"model": "a"}, "paper": {"F1": 60.0}},
                 {"key": "B", "match": {"model": "b"}}]}


def test_names_tags_and_cells_of_a_run():
    assert table_stem("ewe_table3", "quick") == "ewe_table3.quick" and table_stem("ewe_table1", "exact") == "ewe_table1"
    assert run_tags("ewe_table3", "quick", {"model": "bert_ewe", "dataset": "synthetic"}) == [
        "paper:ewe", "table:ewe_table3", "profile:quick", "model:bert_ewe", "dataset:synthetic"]
    record = {"choices": {"model": "a"}, "config": {}, "metrics": {"test/f1": 0.5}, "params": {"total": 7}}
    assert cells_of_run(SPEC, record) == (["A"], {"F1": 50.0, "Params": 7.0})
    table = {"columns": ["F1"], "rows": [{"key": "A", "cells": {"F1": {"ours": 50.0, "paper": 60.0}}}]}
    assert table_rows(table) == (["row", "F1 ours", "F1 paper"], [["A", 50.0, 60.0]])


def fake_finished_cell(sweep, model, f1):
    """A sibling cell of the sweep as train.py leaves it, so the logged table must include it."""
    run = sweep / f"dataset=synthetic,model={model},seed=1"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({
        "status": "finished", "seed": 1, "commit": "abc1234", "choices": {"model": model, "dataset": "synthetic"},
        "metrics": {f"test/{s}/{m}": f1 for s in ("2015A", "2015B") for m in ("f1", "precision", "recall")}}))
    (run / "config_resolved.yaml").write_text(yaml.safe_dump({"seed": 1}))


def test_offline_wandb_run_mirrors_the_table(compose_cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    full = compose_cfg("experiment=ewe_table3", "profile=quick", "debug=smoke", "dataset=synthetic", "model=bert_ewe",
                       "logger=wandb", "logger.wandb.name=cell", "seed=1", hydra=True)
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)   # restored after the test: no leak into others
    HydraConfig.instance().set_config(full)          # as inside a Hydra job: choices give the model/dataset tags
    cfg = OmegaConf.masked_copy(full, [k for k in full if k != "hydra"])
    with open_dict(cfg):
        cfg.paths.output_root = str(tmp_path / "outputs")
    fake_finished_cell(tmp_path / "outputs" / "quick" / "ewe_table3", "bert_orig", 0.25)
    record = train(cfg, tmp_path / "run")
    run_files = list((tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(run_files) == 1
    run = offline_run_summary(run_files[0])
    assert run["group"] == "ewe_table3.quick"
    assert run["tags"] == ["paper:ewe", "table:ewe_table3", "profile:quick", "model:bert_ewe", "dataset:synthetic"]
    columns = ["2015A F1", "2015A P", "2015A R", "2015B F1", "2015B P", "2015B R"]
    for name in columns:   # the table's column names, with the values metrics.json gives the renderer
        metric = {"F1": "f1", "P": "precision", "R": "recall"}[name.split()[1]]
        assert run["summary"][name] == pytest.approx(100 * record["metrics"][f"test/{name.split()[0]}/{metric}"])
    assert run["summary"]["table/row"] == "BERT_EWE"
    assert ("ewe_table3-quick", "table") in run["artifacts"]
    logged = json.loads(next((run_files[0].parent / "files" / "media").rglob("*.table.json")).read_text())
    rows = {row[0]: dict(zip(logged["columns"], row)) for row in logged["data"]}
    assert rows["BERT_ORIG"]["2015A F1 ours"] == pytest.approx(25.0)          # the sibling cell from its run dir
    assert rows["BERT_EWE"]["2015A F1 ours"] == pytest.approx(run["summary"]["2015A F1"])
    assert rows["BERT_EWE"]["2015A F1 paper"] == pytest.approx(64.30) and rows["CANINE_EWE"]["2015A F1 ours"] is None
