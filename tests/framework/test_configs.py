"""Every shipped config composes; every model and dataset node instantiates; sweeps expand as declared."""

from __future__ import annotations

import inspect
import itertools

import pytest
from hydra.utils import get_class, get_method, instantiate
from omegaconf import OmegaConf

from langrepr.confpaths import group_options

EXPERIMENTS = group_options("experiment")   # every config root: conf/ and conf/papers/<paper>/
MODELS = group_options("model")
DATASETS = group_options("dataset")


def targets(node):
    if OmegaConf.is_dict(node):
        if "_target_" in node:
            yield node._target_
        for value in node.values():
            yield from targets(value)
    elif OmegaConf.is_list(node):
        for value in node:
            yield from targets(value)


RUNTIME_KWARGS = {"num_labels": 5, "vocab_size": 300, "src_vocab_size": 300, "tgt_vocab_size": 300, "pad_id": 0}


def get_class_or_method(target: str):
    try:
        return get_class(target)
    except Exception:
        return get_method(target)


def importable(target: str) -> None:
    get_class_or_method(target)


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
    assert str(cfg.hydra.mode).endswith("MULTIRUN") and params, "a table experiment declares its sweep"
    assert all(list(itertools.product(*[str(v).split(",") for v in params.values()])))
    excluded = set(cfg.hydra.job.config.override_dirname.exclude_keys)
    assert not excluded & set(params), "a swept key would not name its cell's directory"


@pytest.mark.parametrize("model", MODELS)
def test_model_config_instantiates_at_smoke_size(compose_cfg, model):
    cfg = compose_cfg(f"model={model}", "debug=smoke")
    if cfg.get("stage") == "pipeline":  # a reference row (conf/papers/*/model/reference_*.yaml, ...): a pipeline, no net
        importable(cfg.pipeline._target_)
        return
    if model == "none":                 # no model, for pipeline and stats cells: nothing to build
        assert not cfg.model.get("net") or "_target_" not in cfg.model.net
        return
    for target in targets(cfg.model):
        importable(target)
    # runtime values a datamodule would pass: offer the usual ones, keep those the constructor takes
    accepted = inspect.signature(get_class_or_method(cfg.model.net._target_)).parameters
    runtime = {k: v for k, v in RUNTIME_KWARGS.items() if k in accepted and k not in cfg.model.net}
    net = instantiate(cfg.model.net, **runtime)
    assert sum(p.numel() for p in net.parameters()) > 0
    if cfg.model.get("tokenizer"):
        instantiate(cfg.model.tokenizer)


@pytest.mark.parametrize("dataset", DATASETS)
def test_dataset_config_targets_import(compose_cfg, dataset):
    cfg = compose_cfg(f"dataset={dataset}")
    for target in targets(cfg.dataset):
        importable(target)
    assert cfg.dataset.monitor.startswith("val/")


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_quick_profile_builds_every_swept_model(compose_cfg, experiment):
    """Quick widths must suit every model of the sweep (e.g. ORIG's 12 heads must divide hidden_size)."""
    params = compose_cfg(f"experiment={experiment}", "profile=quick", hydra=True).hydra.sweeper.params
    for model in str(params.get("model", "")).split(",") if "model" in params else [None]:
        overrides = [f"experiment={experiment}", "profile=quick"] + ([f"model={model}"] if model else [])
        cfg = compose_cfg(*overrides)
        if cfg.stage in ("stats", "pipeline"):
            continue
        accepted = inspect.signature(get_class_or_method(cfg.model.net._target_)).parameters
        runtime = {k: v for k, v in RUNTIME_KWARGS.items() if k in accepted and k not in cfg.model.net}
        instantiate(cfg.model.net, **runtime)
