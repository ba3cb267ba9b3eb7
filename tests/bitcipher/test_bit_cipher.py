"""Bit Cipher step 1 (langrepr.models.bit_cipher): code order, capacity rule, L1 vectors, noise, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from langrepr.errors import UserError
from langrepr.models.bit_cipher import (
    beta,
    bit_codes,
    build_cipher,
    check_capacity,
    code_order,
    noise_distribution,
    noised_vectors,
    plain_vectors,
    rank_vocabulary,
)


def bits_of(code: int) -> set[int]:
    return {i for i in range(code.bit_length()) if code >> i & 1}


def test_b5_gives_31_unique_codes_in_rank_intervals():
    codes = code_order(5, 31)
    assert len(set(codes)) == 31
    popcounts = [len(bits_of(c)) for c in codes]
    assert popcounts == [1] * 5 + [2] * 10 + [3] * 10 + [4] * 5 + [5]


def test_b5_first_ranks_by_hand():
    codes = code_order(5, 31)
    # ranks 1-5: e0..e4; then the basis is reversed (e4 first) and the one-bit parents visited in reverse order
    assert [bits_of(c) for c in codes[:5]] == [{0}, {1}, {2}, {3}, {4}]
    assert [bits_of(c) for c in codes[5:11]] == [{3, 4}, {2, 4}, {1, 4}, {0, 4}, {2, 3}, {1, 3}]
    assert bits_of(codes[-1]) == {0, 1, 2, 3, 4}


def test_bit_codes_matrix_matches_code_order():
    matrix = bit_codes(31, 5)
    assert matrix.shape == (31, 5)
    assert [set(np.flatnonzero(row)) for row in matrix] == [bits_of(c) for c in code_order(5, 31)]


def test_capacity_rule():
    assert check_capacity(31, 5) == 5
    with pytest.raises(UserError, match="bits=5 holds only 31 unique codes but 32 are needed; raise bits to >= 6"):
        check_capacity(32, 5)
    assert check_capacity(32, 5, grow_bits=True) == 6
    with pytest.raises(UserError):
        check_capacity(3, 0)


def test_ranking_ties_keep_first_occurrence():
    counts = {"b": 2, "a": 3, "c": 2, "d": 1, "e": 2}   # insertion order = order of first occurrence
    assert rank_vocabulary(counts) == ["a", "b", "c", "e", "d"]


def test_plain_vectors_are_l1_normalised():
    v = plain_vectors(bit_codes(7, 3))
    np.testing.assert_allclose(v.sum(axis=1), 1.0)
    np.testing.assert_allclose(v[3], [0, 0.5, 0.5])     # rank 4 = bits {1, 2}
    np.testing.assert_allclose(v[6], [1 / 3] * 3)


def test_noise_distribution_by_hand():
    plain = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    sigma = noise_distribution(plain, np.array([3, 2, 1]))
    # F = [3 + 0.5, 2 + 0.5], ΣF = 6 → σ = (1 − F/6) / (2 − 1)
    np.testing.assert_allclose(sigma, [2.5 / 6, 3.5 / 6])
    assert sigma.sum() == pytest.approx(1.0)


def test_beta_variants_by_hand():
    np.testing.assert_allclose(beta("freq", np.array([3.0, 1.0])), [0.75, 0.5])
    np.testing.assert_allclose(beta("df_over_f", np.array([4.0]), np.array([2.0])), [0.5])
    np.testing.assert_allclose(beta("df_over_ndocs", np.array([4.0]), np.array([2.0]), n_docs=8), [0.25])
    with pytest.raises(UserError, match="unknown beta"):
        beta("nope", np.array([1.0]))
    with pytest.raises(UserError, match="document frequencies"):
        beta("df_over_f", np.array([1.0]))


def test_noised_vector_by_hand():
    out = noised_vectors(np.array([[1.0, 0.0]]), np.array([0.75]), np.array([0.25, 0.75]))
    np.testing.assert_allclose(out, [[0.8125, 0.1875]])


def test_build_cipher_ranks_adds_extras_and_oov():
    counts = {"the": 5, "cat": 2, "sat": 2}
    docs = {"the": 2, "cat": 1, "sat": 2}
    cipher = build_cipher(counts, bits=3, beta_kind="df_over_f", doc_counts=docs, n_docs=2, extra_words=["dog"])
    assert cipher.words == ["the", "cat", "sat", "dog"]
    assert cipher.vectors.shape == (5, 3)
    np.testing.assert_allclose(cipher.vectors.sum(axis=1), 1.0)
    # "sat": d/f = 1 → no noise, its plain vector (rank 3 = bit 2); "dog" unseen: f = 0 → β = 0 → σ
    np.testing.assert_allclose(cipher.vectors[2], [0, 0, 1])
    np.testing.assert_allclose(cipher.vectors[3], cipher.vectors[4])   # OOV default = σ
    assert list(cipher.ids(["cat", "zebra"])) == [1, 4]
    plain = build_cipher(counts, bits=3, noise=False, oov="zero")
    np.testing.assert_allclose(plain.vectors[:3], np.eye(3))
    np.testing.assert_allclose(plain.vectors[3], 0)


def test_build_cipher_errors():
    with pytest.raises(UserError, match="raise bits"):
        build_cipher({w: 1 for w in "abcd"}, bits=2)
    assert build_cipher({w: 1 for w in "abcd"}, bits=2, beta_kind="freq", grow_bits=True).bits == 3
    with pytest.raises(UserError, match="no tokens"):
        build_cipher({}, bits=4)
    with pytest.raises(UserError, match="unknown oov"):
        build_cipher({"a": 1}, bits=4, oov="nope")
    with pytest.raises(UserError, match="raise bits"):          # next_code counts against capacity
        build_cipher({w: 1 for w in "abc"}, bits=2, oov="next_code")
