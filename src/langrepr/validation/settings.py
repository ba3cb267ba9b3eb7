"""Pipeline and newer-paper settings checked by name, the data set and grid choices, and `validate_config` (every check)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig

from langrepr.confpaths import option_files, option_path
from langrepr.errors import UserError
from langrepr.validation.keys import STAGES, TEST_CKPTS, check_keys
from langrepr.validation.values import (
    _get,
    _int,
    _number,
    _positive_float,
    check_canine_length,
    check_hardware,
    check_trainer_values,
)

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
    """Every check (data set and grid choices, keys, values, settings); one UserError line at the first problem."""
    check_supported_dataset(cfg, choices or {})   # first: a wrong data set explains the unknown keys it brings
    check_grid_model(choices or {})               # before the keys model= brought into the grid's network
    check_keys(cfg)
    check_values(cfg)


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
