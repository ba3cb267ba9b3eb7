"""Table 3 / Table 5 cells (multi-hot LM §3): fine-tune this config's pretrained multi-hot LM on one downstream task.

`downstream_pipeline(task=...)`: korquad (delegates to `langrepr.tasks.span_qa.korquad_finetune_pipeline`),
ner / srl (per-morpheme BIO tagging, seqeval F1) or nsmc (sentence classification, accuracy). Each cell reads and
analyses its data first (a missing file fails before any pretraining), computes the reference predictors on the
same split (NER: all-O and the per-morpheme majority tagger; NSMC: the training majority class) as
`reference/<name>/...` metrics, then pretrains or reuses the checkpoint keyed by its pretraining config
(`langrepr.tasks.multihot_mlm.pretrained_checkpoint`) and fine-tunes it; model scores are `test/...`.
The ORIG-style baseline is the `bpe_base` list: morphemes as BPE pieces, no multi-hot groups.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch

from langrepr.data.korean.encoding import MorphemeEncoder
from langrepr.data.korean.morphemes import cached_analysis
from langrepr.data.korean.ner import (
    KLUE_TYPES,
    MODU_TYPES,
    TaggedSentence,
    bio_labels,
    read_klue_ner,
    read_modu_ner,
    shown_types,
)
from langrepr.data.korean.nsmc import load_nsmc
from langrepr.data.korean.srl import SRL_TYPES, predicate_segment, read_modu_srl
from langrepr.data.korean.token_lists import TokenList
from langrepr.errors import UserError
from langrepr.tasks.multihot_mlm import load_pretrained, plain, pretrained_checkpoint
from langrepr.tasks.token_classification import (
    FinetuneTask,
    MajorityTagger,
    SentenceHead,
    TaggingHead,
    accuracy,
    all_outside,
    collate_sentences,
    collate_tagging,
    fit,
    gold_tags,
    predict_classes,
    predict_tags,
    tagging_input,
    tagging_scores,
)
from langrepr.utils import write_json_atomic

TASKS = ("korquad", "ner", "srl", "nsmc")
READERS = {"klue": (read_klue_ner, tuple(KLUE_TYPES)), "modu_ner": (read_modu_ner, MODU_TYPES),
           "modu_srl": (read_modu_srl, SRL_TYPES)}


def in_test_part(example_id: str, test_fraction: float) -> bool:
    """A stable split by the example id's hash (the same on every machine and run)."""
    return int(hashlib.sha256(example_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < test_fraction


def load_tagged(data: dict) -> tuple[dict[str, list[TaggedSentence]], list[str]]:
    """Train / test sentences of a tagging data set and its (shown) types."""
    source = data.get("source")
    if source not in READERS:
        raise UserError(f"unknown tagging source '{source}': use {', '.join(READERS)}")
    reader, default_types = READERS[source]
    types = tuple(data.get("types") or default_types)
    sentences = reader(data["path"], {t: KLUE_TYPES.get(t, t) for t in types} if source == "klue" else types)
    parts = {"train": [], "test": []}
    for s in sentences:
        key = s.id.split("#", 1)[0]                 # SRL: all predicates of a sentence stay in one part
        parts["test" if in_test_part(key, data.get("test_fraction", 0.2)) else "train"].append(s)
    for part, limit in (("train", data.get("max_train")), ("test", data.get("max_test"))):
        parts[part] = parts[part][:limit] if limit else parts[part]
        if not parts[part]:
            raise UserError(f"{data['path']}: the {part} part is empty; use a test_fraction "
                            "strictly between 0 and 1, or a larger file")
    return parts, shown_types(types)


def pretrained_encoder(corpus, sizes, token_list, model, mlm, cache_dir, checkpoint_root, seed, workers):
    folder, record = pretrained_checkpoint(corpus, sizes, token_list, model, mlm, cache_dir, checkpoint_root, seed,
                                           workers)
    net, config = load_pretrained(folder)
    encoder = MorphemeEncoder(TokenList.load(folder / "token_list.json"), config["model"]["max_group"])
    return net, encoder, config["model"], record


def tagging_cell(name: str, data: dict, finetune: dict, pretrain: dict, cache_dir: str, seed: int, workers: int,
                 output_dir: str) -> dict[str, float]:
    parts, types = load_tagged(data)
    labels = bio_labels(types)
    index = {label: i for i, label in enumerate(labels)}
    analysed, predicates, gold = {}, {}, {}
    for part, sentences in parts.items():
        analysed[part] = cached_analysis(f"{name}_{part}", [s.text for s in sentences], cache_dir, workers,
                                         offsets=True)
        gold[part] = gold_tags(analysed[part], sentences)
        if sentences[0].predicate is not None:
            predicates[part] = cached_analysis(f"{name}_{part}_predicates",
                                               [predicate_segment(s.text, s.predicate) for s in sentences],
                                               cache_dir, workers, offsets=True)
    metrics: dict[str, float] = {"data/train_sentences": len(parts["train"]), "data/test_sentences": len(parts["test"])}
    references = {"all_o": all_outside(analysed["test"]),
                  "majority": MajorityTagger(analysed["train"], gold["train"])(analysed["test"])}
    for ref, predicted in references.items():
        metrics.update({f"reference/{ref}/{k}": v for k, v in tagging_scores(gold["test"], predicted, types).items()})
    net, encoder, model, record = pretrained_encoder(**pretrain, workers=workers)
    max_len, max_group = model["max_positions"], model["max_group"]

    def inputs(part: str, with_tags: bool):
        extra = predicates.get(part) or [None] * len(analysed[part])
        return [tagging_input(m, g if with_tags else None, index, encoder, max_len, p)
                for m, g, p in zip(analysed[part], gold[part], extra)]

    pl.seed_everything(seed, workers=True)
    task = FinetuneTask(TaggingHead(net, len(labels)), finetune["lr"], finetune["weight_decay"],
                        finetune["warmup_steps"], finetune["steps"])
    wall, steps = fit(task, inputs("train", True), lambda b: collate_tagging(b, max_group), finetune["batch_size"],
                      finetune["steps"])
    predicted = predict_tags(task, inputs("test", False), labels, max_group, finetune["batch_size"])
    write_json_atomic(Path(output_dir) / "predictions.json",
                      {s.id: p for s, p in zip(parts["test"], predicted)})
    metrics.update({f"test/{k}": v for k, v in tagging_scores(gold["test"], predicted, types).items()})
    return {**metrics, **timings(record, wall, steps)}


def nsmc_cell(data: dict, finetune: dict, pretrain: dict, cache_dir: str, seed: int, workers: int,
              output_dir: str) -> dict[str, float]:
    split = load_nsmc(cache_dir=cache_dir, **{k: v for k, v in data.items() if k != "monitor"})
    texts = {part: [r.text for r in reviews] for part, reviews in split.items()}
    gold = {part: [r.label for r in reviews] for part, reviews in split.items()}
    majority = Counter(gold["train"]).most_common(1)[0][0]
    metrics = {"data/train_reviews": len(texts["train"]), "data/test_reviews": len(texts["test"]),
               "data/train_positive_share": sum(gold["train"]) / len(gold["train"]),
               "reference/majority/accuracy": accuracy(gold["test"], [majority] * len(gold["test"]))}
    analysed = {part: cached_analysis(f"nsmc_{data.get('source')}_{part}", t, cache_dir, workers)
                for part, t in texts.items()}
    net, encoder, model, record = pretrained_encoder(**pretrain, workers=workers)
    max_len, max_group = model["max_positions"], model["max_group"]
    encoded = {part: [encoder.encode(m) for m in a] for part, a in analysed.items()}
    pl.seed_everything(seed, workers=True)
    task = FinetuneTask(SentenceHead(net, 2), finetune["lr"], finetune["weight_decay"], finetune["warmup_steps"],
                        finetune["steps"])
    pairs = list(zip(encoded["train"], gold["train"]))
    wall, steps = fit(task, pairs, lambda b: collate_sentences([e for e, _ in b], [y for _, y in b], max_group,
                                                               max_len), finetune["batch_size"], finetune["steps"])
    predicted = predict_classes(task, encoded["test"], max_group, max_len, finetune["batch_size"])
    write_json_atomic(Path(output_dir) / "predictions.json",
                      {r.id: p for r, p in zip(split["test"], predicted)})
    return {**metrics, "test/accuracy": accuracy(gold["test"], predicted), **timings(record, wall, steps)}


def timings(record: dict, wall: float, steps: int) -> dict[str, float]:
    return {"pretrain/wall_s": record["wall_s"], "pretrain/steps": record.get("steps", 0),
            "finetune/wall_s": wall, "finetune/steps": steps, "finetune/step_s": wall / max(steps, 1)}


def downstream_pipeline(output_dir: str, task: str, data: Any, corpus: Any, sizes: Any, token_list: str, model: Any,
                        mlm: Any, finetune: Any, cache_dir: str, checkpoint_root: str, seed: int, workers: int = 2,
                        korquad: Any = None) -> dict[str, float]:
    """One Table 3 cell: `task` ∈ korquad | ner | srl | nsmc on this config's pretrained model (see module doc)."""
    if task not in TASKS:
        raise UserError(f"unknown downstream task '{task}': use {', '.join(TASKS)}")
    finetune = plain(finetune)
    if task not in finetune:
        raise UserError(f"no fine-tuning settings for '{task}': add finetune.{task} to the experiment")
    settings = finetune[task]
    if settings.get("torch_threads"):
        torch.set_num_threads(int(settings["torch_threads"]))
    if task == "korquad":
        from langrepr.tasks.span_qa import korquad_finetune_pipeline

        return korquad_finetune_pipeline(output_dir, korquad, corpus, sizes, token_list, model, mlm, settings,
                                         cache_dir, checkpoint_root, seed, workers)
    data = plain(data)
    if task not in data:
        raise UserError(f"no data settings for '{task}': add downstream_data.{task} to the experiment")
    pretrain = {"corpus": corpus, "sizes": sizes, "token_list": token_list, "model": model, "mlm": mlm,
                "cache_dir": cache_dir, "checkpoint_root": checkpoint_root, "seed": seed}
    started = time.time()
    if task == "nsmc":
        metrics = nsmc_cell(data[task], settings, pretrain, cache_dir, seed, workers, output_dir)
    else:
        metrics = tagging_cell(f"{task}_{data[task]['source']}", data[task], settings, pretrain, cache_dir, seed,
                               workers, output_dir)
    return {**metrics, "cell/wall_s": time.time() - started}
