"""Config validation before any data is read: one line per mistake, with the fix.

Why: a typo (`+optimzer.lr=0.1`) or an out-of-range value (`trainer.max_epochs=-1`) used to be accepted
silently or to fail minutes later inside Lightning with a traceback. Everything here looks only at the
composed config and the hardware, so it runs in milliseconds, before the data is touched.

Unknown keys are found two ways: top-level keys must be declared by `conf/train.yaml` or by a global
config file (experiments, profiles, debug); keys of a node with `_target_` must be parameters of that
callable (unless it takes `**kwargs`). The closest valid key is suggested.
"""

from __future__ import annotations

import difflib
import inspect
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from langrepr.confpaths import CONF_DIR
from langrepr.errors import UserError

GLOBAL_GROUPS = ("experiment", "experiment_profile", "profile", "debug", "local")
STAGES = ("train", "count", "stats", "pipeline")
TEST_CKPTS = ("best", "last")
PRECISIONS = ("16-mixed", "bf16-mixed", "32-true", "64-true", "16-true", "bf16-true", "transformer-engine",
              "16", "32", "64", "bf16")
HYDRA_KEYS = {"_target_", "_partial_", "_recursive_", "_convert_", "_args_"}


# ---------------------------------------------------------------- unknown keys

@lru_cache(maxsize=1)
def known_top_level_keys() -> frozenset[str]:
    """Top-level keys the config tree declares (train.yaml + every `@package _global_` file)."""
    keys = set(yaml.safe_load((CONF_DIR / "train.yaml").read_text()) or {})
    for group in GLOBAL_GROUPS:
        for path in (CONF_DIR / group).glob("*.yaml"):
            text = path.read_text()
            if "@package _global_" in text:
                keys |= set(yaml.safe_load(text) or {})
    keys |= {p.name for p in CONF_DIR.iterdir() if p.is_dir()}   # config groups: dataset, model, trainer, ...
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
    return (frozenset(p.name for p in params),
            any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params))


def _check_target_keys(node: Any, path: str) -> None:
    if isinstance(node, DictConfig):
        target = node.get("_target_") if "_target_" in node else None
        if isinstance(target, str):
            found = _parameters(target)
            if found is not None and not found[1]:
                names = sorted(found[0] - {"self"})
                for key in node:
                    if key not in HYDRA_KEYS and key not in found[0]:
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


# ---------------------------------------------------------------- values

def _get(cfg: DictConfig, key: str) -> Any:
    try:
        return OmegaConf.select(cfg, key, throw_on_missing=False)
    except Exception:  # noqa: BLE001  (an interpolation that cannot resolve here, e.g. ${hydra:...})
        return None


def _int(cfg: DictConfig, key: str, minimum: int, allow: tuple = ()) -> None:
    value = _get(cfg, key)
    if value is None or value in allow:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{key}={value!r} is not an integer: pass a whole number >= {minimum}")
    if value < minimum:
        extra = f" (or {', '.join(map(str, allow))})" if allow else ""
        raise UserError(f"{key}={value} is out of range: pass a whole number >= {minimum}{extra}")


def _positive_float(cfg: DictConfig, key: str) -> None:
    value = _get(cfg, key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{key}={value!r} is not a number: pass a positive float such as 2e-5")
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{key}={value} is out of range: pass a positive, finite float such as 2e-5")


def check_hardware(cfg: DictConfig) -> None:
    """precision/accelerator/devices against what this machine has."""
    import torch

    precision = str(_get(cfg, "trainer.precision") or "32-true")
    if precision not in PRECISIONS:
        raise UserError(f"trainer.precision={precision!r} is not a precision: choose one of "
                        f"{', '.join(PRECISIONS[:4])}")
    accelerator = str(_get(cfg, "trainer.accelerator") or "auto")
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise UserError(f"trainer.accelerator={accelerator} but this machine has no CUDA GPU: pass trainer=cpu "
                        "(or trainer.accelerator=auto)")
    if accelerator == "mps" and not torch.backends.mps.is_available():
        raise UserError("trainer.accelerator=mps but MPS is not available here: pass trainer=cpu")
    if accelerator not in ("auto", "cpu", "gpu", "cuda", "mps", "tpu"):
        raise UserError(f"trainer.accelerator={accelerator!r} is not an accelerator: choose auto, cpu or gpu")
    devices = _get(cfg, "trainer.devices")
    if accelerator in ("gpu", "cuda") and isinstance(devices, int) and devices > torch.cuda.device_count():
        raise UserError(f"trainer.devices={devices} but only {torch.cuda.device_count()} GPU(s) are visible: "
                        "lower trainer.devices")
    if precision.startswith("bf16") and accelerator in ("gpu", "cuda") and not torch.cuda.is_bf16_supported():
        raise UserError(f"trainer.precision={precision} needs a GPU with bf16 support: use 16-mixed or 32-true")


def check_canine_length(cfg: DictConfig) -> None:
    """CANINE downsamples by 4: the sequence length (EWE: tokenizer.u, ORIG: max_length) must divide."""
    if _get(cfg, "model.net.arch") != "canine":
        return
    rate = 4   # CanineConfig.downsampling_rate default, which hf_backbone keeps
    for key in ("model.tokenizer.u", "model.tokenizer.max_length", "model.net.embedding.u"):
        value = _get(cfg, key)
        if isinstance(value, int) and value % rate:
            raise UserError(f"{key}={value} is not divisible by CANINE's downsampling rate {rate}: pass a multiple "
                            f"of {rate} (e.g. {value - value % rate or rate})")


def check_values(cfg: DictConfig) -> None:
    """Types and ranges of the keys every run reads."""
    _int(cfg, "seed", 0)
    stage = _get(cfg, "stage")
    if stage not in STAGES:
        raise UserError(f"stage={stage!r} is not a stage: choose one of {', '.join(STAGES)}")
    test_ckpt = _get(cfg, "test_ckpt")
    if test_ckpt not in TEST_CKPTS:
        raise UserError(f"test_ckpt={test_ckpt!r}: choose best (the best validation checkpoint) or last")
    ckpt_path = _get(cfg, "ckpt_path")
    if ckpt_path not in (None, "", "null", "auto") and not Path(str(ckpt_path)).is_file():
        raise UserError(f"ckpt_path={ckpt_path} does not exist: pass an existing .ckpt file, ckpt_path=auto "
                        "(this cell's last checkpoint) or null")
    force = _get(cfg, "force")
    if not isinstance(force, bool):
        raise UserError(f"force={force!r}: pass force=true or force=false")
    if stage != "train":
        return
    _int(cfg, "trainer.max_epochs", 1, allow=(-1,))
    _int(cfg, "trainer.max_steps", 1, allow=(-1,))
    if _get(cfg, "trainer.max_epochs") == -1 and _get(cfg, "trainer.max_steps") in (None, -1):
        raise UserError("trainer.max_epochs=-1 trains forever unless trainer.max_steps is set: set one of them")
    _positive_float(cfg, "optimizer.lr")
    _int(cfg, "dataset.datamodule.batch_size", 1)
    _int(cfg, "callbacks.last_checkpoint.every_n_train_steps", 1)
    check_hardware(cfg)
    check_canine_length(cfg)


def check_supported_dataset(cfg: DictConfig, choices: dict[str, str]) -> None:
    """An experiment lists the data sets its table is defined on; others are refused with the list."""
    supported = _get(cfg, "supported_datasets")
    dataset, experiment = choices.get("dataset"), choices.get("experiment")
    if supported is None or dataset is None or _get(cfg, "stage") == "count":
        return
    if dataset not in list(supported):
        raise UserError(f"experiment {experiment} is defined on dataset {' or '.join(supported)}, not {dataset}: "
                        f"drop dataset={dataset} (the experiment sets it) or pick another experiment")


def validate_config(cfg: DictConfig, choices: dict[str, str] | None = None) -> None:
    """Every check above; raises UserError with one line at the first problem."""
    check_supported_dataset(cfg, choices or {})   # first: a wrong data set explains the unknown keys it brings
    check_keys(cfg)
    check_values(cfg)


# ---------------------------------------------------------------- the command line, before Hydra runs

def canonical_overrides(argv: list[str]) -> list[str]:
    """Rewrite float values canonically (`optimizer.lr=1e-3` -> `0.001`): one cell, one folder, with or without -m."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType, ValueType

    out, parser = [], OverridesParser.create()
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            out.append(arg)
            continue
        try:
            (override,) = parser.parse_overrides([arg])
        except Exception:  # noqa: BLE001  (Hydra reports its own parse errors)
            out.append(arg)
            continue
        if (override.type is OverrideType.CHANGE and override.value_type is ValueType.ELEMENT
                and isinstance(override.value(), float)):
            arg = f"{override.get_key_element()}={override.get_value_element_as_str()}"
        out.append(arg)
    return out


def _flat_keys(node: Any, prefix: str = "") -> list[str]:
    keys = []
    if isinstance(node, DictConfig):
        for key in node:
            if key == "hydra":
                continue
            keys.append(f"{prefix}{key}")
            keys += _flat_keys(node._get_node(key), f"{prefix}{key}.")
    return keys


def _compose(overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("train", overrides=overrides, return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()


def _composition_error(err: Exception) -> UserError:
    import re

    text = str(err)
    missing = re.search(r"Could not override '([^']+)'", text)
    if missing:
        key = missing.group(1)
        hint = closest(key, _flat_keys(_compose([])))
        return UserError(f"unknown key '{key}'{hint}: fix its spelling (adding it with '+' is refused too: nothing "
                         "would read it)")
    exists = re.search(r"An item is already at '([^']+)'", text)
    if exists:
        return UserError(f"'{exists.group(1)}' already exists: set it without the leading '+'")
    return UserError(" ".join(text.split()))


def check_writable(path: Path) -> None:
    """The output root (or its nearest existing parent) must be writable before Hydra creates folders in it."""
    import os

    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"paths.output_root={path} lies under {probe}, which is a file: pass "
                        "paths.output_root=<a writable folder>")
    if not os.access(probe, os.W_OK):
        raise UserError(f"paths.output_root={path} is not writable ({probe} is read-only): pass "
                        "paths.output_root=<a writable folder>")


def check_command_line(argv: list[str]) -> None:
    """Compose the config the command asks for (first value of every sweep) and validate it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType

    if any(a.startswith("-") and a not in ("-m", "--multirun") for a in argv):
        return                                   # --help, --cfg job, -cn ...: Hydra's own modes
    prefix = {OverrideType.ADD: "+", OverrideType.FORCE_ADD: "++", OverrideType.DEL: "~"}
    try:
        overrides = OverridesParser.create().parse_overrides([a for a in argv if not a.startswith("-")])
    except Exception as err:  # noqa: BLE001  (OverrideParseException: Hydra's text is already one sentence)
        raise UserError(f"cannot parse the command line: {' '.join(str(err).split())}") from None
    probe, given = [], set()
    for o in overrides:
        given.add(o.key_or_group)
        first = next(iter(o.sweep_string_iterator())) if o.is_sweep_override() else None
        probe.append(o.input_line if first is None else f"{prefix.get(o.type, '')}{o.get_key_element().lstrip('+~')}={first}")
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        cfg = _compose(probe)
        sweep = OmegaConf.select(cfg, "hydra.sweeper.params") or {}
        extra = [f"{k}={str(v).split(',')[0]}" for k, v in sweep.items() if k not in given]
        if extra:
            cfg = _compose(probe + extra)
    except (HydraException, OmegaConfBaseException) as err:
        raise _composition_error(err) from None
    validate_config(cfg, choices={k: v for k, v in cfg.hydra.runtime.choices.items() if v is not None})
    from langrepr.cell import config_fingerprint

    config_fingerprint(cfg)                      # every interpolation resolves (${oc.env:...} set, ...)
    root = _get(cfg, "paths.output_root")
    if root:
        check_writable(Path(str(root)))
