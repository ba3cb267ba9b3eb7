"""Fine-tuning data of the multi-hot LM (multi-hot LM §3): one datamodule per downstream task.

Every datamodule reads and analyses its data first (a missing file is one line before anything else), then finds
its pretraining cell by config (`langrepr.data.korean.pretrained`), encodes its examples with that cell's token
list and hands the task the encoder checkpoint, the pretraining's held-out scores and what the task scores
against (`task_kwargs`): gold answers / tags / labels of the test part and the training part a reference
predictor is fitted on. There is no validation part: the papers fine-tune a fixed number of steps and score the
test part once.

- `KorQuADDataModule`: question windows with answer spans at morpheme units (`korquad_features`); the task also
  gets which test answers the token list divides (Table 4).
- `TaggingDataModule`: NER / SRL, one BIO tag per morpheme (`downstream`).
- `NSMCDataModule`: sentence classification on [CLS].
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader

from langrepr.data.korean.base import MultiHotDataModule
from langrepr.data.korean.downstream import collate_sentences, collate_tagging, load_tagged, tagging_input
from langrepr.data.korean.encoding import MorphemeEncoder
from langrepr.data.korean.korquad import load_korquad
from langrepr.data.korean.korquad_features import answer_divided, collate_windows, korquad_windows
from langrepr.data.korean.morphemes import cached_analysis
from langrepr.data.korean.ner import bio_labels, morpheme_tags
from langrepr.data.korean.nsmc import load_nsmc
from langrepr.data.korean.prepare import token_lists
from langrepr.data.korean.pretrained import find_pretrained, plain
from langrepr.data.korean.srl import predicate_segment
from langrepr.errors import UserError

log = logging.getLogger(__name__)


class Passed(Sequence):
    """A read-only sequence handed to the task as it is.

    `hydra.utils.instantiate` turns a plain list kwarg into an OmegaConf node, where a string "???" (a morpheme or
    a question can be exactly that) means a missing value and stops the cell, and where every item of thousands
    of sentences is copied on the way.
    """

    def __init__(self, items: Sequence):
        self._items = list(items)

    def __getitem__(self, index):
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)


def passed(value: Any) -> Any:
    """Lists and tuples of the task's data as `Passed`, anything else unchanged."""
    return Passed(value) if isinstance(value, (list, tuple)) else value


class FinetuneDataModule(MultiHotDataModule):
    """What every multi-hot fine-tuning datamodule shares; subclasses read, encode and collate their task.

    Args:
        data: the task's data node (`dataset.korquad`, `downstream_data.<task>`).
        options: the task's `finetune.<task>` settings (steps, lr, ... for the trainer; stride, limits, threads here).
        pretrained: where and which pretraining cell (`root`, `expect`, `cell`, `make`, `profile`).
        corpus / sizes / token_list: the pretraining corpus and token list (the same cached list the cell used).
        max_group / max_len: the model's group slots and input positions.
    """

    def __init__(self, data: dict, options: dict, pretrained: dict, corpus: dict, sizes: dict, token_list: str,
                 max_group: int, max_len: int, batch_size: int, seed: int = 1, cache_dir: str = "outputs/cache",
                 workers: int = 2, num_workers: int = 0):
        super().__init__()
        self.data, self.options, self.pretrained = plain(data), dict(plain(options) or {}), plain(pretrained)
        self.corpus, self.sizes, self.token_list = plain(corpus), plain(sizes), token_list
        self.max_group, self.max_len, self.batch_size, self.seed = max_group, max_len, batch_size, seed
        self.cache_dir, self.workers, self.num_workers = cache_dir, workers, num_workers
        if self.options.get("torch_threads"):
            torch.set_num_threads(int(self.options["torch_threads"]))   # 1 on a shared CPU box
        self.test_splits = ["test"]
        self.data_info: dict[str, Any] = {}
        self._built = False

    # ------------------------------------------------------------ the task's part
    def read(self) -> None:
        """Read and analyse the task's data (before anything else)."""
        raise NotImplementedError

    def encode(self, encoder: MorphemeEncoder) -> None:
        """Build `train_items` / `test_items` and the task's gold data with the pretraining's token list."""
        raise NotImplementedError

    def collate(self, items: list) -> dict:
        raise NotImplementedError

    def scoring_kwargs(self) -> dict:
        """What the task scores its test predictions (and the reference predictors) against."""
        return {}

    # ------------------------------------------------------------ shared
    def setup(self, stage: str | None = None) -> None:
        if self._built:
            return
        self.read()
        cell = find_pretrained(**self.pretrained)
        tl = token_lists(self.corpus, self.sizes, self.cache_dir, self.workers)[self.token_list]
        self.vocab_size = len(tl.tokens)
        self.encode(MorphemeEncoder(tl, self.max_group))
        record = cell.record
        metrics = record.get("metrics") or {}
        self.pretraining_metrics = {k: float(v) for k, v in metrics.items() if k.startswith("val/") and v is not None}
        self.pretraining_metrics.update({"pretrain/steps": float(record.get("steps") or 0),
                                         "pretrain/wall_s": float(record.get("wall_time_s") or 0.0),
                                         "pretrain/nsp": float(bool((self.pretrained["expect"].get("mlm") or {})
                                                                    .get("nsp", False)))})
        self.checkpoint = str(cell.checkpoint)
        self.data_info.update(pretrained_cell=str(cell.folder), pretrained_fingerprint=record.get("fingerprint"),
                              token_list=self.token_list, vocab_size=self.vocab_size,
                              train_examples=len(self.train_items), test_examples=len(self.test_items))
        log.info("%s: %s", type(self).__name__, self.data_info)
        self._built = True

    @property
    def task_kwargs(self) -> dict:
        return {"encoder_checkpoint": self.checkpoint, "pretraining_metrics": dict(self.pretraining_metrics),
                **{name: passed(value) for name, value in self.scoring_kwargs().items()}}

    def test_dataloader(self) -> list[DataLoader]:
        return [DataLoader(self.test_items, batch_size=self.batch_size, shuffle=False, collate_fn=self.collate,
                           num_workers=self.num_workers)]


class KorQuADDataModule(FinetuneDataModule):
    """KorQuAD v1.0 question windows.

    `data` = `dataset.korquad` (`data_dir` null = the hub's train / dev, else the local dev file split by article);
    options: stride, max_train_questions, max_test_questions, max_answer_positions, train_windows: `all` (default:
    BERT's recipe, a window without the whole answer is trained to point at [CLS]) or `with_answer` (only the
    windows that hold the answer are trained on; KorQuAD v1.0 has no unanswerable question and the test picks the
    best span over a question's windows, never [CLS], so no test prediction depends on the dropped windows).
    """

    TRAIN_WINDOWS = ("all", "with_answer")

    def read(self) -> None:
        split = self.data.get("test_fraction", 0.3)
        limit = self.options.get
        self.train_q = load_korquad(self.data.get("data_dir"), "train", split)[:limit("max_train_questions")]
        self.test_q = load_korquad(self.data.get("data_dir"), "test", split)[:limit("max_test_questions")]
        self.answers = cached_analysis("korquad_test_answers", [q.answers[0] for q in self.test_q], self.cache_dir,
                                       self.workers)

    def encode(self, encoder: MorphemeEncoder) -> None:
        stride = int(self.options.get("stride", 128))
        self.train_items = korquad_windows(self.train_q, encoder, "korquad_train", self.cache_dir, self.workers,
                                           self.max_len, stride)
        windows = self.options.get("train_windows", "all")
        if windows not in self.TRAIN_WINDOWS:
            raise UserError(f"finetune.korquad.train_windows={windows!r}: choose one of {', '.join(self.TRAIN_WINDOWS)}")
        self.data_info["train_windows_all"] = len(self.train_items)
        if windows == "with_answer":
            self.train_items = [w for w in self.train_items if w.start > 0]
        self.test_items = korquad_windows(self.test_q, encoder, "korquad_test", self.cache_dir, self.workers,
                                          self.max_len, stride)
        self.divided = [answer_divided(encoder, m) for m in self.answers]
        self.data_info.update(train_questions=len(self.train_q), test_questions=len(self.test_q))

    def collate(self, items: list) -> dict:
        return collate_windows(items, self.max_group)

    def scoring_kwargs(self) -> dict:
        return {"questions": self.test_q, "divided": self.divided, "token_list": self.token_list,
                "max_answer": int(self.options.get("max_answer_positions", 30))}


class TaggingDataModule(FinetuneDataModule):
    """NER / SRL (`data` = `downstream_data.ner|srl`: source klue | modu_ner | modu_srl, path, types, split)."""

    TASK_OF_SOURCE = {"klue": "ner", "modu_ner": "ner", "modu_srl": "srl"}   # names of the analysis caches

    def read(self) -> None:
        self.parts, self.types = load_tagged(self.data)
        self.labels = bio_labels(self.types)
        name = f"{self.TASK_OF_SOURCE.get(self.data.get('source'), 'tagging')}_{self.data.get('source')}"
        self.analysed, self.gold, self.predicates = {}, {}, {}
        for part, sentences in self.parts.items():
            self.analysed[part] = cached_analysis(f"{name}_{part}", [s.text for s in sentences], self.cache_dir,
                                                  self.workers, offsets=True)
            self.gold[part] = [morpheme_tags(m, s.spans) for m, s in zip(self.analysed[part], sentences)]
            if sentences[0].predicate is not None:
                self.predicates[part] = cached_analysis(
                    f"{name}_{part}_predicates", [predicate_segment(s.text, s.predicate) for s in sentences],
                    self.cache_dir, self.workers, offsets=True)
        self.data_info.update(train_sentences=len(self.parts["train"]), test_sentences=len(self.parts["test"]))

    def encode(self, encoder: MorphemeEncoder) -> None:
        index = {label: i for i, label in enumerate(self.labels)}

        def inputs(part: str, with_tags: bool) -> list:
            extra = self.predicates.get(part) or [None] * len(self.analysed[part])
            return [tagging_input(m, g if with_tags else None, index, encoder, self.max_len, p, i)
                    for i, (m, g, p) in enumerate(zip(self.analysed[part], self.gold[part], extra))]

        self.train_items, self.test_items = inputs("train", True), inputs("test", False)

    def collate(self, items: list) -> dict:
        return collate_tagging(items, self.max_group)

    def scoring_kwargs(self) -> dict:
        return {"labels": self.labels, "types": self.types, "test_ids": [s.id for s in self.parts["test"]],
                "test_gold": self.gold["test"], "test_morphemes": [[m[:2] for m in s] for s in self.analysed["test"]],
                "train_morphemes": [[m[:2] for m in s] for s in self.analysed["train"]],
                "train_gold": self.gold["train"]}


class NSMCDataModule(FinetuneDataModule):
    """NSMC sentiment, classified on [CLS].

    `data` = `downstream_data.nsmc`: source crawl = an NSMC-style split built here, hub = the official one.
    """

    def read(self) -> None:
        self.split = load_nsmc(cache_dir=self.cache_dir, **{k: v for k, v in self.data.items() if k != "monitor"})
        self.gold = {part: [r.label for r in reviews] for part, reviews in self.split.items()}
        self.analysed = {part: cached_analysis(f"nsmc_{self.data.get('source')}_{part}", [r.text for r in reviews],
                                               self.cache_dir, self.workers)
                         for part, reviews in self.split.items()}
        self.data_info.update(train_reviews=len(self.gold["train"]), test_reviews=len(self.gold["test"]),
                              train_positive_share=sum(self.gold["train"]) / max(len(self.gold["train"]), 1))

    def encode(self, encoder: MorphemeEncoder) -> None:
        self.train_items, self.test_items = (
            [(encoder.encode(m), y, i) for i, (m, y) in enumerate(zip(self.analysed[part], self.gold[part]))]
            for part in ("train", "test"))

    def collate(self, items: list) -> dict:
        encoded, labels, index = zip(*items)
        return collate_sentences(encoded, labels, self.max_group, self.max_len, index)

    def scoring_kwargs(self) -> dict:
        return {"train_labels": self.gold["train"], "test_labels": self.gold["test"],
                "test_ids": [r.id for r in self.split["test"]]}
