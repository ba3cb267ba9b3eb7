"""Word-vector artefacts for the Bit Cipher tables: cipher, Sum/Cat co-occurrence, and same-text baselines.

`build_vectors(output_dir, kind, ...)` writes ``vectors.npy`` ((V+1) × D float32, last row = OOV), ``vocab.txt``
(V words, one a line) and ``manifest.json`` (the spec, corpus size, timings) into `output_dir`, atomically, and
returns flat metrics. Kinds:

- ``cipher``: the noised (or plain) bit cipher ν alone (Tables 6-7, Table 1 "cipher");
- ``sum`` / ``cat``: co-occurrence of ν within radius r (Tables 1-4), then ``log`` and post-processing;
- ``word2vec``: gensim Word2Vec trained on the same tokenised text (Table 1 baseline);
- ``glove``: GloVe's weighted least squares trained here on the same text (``langrepr.pipelines.bitcipher.glove``);
- ``random``: Gaussian vectors of the same dimension for the same vocabulary (a reference row).

The vocabulary is the corpus types ranked by frequency plus, as in the paper (GloVe-6B words ∪ evaluation
tokens), the probe datasets' tokens (`extra_vocab`), ranked after every corpus word. `ensure_vectors` is how a
probing cell names an artefact by config: a folder ``<root>/<kind>-<hash of the spec>`` built once and reused
by every seed and table that asks for the same spec.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from langrepr.data.integrity import recording_reads
from langrepr.errors import UserError
from langrepr.models.bit_cipher import build_cipher
from langrepr.pipelines.bitcipher.cooccurrence import context_table, cooccurrence_matrix, log_transform
from langrepr.pipelines.bitcipher.corpus_shards import (
    corpus_shards,
    load_shard,
    merged_counts,
    source_contents,
    spec_hash,
    tokenise_corpus,
)
from langrepr.pipelines.bitcipher.postprocess import postprocess
from langrepr.utils import write_json_atomic, write_text_atomic

log = logging.getLogger("langrepr.pipelines")
KINDS = ("cipher", "sum", "cat", "word2vec", "glove", "random")


def probe_vocabulary(data_dir: str | Path | None, datasets: list[str]) -> list[str]:
    """Lower-cased tokens of every split of the probe datasets, in first-occurrence order."""
    from langrepr.data.english.conll import conll2003_splits
    from langrepr.data.english.gum import gum_splits

    readers = {"conll2003": conll2003_splits, "gum": gum_splits}
    words: dict[str, None] = {}
    for name in datasets:
        if name not in readers:
            raise UserError(f"unknown probe dataset '{name}' in extra_vocab: choose from {', '.join(readers)}")
        for split in readers[name](data_dir).values():
            for tokens, _ in split:
                words.update(dict.fromkeys(t.lower() for t in tokens))
    return list(words)


def corpus_documents(corpus_dir: Path) -> list[list[str]]:
    """The tokenised documents back from the shards (for gensim, which wants token lists)."""
    docs = []
    for path in corpus_shards(corpus_dir):
        shard = load_shard(path)
        words = shard["words"]
        tokens = words[shard["ids"]].tolist()
        offs = shard["doc_offsets"]
        docs += [tokens[a:b] for a, b in zip(offs[:-1], offs[1:])]
    return docs


def train_word2vec(docs: list[list[str]], words: list[str], dim: int, seed: int, window: int = 5, sg: int = 1,
                   epochs: int = 5, min_count: int = 1, negative: int = 5, workers: int = 2) -> np.ndarray:
    """(V+1) × dim matrix from gensim Word2Vec; words gensim did not keep and OOV get the zero vector."""
    from gensim.models import Word2Vec

    model = Word2Vec(sentences=docs, vector_size=dim, window=window, sg=sg, epochs=epochs, min_count=min_count,
                     negative=negative, workers=workers, seed=seed)
    out = np.zeros((len(words) + 1, dim))
    for i, w in enumerate(words):
        if w in model.wv.key_to_index:
            out[i] = model.wv[w]
    return out


def build_vectors(output_dir: str, kind: str, corpus: dict, data_dir: str | None, cache_dir: str,
                  bits: int = 200, beta: str = "df_over_f", noise: bool = True, oov: str = "sigma",
                  grow_bits: bool = False, radius: int = 4, cat_mode: str = "left_right", log: bool = True,
                  whiten: str = "zca", centre: bool = True, l2: bool = True, extra_vocab: list[str] | None = None,
                  dim: int = 200, seed: int = 1, workers: int = 2, group_shards: int | None = None,
                  word2vec: dict | None = None, glove: dict | None = None) -> dict[str, float]:
    """Build one artefact into `output_dir` (see the module docstring); returns corpus size and timings."""
    if kind not in KINDS:
        raise UserError(f"unknown vectors kind '{kind}': choose one of {', '.join(KINDS)}")
    out = Path(output_dir)
    started = time.time()
    corpus_dir = tokenise_corpus(cache_dir, corpus.get("sources", []), data_dir,
                                 shard_tokens=int(corpus.get("shard_tokens", 1_000_000)),
                                 max_tokens=corpus.get("max_tokens"), lowercase=bool(corpus.get("lowercase", True)),
                                 workers=workers, interleave_seed=corpus.get("interleave_seed"))
    counts, doc_counts, n_docs, n_tokens = merged_counts(corpus_dir)
    tokenised = time.time()
    extras = probe_vocabulary(data_dir, list(extra_vocab or []))
    cipher = build_cipher(counts, bits, beta, doc_counts, n_docs, noise=noise, oov=oov, grow_bits=grow_bits,
                          extra_words=extras)
    words = cipher.words
    cooc_seconds = 0.0
    if kind == "cipher":
        matrix = cipher.vectors
    elif kind in ("sum", "cat"):
        t0 = time.time()
        matrix = cooccurrence_matrix(corpus_dir, context_table(cipher), cipher.index, out / "work", mode=kind,
                                     radius=radius, cat_mode=cat_mode, workers=workers, group_shards=group_shards)
        cooc_seconds = time.time() - t0
        if log:
            matrix = log_transform(matrix, cipher.bits)
    elif kind == "word2vec":
        matrix = train_word2vec(corpus_documents(corpus_dir), words, dim, seed, workers=workers, **(word2vec or {}))
    elif kind == "glove":
        from langrepr.pipelines.bitcipher.glove import (
            glove_vectors,  # torch import only where GloVe is trained
        )

        matrix = glove_vectors(corpus_dir, words, dim, seed, **(glove or {}))
    else:
        matrix = np.random.default_rng(seed).standard_normal((len(words) + 1, dim))
    if whiten != "none" or centre or l2:
        matrix = postprocess(matrix, whiten=whiten, centre=centre, l2=l2, fit_rows=len(words))
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".vectors.tmp.npy"
    np.save(tmp, matrix.astype(np.float32))
    tmp.replace(out / "vectors.npy")
    write_text_atomic(out / "vocab.txt", "\n".join(words) + "\n")
    metrics = {"corpus_tokens": n_tokens, "corpus_docs": n_docs, "vocab": len(words), "dim": matrix.shape[1],
               "bits": cipher.bits, "tokenise_s": tokenised - started, "cooccurrence_s": cooc_seconds,
               "cooccurrence_tokens_per_s": n_tokens / cooc_seconds if cooc_seconds else 0.0,
               "build_s": time.time() - started}
    write_json_atomic(out / "manifest.json", {"status": "finished", "kind": kind, "corpus_dir": str(corpus_dir),
                                              "metrics": metrics})
    return metrics


def input_contents(spec: dict[str, Any]) -> dict[str, Any]:
    """The content an artefact is built from, for its key.

    Each local corpus file's sha256, and those of the probe datasets whose tokens join the vocabulary (read here,
    recording which files they are).
    """
    data_dir = spec.get("data_dir")
    corpus = spec.get("corpus") or {}
    extras = {}
    if spec.get("extra_vocab") and data_dir is not None:
        with recording_reads([data_dir]) as reads:
            probe_vocabulary(data_dir, list(spec["extra_vocab"]))
        extras = {str(Path(p).relative_to(Path(data_dir).resolve())): d for p, d in reads.digests().items()}
    return {"corpus": source_contents(corpus.get("sources", []), data_dir), "extra_vocab": extras}


def ensure_vectors(root: str | Path, spec: dict[str, Any]) -> tuple[Path, dict]:
    """The artefact folder for `spec` under `root`, built now if no finished one exists.

    The folder's hash covers the settings and the content of the files the vectors are built from
    (`input_contents`), so new text under the same data folder is a new artefact, never the old one.
    """
    spec = dict(spec)
    key = {k: v for k, v in spec.items() if k not in ("workers", "cache_dir", "data_dir")}
    key["content"] = input_contents(spec)
    folder = Path(root) / f"{spec['kind']}-{spec_hash(key)}"
    manifest = folder / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("status") == "finished":
        return folder, json.loads(manifest.read_text())["metrics"]
    write_json_atomic(folder / "spec.json", key)
    return folder, build_vectors(str(folder), **spec)


def load_vectors(folder: str | Path) -> tuple[list[str], np.ndarray]:
    folder = Path(folder)
    words = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    return words, np.load(folder / "vectors.npy")
