"""Unknown keys: a top-level key no config file declares, or a key that is not a parameter of its node's `_target_`."""

from __future__ import annotations

import difflib
import inspect
from functools import lru_cache
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig

from langrepr.confpaths import CONF_DIR, config_groups, option_files
from langrepr.errors import UserError

GLOBAL_GROUPS = ("experiment", "experiment_profile", "profile", "debug", "local", "grid_task", "encoder")
STAGES = ("train", "count", "stats", "pipeline")
TEST_CKPTS = ("best", "last")
PRECISIONS = ("16-mixed", "bf16-mixed", "32-true", "64-true", "16-true", "bf16-true", "transformer-engine",
              "16", "32", "64", "bf16")
HYDRA_KEYS = {"_target_", "_partial_", "_recursive_", "_convert_", "_args_"}
# Trainer arguments `langrepr.train` passes itself; a `trainer.<name>` for them would clash at instantiate
TRAINER_SET_BY_ENTRY = {"logger": "choose loggers with logger=csv or logger=wandb",
                        "callbacks": "set or remove callbacks under callbacks.* (e.g. ~callbacks.progress)",
                        "default_root_dir": "the cell folder follows paths.output_root and run_id",
                        "plugins": "checkpoints are written by langrepr's atomic writer"}


# ---------------------------------------------------------------- unknown keys

@lru_cache(maxsize=1)
def known_top_level_keys() -> frozenset[str]:
    """Top-level keys the config tree declares (train.yaml + every `@package _global_` file)."""
    keys = set(yaml.safe_load((CONF_DIR / "train.yaml").read_text()) or {})
    for group in GLOBAL_GROUPS:
        for path in option_files(group).values():   # every config root: conf/ and conf/papers/<paper>/
            text = path.read_text()
            if "@package _global_" in text:
                keys |= set(yaml.safe_load(text) or {})
    keys |= set(config_groups())   # dataset, model, trainer, ...
    return frozenset(keys - {"defaults"})


def closest(key: str, options: list[str]) -> str:
    """' (did you mean X?)' for the nearest option, or ''."""
    match = difflib.get_close_matches(key, options, n=1, cutoff=0.6)
    return f" (did you mean {match[0]}?)" if match else ""


@lru_cache(maxsize=256)
def _parameters(target: str) -> tuple[frozenset[str], bool] | None:
    """(parameter names, takes **kwargs) of a `_target_`, None when it cannot be imported here."""
    from hydra.utils import get_object

    try:
        obj = get_object(target)
    except Exception:  # noqa: BLE001  (a wrong _target_ is reported by instantiate, with its own message)
        return None
    func = obj.__init__ if inspect.isclass(obj) else obj
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    params = sig.parameters.values()
    variadic = (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
    return (frozenset(p.name for p in params if p.kind not in variadic),
            any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params))


@lru_cache(maxsize=1)
def trainer_arguments() -> frozenset[str]:
    """The keyword arguments of `pytorch_lightning.Trainer.__init__` (the Trainer the configs build)."""
    found = _parameters("pytorch_lightning.Trainer")
    assert found is not None, "pytorch_lightning.Trainer cannot be imported"
    return found[0] - {"self"}


def target_arguments(node: Any, path: str) -> tuple[str, frozenset[str]] | None:
    """(`_target_`, the keyword arguments it takes) of a config node; None when unknown or it takes **kwargs.

    The `trainer` node is checked against `pytorch_lightning.Trainer`'s own signature whatever its `_target_`
    (`trainer=ddp` builds it through `langrepr.scale_out.ddp_trainer`, which forwards **kwargs to it).
    """
    if not isinstance(node, DictConfig) or "_target_" not in node:
        return None
    target = node.get("_target_")
    if not isinstance(target, str):
        return None
    found = _parameters(target)
    if found is None:
        return None
    names, takes_kwargs = found
    if path.rstrip(".") == "trainer":
        return "pytorch_lightning.Trainer", (names | trainer_arguments()) - {"self"}
    return None if takes_kwargs else (target, names - {"self"})


def _check_target_keys(node: Any, path: str) -> None:
    if isinstance(node, DictConfig):
        found = target_arguments(node, path)
        if found is not None:
            target, accepted = found
            names = sorted(accepted)
            for key in node:
                if path == "trainer." and key in TRAINER_SET_BY_ENTRY:
                    raise UserError(f"trainer.{key} is passed to the Trainer by langrepr.train itself: remove it "
                                    f"({TRAINER_SET_BY_ENTRY[key]})")
                if key not in HYDRA_KEYS and key not in accepted:
                    raise UserError(f"unknown key {path}{key}: {target} takes no '{key}'"
                                    f"{closest(str(key), [path + n for n in names])}; remove it or fix "
                                    "its spelling")
        for key in node:
            if key != "hydra":
                _check_target_keys(node._get_node(key), f"{path}{key}.")
    elif isinstance(node, ListConfig):
        for i, item in enumerate(node._iter_ex(resolve=False)):
            _check_target_keys(item, f"{path}{i}.")


def check_keys(cfg: DictConfig) -> None:
    """Reject keys nothing reads (a `+typo=...` used to be accepted and ignored)."""
    known = known_top_level_keys()
    for key in cfg:
        if key not in known and key != "hydra":
            raise UserError(f"unknown key '{key}'{closest(str(key), sorted(known))}: remove it or fix its spelling "
                            "(the keys are those of conf/train.yaml and its groups)")
    _check_target_keys(cfg, "")
