"""Every shipped config composes; every model and dataset node instantiates; sweeps expand as declared."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hydra.utils import get_class, get_method, instantiate
from omegaconf import OmegaConf

CONF = Path(__file__).resolve().parents[1] / "conf"
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
MODELS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
DATASETS = sorted(p.stem for p in (CONF / "dataset").glob("*.yaml"))


def targets(node):
    if OmegaConf.is_dict(node):
        if "_target_" in node:
            yield node._target_
        for value in node.values():
            yield from targets(value)
    elif OmegaConf.is_list(node):
        for value in node:
            yield from targets(value)


def importable(target: str) -> None:
    try:
        get_class(target)
    except Exception:
        get_method(target)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
@pytest.mark.parametrize("profile", ["full", "quick"])
def test_experiment_composes_and_sweep_expands(compose_cfg, experiment, profile):
    cfg = compose_cfg(f"experiment={experiment}", f"profile={profile}", hydra=True)
    assert cfg.run_id == experiment
    assert "table" in cfg and cfg.table.rows and cfg.table.columns
    for key in cfg:
        if key != "hydra":
            for target in targets(cfg[key]) if OmegaConf.is_config(cfg[key]) else []:
                importable(target)
    params = cfg.hydra.sweeper.params or {}
    assert cfg.hydra.mode == "MULTIRUN" and params, "a table experiment declares its sweep"
    jobs = list(itertools.product(*[str(v).split(",") for v in params.values()]))
    assert len(jobs) >= len(cfg.table.rows), "fewer cells than table rows"
    excluded = set(cfg.hydra.job.config.override_dirname.exclude_keys)
    assert not excluded & set(params), "a swept key would not name its cell's directory"


@pytest.mark.parametrize("model", MODELS)
def test_model_config_instantiates_at_smoke_size(compose_cfg, model):
    cfg = compose_cfg(f"model={model}", "debug=smoke")
    for target in targets(cfg.model):
        importable(target)
    net = instantiate(cfg.model.net, num_labels=5, **({"vocab_size": 300} if "vocab_size" in cfg.model.net else {}))
    assert sum(p.numel() for p in net.parameters()) > 0
    if cfg.model.get("tokenizer"):
        instantiate(cfg.model.tokenizer)


@pytest.mark.parametrize("dataset", DATASETS)
def test_dataset_config_targets_import(compose_cfg, dataset):
    cfg = compose_cfg(f"dataset={dataset}")
    for target in targets(cfg.dataset):
        importable(target)
    assert cfg.dataset.monitor.startswith("val/")
