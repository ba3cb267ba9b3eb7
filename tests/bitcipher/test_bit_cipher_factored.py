"""Bit Cipher co-occurrence against the factored cipher (sparse codes + rank-one noise) equals the dense product."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from langrepr.models.bit_cipher import build_cipher
from langrepr.pipelines.bitcipher.cooccurrence import (
    FactoredTable,
    context_table,
    cooccurrence_matrix,
    partial_path,
    shard_cooccurrence,
)
from langrepr.pipelines.bitcipher.corpus_shards import save_npz_atomic


def zipf_counts(n: int) -> dict[str, int]:
    return {f"w{i}": max(1, 60 // (i + 1)) for i in range(n)}


@pytest.mark.parametrize("noise,oov,beta", [(True, "sigma", "df_over_f"), (True, "zero", "freq"),
                                            (False, "next_code", "freq"), (True, "next_code", "df_over_ndocs")])
def test_parts_rebuild_the_vectors(noise, oov, beta):
    counts = zipf_counts(20)
    docs = {w: max(1, c // 2) for w, c in counts.items()}
    cipher = build_cipher(counts, 6, beta, docs, 40, noise=noise, oov=oov, extra_words=["unseen"])
    np.testing.assert_allclose(cipher.parts.dense(), cipher.vectors, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(context_table(cipher).toarray(), cipher.vectors, rtol=1e-12, atol=1e-15)
    assert context_table(cipher).sparse.nnz == int(cipher.parts.codes[cipher.parts.code_weight > 0].sum())


def test_factored_table_by_hand():
    # two words, codes 10 and 11, β = 0.5 and 1; σ = (0.25, 0.75); row 2 (OOV) = σ
    table = FactoredTable.from_parts(type("P", (), {"codes": np.array([[1, 0], [1, 1], [0, 0]], dtype=np.uint8),
                                                    "code_weight": np.array([0.5, 1.0, 0.0]),
                                                    "noise_weight": np.array([0.5, 0.0, 1.0]),
                                                    "sigma": np.array([0.25, 0.75])})())
    np.testing.assert_allclose(table.toarray(), [[0.625, 0.375], [0.5, 0.5], [0.25, 0.75]])


@pytest.mark.parametrize("mode,cat_mode", [("sum", "left_right"), ("cat", "left_right"), ("cat", "per_offset")])
def test_factored_shard_cooccurrence_equals_dense(mode, cat_mode):
    cipher = build_cipher(zipf_counts(30), 6, "freq", extra_words=["unseen"])
    rng = np.random.default_rng(0)
    ids = rng.integers(0, len(cipher.vectors), size=400)               # OOV row included
    offsets = np.array([0, 7, 8, 150, 400])
    width = {"sum": 6, "left_right": 12, "per_offset": 36}["sum" if mode == "sum" else cat_mode]
    dense, factored = np.zeros((len(cipher.vectors), width)), np.zeros((len(cipher.vectors), width))
    shard_cooccurrence(dense, ids, offsets, cipher.vectors, 3, mode, cat_mode)
    shard_cooccurrence(factored, ids, offsets, context_table(cipher), 3, mode, cat_mode)
    assert dense.any()
    np.testing.assert_allclose(factored, dense, rtol=1e-12)


def write_shards(folder: Path, words: list[str], n_shards: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    vocab = np.array(words + ["never-in-vocab"], dtype=object)
    for k in range(n_shards):
        ids = rng.integers(0, len(vocab), size=120).astype(np.int32)
        save_npz_atomic(folder / "shards" / f"{k:05d}.npz", {
            "words": vocab, "ids": ids, "doc_offsets": np.array([0, 30, 31, 90, 120], dtype=np.int64),
            "counts": np.bincount(ids, minlength=len(vocab)).astype(np.int64),
            "doc_counts": np.zeros(len(vocab), dtype=np.int64)})


def test_factored_matrix_parallel_flush_and_resume(tmp_path):
    cipher = build_cipher(zipf_counts(25), 6, "freq")
    write_shards(tmp_path, cipher.words, 4)
    table = context_table(cipher)
    dense = cooccurrence_matrix(tmp_path, cipher.vectors, cipher.index, tmp_path / "dense", "cat", 2, workers=1)
    serial = cooccurrence_matrix(tmp_path, table, cipher.index, tmp_path / "serial", "cat", 2, workers=1)
    parallel = cooccurrence_matrix(tmp_path, table, cipher.index, tmp_path / "par", "cat", 2, workers=2,
                                   group_shards=1)
    flushed = cooccurrence_matrix(tmp_path, table, cipher.index, tmp_path / "flush", "cat", 2, workers=1, flush_nnz=1)
    for got in (serial, parallel, flushed):
        np.testing.assert_allclose(got, dense, rtol=1e-12)
    # a finished factored partial is not recomputed: poison its rank-one coefficients, the total moves by that
    partial = partial_path(tmp_path / "par" / "partials", 0, table)
    assert partial.suffix == ".npz"
    with np.load(partial) as z:
        parts = dict(z)
    parts["noise_coef"] = parts["noise_coef"] + 1.0
    np.savez(partial, **parts)
    resumed = cooccurrence_matrix(tmp_path, table, cipher.index, tmp_path / "par", "cat", 2, workers=2,
                                  group_shards=1)
    shift = np.tile(table.shared, 2)                               # both Cat blocks get σ once per row
    np.testing.assert_allclose(resumed, parallel + shift[None, :], rtol=1e-12)
