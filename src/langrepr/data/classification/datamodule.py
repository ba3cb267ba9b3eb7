"""Text-classification datamodule for LEAM and its baselines (AG News, Yelp, DBpedia, Yahoo, MIMIC-III 50, NSMC).

Texts are read once (`sources.py`), the word vocabulary is built on the training split only, and every
split is encoded to fixed-length id tensors; batches are gathered in numpy (see `_Split`). The
validation split is held out of train (stratified, ``val_fraction``), as the official code
selects the test accuracy at the best validation accuracy.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset

from langrepr.data.classification.sources import (
    read_hub,
    read_local,
    read_mimic50,
    read_nsmc,
    stratified_split,
)
from langrepr.data.classification.vocab import WordTokenizer
from langrepr.data.classification.word_vectors import word_vectors_for
from langrepr.data.loaders import SplitLoaders, batch_loader
from langrepr.errors import UserError

log = logging.getLogger(__name__)


class _Split(Dataset):
    """Encoded split; ``self[list_of_indices]`` is a whole batch (numpy gather: no per-item torch ops)."""

    def __init__(self, ids: np.ndarray, labels: list, num_labels: int, multilabel: bool):
        self.ids = ids.astype(np.int32)
        if multilabel:
            self.labels = np.zeros((len(labels), num_labels), dtype=np.float32)
            for row, labs in enumerate(labels):
                self.labels[row, labs] = 1.0
        else:
            self.labels = np.asarray(labels, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, idx: list[int]) -> dict[str, torch.Tensor]:
        ids = torch.from_numpy(self.ids[np.asarray(idx)].astype(np.int64))
        return {"input_ids": ids, "attention_mask": (ids != 0).long(),
                "labels": torch.from_numpy(self.labels[np.asarray(idx)])}


class TextClassificationDataModule(SplitLoaders, pl.LightningDataModule):
    """Single- or multi-label text classification over word ids.

    Args:
        name: ag_news | yelp_polarity | yelp_full | dbpedia | yahoo | mimic50 | nsmc (what the files hold).
        data_dir: a local folder (Zhang CSVs, the MIMIC files, or for NSMC the data root holding nsmc/);
            None = HF hub (MIMIC: required).
        source_options: extra arguments of the reader; NSMC: those of `load_nsmc` (source, per_class, ...).
        class_names: one name per label; their words initialise LEAM's label embeddings.
        split_test_fraction: with a local folder holding only test.csv, cut it into train and test.
        split_seed: fixes that cut and the validation hold-out (the same for every model seed).
        max_train_samples / max_eval_samples: caps (a class-stratified subset), None = all.
        tokenizer: a `WordTokenizer` (the model config's ``tokenizer:``, injected by train.py).
        word_vectors: pretrained word vectors for the training vocabulary (`word_vectors.py`): null (random, the
            stated fallback, one log line), a GloVe .txt / .zip, or hub:<owner>/<repo>/<file>. After setup,
            `word_vectors_file` is the GloVe-format file of the vocabulary's rows (None without), which the
            LEAM task hands to its net. word_vector_dim: their width (LEAM: 300, the paper's).
        label_fraction: keep this share of the training rows (LEAM Fig. 2(b): accuracy against the proportion of
            labelled data), drawn uniformly at random with the run's `seed` after the vocabulary is built on the
            whole training split, as the official code's ``part_data`` (its draw is unseeded, so it varies by run);
            at least one row. Validation and test are untouched. None = all rows.
    """

    val_split = "val"

    def __init__(self, name: str, data_dir: str | None = None, class_names: list[str] | None = None,
                 tokenizer: WordTokenizer | None = None, batch_size: int = 100, num_workers: int = 0,
                 val_fraction: float = 0.05, split_test_fraction: float | None = None, split_seed: int = 0,
                 max_train_samples: int | None = None, max_eval_samples: int | None = None,
                 multilabel: bool = False, seed: int = 0, cache_dir: str | None = None,
                 source_options: dict[str, Any] | None = None, word_vectors: str | None = None,
                 word_vector_dim: int = 300, label_fraction: float | None = None):
        super().__init__()
        if tokenizer is None:
            raise UserError("TextClassificationDataModule needs a tokenizer: set model.tokenizer (train.py passes it in)")
        self.name, self.data_dir, self.class_names, self.tokenizer = name, data_dir, class_names, tokenizer
        self.batch_size, self.num_workers, self.seed = batch_size, num_workers, seed
        self.val_fraction, self.split_test_fraction, self.split_seed = val_fraction, split_test_fraction, split_seed
        self.max_train_samples, self.max_eval_samples = max_train_samples, max_eval_samples
        self.multilabel, self.cache_dir = multilabel, cache_dir
        self.source_options = dict(source_options or {})
        self.word_vectors, self.word_vector_dim = word_vectors, word_vector_dim
        self.word_vectors_file: Path | None = None
        if label_fraction is not None and not 0 < float(label_fraction) <= 1:
            raise UserError(f"dataset.datamodule.label_fraction={label_fraction}: give a share of the training rows "
                            "in (0, 1], e.g. 0.01 for 1%, or null for all")
        self.label_fraction = None if label_fraction is None else float(label_fraction)
        self.test_splits = ["test"]
        self.data_info: dict[str, Any] = {}
        self.label_word_ids: list[list[int]] | None = None
        self._splits: dict[str, _Split] = {}
        self._unlabelled_train: list[str] | None = None
        self.num_labels = 0

    # --- what train.py and the task read ---------------------------------------------------
    @property
    def net_kwargs(self) -> dict[str, Any]:
        if not self._splits:
            raise RuntimeError("TextClassificationDataModule.net_kwargs is available after setup()")
        return {"vocab_size": self.tokenizer.vocab_size, "num_labels": self.num_labels}

    def prepare_data(self) -> None:
        self._build()

    def setup(self, stage: str | None = None) -> None:
        self._build()

    # --- building ---------------------------------------------------------------------------
    def _read(self) -> tuple[dict, dict, list[str] | None]:
        if self.name == "mimic50":
            return read_mimic50(self.data_dir, self.cache_dir)
        if self.name == "nsmc":
            splits, info = read_nsmc(self.data_dir, self.cache_dir, **self.source_options)
            return splits, info, None
        if self.data_dir:
            splits, info = read_local(Path(self.data_dir), self.split_test_fraction, self.split_seed,
                                      len(self.class_names) if self.class_names is not None else None)
        else:
            splits, info = read_hub(self.name, self.cache_dir)
        return splits, info, None

    def _cap(self, split: tuple[list, list], limit: int | None) -> tuple[list, list]:
        texts, labels = split
        if limit is None or limit >= len(texts):
            return split
        if self.multilabel:
            keep = np.sort(np.random.default_rng(self.split_seed).permutation(len(texts))[:limit])
        else:
            _, keep = stratified_split(labels, limit / len(texts), self.split_seed)
        return [texts[i] for i in keep], [labels[i] for i in keep]

    def _check_classes(self, splits: dict, info: dict) -> None:
        """Every class has training rows, and no row has a class beyond the configured class names."""
        if self.multilabel:
            return
        labels = [lab for _, labs in splits.values() for lab in labs]
        if not labels:
            return
        n = len(self.class_names) if self.class_names is not None else max(labels) + 1
        beyond = sorted({lab for lab in labels if lab >= n})
        if beyond:
            raise UserError(f"{self.name} ({info.get('source', '?')}) has rows of class {beyond[0] + 1} but "
                            f"{n} class names (dataset.datamodule.class_names): fix or drop those rows")
        counts = np.bincount(np.asarray(splits["train"][1], dtype=np.int64), minlength=n)
        empty = [i for i in range(n) if counts[i] == 0]
        if empty:
            named = [f"{i + 1}" + (f" ({self.class_names[i]})" if self.class_names is not None else "") for i in empty]
            raise UserError(f"{self.name} ({info.get('source', '?')}): class {', '.join(named)} has no training "
                            f"rows ({len(splits['train'][1])} rows, classes 1-{n}): the data is cut or filtered; "
                            "restore the missing rows or point dataset.datamodule.data_dir at the full data")

    def _build(self) -> None:
        if self._splits:
            return
        splits, info, codes = self._read()
        self._check_classes(splits, info)
        if "val" not in splits:
            texts, labels = splits["train"]
            if self.multilabel:
                order = np.random.default_rng(self.split_seed).permutation(len(texts))
                n_val = max(1, int(round(self.val_fraction * len(texts))))
                train_idx, val_idx = np.sort(order[n_val:]), np.sort(order[:n_val])
            else:
                train_idx, val_idx = stratified_split(labels, self.val_fraction, self.split_seed)
            splits["val"] = ([texts[i] for i in val_idx], [labels[i] for i in val_idx])
            splits["train"] = ([texts[i] for i in train_idx], [labels[i] for i in train_idx])
        splits["train"] = self._cap(splits["train"], self.max_train_samples)
        for name in ("val", "test"):
            splits[name] = self._cap(splits[name], self.max_eval_samples)
        for name, (texts, _) in splits.items():
            if not texts:
                raise UserError(f"split {name!r} of {self.name} is empty: raise dataset.datamodule.max_*_samples "
                                "or check the data folder")
        self.num_labels = len(codes) if codes is not None else int(max(max(s[1]) for s in splits.values())) + 1
        if self.class_names is not None and len(self.class_names) != self.num_labels:
            raise UserError(f"{len(self.class_names)} class names for {self.num_labels} labels in {self.name}: "
                            "give one name per label in dataset.datamodule.class_names")
        names = self.class_names if self.class_names is not None else codes
        self.tokenizer.prepare(splits["train"][0], Path(self.cache_dir) / "vocab" if self.cache_dir else None)
        if names is not None and self.class_names is not None:
            self.label_word_ids = self.tokenizer.name_ids(names)
        if self.label_fraction is not None and self.label_fraction < 1:
            texts, labels = splits["train"]
            self._unlabelled_train = texts
            n = max(1, int(len(texts) * self.label_fraction))
            keep = np.sort(np.random.default_rng(self.seed).choice(len(texts), n, replace=False))
            splits["train"] = ([texts[i] for i in keep], [labels[i] for i in keep])
            log.info("%s: %d of %d training rows labelled (label_fraction %g)", self.name, n, len(texts),
                     self.label_fraction)
        self._raw = splits
        self._splits = {n: _Split(self.tokenizer.encode(t)["input_ids"].numpy(), labs, self.num_labels, self.multilabel)
                        for n, (t, labs) in splits.items()}
        counts = np.bincount(np.asarray(splits["train"][1]), minlength=self.num_labels) if not self.multilabel else None
        self.data_info = {**info, "name": self.name, "num_labels": self.num_labels,
                          "vocab_size": self.tokenizer.vocab_size, "max_length": self.tokenizer.max_length,
                          "rows": {n: len(s) for n, s in self._splits.items()},
                          "train_label_counts": counts.tolist() if counts is not None else None}
        out = Path(self.cache_dir) / "word_vectors" if self.cache_dir else Path("outputs") / "cache" / "word_vectors"
        if self.word_vectors and not hasattr(self.tokenizer, "vocab"):
            raise UserError(f"dataset.datamodule.word_vectors needs a word tokenizer with a vocabulary; "
                            f"{type(self.tokenizer).__name__} has none: unset word_vectors or use a word tokenizer")
        vocab = self.tokenizer.vocab if self.word_vectors else ()     # read only when vectors are asked for
        self.word_vectors_file, vectors_info = word_vectors_for(self.word_vectors, vocab, self.word_vector_dim, out)
        self.data_info.update(vectors_info)
        log.info("%s: %s (%s)", self.name, self.data_info["rows"], info["split"])

    def glove_corpus(self) -> tuple[list[str], list[str], Path, bool]:
        """(training texts, vocabulary, cache folder, lowercase) for GloVe trained here (`pipelines.trained_glove`).

        The training split only, never validation or test. With `label_fraction`, the unlabelled rest of the
        training split counts too: GloVe needs no labels, and the official code's partial-label runs keep their
        full-data word vectors.
        """
        self._build()
        texts = self._unlabelled_train if self._unlabelled_train is not None else self._raw["train"][0]
        out = Path(self.cache_dir) / "word_vectors" if self.cache_dir else Path("outputs") / "cache" / "word_vectors"
        return list(texts), list(self.tokenizer.vocab), out, getattr(self.tokenizer, "lowercase", True)

    # --- loaders ----------------------------------------------------------------------------
    def _loader(self, name: str, shuffle: bool) -> DataLoader:
        self._build()
        return batch_loader(self._splits[name], self.batch_size, shuffle, self.seed, self.num_workers)

    def texts_and_labels(self, split: str) -> tuple[list[str], list]:
        """Raw texts and labels of a built split (the same rows the nets see), for the reference rows."""
        self._build()
        return self._raw[split]
