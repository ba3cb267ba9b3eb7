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

from langrepr.confpaths import CONF_DIR, config_groups, option_files, option_path
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


def _number(cfg: DictConfig, key: str, low: float, high: float = math.inf, example: str = "1.0") -> None:
    """A finite number in [low, high] (None allowed: the callee's default)."""
    value = _get(cfg, key)
    if value is None:
        return
    bound = f"between {low:g} and {high:g}" if math.isfinite(high) else f">= {low:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{key}={value!r} is not a number: pass a number {bound} such as {example}")
    if not math.isfinite(value) or not low <= value <= high:
        raise UserError(f"{key}={value} is out of range: pass a finite number {bound} such as {example}")


def _batches_limit(cfg: DictConfig, key: str) -> None:
    """Lightning's limit_*_batches / overfit_batches: a fraction in [0, 1] or a whole number of batches."""
    value = _get(cfg, key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
            isinstance(value, float) and not 0 <= value <= 1):
        raise UserError(f"{key}={value!r} is not a batch limit: pass a fraction between 0.0 and 1.0 or a whole "
                        "number of batches")


def check_trainer_values(cfg: DictConfig) -> None:
    """Types and ranges of the Trainer arguments people set (before Lightning fails on them after the data load)."""
    _int(cfg, "trainer.accumulate_grad_batches", 1)
    _number(cfg, "trainer.gradient_clip_val", 0.0)
    algorithm = _get(cfg, "trainer.gradient_clip_algorithm")
    if algorithm not in (None, "norm", "value"):
        raise UserError(f"trainer.gradient_clip_algorithm={algorithm!r}: choose norm or value")
    for split in ("train", "val", "test", "predict"):
        _batches_limit(cfg, f"trainer.limit_{split}_batches")
    _batches_limit(cfg, "trainer.overfit_batches")
    _int(cfg, "trainer.log_every_n_steps", 1)
    _int(cfg, "trainer.check_val_every_n_epoch", 1)
    _int(cfg, "trainer.num_sanity_val_steps", 0, allow=(-1,))
    _int(cfg, "trainer.min_epochs", 0)
    _int(cfg, "trainer.min_steps", 0, allow=(-1,))


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
    check_pipeline_values(cfg)
    if stage != "train":
        return
    _int(cfg, "trainer.max_epochs", 1, allow=(-1,))
    _int(cfg, "trainer.max_steps", 1, allow=(-1,))
    if _get(cfg, "trainer.max_epochs") == -1 and _get(cfg, "trainer.max_steps") in (None, -1):
        raise UserError("trainer.max_epochs=-1 trains forever unless trainer.max_steps is set: set one of them")
    _positive_float(cfg, "optimizer.lr")
    _int(cfg, "dataset.datamodule.batch_size", 1)
    _int(cfg, "callbacks.last_checkpoint.every_n_train_steps", 1)
    check_trainer_values(cfg)
    check_hardware(cfg)
    check_canine_length(cfg)


# ---------------------------------------------------------------- pipeline and newer-paper settings

# Settings of the non-gradient pipelines (Bit Cipher vectors and probes, multi-hot token lists, MLM pretraining and
# fine-tuning) and of the newer papers' models and readers, checked by name under these roots: a negative probe
# batch used to train zero steps and score an untrained probe (issue 21 X12), a zero one to fail with
# "range() arg 3 must not be zero" (X11). Every rule holds for every node of that name under the roots.
SETTING_ROOTS = ("pipeline", "bitcipher", "bitcipher_vectors", "bitcipher_lm", "lm_init", "mlm", "finetune", "dataset",
                 "downstream_data", "model")
WHOLE_AT_LEAST_1 = frozenset({
    "batch_size", "epochs", "steps", "hidden", "hidden_size", "intermediate_size", "num_layers", "num_heads", "dim",
    "bits", "radius", "workers", "threads", "torch_threads", "max_group", "shard_tokens", "max_tokens",
    "max_positions", "max_length", "max_vocab", "min_freq", "min_count", "limit", "doc_tokens", "glove_epochs",
    "seq_len", "max_train_sentences", "stride", "max_answer_positions", "max_train_questions", "max_test_questions",
    "bpe_size", "pos_joined", "syllables", "dictionary_size", "num_pos_tags", "group_shards", "per_class"})
WHOLE_AT_LEAST_0 = frozenset({"warmup_steps", "num_warmup_steps", "freeze_embedding_steps", "num_workers", "negative",
                              "max_train_samples", "max_eval_samples", "nsmc", "korquad", "klue", "split_seed"})
POSITIVE = frozenset({"lr", "x_max", "alpha", "init_scale"})
NON_NEGATIVE = frozenset({"weight_decay", "label_penalty"})
DROPOUTS = frozenset({"dropout", "attention_dropout", "hidden_dropout"})          # [0, 1)
FRACTIONS = frozenset({"mask_prob", "val_fraction", "test_fraction", "split_test_fraction",
                       "korquad_test_fraction"})                                # strictly between 0 and 1
# choices the pipelines check only after the data is read (kept equal to the modules' constants by a test)
CHOICES = {"mlm.loss": ("sce", "bce", "mhsce"),                                  # models.multihot_losses.LOSSES
           "pipeline.token_list": ("bpe_base", "bpe_syllable", "dict_syllable"),  # data.korean.token_lists.KINDS
           "downstream": ("korquad", "ner", "srl", "nsmc"),                      # tasks.multihot_downstream.TASKS
           "bitcipher_vectors.cat_mode": ("left_right", "per_offset"),          # pipelines.bitcipher.cooccurrence.CAT_MODES
           "pipeline.probe.dropout_at": ("hidden", "input", "both")}            # pipelines.bitcipher.probing.DROPOUT_AT
PROBE_TASKS = ("pos", "ner")                                                     # pipelines.bitcipher.probing.TASKS
MAX_PER_OFFSET_WIDTH = 1 << 20   # cat_mode=per_offset writes 2·r·b columns; beyond this it grinds for hours (X05)
LEAM_TARGET = "langrepr.models.leam.LEAM"


def _setting_keys(node: Any, path: str) -> list[tuple[bool, str, str]]:
    """(is an interpolation, dotted key, leaf name) of every leaf under a config node."""
    out: list[tuple[bool, str, str]] = []
    if isinstance(node, DictConfig):
        for key in node:
            child = node._get_node(key)
            if isinstance(child, (DictConfig, ListConfig)) and not child._is_interpolation():
                out += _setting_keys(child, f"{path}{key}.")
            else:
                out.append((bool(child._is_interpolation()), f"{path}{key}", str(key)))
    elif isinstance(node, ListConfig):
        for i in range(len(node)):
            out += _setting_keys(node._get_node(i), f"{path}{i}.")
    return out


def _fraction(cfg: DictConfig, key: str, closed_low: bool) -> None:
    value = _get(cfg, key)
    if value is None:
        return
    bound = "between 0 (included) and 1" if closed_low else "strictly between 0 and 1"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{key}={value!r} is not a number: pass a fraction {bound} such as 0.1")
    if not ((0 <= value if closed_low else 0 < value) and value < 1):
        raise UserError(f"{key}={value} is out of range: pass a fraction {bound} such as 0.1")


def check_pipeline_values(cfg: DictConfig) -> None:
    """Types and ranges of every numeric pipeline / model / reader setting, before any data is read."""
    leaves = [leaf for root in SETTING_ROOTS if root in cfg for leaf in _setting_keys(cfg._get_node(root), f"{root}.")]
    # the keys a user sets first, so that a bad value is named where it was set, not where it is interpolated
    for _, key, name in sorted(leaves, key=lambda leaf: leaf[0]):
        if isinstance(_get(cfg, key), (DictConfig, ListConfig)):
            continue                        # an interpolated node (pipeline.korquad: ${dataset.korquad})
        if name in WHOLE_AT_LEAST_1:
            _int(cfg, key, 1)
        elif name in WHOLE_AT_LEAST_0:
            _int(cfg, key, 0)
        elif name in POSITIVE:
            _positive_float(cfg, key)
        elif name in NON_NEGATIVE:
            _number(cfg, key, 0.0, example="0.01")
        elif name in DROPOUTS:
            _fraction(cfg, key, closed_low=True)
        elif name in FRACTIONS:
            _fraction(cfg, key, closed_low=False)
    for key in ("bitcipher_vectors.glove.window", "bitcipher_vectors.word2vec.window"):
        _int(cfg, key, 1)
    if _get(cfg, "model.net._target_") == LEAM_TARGET:
        _int(cfg, "model.net.window", 1)
        window = _get(cfg, "model.net.window")
        if isinstance(window, int) and window % 2 == 0:
            raise UserError(f"model.net.window={window} is even: LEAM's phrase window is 2r+1 words, pass an odd "
                            f"number such as {window + 1}")
    for key, options in CHOICES.items():
        value = _get(cfg, key)
        if value is not None and value not in options:
            raise UserError(f"{key}={value!r}: choose one of {', '.join(options)}")
    tasks = _get(cfg, "pipeline.tasks")
    if isinstance(tasks, ListConfig) and _get(cfg, "stage") == "pipeline" and "probe_cell" in str(
            _get(cfg, "pipeline._target_")):
        bad = [t for t in tasks if t not in PROBE_TASKS]
        if bad or not len(tasks):
            raise UserError(f"pipeline.tasks={list(tasks)}: choose from {', '.join(PROBE_TASKS)} (at least one)")
    if _get(cfg, "bitcipher_vectors.cat_mode") == "per_offset":
        radius, bits = _get(cfg, "bitcipher_vectors.radius"), _get(cfg, "bitcipher_vectors.bits")
        if isinstance(radius, int) and isinstance(bits, int) and 2 * radius * bits > MAX_PER_OFFSET_WIDTH:
            raise UserError(f"bitcipher_vectors.radius={radius} with cat_mode=per_offset makes 2·r·b = "
                            f"{2 * radius * bits:,} columns (at most {MAX_PER_OFFSET_WIDTH:,}): lower radius or bits, "
                            "or use bitcipher_vectors.cat_mode=left_right (2·b columns)")
    check_leam_class_names(cfg)


def check_leam_class_names(cfg: DictConfig) -> None:
    """LEAM initialises its label embeddings from the class names' words: names the data set gives are required."""
    if _get(cfg, "model.net._target_") != LEAM_TARGET or _get(cfg, "dataset.datamodule") is None:
        return
    names = _get(cfg, "dataset.datamodule.class_names")
    if names is None:
        dataset = _get(cfg, "dataset.datamodule.name")
        declared = None
        path = option_files("dataset").get(dataset)
        if path is not None:
            declared = ((yaml.safe_load(path.read_text()) or {}).get("datamodule") or {}).get("class_names")
        if declared:
            raise UserError(f"dataset.datamodule.class_names=null: LEAM initialises its label embeddings from the "
                            f"class names, so this run would silently start them at random; drop the override "
                            f"({option_path('dataset', dataset)} names {len(declared)} classes)")
        return
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise UserError(f"dataset.datamodule.class_names={names!r}: give a list of names, one per class")
    empty = [i for i, n in enumerate(names) if not n.strip()]
    if empty:
        raise UserError(f"dataset.datamodule.class_names has an empty name at position {empty[0]}: LEAM initialises "
                        "each label embedding from its name's words; give every class a name")


def check_supported_dataset(cfg: DictConfig, choices: dict[str, str]) -> None:
    """An experiment lists the data sets its table is defined on; others are refused with the list."""
    supported = _get(cfg, "supported_datasets")
    dataset, experiment = choices.get("dataset"), choices.get("experiment")
    if supported is None or dataset is None or _get(cfg, "stage") == "count":
        return
    if dataset not in list(supported):
        raise UserError(f"experiment {experiment} is defined on dataset {' or '.join(supported)}, not {dataset}: "
                        f"drop dataset={dataset} (the experiment sets it) or pick another experiment")


def check_grid_model(choices: dict[str, str]) -> None:
    """A grid cell builds its network from `input=` x `encoder=`: a `model=` there is named, with encoder= instead.

    Its keys used to merge into the grid's network and be refused as 'unknown key model.net.arch', a key the user
    never wrote (issue 33 finding 10).
    """
    from langrepr.confpaths import group_options

    model, picks = choices.get("model"), {g: choices.get(g) for g in ("input", "encoder")}
    if model in (None, "none") or all(v in (None, "none") for v in picks.values()):
        return
    encoders = "|".join(o for o in group_options("encoder") if o != "none")
    given = " ".join(f"{g}={v}" for g, v in picks.items() if v not in (None, "none"))
    raise UserError(f"model={model}: a grid cell ({given}) builds its network from input= and encoder=, not model=: "
                    f"drop model={model} and pick the encoder with encoder=<{encoders}> (model= is for the reference "
                    "rows only, with input=none encoder=none)")


def validate_config(cfg: DictConfig, choices: dict[str, str] | None = None) -> None:
    """Every check above; raises UserError with one line at the first problem."""
    check_supported_dataset(cfg, choices or {})   # first: a wrong data set explains the unknown keys it brings
    check_grid_model(choices or {})               # before the keys model= brought into the grid's network
    check_keys(cfg)
    check_values(cfg)


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
