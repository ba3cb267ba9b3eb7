"""The grid's input side: the tokenizer of a grid cell, its pre-trained vectors, and the composition check.

`grid_tokenizer(...)` is the `model.tokenizer` node of every grid cell (see `conf/encoder/*.yaml`). train.py
builds it before any data is read, so an input x encoder x task that cannot compose stops there with one line
(`langrepr.grid.composition_error`). It wraps the input's own tokenizer (`conf/input/<name>.yaml`, `tokenizer:`)
in `GridTokenizer`, which keeps the tokenizer contract (`prepare`, `encode`, `cache_key`, `vocab_size`) and adds:

- **pre-trained vectors** (`vectors:` of the input): word vectors trained here on the cell's own training texts,
  outside the gradient, when the tokenizer is prepared, and written to the cell's folder (`vectors_out`), which
  the input module reads (`TokenInput(vectors_path=...)`): Bit Cipher Sum / Cat (Bit Cipher §3.5, with real
  document boundaries) or word2vec (gensim skip-gram, as the Bit Cipher baselines);
- `name_ids` -> None: the grid's inputs share no word vocabulary, so LEAM's label embeddings start N(0, 1).

`MultiHotTokenizer` turns Korean text into multi-hot syllable groups (multi-hot LM §3.1, Figure 1): morphemes by
Kiwi (cached), a BPE + syllable token list trained on the training texts (`bpe_syllable`), each morpheme one
position holding its POS tag and the ids of its group.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from langrepr.errors import UserError
from langrepr.grid import composition_error, tagging_task

log = logging.getLogger(__name__)

VECTOR_KINDS = ("bitcipher_sum", "bitcipher_cat", "word2vec")


# --------------------------------------------------------------------------- vectors trained here
def documents_of(ids: np.ndarray) -> list[np.ndarray]:
    """The non-pad ids of each row of an id matrix (B, L)."""
    return [row[row != 0] for row in np.asarray(ids)]


def bit_cipher_vectors(docs: Sequence[np.ndarray], vocab_size: int, dim: int, mode: str = "sum", radius: int = 4,
                       beta: str = "df_over_f", scale_std: float = 0.1) -> np.ndarray:
    """(vocab_size, dim) Bit Cipher co-occurrence vectors (Sum: bits = dim; Cat left|right: bits = dim / 2).

    The cipher is built on the documents' id counts (β = d/f), the co-occurrence within `radius` never crosses a
    document, then −log10, whitening, centring, L2 (Bit Cipher §3.5 and §4), rescaled to `scale_std` (the random
    start's std), so that the vectors and a random start differ only in what they encode.
    """
    from langrepr.models.bit_cipher import build_cipher
    from langrepr.pipelines.bitcipher.cipher_embedding import id_statistics
    from langrepr.pipelines.bitcipher.cooccurrence import context_table, log_transform, shard_cooccurrence
    from langrepr.pipelines.bitcipher.postprocess import postprocess

    if mode not in ("sum", "cat"):
        raise UserError(f"input.vectors: Bit Cipher mode must be sum or cat, got {mode!r}")
    bits = dim if mode == "sum" else dim // 2
    if mode == "cat" and dim % 2:
        raise UserError(f"Bit Cipher Cat vectors are 2 x bits wide: input width {dim} must be even")
    docs = [d for d in docs if len(d)]
    if not docs:
        raise UserError("the training texts gave no tokens to train Bit Cipher vectors on")
    stream = np.concatenate(docs).astype(np.int64)
    offsets = np.r_[0, np.cumsum([len(d) for d in docs])].astype(np.int64)
    counts, doc_counts, unseen = id_statistics(stream, vocab_size, offsets)
    cipher = build_cipher(counts, bits, beta, doc_counts, len(docs), noise=True, oov="sigma", extra_words=unseen)
    row_of_id = np.array([cipher.index[str(i)] for i in range(vocab_size)], dtype=np.int64)
    width = bits if mode == "sum" else 2 * bits
    matrix = np.zeros((len(cipher.vectors), width))
    shard_cooccurrence(matrix, row_of_id[stream], offsets, context_table(cipher), int(radius), mode)
    matrix = log_transform(matrix, cipher.bits)[row_of_id]
    matrix = postprocess(matrix, whiten="zca", centre=True, l2=True)
    return matrix * (scale_std / max(float(matrix.std()), 1e-12))


def word2vec_vectors(docs: Sequence[np.ndarray], vocab_size: int, dim: int, seed: int, window: int = 5,
                     epochs: int = 5, scale_std: float = 0.1) -> np.ndarray:
    """(vocab_size, dim) skip-gram word2vec (gensim, one worker: deterministic per seed) over the id documents."""
    from langrepr.pipelines.bitcipher.word_vectors import train_word2vec

    words = [str(i) for i in range(vocab_size)]
    matrix = train_word2vec([[str(i) for i in d] for d in docs if len(d)], words, dim, seed, window=window,
                            epochs=epochs, min_count=1, workers=1)[:vocab_size]
    seen = np.abs(matrix).sum(1) > 0
    rng = np.random.default_rng(seed)
    matrix[~seen] = rng.normal(0, float(matrix[seen].std()) if seen.any() else 1.0, (int((~seen).sum()), dim))
    return matrix * (scale_std / max(float(matrix.std()), 1e-12))


def train_vectors(spec: dict, docs: Sequence[np.ndarray], vocab_size: int, seed: int) -> np.ndarray:
    kind = spec.get("kind")
    dim = int(spec["dim"])
    scale = float(spec.get("scale_std", 0.1))
    if kind == "bitcipher_sum":
        return bit_cipher_vectors(docs, vocab_size, dim, "sum", int(spec.get("radius", 4)), scale_std=scale)
    if kind == "bitcipher_cat":
        return bit_cipher_vectors(docs, vocab_size, dim, "cat", int(spec.get("radius", 4)), scale_std=scale)
    if kind == "word2vec":
        return word2vec_vectors(docs, vocab_size, dim, seed, int(spec.get("window", 5)), int(spec.get("epochs", 5)),
                                scale_std=scale)
    raise UserError(f"input.vectors.kind={kind!r}: choose one of {', '.join(VECTOR_KINDS)} (or vectors: null)")


# --------------------------------------------------------------------------- the grid's tokenizer
class GridTokenizer:
    """An input's tokenizer, plus the vectors it trains on the training texts (see the module docstring)."""

    def __init__(self, inner: Any, vectors: dict | None = None, vectors_out: str | None = None, seed: int = 1):
        self.inner, self.vectors_spec, self.vectors_out, self.seed = inner, dict(vectors or {}), vectors_out, seed
        if self.vectors_spec and not vectors_out:
            raise UserError("an input with vectors needs vectors_out (the cell folder's input_vectors.npy)")

    @property
    def vocab_size(self) -> int:
        return int(self.inner.vocab_size)

    @property
    def max_length(self) -> int | None:
        return getattr(self.inner, "max_length", None)

    def prepare(self, texts: Iterable[str], cache_dir: str | Path | None = None) -> None:
        texts = texts if isinstance(texts, list) else list(texts)
        self.inner.prepare(texts, cache_dir)
        if self.vectors_spec:
            docs = documents_of(self.inner.encode(texts)["input_ids"].numpy())
            matrix = train_vectors(self.vectors_spec, docs, self.vocab_size, self.seed).astype(np.float32)
            out = Path(self.vectors_out)
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + ".tmp.npy")
            np.save(tmp, matrix)
            tmp.replace(out)                      # atomic: a crash never leaves torn vectors
            log.info("input vectors (%s, %d x %d) trained on %d training texts -> %s", self.vectors_spec["kind"],
                     *matrix.shape, len(texts), out)

    def encode(self, texts: list[str]) -> dict[str, torch.Tensor]:
        return self.inner.encode(texts)

    def encode_words(self, sentences: Sequence[Sequence[str]]) -> dict:
        """Pre-split words -> ids plus each word's first position (a word tagger's alignment).

        See `langrepr.data.tokenizers`.
        """
        return self.inner.encode_words(sentences)

    def cache_key(self) -> str:
        return f"grid-{self.inner.cache_key()}"

    def name_ids(self, names: Sequence[str]) -> None:
        """No class-name word ids: the grid's LEAM starts its label embeddings N(0, 1)."""
        return None


def grid_tokenizer(inner: Any, compose: dict, vectors: dict | None = None, vectors_out: str | None = None,
                   seed: int = 1) -> GridTokenizer:
    """The grid cell's tokenizer, after the composition check (one line when input x encoder x task cannot compose)."""
    reason = composition_error(dict(compose))
    if reason:
        raise UserError(f"does not compose: {reason}")
    if tagging_task(dict(compose)) and not hasattr(inner, "encode_words"):
        raise UserError(f"does not compose: input {compose.get('input')}'s tokenizer ({type(inner).__name__}) cannot "
                        f"align its positions to words, and task {compose.get('task')} tags every word")
    return GridTokenizer(inner, vectors, vectors_out, seed)


# --------------------------------------------------------------------------- multi-hot syllable groups (Korean)
class MultiHotTokenizer:
    """Korean text -> multi-hot groups: ids (B, max_length, 1 + max_group), column 0 the POS tag id.

    The token list is `bpe_syllable` (multi-hot LM §3.1) trained on the training texts' morphemes: BPE pieces
    of the base list plus `syllables` '@'-syllable tokens; a morpheme that is a listed token is one id, any other
    morpheme one group of its syllables' ids (cut to `max_group` slots).
    """

    def __init__(self, max_length: int = 64, bpe_size: int = 4000, pos_joined: int = 500, syllables: int = 1000,
                 max_group: int = 8, workers: int = 1):
        if max_length < 1 or max_group < 1:
            raise UserError(f"multi-hot tokenizer needs max_length, max_group >= 1; got {max_length}, {max_group}")
        self.max_length, self.bpe_size, self.pos_joined = max_length, bpe_size, pos_joined
        self.syllables, self.max_group, self.workers = syllables, max_group, workers
        self.encoder = None
        self.cache_dir: Path | None = None
        self._key = "untrained"

    @property
    def vocab_size(self) -> int:
        return len(self.encoder.tokens.tokens) if self.encoder is not None else self.bpe_size + self.syllables + 5

    def _analyse(self, texts: Sequence[str]) -> list:
        from langrepr.data.korean.morphemes import analyse, cached_analysis

        if self.cache_dir is None:
            return analyse(list(texts), workers=self.workers)
        return cached_analysis("grid", list(texts), self.cache_dir, workers=self.workers)

    def prepare(self, texts: Iterable[str], cache_dir: str | Path | None = None) -> None:
        from langrepr.data.korean.encoding import MorphemeEncoder
        from langrepr.data.korean.token_lists import bpe_base, bpe_syllable, syllable_tokens

        texts = list(texts)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        analysed = self._analyse(texts)
        base = bpe_base(analysed, self.bpe_size, self.pos_joined)
        tokens = bpe_syllable(base, syllable_tokens(analysed, self.syllables))
        self.encoder = MorphemeEncoder(tokens, max_group=self.max_group, long_groups="split")
        digest = hashlib.sha256("\n".join(tokens.tokens).encode()).hexdigest()[:12]
        self._key = f"multihot-l{self.max_length}-g{self.max_group}-{digest}"

    def cache_key(self) -> str:
        return self._key

    def encode(self, texts: list[str]) -> dict[str, torch.Tensor]:
        if self.encoder is None:
            raise RuntimeError("MultiHotTokenizer.prepare() must run before encode()")
        ids = np.zeros((len(texts), self.max_length, 1 + self.max_group), dtype=np.int64)
        for b, morphemes in enumerate(self._analyse(texts)):
            enc = self.encoder.encode(morphemes)
            for i, (group, pos) in enumerate(zip(enc.groups[: self.max_length], enc.pos)):
                ids[b, i, 0] = pos
                ids[b, i, 1:1 + len(group)] = group[: self.max_group]
        tensor = torch.from_numpy(ids)
        return {"input_ids": tensor, "attention_mask": (tensor[..., 1:] != 0).any(-1).long()}
