"""A table's sweep expanded into cells (as Hydra's basic sweeper does), and each cell into its gradient stages."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from langrepr.build import compose
from langrepr.plan.facts import (
    COOCCURRENCE_TOKENS_PER_CPU_S,
    DATASET_DOWNLOAD,
    downloads,
    labels_of,
    size_of,
    token_list_size,
)
from langrepr.plan.workload import Stage, Workload

# ---------------------------------------------------------------- sweep -> cells

def sweep_cells(experiment: str, profile: str, extra: list[str] = ()) -> list[list[str]]:
    """The override list of every job `-m experiment=E profile=P [extra]` runs, as Hydra's basic sweeper builds them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    cfg = compose([f"experiment={experiment}", f"profile={profile}", *extra], hydra=True)
    params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.params or {}).items()]
    overrides = OverridesParser.create().parse_overrides(params + [f"experiment={experiment}", f"profile={profile}",
                                                                   *extra])
    return BasicSweeper.split_arguments(overrides, None)[0]


def compose_cell(overrides: list[str]) -> tuple[Any, list[str]]:
    """(validated config, findings) of one cell.

    A key the sweep sets without '+' that no file declares is retried with '+' (so the plan can still cost the
    cell) and reported: `make` would refuse that cell.
    """
    from langrepr.validation import validate_config

    findings = []
    try:
        cfg = compose(overrides, hydra=True)
    except Exception as err:  # noqa: BLE001  (Hydra's composition errors: reported, retried below)
        missing = re.search(r"Could not override '([^']+)'", str(err))
        if not missing:
            raise
        findings.append(f"does not compose: '{missing.group(1)}' is set by the sweep but declared by no config "
                        f"file of this profile (`make` refuses it); planned with +{missing.group(1)}")
        overrides = [f"+{o}" if o.split("=", 1)[0] == missing.group(1) else o for o in overrides]
        cfg = compose(overrides, hydra=True)
    validate_config(cfg, {k: v for k, v in cfg.hydra.runtime.choices.items() if v is not None})
    return cfg, findings


def cell_name(overrides: list[str]) -> str:
    return ",".join(o for o in overrides if not o.startswith(("experiment=", "profile=")))


# ---------------------------------------------------------------- cell -> stages

def _sel(cfg: Any, key: str, default: Any = None) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, key, default=default)


def dataset_name(cfg: Any) -> str:
    return str(cfg.hydra.runtime.choices.get("dataset") or _sel(cfg, "dataset.datamodule.name") or "")


def data_needs(cfg: Any) -> set[str]:
    """The `downloads()` keys of the data the cell reads."""
    stage, target = cfg.get("stage", "train"), str(_sel(cfg, "pipeline._target_", ""))
    if stage == "count" or target.endswith("time_training_iterations"):
        return set()
    if target.endswith("probe_cell"):
        return {"c4", "conll2003", "gum"}
    if ".korean." in target or "multihot" in target or "span_qa" in target:
        needs = {"modu_newspaper", "korquad"}
        task = _sel(cfg, "downstream")
        if target.endswith("downstream_pipeline") and task in ("ner", "srl"):
            needs.add(f"modu_{task}")
        if target.endswith("downstream_pipeline") and task == "nsmc":
            needs.add("nsmc")
        return needs
    name = DATASET_DOWNLOAD.get(dataset_name(cfg), dataset_name(cfg))
    needs = {name} if name in downloads() else set()
    task = _sel(cfg, "downstream")       # a multi-hot fine-tuning train cell reads its task's data too
    if task is not None:
        needs.add({"korquad": "korquad", "ner": "modu_ner", "srl": "modu_srl", "nsmc": "nsmc"}.get(str(task), ""))
    elif str(_sel(cfg, "dataset.datamodule._target_", "")).endswith("KorQuADDataModule"):
        needs.add("korquad")
    return needs & set(downloads())


def cpu_nature(cfg: Any) -> str:
    """What a non-gradient cell does (no GPU time)."""
    stage, target = cfg.get("stage", "train"), str(_sel(cfg, "pipeline._target_", ""))
    if stage == "count":
        return "parameter count of the model built from config (CPU, seconds)"
    if stage == "stats":
        return "label statistics of the data (CPU)"
    leaf = target.rsplit(".", 1)[-1]
    if leaf == "probe_cell":
        kind = str(_sel(cfg, "bitcipher_vectors.kind", "?"))
        tokens = _sel(cfg, "bitcipher.corpus.max_tokens")
        work = {"sum": "co-occurrence", "cat": "co-occurrence"}.get(kind)
        text = (f"Bit Cipher vectors '{kind}' over up to {tokens:,} corpus tokens (built once, shared by the seeds)"
                if tokens else f"Bit Cipher vectors '{kind}'")
        if work:
            text += f", {work} ~{tokens / COOCCURRENCE_TOKENS_PER_CPU_S / 3600:,.1f} CPU-hours at 1.42M tokens per " \
                    "CPU-second (docs/bitcipher.md; tokenisation excluded)"
        return text + " + POS/NER MLP probe on CPU (1 thread)"
    return {"label_prior": "reference row: label prior (CPU)", "majority_class": "reference row: majority class (CPU)",
            "bow_logistic_regression": "reference row: bag-of-words logistic regression (scikit-learn, CPU)",
            "tfidf_probe": "reference row: TF-IDF + logistic regression (scikit-learn, CPU)",
            "masked_unigram_nll": "reference row: unigram NLL of the masked tokens (CPU counts)",
            "copy_source_bleu": "reference row: BLEU of copying the source (CPU)",
            "causal_unigram_ppl": "reference row: unigram perplexity (CPU counts)",
            "table1_pipeline": "token-list sizes: Kiwi morpheme analysis of the corpus + list building (CPU)",
            "korquad_answer_pipeline": "KorQuAD answers divided / not divided per token list (CPU counts)",
            }.get(leaf, f"pipeline {target} (CPU)")


def stages(cfg: Any) -> list[Stage]:
    """The gradient stages of a cell ([] for a non-gradient cell)."""
    stage, target = cfg.get("stage", "train"), str(_sel(cfg, "pipeline._target_", ""))
    if stage == "train":
        return [train_stage(cfg)]
    if target.endswith(("downstream_pipeline", "korquad_finetune_pipeline", "pretrain_pipeline")):
        return multihot_stages(cfg, target)
    if target.endswith("time_training_iterations"):
        p = cfg.pipeline
        work = Workload("text_classifier", cfg.model.net, {"vocab_size": int(p.vocab_size), "num_labels": int(p.num_labels)},
                        {"length": int(p.length), "vocab": int(p.vocab_size), "labels": int(p.num_labels),
                         "multilabel": False})
        return [Stage("timing", work, int(p.batch_size), int(p.iterations) + int(p.warmup), "iterations + warm-up",
                      "random ids", optimizer="Adam", precision="32 (plain fp32, no autocast)",
                      notes=["Table 4 times fp32 steps on whatever device it finds"])]
    return []


def _steps(cfg: Any, batch: int, train_units: int | None) -> tuple[int | None, str, float | None]:
    """(optimiser steps, how they were read, epochs) from the trainer config and the training set size."""
    max_steps, max_epochs = int(_sel(cfg, "trainer.max_steps", -1) or -1), int(_sel(cfg, "trainer.max_epochs", -1) or -1)
    accumulate = int(_sel(cfg, "trainer.accumulate_grad_batches", 1) or 1)
    per_epoch = math.ceil(train_units / batch / accumulate) if train_units else None
    if max_epochs > 0 and per_epoch:
        by_epochs = max_epochs * per_epoch
        if 0 < max_steps < by_epochs:
            return max_steps, f"max_steps {max_steps:,} (before {max_epochs} epochs)", max_steps / per_epoch
        return by_epochs, f"{max_epochs} epochs x {per_epoch:,} steps", float(max_epochs)
    if max_steps > 0:
        return max_steps, f"max_steps {max_steps:,}", (max_steps / per_epoch if per_epoch else None)
    return None, f"{max_epochs} epochs x unknown steps per epoch (training-set size unknown)", None


def _eval_forwards(cfg: Any, size: dict, steps: int | None, epochs: float | None, units_per_example: int,
                   batch: int = 1) -> tuple[int, str, int]:
    """(examples run forward-only, how, batches): validation passes (the trainer's schedule) plus one test pass.

    Batches count apart from examples because a small cell's evaluation is bound by its per-batch time, not FLOPs.
    """
    cap = _sel(cfg, "dataset.datamodule.max_eval_samples")
    train = size.get("train")
    val = size.get("val")
    if val is None and train and size.get("val_fraction"):
        val = int(train * size["val_fraction"])
    val = None if val is None else val // units_per_example
    test = None if size.get("test") is None else size["test"] // units_per_example
    if cap:   # a split of unknown size is taken to reach the cap (the cap is what an evaluation reads)
        val, test = (int(cap) if val is None else min(val, int(cap))), (int(cap) if test is None else min(test, int(cap)))
    interval, every = _sel(cfg, "trainer.val_check_interval"), _sel(cfg, "trainer.check_val_every_n_epoch", 1)
    if steps is None:
        return 0, "not projected (steps unknown)", 0
    if isinstance(interval, int) and interval > 1 and not isinstance(interval, bool):
        passes = steps // interval
    elif epochs is not None:
        passes = int(epochs / (float(interval) if interval else 1.0) / (every or 1))
    else:
        passes = 0
    forwards = passes * (val or 0) + (test or 0)
    batches = passes * math.ceil((val or 0) / batch) + math.ceil((test or 0) / batch)
    return forwards, (f"{passes:,} validations x {val or 0:,} + test {test or 0:,}"
                      + ("" if val is not None and test is not None else " (a split size is unknown: not counted)")), batches


def train_stage(cfg: Any) -> Stage:
    """A `stage: train` cell (Lightning Trainer, `trainer.precision`)."""
    from hydra.utils import get_class

    dataset = dataset_name(cfg)
    dm = cfg.dataset.datamodule
    cls = get_class(cfg.model.net._target_).__name__
    batch = int(dm.batch_size)
    size = size_of(dataset) or {"unit": "?", "train": None, "source": "unknown"}
    train = size.get("train")
    if train and size.get("val_fraction"):
        train = int(train * (1 - size["val_fraction"]))
    cap = dm.get("max_train_samples")
    capped = bool(train and isinstance(cap, int) and cap < train)
    if capped:              # the datamodule keeps only its first `max_train_samples` (e.g. the grid's quick NER)
        train = cap
    units_per_example = 1
    if cls == "HFSequenceClassifier":
        tok = cfg.model.tokenizer
        labels = labels_of(dataset) or int(_sel(cfg, "count_net_kwargs.num_labels", 1328))
        shape = {"u": tok.get("u", tok.get("max_length")), "v": tok.get("v", 1), "labels": labels,
                 "vocab": tok.get("vocab_size", 0x10FFFF if "Codepoint" in tok._target_ else 256),
                 "bytes": "Byte" in tok._target_}
        work = Workload("hf_classifier", cfg.model.net, {"num_labels": labels}, shape)
    elif cls in ("LEAM", "SWEM", "KimCNN", "BiLSTM"):
        tok = cfg.model.tokenizer
        labels = labels_of(dataset) or len(dm.class_names or [])
        multilabel = bool(dm.get("multilabel", False)) or dataset == "uspto"
        vocab = int(tok.max_vocab)
        work = Workload("text_classifier", cfg.model.net, {"vocab_size": vocab, "num_labels": labels},
                        {"length": int(tok.max_length), "vocab": vocab, "labels": labels, "multilabel": multilabel})
    elif cls == "GridModel":      # the grid (issue 24): an input x an encoder (langrepr.models.grid)
        work = grid_workload(cfg, dataset)
    elif cls == "MaskedLMModel":
        n, vocab = int(dm.seq_len), size["vocab"]
        units_per_example = n
        work = Workload("masked_lm", cfg.model.net, {"vocab_size": vocab, "pad_token_id": 0, "max_len": n,
                                                     "flops_seq_len": n},
                        {"length": n, "vocab": vocab, "mask_prob": float(cfg.dataset.task.mask_prob)})
    elif cls == "CausalTransformerLM":
        n, vocab = int(dm.seq_len), int(dm.get("max_vocab") or size["vocab"])
        units_per_example = n
        work = Workload("causal_lm", cfg.model.net, {"vocab_size": vocab, "pad_token_id": 0, "max_len": n},
                        {"length": n, "vocab": vocab})
    elif cls == "Seq2SeqModel":
        src, tgt, vocab = int(dm.max_source_len), int(dm.max_target_len), int(dm.vocab_size)
        work = Workload("seq2seq", cfg.model.net, {"vocab_size": vocab, "pad_token_id": 0, "bos_token_id": 1,
                                                   "eos_token_id": 2, "max_len": max(src, tgt) + 1,
                                                   "flops_seq_len": src},
                        {"source": src, "target": tgt, "vocab": vocab})
    elif cls == "MultiHotLM":     # multi-hot pretraining or fine-tuning as a train cell
        work, size = multihot_train_workload(cfg)
    else:
        raise ValueError(f"the plan does not know how to feed {cfg.model.net._target_}")
    train_examples = train // units_per_example if train else None
    steps, note, epochs = _steps(cfg, batch, train_examples)
    forwards, eval_note, eval_batches = _eval_forwards(cfg, size, steps, epochs, units_per_example, batch)
    unit = size.get("unit", "?")
    if train:
        examples = (f"{train:,} {unit}" + (" (max_train_samples)" if capped else "")
                    + (f" = {train_examples:,} blocks of {units_per_example}" if units_per_example > 1 else ""))
    elif steps:
        examples = f"{steps * batch:,} {unit} seen (steps x batch; set size unknown)"
    else:
        examples = f"unknown ({size.get('source', '')})"
    notes = []
    if work.kind == "seq2seq":
        notes.append("source/target at the length caps (max_source_len / max_target_len): an upper bound, batches "
                     "pad only to their longest pair; test beam search (beam 5) not counted")
    if work.kind == "text_classifier" and dataset != "uspto" and "max_vocab" in cfg.model.tokenizer:
        notes.append(f"vocabulary at the tokenizer cap ({work.shape['vocab']:,}): an upper bound")
    optimizer = str(cfg.optimizer._target_).rsplit(".", 1)[-1]
    return Stage("train", work, batch, steps, note, examples, optimizer=optimizer,
                 precision=str(_sel(cfg, "trainer.precision", "32")), eval_forwards=forwards, eval_note=eval_note,
                 eval_batches=eval_batches,
                 notes=notes)


def extra_sweeps(table: str, profile: str) -> list[list[str]]:
    """Sweeps a table's make target runs beside its experiment's own (single values: each is composed once).

    The grid (`make grid`): multi-hot inputs on NSMC only, CoNLL-2003 NER under the tagging encoders only, and the
    reference rows (one seed, deterministic).
    """
    if table != "grid":
        return []
    patents = "synthetic" if profile == "quick" else "uspto"
    refs = [(patents, "patent_label_prior"), (patents, "patent_tfidf_probe")] + [
        (task, model) for task in ("ag_news", "nsmc_text") for model in ("majority_class", "bow_lr")] + [
        ("conll2003", "majority_tagger"), ("conll2003", "token_lr")]
    return ([["grid_task=nsmc_text", "input=multihot"]]
            + [["grid_task=conll2003", f"encoder={encoder}"] for encoder in ("tensorcoder", "bert")]
            + [[f"grid_task={task}", "input=none", "encoder=none", f"model={model}", "seed=1"] for task, model in refs])


def grid_workload(cfg: Any, dataset: str) -> Workload:
    """A grid cell's input x encoder at its input's id shape: (L,) token ids, (u, v) EWE materials, (L, 1 + G) groups."""
    from omegaconf import OmegaConf

    node = _sel(cfg, "input.net")
    if node is not None and "vectors_path" in node:   # vectors trained in the cell: a random start costs the same
        OmegaConf.update(cfg, "input.net.vectors_path", None, merge=False)
    tok = cfg.model.tokenizer.inner
    target = str(tok._target_)
    extra: dict = {}
    if "WhitespaceByte" in target or "RawByte" in target:
        ids, vocab = ([int(tok.u), int(tok.v)] if int(tok.v) > 1 else [int(tok.u)]), 256
    elif "MultiHot" in target:
        ids, vocab = [int(tok.max_length), 1 + int(tok.max_group)], int(tok.bpe_size) + int(tok.syllables)
        extra = {"pos_tags": int(cfg.model.net.input.num_pos_tags)}
    else:
        ids, vocab = [int(tok.max_length)], int(tok.get("vocab_size") or tok.get("max_vocab"))
    dm = cfg.dataset.datamodule
    labels = labels_of(dataset) or len(dm.get("class_names") or []) or 2
    multilabel = bool(dm.get("multilabel", False)) or dataset in ("uspto", "synthetic")
    return Workload("grid_classifier", cfg.model.net, {"vocab_size": vocab, "num_labels": labels},
                    {"ids": ids, "vocab": vocab, "labels": labels, "multilabel": multilabel, **extra})


def grid_composition(cfg: Any) -> str | None:
    """A grid cell (`model.tokenizer` is the grid's): why it does not compose, else None (`langrepr.grid`)."""
    tok = _sel(cfg, "model.tokenizer")
    if tok is None or not str(tok.get("_target_", "")).endswith("grid_tokenizer"):
        return None
    from omegaconf import OmegaConf

    from langrepr.grid import composition_error

    return composition_error(OmegaConf.to_container(tok.compose, resolve=True))


def multihot_shape(model: Any, token_list: str) -> tuple[int, dict]:
    """Token-list size and input shape of a multi-hot net: every group slot filled, the widest batch a list allows."""
    vocab = token_list_size(token_list)
    group = 1 if token_list == "bpe_base" else int(model.max_group)
    return vocab, {"length": int(model.max_positions), "group": group, "vocab": vocab,
                   "pos_tags": int(model.num_pos_tags), "token_list": token_list}


def multihot_train_workload(cfg: Any) -> tuple[Workload, dict]:
    """A multi-hot train cell: MLM pretraining (a PretrainingDataModule) or fine-tuning (the encoder's cost)."""
    dm = cfg.dataset.datamodule
    token_list = str(_sel(cfg, "dataset.datamodule.token_list") or _sel(cfg, "pipeline.token_list"))
    vocab, shape = multihot_shape(cfg.model.net, token_list)
    if str(dm._target_).endswith("PretrainingDataModule"):
        task = cfg.dataset.task
        options = dict(task.get("loss_options") or {}) if str(task.get("loss", "mhsce")) == "mhsce" else {}
        work = Workload("multihot_mlm", cfg.model.net, {"vocab_size": vocab},
                        {**shape, "loss": str(task.get("loss", "mhsce")), "loss_options": options})
        unit = "sequences (from the 16 GB corpus)"
    else:
        work = Workload("multihot_encoder", cfg.model.net, {"vocab_size": vocab}, shape)
        unit = "examples"
    return work, {"unit": unit, "train": None, "source": "step-based (trainer.max_steps)"}


def multihot_stages(cfg: Any, target: str) -> list[Stage]:
    """Pretraining (shared by every cell naming the same config) and fine-tuning of a multi-hot pipeline cell."""
    from omegaconf import OmegaConf

    model, mlm, token_list = cfg.model.net, cfg.mlm, str(cfg.pipeline.token_list)
    vocab, shape = multihot_shape(model, token_list)
    group = shape["group"]
    wired = "32 (the pipeline's own Trainer sets no precision: fp32 on a GPU today)"
    key = json.dumps({"token_list": token_list, "model": OmegaConf.to_container(model, resolve=True),
                      "mlm": OmegaConf.to_container(mlm, resolve=True), "seed": int(cfg.seed),
                      "corpus": OmegaConf.to_container(cfg.dataset.corpus, resolve=True)}, sort_keys=True, default=str)
    pre = Stage("pretrain", Workload("multihot_mlm", model, {"vocab_size": vocab},
                                     {**shape, "loss": str(mlm.loss),
                                      "loss_options": OmegaConf.to_container(mlm.get("loss_options") or {}) if mlm.loss == "mhsce" else {}}),
                int(mlm.batch_size), int(mlm.steps), f"mlm.steps {int(mlm.steps):,}",
                f"{int(mlm.steps) * int(mlm.batch_size):,} sequences of {shape['length']} positions from the 16 GB "
                "corpus", precision=wired, share_key=f"multihot-pretrain-{key}", batch_setting="mlm.batch_size",
                notes=[f"token list {token_list} ({vocab:,} tokens, paper Table 1); group slots {group} (every slot "
                       "filled: the widest batch the list allows)" + ("; NSP head not counted (2 outputs)" if mlm.get("nsp") else "")])
    if target.endswith("pretrain_pipeline"):
        return [pre]
    task = str(cfg.downstream) if target.endswith("downstream_pipeline") else "korquad"
    ft = cfg.finetune[task] if target.endswith("downstream_pipeline") else cfg.finetune
    tune = Stage(f"fine-tune {task}", Workload("multihot_encoder", model, {"vocab_size": vocab}, shape),
                 int(ft.batch_size), int(ft.steps), f"finetune steps {int(ft.steps):,}",
                 f"{int(ft.steps) * int(ft.batch_size):,} examples at {shape['length']} positions (upper bound)",
                 precision=wired,
                 batch_setting=f"finetune.{task}.batch_size" if target.endswith("downstream_pipeline") else "finetune.batch_size",
                 notes=["fine-tuning at max_positions: an upper bound (batches pad to their longest example)"])
    return [pre, tune]
