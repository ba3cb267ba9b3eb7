"""The command line before Hydra runs: canonical overrides, '+' where a key is new, composition errors as one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from langrepr.confpaths import CONF_DIR
from langrepr.errors import UserError
from langrepr.validation.keys import closest, target_arguments
from langrepr.validation.settings import validate_config
from langrepr.validation.values import _get

# ---------------------------------------------------------------- the command line, before Hydra runs

def canonical_overrides(argv: list[str]) -> list[str]:
    """Rewrite float values canonically (`optimizer.lr=1e-3` -> `0.001`): one cell, one folder, with or without -m."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType, ValueType

    _COMPOSED.clear()
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
    return _plus_for_target_arguments(out)


def _first_values(overrides: list) -> list[str]:
    """The override lines with every sweep replaced by its first value (the config the first job composes)."""
    from hydra.core.override_parser.types import OverrideType

    prefix = {OverrideType.ADD: "+", OverrideType.FORCE_ADD: "++", OverrideType.DEL: "~"}
    probe = []
    for o in overrides:
        first = next(iter(o.sweep_string_iterator())) if o.is_sweep_override() else None
        probe.append(o.input_line if first is None
                     else f"{prefix.get(o.type, '')}{o.get_key_element().lstrip('+~')}={first}")
    return probe


_COMPOSED: dict[str, Any] = {}   # the probe config composed by canonical_overrides, used once by check_command_line


def _plus_for_target_arguments(argv: list[str]) -> list[str]:
    """`trainer.gradient_clip_val=1.0` -> `+trainer.gradient_clip_val=1.0` when the config does not list the key.

    A key the config files do not list cannot be set without '+' in Hydra, although the node's `_target_` takes
    it (any `pytorch_lightning.Trainer` argument under `trainer.`, `amsgrad` under `optimizer.`, ...). Such a key
    is an ordinary argument, so it is accepted with or without '+', and both spellings name one cell folder.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType

    parser, parsed = OverridesParser.create(), {}
    for i, arg in enumerate(argv):
        if arg.startswith("-") or "=" not in arg:
            continue
        try:
            (parsed[i],) = parser.parse_overrides([arg])
        except Exception:  # noqa: BLE001  (check_command_line reports it)
            return argv
    candidates = [i for i, o in parsed.items()
                  if o.type is OverrideType.CHANGE and "." in o.key_or_group and not o.key_or_group.startswith("hydra.")]
    if not candidates:
        return argv
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    probe = _first_values(list(parsed.values()))
    try:
        _COMPOSED.update(probe=tuple(probe), cfg=_compose(probe))   # every key exists: check_command_line reuses it
        return argv
    except (HydraException, OmegaConfBaseException):
        pass
    try:
        cfg = _compose(_first_values([o for i, o in parsed.items() if i not in candidates]))
    except Exception:  # noqa: BLE001  (a composition error of its own: check_command_line reports it)
        return argv
    out = list(argv)
    for i in candidates:
        parent_path, _, leaf = parsed[i].key_or_group.rpartition(".")
        parent = _get(cfg, parent_path)
        if not isinstance(parent, DictConfig) or leaf in parent:
            continue
        found = target_arguments(parent, parent_path)
        if found is not None and leaf in found[1]:
            out[i] = f"+{argv[i]}"
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


def _through_interpolation(cfg: DictConfig, key: str) -> tuple[str, str, str | None] | None:
    """(prefix, its `${...}`, the key to set instead) when `key` lies under a node that is an interpolation."""
    import re

    parts, node = key.split("."), cfg
    for i, part in enumerate(parts[:-1]):
        if not isinstance(node, DictConfig) or part not in node:
            return None
        if OmegaConf.is_interpolation(node, part):
            raw = str(node._get_node(part)._value())
            target = re.fullmatch(r"\$\{([\w.]+)\}", raw)
            return (".".join(parts[:i + 1]), raw,
                    ".".join([target.group(1), *parts[i + 1:]]) if target else None)
        node = node._get_node(part)
    return None


def setting_key(cfg: DictConfig, key: str) -> str:
    """The key a user sets `key` with: `optimizer.lr: ${mlm.lr}` (the multi-hot cells) is set with `mlm.lr`."""
    import re

    seen: set[str] = set()
    while key not in seen:
        seen.add(key)
        parent, _, leaf = key.rpartition(".")
        node = _get(cfg, parent) if parent else cfg
        if not isinstance(node, DictConfig) or leaf not in node or not OmegaConf.is_interpolation(node, leaf):
            return key
        target = re.fullmatch(r"\$\{([\w.]+)\}", str(node._get_node(leaf)._value()))
        if target is None:
            return key
        key = target.group(1)
    return key


def _composition_error(err: Exception, probe: list[str] | None = None) -> UserError:
    import re

    text = str(err)
    missing = re.search(r"Could not override '([^']+)'", text)
    if missing:
        key = missing.group(1)
        others = [a for a in probe or [] if a.split("=", 1)[0].lstrip("+~") != key]
        try:
            cfg = _compose(others)
        except Exception:  # noqa: BLE001  (another override fails too: hint from the defaults)
            cfg = _compose([])
        through = _through_interpolation(cfg, key)
        if through:
            prefix, raw, instead = through
            return UserError(f"'{key}' cannot be set: '{prefix}' is an interpolation ({raw}), and Hydra does not override "
                             f"through one; " + (f"set '{instead}' instead" if instead else "set the key it reads"))
        parent_path, _, leaf = key.rpartition(".")
        found = target_arguments(_get(cfg, parent_path), parent_path) if parent_path else None
        options = _flat_keys(cfg) + [f"{parent_path}.{n}" for n in sorted(found[1]) if found] if found else _flat_keys(cfg)
        why = (f"{found[0]} takes no '{leaf}', so adding it with '+' is refused too" if found
               else "no config file declares it")
        return UserError(f"unknown key '{key}'{closest(key, options)}: fix its spelling ({why})")
    exists = re.search(r"An item is already at '([^']+)'", text)
    if exists:
        return UserError(f"'{exists.group(1)}' already exists: set it without the leading '+'")
    return UserError(" ".join(text.split()))


def check_writable(path: Path, key: str = "paths.output_root") -> None:
    """The folder `key` names (or its nearest existing parent) must be writable before Hydra creates folders in it."""
    import os

    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"{key}={path} lies under {probe}, which is a file: pass {key}=<a writable folder>")
    if not os.access(probe, os.W_OK):
        raise UserError(f"{key}={path} is not writable ({probe} is read-only): pass {key}=<a writable folder>")


def check_seeds(cfg: DictConfig) -> None:
    """`seeds=` is a count: its own line, not the interpolation error of the sweep that reads it."""
    from langrepr.confpaths import seeds_error

    error = seeds_error(_get(cfg, "seeds")) if "seeds" in cfg else None
    if error:
        raise UserError(error)


def check_command_line(argv: list[str]) -> None:
    """Compose the config the command asks for (first value of every sweep) and validate it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if any(a.startswith("-") and a not in ("-m", "--multirun") for a in argv):
        return                                   # --help, --cfg job, -cn ...: Hydra's own modes
    try:
        overrides = OverridesParser.create().parse_overrides([a for a in argv if not a.startswith("-")])
    except Exception as err:  # noqa: BLE001  (OverrideParseException: Hydra's text is already one sentence)
        raise UserError(f"cannot parse the command line: {' '.join(str(err).split())}") from None
    probe, given = _first_values(overrides), {o.key_or_group for o in overrides}
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    try:
        reuse = _COMPOSED.pop("cfg", None) if _COMPOSED.pop("probe", None) == tuple(probe) else None
        cfg = reuse if reuse is not None else _compose(probe)
        check_seeds(cfg)                         # before the sweep's ${seed_list:${seeds}} is read below
        sweep = OmegaConf.select(cfg, "hydra.sweeper.params") or {}
        extra = [f"{k}={str(v).split(',')[0]}" for k, v in sweep.items() if k not in given]
        if extra:
            cfg = _compose(probe + extra)
    except (HydraException, OmegaConfBaseException) as err:
        raise _composition_error(err, probe) from None
    validate_config(cfg, choices={k: v for k, v in cfg.hydra.runtime.choices.items() if v is not None})
    from langrepr.cell import config_fingerprint

    config_fingerprint(cfg)                      # every interpolation resolves (${oc.env:...} set, ...)
    root = _get(cfg, "paths.output_root")
    if root:
        check_writable(Path(str(root)))
    cache = _get(cfg, "paths.cache_dir")   # set apart from the output root, it is named on its own (issue 21 X48)
    if cache:
        check_writable(Path(str(cache)), "paths.cache_dir")
