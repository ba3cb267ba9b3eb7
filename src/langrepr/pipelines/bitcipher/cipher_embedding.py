"""Cipher vectors for an LM's own vocabulary: the warm-start embedding of Bit Cipher's Figure 4.

The paper (§5) trains bit-cipher on the LM's training text (BabyLM 10M) with bits = 2^7 and radius 2^7 or 2^3
and puts the vectors into the LM's embedding layer. Here the text is the LM datamodule's training stream of word
ids, so every LM id gets exactly one cipher row:

    rank ids by frequency (ties: first occurrence) → bit codes → noised cipher ν (β = d/f by default)
    → Sum co-occurrence within `radius` (`langrepr.pipelines.bitcipher.cooccurrence`) → −log10 per row (log=True)
    → whitening + centring + L2 (`langrepr.pipelines.bitcipher.postprocess`) → rescaled to the LM's init std

[inferred, configurable]
- Documents: the stream has no document boundaries after blocking (PTB's text-only release has none), so it is
  cut into documents of `doc_tokens` tokens (default 1024 ≥ 2 × 128 + 1: a radius-128 window fits); they bound
  the windows and give the document frequencies of β = d/f.
- `radius: null` uses the noised cipher ν alone (no co-occurrence).
- Post-processing as the probes (§4) and `scale_std`: the matrix is rescaled to the std of the cold start's
  init (GPT-2: 0.02), so warm and cold differ only in what the vectors encode, not in their scale.
- Ids the training stream never contains (padding, mask) are ranked last, as unseen vocabulary words.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from langrepr.errors import UserError
from langrepr.models.bit_cipher import build_cipher
from langrepr.pipelines.bitcipher.cooccurrence import context_table, log_transform, shard_cooccurrence
from langrepr.pipelines.bitcipher.postprocess import postprocess
from langrepr.utils import open_mode


def stream_documents(n_tokens: int, doc_tokens: int) -> np.ndarray:
    """Offsets of consecutive documents of `doc_tokens` tokens (the last one shorter)."""
    if doc_tokens < 1:
        raise UserError(f"doc_tokens={doc_tokens}: documents need at least one token")
    return np.unique(np.r_[np.arange(0, n_tokens, doc_tokens), n_tokens]).astype(np.int64)


def id_statistics(stream: np.ndarray, vocab_size: int, doc_offsets: np.ndarray) -> tuple[dict, dict, list[str]]:
    """Token and document counts keyed by str(id) in first-occurrence order, and the never-seen ids."""
    counts = np.bincount(stream, minlength=vocab_size)
    doc_ids = np.repeat(np.arange(len(doc_offsets) - 1), np.diff(doc_offsets))
    pairs = np.unique(doc_ids * vocab_size + stream)
    doc_counts = np.bincount(pairs % vocab_size, minlength=vocab_size)
    seen, first = np.unique(stream, return_index=True)
    order = seen[np.argsort(first, kind="stable")]
    token_counts = {str(i): int(counts[i]) for i in order}
    docs = {str(i): int(doc_counts[i]) for i in order}
    unseen = [str(i) for i in range(vocab_size) if counts[i] == 0]
    return token_counts, docs, unseen


def cipher_embedding(stream: np.ndarray, vocab_size: int, bits: int, radius: int | None = 8,
                     doc_tokens: int = 1024, beta: str = "df_over_f", log: bool = True, whiten: str = "zca",
                     centre: bool = True, l2: bool = True, scale_std: float | None = 0.02) -> np.ndarray:
    """(vocab_size, bits) cipher vectors for the ids of `stream` (see the module docstring)."""
    stream = np.asarray(stream, dtype=np.int64)
    if stream.size == 0:
        raise UserError("the LM training split has no tokens: the cipher warm start needs its text")
    if stream.min() < 0 or stream.max() >= vocab_size:
        raise UserError(f"token ids outside [0, {vocab_size}): the datamodule and the model disagree on the vocabulary")
    offsets = stream_documents(stream.size, doc_tokens)
    counts, docs, unseen = id_statistics(stream, vocab_size, offsets)
    cipher = build_cipher(counts, bits, beta, docs, len(offsets) - 1, noise=True, oov="sigma", extra_words=unseen)
    row_of_id = np.array([cipher.index[str(i)] for i in range(vocab_size)], dtype=np.int64)
    if radius:
        matrix = np.zeros((len(cipher.vectors), cipher.bits))
        shard_cooccurrence(matrix, row_of_id[stream], offsets, context_table(cipher), int(radius), "sum")
        if log:
            matrix = log_transform(matrix, cipher.bits)
    else:
        matrix = cipher.vectors
    matrix = matrix[row_of_id]
    if whiten != "none" or centre or l2:
        matrix = postprocess(matrix, whiten=whiten, centre=centre, l2=l2)
    if scale_std:
        matrix = matrix * (scale_std / max(float(matrix.std()), 1e-12))
    return matrix


def cached_cipher_embedding(cache_dir: str | Path | None, stream: np.ndarray, vocab_size: int,
                            **spec: object) -> np.ndarray:
    """`cipher_embedding`, stored under `cache_dir` by a hash of the spec and the stream (seeds share it)."""
    if cache_dir is None:
        return cipher_embedding(stream, vocab_size, **spec)
    stream = np.ascontiguousarray(stream, dtype=np.int64)
    digest = hashlib.sha256(json.dumps({**spec, "vocab_size": vocab_size}, sort_keys=True, default=str).encode())
    digest.update(stream.tobytes())
    path = Path(cache_dir) / f"cipher-init-{digest.hexdigest()[:16]}.npy"
    if path.exists():
        return np.load(path)
    matrix = cipher_embedding(stream, vocab_size, **spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cipher-init.", suffix=".npy")
    open_mode(fd)  # readable as the umask allows, not mkstemp's 0600
    os.close(fd)
    np.save(tmp, matrix)
    os.replace(tmp, path)
    return matrix
