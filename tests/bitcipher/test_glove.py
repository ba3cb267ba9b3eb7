"""GloVe baseline: the weighting and the loss against hand-computed values, 1/d co-occurrence counts, training."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from langrepr.errors import UserError
from langrepr.pipelines.bitcipher.corpus_shards import save_npz_atomic
from langrepr.pipelines.bitcipher.glove import (
    GloVe,
    entries,
    fit_glove,
    glove_cooccurrence,
    glove_loss,
    glove_vectors,
    glove_weight,
    train_glove,
)


def test_weighting_function_by_hand():
    x = torch.tensor([1.0, 50.0, 100.0, 400.0])
    expected = [0.01 ** 0.75, 0.5 ** 0.75, 1.0, 1.0]        # (x / 100)^(3/4), capped at 1
    torch.testing.assert_close(glove_weight(x), torch.tensor(expected))
    torch.testing.assert_close(glove_weight(torch.tensor([2.0]), x_max=4.0, alpha=1.0), torch.tensor([0.5]))


def test_loss_by_hand():
    # entry 1: w·w̃ = 1*0.5 + 0*2 = 0.5; + b 0.1 + b̃ (−0.2) − log e = −0.6 → 0.36 × f(e) = 0.36 (e/100)^0.75
    # entry 2: w·w̃ = 2*1 + 1*1 = 3;     + 0 + 0 − log 200 → (3 − 5.298317) ² × f(200) = 1
    w = torch.tensor([[1.0, 0.0], [2.0, 1.0]])
    w_tilde = torch.tensor([[0.5, 2.0], [1.0, 1.0]])
    b, b_tilde = torch.tensor([0.1, 0.0]), torch.tensor([-0.2, 0.0])
    x = torch.tensor([math.e, 200.0])
    expected = 0.36 * (math.e / 100) ** 0.75 + (3 - math.log(200)) ** 2
    assert math.isclose(float(glove_loss(w, w_tilde, b, b_tilde, x)), expected, rel_tol=1e-6)


def write_shard(folder: Path, docs: list[list[str]]) -> None:
    index: dict[str, int] = {}
    ids = np.array([index.setdefault(w, len(index)) for d in docs for w in d], dtype=np.int32)
    offsets = np.r_[0, np.cumsum([len(d) for d in docs])].astype(np.int64)
    save_npz_atomic(folder / "shards" / "00000.npz", {
        "words": np.array(list(index), dtype=object), "ids": ids, "doc_offsets": offsets,
        "counts": np.bincount(ids, minlength=len(index)).astype(np.int64),
        "doc_counts": np.ones(len(index), dtype=np.int64)})


def test_cooccurrence_is_symmetric_one_over_distance_within_documents(tmp_path):
    docs = [["a", "b", "c", "a"], ["b", "zz"]]                # "zz" is not in the vocabulary: the OOV row
    write_shard(tmp_path, docs)
    words = ["a", "b", "c"]
    got = glove_cooccurrence(tmp_path, {w: i for i, w in enumerate(words)}, 4, window=2).toarray()
    expected = np.zeros((4, 4))
    for doc in docs:
        rows = [words.index(w) if w in words else 3 for w in doc]
        for i in range(len(rows)):
            for j in range(len(rows)):
                if 0 < abs(i - j) <= 2:
                    expected[rows[i], rows[j]] += 1.0 / abs(i - j)
    np.testing.assert_allclose(got, expected)
    assert got[0, 0] == 0.0                                   # the two a's are 3 apart: outside window 2


def test_training_is_seeded_and_zeroes_rows_without_cooccurrence():
    rng = np.random.default_rng(0)
    dense = np.exp(rng.normal(size=(20, 20))) * (rng.random((20, 20)) < 0.7)
    counts = sp.coo_matrix(sp.block_diag([sp.csr_matrix(dense), sp.csr_matrix((1, 1))]))   # row 20: never co-occurs
    vectors = train_glove(counts, dim=8, seed=3, epochs=5, batch_size=64)
    assert vectors.shape == (21, 8)
    assert not vectors[20].any() and vectors[:20].any(axis=1).all()
    np.testing.assert_array_equal(vectors, train_glove(counts, dim=8, seed=3, epochs=5, batch_size=64))
    assert not np.array_equal(vectors, train_glove(counts, dim=8, seed=4, epochs=5, batch_size=64))


def test_training_lowers_the_loss_a_lot():
    rng = np.random.default_rng(1)
    truth = rng.normal(size=(15, 2))
    counts = sp.coo_matrix(np.exp(truth @ truth.T + 1.5))   # log X is exactly rank 2 + a constant
    torch.manual_seed(5)
    model = fit_glove(counts, dim=4, seed=5, epochs=100, lr=0.2, batch_size=32)
    with torch.no_grad():
        start = float(GloVe(15, 4)(*entries(counts), 100.0, 0.75))
        assert float(model(*entries(counts), 100.0, 0.75)) < 0.05 * start


def test_glove_vectors_on_shards(tmp_path):
    write_shard(tmp_path, [["the", "cat", "sat", "on", "the", "mat"]] * 5)
    words = ["the", "cat", "sat", "on", "mat", "unseen"]
    vectors = glove_vectors(tmp_path, words, dim=4, seed=1, window=2, epochs=3, batch_size=8)
    assert vectors.shape == (7, 4)
    assert vectors[:5].any(axis=1).all() and not vectors[5:].any()   # probe-only word and OOV row: zero


def test_bad_glove_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(UserError, match="window"):
        glove_cooccurrence(tmp_path, {}, 1, window=0)
    with pytest.raises(UserError, match="empty co-occurrence"):
        train_glove(sp.coo_matrix((3, 3)), dim=2)
    with pytest.raises(UserError, match="unknown glove output"):
        train_glove(sp.coo_matrix(np.ones((2, 2))), dim=2, output="both")
