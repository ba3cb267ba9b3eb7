"""Word tagging datamodule (CoNLL-2003 NER, the grid's tagging column): sentences of words, one BIO tag per word.

Sentences come from the local CoNLL files (`<data_dir>/conll2003/eng.{train,testa,testb}`, IOB1 as distributed,
converted to IOB2) or, without a data folder, from the HF hub copy (`eriktks/conll2003`, IOB2). The tokenizer
(the model config's, injected by train.py) is prepared on the training sentences joined by spaces and encodes
pre-split words with `encode_words`, which also gives the position of each word's first piece (word piece, EWE
material, byte, word-rule token). The standard alignment: that position carries the word's tag, every other
position is ignored by the loss (-100); a word cut off by the length limit has no position, is predicted O and
still scored. Tags are scored per word by seqeval (entity level) in the task; the gold tags are handed to it.

A tokenizer without `encode_words` cannot align positions to words: one line, before any data is read, by the
grid's composition check (`langrepr.pipelines.grid.grid_tokenizer`), and here for any other model.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset

from langrepr.data.english.conll import conll2003_hub, conll2003_splits, iob1_to_iob2
from langrepr.data.loaders import SplitLoaders, batch_loader
from langrepr.errors import UserError

log = logging.getLogger(__name__)

IGNORE = -100                  # the label of a position the loss skips
OUTSIDE = "O"
Sentences = list[tuple[list[str], list[str]]]


def first_piece_labels(first: Sequence[int], tag_ids: Sequence[int], length: int) -> np.ndarray:
    """(length,) labels: each word's tag id at its first position, IGNORE elsewhere (a word at -1 has none)."""
    labels = np.full(length, IGNORE, dtype=np.int64)
    for position, tag in zip(first, tag_ids):
        if 0 <= position < length:
            labels[position] = tag
    return labels


class _Split(Dataset):
    """Encoded sentences; ``self[list_of_indices]`` is a whole batch (numpy gather)."""

    def __init__(self, ids: np.ndarray, labels: np.ndarray, first: np.ndarray, words: np.ndarray):
        self.ids, self.labels, self.first, self.words = ids, labels, first, words

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, idx: list[int]) -> dict[str, torch.Tensor]:
        idx = np.asarray(idx)
        ids = torch.from_numpy(self.ids[idx])
        mask = (ids != 0).any(-1) if ids.dim() == 3 else ids != 0
        return {"input_ids": ids, "attention_mask": mask.long(), "labels": torch.from_numpy(self.labels[idx]),
                "first": torch.from_numpy(self.first[idx]), "words": torch.from_numpy(self.words[idx]),
                "index": torch.from_numpy(idx.astype(np.int64))}


class WordTaggingDataModule(SplitLoaders, pl.LightningDataModule):
    """Word-level BIO tagging over any tokenizer with `encode_words`.

    Args:
        name: conll2003 (what the files hold).
        data_dir: the data root holding conll2003/ (local files, IOB1 -> IOB2); None = the HF hub copy.
        tag_scheme: the local files' scheme, iob1 (CoNLL-2003 as distributed) or iob2.
        max_train_samples / max_eval_samples: caps on train and on dev / test sentences (a seeded subset in file
            order, `split_seed`), None = all.
        tokenizer: the model config's tokenizer (train.py passes it); None only for the reference rows, which
            read `sentences(split)`.
    """

    val_split = "dev"

    def __init__(self, name: str = "conll2003", data_dir: str | None = None, tokenizer: Any = None,
                 batch_size: int = 32, num_workers: int = 0, tag_scheme: str = "iob1",
                 max_train_samples: int | None = None, max_eval_samples: int | None = None, split_seed: int = 0,
                 seed: int = 0, cache_dir: str | None = None, hub_revision: str | None = "refs/convert/parquet",
                 hub_data_dir: str | None = "conll2003"):
        super().__init__()
        if name != "conll2003":
            raise UserError(f"dataset.datamodule.name={name!r}: the word tagging datamodule reads conll2003")
        if tag_scheme not in ("iob1", "iob2"):
            raise UserError(f"dataset.datamodule.tag_scheme must be iob1 or iob2, got {tag_scheme!r}")
        if tokenizer is not None and not hasattr(tokenizer, "encode_words"):
            raise UserError(f"does not compose: the tokenizer {type(tokenizer).__name__} cannot align its positions "
                            f"to words, and {name} tags every word")
        self.name, self.data_dir, self.tokenizer, self.tag_scheme = name, data_dir, tokenizer, tag_scheme
        self.batch_size, self.num_workers, self.seed, self.split_seed = batch_size, num_workers, seed, split_seed
        self.max_train_samples, self.max_eval_samples = max_train_samples, max_eval_samples
        self.cache_dir, self.hub_revision, self.hub_data_dir = cache_dir, hub_revision, hub_data_dir
        self.test_splits = ["test"]
        self.labels: list[str] = []
        self.data_info: dict[str, Any] = {}
        self._sentences: dict[str, Sentences] = {}
        self._splits: dict[str, _Split] = {}

    # --- what train.py and the task read ---------------------------------------------------
    @property
    def net_kwargs(self) -> dict[str, Any]:
        if not self._splits:
            raise RuntimeError("WordTaggingDataModule.net_kwargs is available after setup()")
        return {"vocab_size": self.tokenizer.vocab_size, "num_labels": len(self.labels), "per_position": True}

    @property
    def task_kwargs(self) -> dict[str, Any]:
        self._build()
        return {"labels": self.labels, "types": sorted({t[2:] for t in self.labels if t != OUTSIDE}),
                "val_gold": [tags for _, tags in self._sentences["dev"]],
                "test_gold": [tags for _, tags in self._sentences["test"]]}

    def prepare_data(self) -> None:
        self._build()

    def setup(self, stage: str | None = None) -> None:
        self._build()

    def sentences(self, split: str) -> Sentences:
        """(words, IOB2 tags) of a split, after the caps: the rows the model cells see (for the reference rows)."""
        self._read()
        return self._sentences[split]

    # --- building ---------------------------------------------------------------------------
    def _cap(self, sentences: Sentences, limit: int | None) -> Sentences:
        if limit is None or limit >= len(sentences):
            return sentences
        keep = np.sort(np.random.default_rng(self.split_seed).permutation(len(sentences))[:limit])
        return [sentences[i] for i in keep]

    def _read(self) -> None:
        if self._sentences:
            return
        if self.data_dir:
            raw, source = conll2003_splits(self.data_dir), f"local conll2003/ ({self.tag_scheme})"
            if self.tag_scheme == "iob1":
                raw = {s: [(w, iob1_to_iob2(t)) for w, t in rows] for s, rows in raw.items()}
        else:
            raw, source = conll2003_hub(self.cache_dir, self.hub_revision, self.hub_data_dir), "hub eriktks/conll2003"
        raw = {s: [(w, t) for w, t in rows if w] for s, rows in raw.items()}
        self._sentences = {"train": self._cap(raw["train"], self.max_train_samples),
                           "dev": self._cap(raw["dev"], self.max_eval_samples),
                           "test": self._cap(raw["test"], self.max_eval_samples)}
        for split, rows in self._sentences.items():
            if not rows:
                raise UserError(f"split {split!r} of {self.name} is empty: check the data folder or the caps")
        self.labels = [OUTSIDE] + sorted({t for _, tags in self._sentences["train"] for t in tags} - {OUTSIDE})
        self.data_info = {"name": self.name, "source": source, "labels": self.labels,
                          "rows": {s: len(r) for s, r in self._sentences.items()},
                          "words": {s: sum(len(w) for w, _ in r) for s, r in self._sentences.items()}}

    def _encode(self, sentences: Sentences) -> tuple[_Split, int]:
        index = {t: i for i, t in enumerate(self.labels)}
        enc = self.tokenizer.encode_words([words for words, _ in sentences])
        ids = enc["input_ids"].numpy()
        length = ids.shape[1]
        most = max(len(words) for words, _ in sentences)
        first = np.full((len(sentences), most), -1, dtype=np.int64)
        labels = np.zeros((len(sentences), length), dtype=np.int64)
        cut = 0
        for row, ((_, tags), starts) in enumerate(zip(sentences, enc["first"])):
            first[row, : len(starts)] = starts
            labels[row] = first_piece_labels(starts, [index.get(t, IGNORE) for t in tags], length)
            cut += sum(p < 0 for p in starts)
        words = np.array([len(w) for w, _ in sentences], dtype=np.int64)
        return _Split(ids, labels, first, words), cut

    def _build(self) -> None:
        if self._splits:
            return
        if self.tokenizer is None:
            raise UserError("WordTaggingDataModule needs a tokenizer to encode: set model.tokenizer")
        self._read()
        train_texts = [" ".join(words) for words, _ in self._sentences["train"]]
        self.tokenizer.prepare(train_texts, Path(self.cache_dir) / "vocab" if self.cache_dir else None)
        cut = {}
        for split, rows in self._sentences.items():
            self._splits[split], cut[split] = self._encode(rows)
        self.data_info.update(vocab_size=self.tokenizer.vocab_size, words_cut_off=cut)
        log.info("%s: %s sentences, %s words cut off by the length limit (predicted O)", self.name,
                 self.data_info["rows"], cut)

    def _loader(self, name: str, shuffle: bool) -> DataLoader:
        self._build()
        return batch_loader(self._splits[name], self.batch_size, shuffle, self.seed, self.num_workers)
