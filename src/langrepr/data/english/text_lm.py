"""Word-level LM corpora for masked LM (TensorCoder §5.1): PTB (sequences of 100) and WikiText-103 (160).

Each split is read line by line, every line becomes its whitespace tokens plus ``<eos>`` ("no
processing is needed other than replacing newlines with <eos>"), the stream is concatenated and cut
into non-overlapping blocks of ``seq_len`` tokens (the last partial block is padded and masked).
The vocabulary is built from the training split: ``<pad>`` = 0, ``<mask>`` = 1, then words by
descending frequency (ties alphabetical), optionally capped by ``max_vocab`` (the rest -> ``<unk>``).

Sources: ``data_dir``/``subdir`` (a root laid out like shared/data, normally ``$LANGREPR_DATA_DIR``,
and the folder in it holding the three files named in ``files``, e.g. ``ptb``) or, when ``data_dir``
is null, the Hugging Face hub dataset
``hub_name``/``hub_config`` (PTB: ``ptb-text-only/ptb_text_only``; WikiText-103:
``Salesforce/wikitext``, ``wikitext-103-v1``, the tokenized version with the 267k vocabulary).
Encoded splits are cached as tensors under ``cache_dir``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from langrepr.data.hub import describe, load_hub
from langrepr.data.integrity import check_corpus, file_digests
from langrepr.data.loaders import SplitLoaders, make_loader
from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError

SPECIALS = ("<pad>", "<mask>")
PAD_ID, MASK_ID = 0, 1
SPLITS = ("train", "validation", "test")


def read_local_lines(folder: Path, filename: str) -> list[str]:
    path = folder / filename
    if not path.exists():
        raise UserError(f"{path} not found: point data_dir (or LANGREPR_DATA_DIR) at a folder holding {filename}, "
                        "or set data_dir=null to download from the Hugging Face hub")
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "point data_dir at the original corpus") from None


def read_hub_lines(hub_name: str, hub_config: str | None, split: str, text_field: str,
                   hub_revision: str | None = None, hub_data_dir: str | None = None) -> list[str]:
    """One split's `text_field` column from the hub (`langrepr.data.hub`: revision and data folder forwarded)."""
    try:
        ds = load_hub(hub_name, hub_config, revision=hub_revision, data_dir=hub_data_dir, split=split)
    except Exception as err:  # offline, renamed dataset, ...: one actionable line
        raise UserError(f"could not load {describe(hub_name, hub_config, hub_revision, hub_data_dir)} "
                        f"({type(err).__name__}): set LANGREPR_DATA_DIR to a folder laid out like shared/data, or "
                        "check network access") from err
    return list(ds[text_field])


def line_tokens(lines: Iterable[str]) -> list[str]:
    """Whitespace tokens with <eos> after every non-empty line."""
    out: list[str] = []
    for line in lines:
        words = line.split()
        if words:
            out.extend(words)
            out.append("<eos>")
    return out


def build_vocab(tokens: list[str], max_vocab: int | None) -> dict[str, int]:
    counts = Counter(tokens)
    words = sorted(counts, key=lambda w: (-counts[w], w))
    if max_vocab is not None:
        words = [w for w in words if w != "<unk>"][: max_vocab - len(SPECIALS) - 1] + ["<unk>"]
    return {w: i for i, w in enumerate(list(SPECIALS) + [w for w in words if w not in SPECIALS])}


def to_blocks(ids: list[int], seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n_blocks, seq_len) ids and attention mask; the last partial block is padded."""
    n = -(-len(ids) // seq_len)
    flat = torch.full((n * seq_len,), PAD_ID, dtype=torch.long)
    flat[: len(ids)] = torch.tensor(ids, dtype=torch.long)
    mask = torch.zeros(n * seq_len, dtype=torch.long)
    mask[: len(ids)] = 1
    return flat.view(n, seq_len), mask.view(n, seq_len)


class TextLMDataModule(SplitLoaders, pl.LightningDataModule):
    """Blocks of ``seq_len`` word ids from a word-level corpus, for masked LM."""

    def __init__(
        self,
        name: str,
        seq_len: int,
        data_dir: str | None = None,
        subdir: str = "",
        files: dict[str, str] | None = None,
        hub_name: str | None = None,
        hub_config: str | None = None,
        hub_revision: str | None = None,
        hub_data_dir: str | None = None,
        text_field: str = "text",
        max_vocab: int | None = None,
        batch_size: int = 32,
        num_workers: int = 0,
        max_train_samples: int | None = None,
        max_eval_samples: int | None = None,
        cache_dir: str = "outputs/cache/text_lm",
    ) -> None:
        super().__init__()
        if seq_len <= 1:
            raise ValueError("seq_len must be > 1")
        if data_dir is None and hub_name is None:
            raise UserError(f"{name}: no data source: set LANGREPR_DATA_DIR (or dataset.datamodule.data_dir) "
                            "or dataset.datamodule.hub_name")
        self.name, self.seq_len = name, seq_len
        self.data_dir = None if data_dir is None else str(Path(data_dir) / subdir)
        self.files = {k: str(v) for k, v in (files or {}).items()}
        self.hub_name, self.hub_config, self.text_field = hub_name, hub_config, text_field
        self.hub_revision, self.hub_data_dir = hub_revision, hub_data_dir   # `langrepr.data.hub`
        self.max_vocab, self.batch_size, self.num_workers = max_vocab, batch_size, num_workers
        self.max_train_samples, self.max_eval_samples = max_train_samples, max_eval_samples
        self.cache_dir = Path(cache_dir)
        self.test_splits = ["test"]
        self.vocab: dict[str, int] = {}
        self._data: dict[str, TensorDataset] = {}

    # ---------------------------------------------------------------- loading
    def _source_key(self) -> str:
        if self.data_dir is not None:
            folder = Path(self.data_dir)
            present = [folder / f for f in self.files.values() if (folder / f).is_file()]
            digests = file_digests(present)   # content, cached by size+mtime: an edited file is a new cache
            stats = {s: (f, digests.get(str((folder / f).resolve()))) for s, f in self.files.items()}
            src = {"dir": str(folder.resolve()), "files": stats}
        else:
            src = {"hub": self.hub_name, "config": self.hub_config, "field": self.text_field}
            if self.hub_revision or self.hub_data_dir:   # absent when unset: earlier caches keep their keys
                src.update(revision=self.hub_revision, data_dir=self.hub_data_dir)
        payload = json.dumps({"src": src, "seq_len": self.seq_len, "max_vocab": self.max_vocab, "v": 1},
                             sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    def _lines(self, split: str) -> list[str]:
        if self.data_dir is not None:
            if split not in self.files:
                raise UserError(f"{self.name}: no file configured for split '{split}' (dataset.datamodule.files)")
            return read_local_lines(Path(self.data_dir), self.files[split])
        return read_hub_lines(self.hub_name, self.hub_config, split, self.text_field, self.hub_revision,
                              self.hub_data_dir)

    def prepare_data(self) -> None:
        cache = self.cache_dir / f"{self.name}-{self._source_key()}.pt"
        if cache.exists():
            return
        tokens = {s: line_tokens(self._lines(s)) for s in SPLITS}
        if not tokens["train"]:
            raise UserError(f"{self.name}: the training split is empty; check the data files / hub dataset")
        covered = set(tokens["train"])
        check_corpus(self.name, len(tokens["train"]), len(tokens["validation"]),
                     sum(1 for t in tokens["validation"] if t in covered))
        vocab = build_vocab(tokens["train"], self.max_vocab)
        unk = vocab.get("<unk>")
        payload = {"vocab": vocab}
        for split, toks in tokens.items():
            if not toks:
                raise UserError(f"{self.name}: split '{split}' is empty; check the data files / hub dataset")
            if unk is None and any(t not in vocab for t in toks):
                vocab["<unk>"] = unk = len(vocab)
            payload[split] = to_blocks([vocab.get(t, unk) for t in toks], self.seq_len)
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")   # per process: packed cells (PACK=N) build one cache at once
        torch.save(payload, tmp)
        tmp.replace(cache)

    def setup(self, stage: str | None = None) -> None:
        if self._data:
            return
        payload = torch.load(self.cache_dir / f"{self.name}-{self._source_key()}.pt")
        self.vocab = payload["vocab"]
        limits = {"train": self.max_train_samples, "validation": self.max_eval_samples, "test": self.max_eval_samples}
        for split in SPLITS:
            ids, mask = payload[split]
            n = limits[split]
            self._data[split] = TensorDataset(ids[:n], mask[:n]) if n else TensorDataset(ids, mask)

    # ---------------------------------------------------------------- contract
    @property
    def net_kwargs(self) -> dict:
        """Vocabulary size, padding id, and the sequence length for positions and the FLOPs count."""
        return {"vocab_size": len(self.vocab), "pad_token_id": PAD_ID, "max_len": self.seq_len,
                "flops_seq_len": self.seq_len}

    @property
    def task_kwargs(self) -> dict:
        return {"mask_token_id": MASK_ID, "num_special_tokens": len(SPECIALS)}

    @staticmethod
    def _collate(rows: list[tuple[torch.Tensor, torch.Tensor]]) -> dict:
        ids, mask = zip(*rows)
        return {"input_ids": torch.stack(ids), "attention_mask": torch.stack(mask)}

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        return make_loader(self._data[split], self.num_workers, batch_size=self.batch_size, shuffle=shuffle,
                           collate_fn=self._collate)
