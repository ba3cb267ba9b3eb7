"""Word tokenizer + vocabulary for the word-level classifiers (LEAM, SWEM, CNN, BiLSTM).

Follows the tokenizer contract of `data/tokenizers.py` (`prepare`, `encode`, `cache_key`,
`vocab_size`), so the same object serves the text-classification datamodule and the patent
datamodule (LEAM as a reference row on the EWE tables).

Rule: lower-case (optional), tokens = runs of letters/digits (with an inner apostrophe) or single
punctuation marks; ids 0 = [PAD], 1 = [UNK], then words by descending training frequency (ties
alphabetical) with count >= min_freq, at most max_vocab ids in all; right-padded / truncated to
max_length.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from langrepr.errors import UserError
from langrepr.utils import write_text_atomic

TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?|[^\w\s]", re.UNICODE)
PAD, UNK = "[PAD]", "[UNK]"


def split_words(text: str, lowercase: bool = True) -> list[str]:
    """The tokens of `text` under the rule in the module docstring."""
    return TOKEN.findall(text.lower() if lowercase else text)


class WordTokenizer:
    """Frequency-ranked word vocabulary, fixed-length id tensors."""

    def __init__(self, max_length: int = 305, max_vocab: int = 50000, min_freq: int = 1, lowercase: bool = True):
        if max_length < 1 or max_vocab < 3 or min_freq < 1:
            raise UserError(f"tokenizer needs max_length >= 1, max_vocab >= 3, min_freq >= 1; got "
                            f"{max_length}, {max_vocab}, {min_freq}")
        self.max_length, self.max_vocab, self.min_freq, self.lowercase = max_length, max_vocab, min_freq, lowercase
        self.vocab: list[str] = []
        self.index: dict[str, int] = {}

    # --- contract -------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return len(self.vocab) if self.vocab else self.max_vocab

    def prepare(self, texts: Iterable[str], cache_dir: str | Path | None = None) -> None:
        """Count words of the training texts and keep the most frequent (cached as JSON when cache_dir is set)."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(split_words(text, self.lowercase))
        if not counts:
            raise UserError("cannot build a vocabulary from an empty training split: check the data path and limits")
        kept = sorted((w for w, c in counts.items() if c >= self.min_freq), key=lambda w: (-counts[w], w))
        self.set_vocab([PAD, UNK, *kept[: self.max_vocab - 2]])
        if cache_dir is not None:
            path = Path(cache_dir) / f"words-{self.cache_key()}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                write_text_atomic(path, json.dumps(self.vocab, ensure_ascii=False))

    def set_vocab(self, vocab: Sequence[str]) -> None:
        if list(vocab[:2]) != [PAD, UNK]:
            raise UserError("a word vocabulary must start with [PAD], [UNK]")
        self.vocab = list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}

    def cache_key(self) -> str:
        digest = hashlib.sha256("\n".join(self.vocab).encode()).hexdigest()[:12] if self.vocab else "untrained"
        return f"words-l{self.max_length}-v{self.max_vocab}-f{self.min_freq}-lc{int(self.lowercase)}-{digest}"

    def ids(self, text: str) -> list[int]:
        if not self.vocab:
            raise RuntimeError("WordTokenizer.prepare() must run before encode()")
        return [self.index.get(w, 1) for w in split_words(text, self.lowercase)]

    def encode(self, texts: list[str]) -> dict[str, torch.Tensor]:
        """input_ids (B, max_length) right-padded with 0, attention_mask (B, max_length)."""
        ids = np.zeros((len(texts), self.max_length), dtype=np.int64)
        for row, text in enumerate(texts):
            seq = self.ids(text)[: self.max_length]
            ids[row, : len(seq)] = seq
        tensor = torch.from_numpy(ids)
        return {"input_ids": tensor, "attention_mask": (tensor != 0).long()}

    def encode_words(self, sentences: Sequence[Sequence[str]]) -> dict:
        """Pre-split words -> `encode`'s tensors, plus `first`: each word's first position.

        Each word is split by the rule (a word it splits into nothing is one [UNK]); `first` is -1 where max_length
        cut the word off.
        """
        if not self.vocab:
            raise RuntimeError("WordTokenizer.prepare() must run before encode_words()")
        ids = np.zeros((len(sentences), self.max_length), dtype=np.int64)
        first = []
        for row, words in enumerate(sentences):
            seq, starts = [], []
            for word in words:
                starts.append(len(seq) if len(seq) < self.max_length else -1)
                seq += [self.index.get(w, 1) for w in split_words(word, self.lowercase)] or [1]
            seq = seq[: self.max_length]
            ids[row, : len(seq)] = seq
            first.append(starts)
        tensor = torch.from_numpy(ids)
        return {"input_ids": tensor, "attention_mask": (tensor != 0).long(), "first": first}

    def name_ids(self, names: Sequence[str]) -> list[list[int]]:
        """Word ids of each class name (letters/digits only; '&' or '/' are not words), for LEAM's label init."""
        return [[self.index.get(w, 1) for w in split_words(name, self.lowercase) if w[0].isalnum()] for name in names]
