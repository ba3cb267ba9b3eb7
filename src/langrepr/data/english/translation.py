"""Parallel corpora for translation (TensorCoder §5.2): WMT16 En-De, IWSLT16 En-De and stand-ins.

One datamodule for every corpus; configs differ only in where the text comes from:

- ``data_dir``/``subdir`` + ``files``: line-aligned plain-text (or .gz) files per split under a root
  laid out like shared/data (normally ``$LANGREPR_DATA_DIR``), e.g. Multi30k (``multi30k/train.en.gz``) or the OpenNMT WMT slice. ``holdout_validation``
  carves the last k training pairs off as the validation split when a corpus has none usable.
- ``data_dir: null``: the Hugging Face hub dataset ``hub_name``/``hub_config`` with a
  ``translation`` field (WMT16: ``wmt/wmt16``, ``de-en``). IWSLT16 is not on the hub; its config
  defaults to ``IWSLT/iwslt2017`` (``iwslt2017-en-de``, the nearest TED En-De set) and accepts the
  IWSLT16 files through ``data_dir``.

Tokenization: one joint BPE vocabulary (the paper: a shared ~32k-37k source/target vocabulary) trained
with the ``tokenizers`` library on the training split of both languages, with a Metaspace
pre-tokenizer so decoding restores the spaces (the hypotheses BLEU scores are detokenized text).
The trained tokenizer is cached on disk under ``cache_dir``, keyed by source and settings.
Batches group sentences of similar length (``LengthBucketBatchSampler``), as NMT toolkits do.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import json
import os
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Sampler

from langrepr.data.hub import describe, load_hub
from langrepr.data.integrity import file_digests
from langrepr.data.loaders import SplitLoaders, make_loader
from langrepr.data.text_files import not_utf8
from langrepr.errors import UserError

SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
IGNORE_INDEX = -100
FLOPS_LENGTHS = ("capped", "longest")   # the FLOPs length: as the model reads it | as the paper counts it
SPLITS = ("train", "validation", "test")


def read_lines(path: Path) -> list[str]:
    if not path.exists():
        raise UserError(f"{path} not found: point data_dir (or LANGREPR_DATA_DIR) at a folder holding it, "
                        "or set data_dir=null to download from the Hugging Face hub")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            return [line.rstrip("\n") for line in fh]
    except UnicodeDecodeError as err:
        raise not_utf8(path, err, "re-download it") from None
    except (OSError, EOFError) as err:   # a damaged .gz
        raise UserError(f"{path} cannot be read as UTF-8 text ({type(err).__name__}): re-encode or re-download "
                        "it") from None


def train_bpe(texts: list[str], vocab_size: int, min_frequency: int):
    """Joint BPE with NFKC normalisation and Metaspace (SentencePiece-style) pre-tokenization."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIALS),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


class LengthBucketBatchSampler(Sampler[list[int]]):
    """Batches of similar length (less padding): sort within pools of 50 batches, then shuffle the batches.

    With ``shuffle`` the pools and batch order are redrawn from torch's global RNG every epoch (seeded by
    the run's seed); without it batches are fixed, sorted by length.
    """

    def __init__(self, lengths: list[int], batch_size: int, shuffle: bool, pool_batches: int = 50) -> None:
        self.lengths, self.batch_size, self.shuffle = lengths, batch_size, shuffle
        self.pool = batch_size * pool_batches

    def __iter__(self):
        n = len(self.lengths)
        order = torch.randperm(n).tolist() if self.shuffle else list(range(n))
        batches = []
        for start in range(0, n, self.pool):
            pool = sorted(order[start:start + self.pool], key=self.lengths.__getitem__)
            batches += [pool[i:i + self.batch_size] for i in range(0, len(pool), self.batch_size)]
        if self.shuffle:
            batches = [batches[i] for i in torch.randperm(len(batches)).tolist()]
        return iter(batches)

    def __len__(self) -> int:
        return sum(-(-min(self.pool, len(self.lengths) - s) // self.batch_size)
                   for s in range(0, len(self.lengths), self.pool))


def collate_pairs(rows: list[tuple[list[int], list[int], str]], fixed: tuple[int, int] | None = None) -> dict:
    """Id batches padded to the longest source / target of the batch, or to `fixed` = (source, target) lengths.

    Fixed lengths give every batch the same shapes, which CUDA graphs (`compile=reduce-overhead`) need; padding
    is masked everywhere (attention masks, IGNORE_INDEX labels), so the numbers stay the same.
    """
    n = fixed[0] if fixed else max(len(s) for s, _, _ in rows)
    t = fixed[1] if fixed else max(len(tg) for _, tg, _ in rows) + 1
    src = torch.full((len(rows), n), PAD_ID, dtype=torch.long)
    dec = torch.full((len(rows), t), PAD_ID, dtype=torch.long)
    labels = torch.full((len(rows), t), IGNORE_INDEX, dtype=torch.long)
    for i, (s, tg, _) in enumerate(rows):
        src[i, : len(s)] = torch.tensor(s)
        dec[i, : len(tg) + 1] = torch.tensor([BOS_ID] + tg)
        labels[i, : len(tg) + 1] = torch.tensor(tg + [EOS_ID])
    return {"input_ids": src, "attention_mask": (src != PAD_ID).long(), "decoder_input_ids": dec,
            "decoder_attention_mask": (labels != IGNORE_INDEX).long(), "labels": labels,
            "references": [ref for _, _, ref in rows]}


class TranslationDataModule(SplitLoaders, pl.LightningDataModule):
    """Source/target pairs -> padded id batches plus raw reference strings for BLEU.

    `pad_to_fixed` (set by `langrepr.train` from the top-level switch): pad every batch to max_source_len /
    max_target_len instead of the batch's longest (`collate_pairs`).
    """

    pad_to_fixed = False

    def __init__(
        self,
        name: str,
        src_lang: str = "en",
        tgt_lang: str = "de",
        data_dir: str | None = None,
        subdir: str = "",
        files: dict[str, list[str]] | None = None,
        holdout_validation: int = 0,
        hub_name: str | None = None,
        hub_config: str | None = None,
        hub_revision: str | None = None,
        hub_data_dir: str | None = None,
        hub_splits: dict[str, str] | None = None,
        unescape_xml: bool = False,
        test_name: str = "test",
        vocab_size: int = 8000,
        min_frequency: int = 2,
        max_source_len: int = 128,
        max_target_len: int = 128,
        flops_length: str = "capped",
        batch_size: int = 64,
        num_workers: int = 0,
        max_train_samples: int | None = None,
        max_eval_samples: int | None = None,
        cache_dir: str = "outputs/cache/translation",
    ) -> None:
        super().__init__()
        if data_dir is None and hub_name is None:
            raise UserError(f"{name}: no data source: set LANGREPR_DATA_DIR (or dataset.datamodule.data_dir) "
                            "or dataset.datamodule.hub_name")
        self.name, self.src_lang, self.tgt_lang = name, src_lang, tgt_lang
        self.data_dir = None if data_dir is None else str(Path(data_dir) / subdir)
        self.files = {k: None if v is None else [str(f) for f in v] for k, v in (files or {}).items()}  # plain lists
        self.holdout_validation = holdout_validation
        self.hub_name, self.hub_config = hub_name, hub_config
        self.hub_revision, self.hub_data_dir = hub_revision, hub_data_dir   # `langrepr.data.hub`
        self.hub_splits = dict(hub_splits or {s: s for s in SPLITS})
        self.unescape_xml, self.vocab_size, self.min_frequency = unescape_xml, vocab_size, min_frequency
        self.max_source_len, self.max_target_len = max_source_len, max_target_len
        if flops_length not in FLOPS_LENGTHS:
            raise UserError(f"dataset.datamodule.flops_length must be one of {', '.join(FLOPS_LENGTHS)}, "
                            f"got {flops_length!r}")
        self.flops_length = flops_length
        self.longest_train_source = 0   # in tokens with EOS, before the max_source_len cut (set in setup)
        self.batch_size, self.num_workers = batch_size, num_workers
        self.max_train_samples, self.max_eval_samples = max_train_samples, max_eval_samples
        self.cache_dir = Path(cache_dir)
        self.test_splits = [test_name]
        self.tokenizer = None
        self._pairs: dict[str, list[tuple[str, str]]] = {}
        self._data: dict[str, list[tuple[list[int], list[int], str]]] = {}

    # ---------------------------------------------------------------- reading
    def _read_split(self, split: str) -> list[tuple[str, str]]:
        if self.data_dir is not None:
            if split not in self.files:
                raise UserError(f"{self.name}: no files configured for split '{split}' (dataset.datamodule.files)")
            src, tgt = (read_lines(Path(self.data_dir) / f) for f in self.files[split])
            if len(src) != len(tgt):
                raise UserError(f"{self.name}/{split}: {len(src)} source vs {len(tgt)} target lines; "
                                "the files must be line-aligned")
            pairs = list(zip(src, tgt))
        else:
            where = describe(self.hub_name, self.hub_config, self.hub_revision, self.hub_data_dir)
            try:
                ds = load_hub(self.hub_name, self.hub_config, revision=self.hub_revision, data_dir=self.hub_data_dir,
                              split=self.hub_splits[split])
            except Exception as err:
                raise UserError(f"could not load {where} ({type(err).__name__}): set LANGREPR_DATA_DIR to a folder "
                                "laid out like shared/data, or check network access") from err
            if "translation" in ds.column_names:  # wmt/wmt16, iwslt2017: {"translation": {"en": .., "de": ..}}
                pairs = [(t[self.src_lang], t[self.tgt_lang]) for t in ds["translation"]]
            else:  # one column per language (bentrevett/multi30k)
                pairs = list(zip(ds[self.src_lang], ds[self.tgt_lang]))
        if self.unescape_xml:  # Moses-escaped corpora: &apos; &quot; &amp; ...
            pairs = [(html.unescape(s), html.unescape(t)) for s, t in pairs]
        return [(s.strip(), t.strip()) for s, t in pairs if s.strip() and t.strip()]

    def _all_pairs(self) -> dict[str, list[tuple[str, str]]]:
        if self._pairs:
            return self._pairs
        train = self._read_split("train")
        if self.holdout_validation:
            train, val = train[: -self.holdout_validation], train[-self.holdout_validation:]
        else:
            val = self._read_split("validation")
        pairs = {"train": train, "validation": val, "test": self._read_split("test")}
        if self.max_train_samples:
            pairs["train"] = pairs["train"][: self.max_train_samples]
        if self.max_eval_samples:
            pairs["validation"] = pairs["validation"][: self.max_eval_samples]
            pairs["test"] = pairs["test"][: self.max_eval_samples]
        for split, rows in pairs.items():
            if not rows:
                raise UserError(f"{self.name}: split '{split}' is empty; check the data files / hub dataset")
        self._pairs = pairs
        return pairs

    def _tokenizer_path(self) -> Path:
        if self.data_dir is not None:
            listed = [Path(self.data_dir) / f for fs in self.files.values() if fs for f in fs]
            content = file_digests([p for p in listed if p.is_file()])   # an edited corpus gets a new BPE
            src = {"dir": str(Path(self.data_dir).resolve()), "files": self.files, "content": content}
        else:
            src = {"hub": self.hub_name, "config": self.hub_config}
            if self.hub_revision or self.hub_data_dir:   # absent when unset: earlier caches keep their keys
                src.update(revision=self.hub_revision, data_dir=self.hub_data_dir)
        key = json.dumps({"src": src, "holdout": self.holdout_validation, "vocab": self.vocab_size,
                          "min_freq": self.min_frequency, "unescape": self.unescape_xml,
                          "max_train": self.max_train_samples, "v": 1}, sort_keys=True)
        return self.cache_dir / f"{self.name}-bpe-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"

    def prepare_data(self) -> None:
        path = self._tokenizer_path()
        if path.exists():
            return
        train = self._all_pairs()["train"]
        tok = train_bpe([s for s, _ in train] + [t for _, t in train], self.vocab_size, self.min_frequency)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")   # per process: packed cells (PACK=N) train one tokenizer at once
        tok.save(str(tmp))
        tmp.replace(path)

    def setup(self, stage: str | None = None) -> None:
        if self._data:
            return
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(self._tokenizer_path()))
        for split, pairs in self._all_pairs().items():
            encoded = self.tokenizer.encode_batch([s for s, _ in pairs])
            if split == "train":
                self.longest_train_source = max(len(e.ids) + 1 for e in encoded)
            src = [e.ids[: self.max_source_len - 1] + [EOS_ID] for e in encoded]
            tgt = [e.ids[: self.max_target_len - 1] for e in self.tokenizer.encode_batch([t for _, t in pairs])]
            self._data[split] = [(s, t, ref) for s, t, (_, ref) in zip(src, tgt, pairs)]

    # ---------------------------------------------------------------- contract
    @property
    def net_kwargs(self) -> dict:
        """Vocabulary, special ids, position-table size and the FLOPs length.

        The FLOPs length is the longest training source in tokens with its EOS ("the maximum length of the
        sentence in the training set", TensorCoder §5.2): ``flops_length: longest`` counts it as it is (the full
        profile), ``capped`` as the model reads it, cut at ``max_source_len`` (the quick profile's default).
        """
        capped = max(len(s) for s, _, _ in self._data["train"])
        return {"vocab_size": self.tokenizer.get_vocab_size(), "pad_token_id": PAD_ID, "bos_token_id": BOS_ID,
                "eos_token_id": EOS_ID, "max_len": max(self.max_source_len, self.max_target_len) + 1,
                "flops_seq_len": self.longest_train_source if self.flops_length == "longest" else capped}

    @property
    def task_kwargs(self) -> dict:
        return {"detokenize": self.detokenize}

    def detokenize(self, ids: list[int]) -> str:
        """Generated ids (no BOS/EOS) -> text with spaces restored."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def _collate(self, rows: list[tuple[list[int], list[int], str]]) -> dict:
        fixed = (self.max_source_len, self.max_target_len) if self.pad_to_fixed else None
        return collate_pairs(rows, fixed)

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        lengths = [max(len(s), len(t)) for s, t, _ in self._data[split]]
        sampler = LengthBucketBatchSampler(lengths, self.batch_size, shuffle)
        return make_loader(self._data[split], self.num_workers, batch_sampler=sampler, collate_fn=self._collate)
