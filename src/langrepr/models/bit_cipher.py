"""Bit-cipher word vectors (Zhao & Williams, arXiv 2311.11012, §3): frequency-ranked bit codes plus noise.

Step 1 of the paper, as pure numpy functions (no training, no Lightning, no Hydra):

    η_t ∈ {0,1}^b        a unique bit vector per word, assigned in frequency-rank order      `bit_codes`
    v_t = η_t / ‖η_t‖₁   the "plain" (probabilistic) cipher vector                          `plain_vectors`
    σ_j = (1 − F_j/ΣF)/(b − 1),  F = Σ_t f_t v_t   shared noise distribution in bit space    `noise_distribution`
    ν_t = β_t v_t + (1 − β_t) σ                     the noised cipher                         `noised_vectors`

Dims: V = vocabulary size (ranked), b = bits. Rank r (1-based) gets the r-th code of the assignment order
(METHODS §5.1): the b one-bit codes first, then codes with k bits built from the (k−1)-bit codes in reverse
order of assignment, a new bit added from the (reversed, once) basis, duplicates filtered. b = 5 gives ranks
1–5 one bit, 6–15 two, 16–25 three, 26–30 four, 31 all five.

[inferred, configurable]
- `beta`: `freq` = f/(f+1) (the paper's formula), `df_over_f` = d/f (the paper's dtype='df' prose, default of
  the experiments), `df_over_ndocs` = d/K (the predecessor IaMaN code's 'df').
- σ lives in bit space (b dims) as in IaMaN; the paper prints it in one-hot space (N dims).
- OOV vector: `sigma` (the noise distribution itself: a distinctive, dense vector), `zero`, or `next_code`
  (the next unused bit code, so it counts against the 2^b − 1 capacity).
- Capacity: V > 2^b − 1 is an error unless `grow_bits=True`, which raises b to ⌊log2 V⌋ + 1 (what IaMaN did
  silently).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from langrepr.errors import UserError

BETAS = ("freq", "df_over_f", "df_over_ndocs")
OOV_KINDS = ("sigma", "zero", "next_code")


# ---------------------------------------------------------------- step 1: ranking and bit codes

def rank_vocabulary(counts: dict[str, int]) -> list[str]:
    """Words by descending frequency; ties keep the dict's insertion order (= first occurrence in the corpus)."""
    return [w for w, _ in sorted(counts.items(), key=lambda kv: -kv[1])]  # sorted() is stable


def capacity(bits: int) -> int:
    """How many distinct non-zero codes b bits hold: 2^b − 1."""
    return (1 << bits) - 1


def required_bits(n_codes: int) -> int:
    """The smallest b with 2^b − 1 ≥ n_codes (IaMaN's ⌊log2 n⌋ + 1)."""
    return max(1, int(n_codes).bit_length())


def check_capacity(n_codes: int, bits: int, grow_bits: bool = False) -> int:
    """The bit count to use: `bits`, or the grown one when allowed; a UserError when the codes do not fit."""
    if bits < 1:
        raise UserError(f"bits={bits}: the cipher needs at least 1 bit; set model bits to a positive integer")
    if n_codes <= capacity(bits):
        return bits
    if grow_bits:
        return required_bits(n_codes)
    raise UserError(f"bits={bits} holds only {capacity(bits)} unique codes but {n_codes} are needed; raise bits to "
                    f">= {required_bits(n_codes)} or pass grow_bits=true")


def code_order(bits: int, n: int) -> list[int]:
    """The first `n` codes (as int bit masks, bit i = dimension i) in the paper's assignment order."""
    if n > capacity(bits):
        raise UserError(f"{n} codes requested from {bits} bits (capacity {capacity(bits)})")
    basis = [1 << i for i in range(bits)]
    out: list[int] = []
    used: set[int] = set()
    parents = [0]
    k = 1
    while len(out) < n:
        new: list[int] = []
        for e in basis:                       # outer loop: the bit to add
            for parent in parents:            # inner loop: the (k−1)-bit codes, reverse assignment order
                code = parent | e
                if code != parent and code not in used:
                    used.add(code)
                    new.append(code)
                    out.append(code)
                    if len(out) == n:
                        return out
        if k == 1:
            basis = basis[::-1]               # reversed once, after the one-hot level
        parents = new[::-1]
        k += 1
    return out


def bit_codes(n: int, bits: int) -> np.ndarray:
    """η for ranks 1..n as a (n, b) uint8 matrix."""
    width = (bits + 7) // 8
    raw = b"".join(c.to_bytes(width, "little") for c in code_order(bits, n))
    packed = np.frombuffer(raw, dtype=np.uint8).reshape(n, width)
    return np.unpackbits(packed, axis=1, bitorder="little")[:, :bits]


def plain_vectors(codes: np.ndarray) -> np.ndarray:
    """v_t = η_t / ‖η_t‖₁ (rows sum to 1)."""
    codes = codes.astype(np.float64)
    return codes / codes.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------- noise

def noise_distribution(plain: np.ndarray, freq: np.ndarray) -> np.ndarray:
    """σ_j = (1 − F_j / ΣF) / (b − 1) with F = Σ_t f_t v_t: probability the bit j is NOT what was seen."""
    mass = np.asarray(freq, dtype=np.float64) @ plain          # (b,)
    total = mass.sum()
    bits = plain.shape[1]
    if bits < 2 or total <= 0:
        return np.full(bits, 1.0 / bits)
    return (1.0 - mass / total) / (bits - 1)


def beta(kind: str, freq: np.ndarray, doc_freq: np.ndarray | None = None, n_docs: int | None = None) -> np.ndarray:
    """β_t, the share of a word's observations taken as error-free (see the module docstring for the kinds)."""
    f = np.asarray(freq, dtype=np.float64)
    if kind == "freq":
        return f / (f + 1.0)
    if kind not in BETAS:
        raise UserError(f"unknown beta '{kind}': choose one of {', '.join(BETAS)}")
    if doc_freq is None:
        raise UserError(f"beta={kind} needs document frequencies; build the cipher from a corpus with documents")
    d = np.asarray(doc_freq, dtype=np.float64)
    if kind == "df_over_f":
        return np.divide(d, f, out=np.zeros_like(d), where=f > 0)
    if not n_docs:
        raise UserError("beta=df_over_ndocs needs the number of documents (n_docs > 0)")
    return d / float(n_docs)


def noised_vectors(plain: np.ndarray, betas: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """ν_t = β_t v_t + (1 − β_t) σ (rows still sum to 1)."""
    b = np.asarray(betas, dtype=np.float64)[:, None]
    return b * plain + (1.0 - b) * sigma[None, :]


# ---------------------------------------------------------------- the cipher as one object

@dataclass(frozen=True)
class CipherParts:
    """The cipher row by row as ν_t = a_t · η_t / ‖η_t‖₁ + c_t · σ (word: a = β, c = 1 − β; OOV σ: a = 0, c = 1).

    Why: η_t has k_t ≪ b bits set, so a product counts @ ν is a sparse product plus a rank-one term
    (`langrepr.pipelines.bitcipher.cooccurrence.FactoredTable`), O(k) instead of O(b) work per counted pair.
    """

    codes: np.ndarray          # (V + 1, b) uint8 η_t; the row is all zero where a_t = 0
    code_weight: np.ndarray    # (V + 1,) a_t
    noise_weight: np.ndarray   # (V + 1,) c_t
    sigma: np.ndarray          # (b,)

    def dense(self) -> np.ndarray:
        """The (V + 1) × b matrix the parts stand for (equal to `BitCipher.vectors` to float rounding)."""
        k = self.codes.sum(axis=1, dtype=np.float64)
        scale = np.divide(self.code_weight, k, out=np.zeros_like(k), where=k > 0)
        return self.codes * scale[:, None] + np.outer(self.noise_weight, self.sigma)


@dataclass
class BitCipher:
    """A ranked vocabulary and its (noised) cipher vectors; row `len(words)` is the OOV vector."""

    words: list[str]
    vectors: np.ndarray                    # (V + 1, b): V ranked words, then OOV
    bits: int
    parts: CipherParts | None = field(default=None, repr=False)   # the same rows, factored (see CipherParts)
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {w: i for i, w in enumerate(self.words)}

    @property
    def oov_id(self) -> int:
        return len(self.words)

    def ids(self, tokens: Iterable[str]) -> np.ndarray:
        get, oov = self.index.get, self.oov_id
        return np.fromiter((get(t, oov) for t in tokens), dtype=np.int64)


def build_cipher(counts: dict[str, int], bits: int, beta_kind: str = "df_over_f",
                 doc_counts: dict[str, int] | None = None, n_docs: int | None = None, noise: bool = True,
                 oov: str = "sigma", grow_bits: bool = False, extra_words: Sequence[str] = ()) -> BitCipher:
    """Rank `counts` (plus `extra_words` never seen, ranked last by first mention), assign codes, add noise.

    `noise=False` returns the plain vectors v_t (the noise-free cipher).
    """
    if oov not in OOV_KINDS:
        raise UserError(f"unknown oov '{oov}': choose one of {', '.join(OOV_KINDS)}")
    if not counts:
        raise UserError("the corpus gave no tokens: check the corpus files (empty shard or wrong path)")
    words = rank_vocabulary(counts)
    seen = set(words)
    words += [w for w in dict.fromkeys(extra_words) if w not in seen]
    n_codes = len(words) + (oov == "next_code")
    bits = check_capacity(n_codes, bits, grow_bits)
    codes = bit_codes(n_codes, bits)
    plain = plain_vectors(codes)
    freq = np.array([counts.get(w, 0) for w in words], dtype=np.float64)
    sigma = noise_distribution(plain[:len(words)], freq)
    if noise:
        docs = None if doc_counts is None else np.array([doc_counts.get(w, 0) for w in words], dtype=np.float64)
        betas = beta(beta_kind, freq, docs, n_docs)
        vectors = noised_vectors(plain[:len(words)], betas, sigma)
    else:
        betas = np.ones(len(words))
        vectors = plain[:len(words)]
    oov_vec = {"sigma": sigma, "zero": np.zeros(bits), "next_code": plain[-1]}[oov]
    oov_code = codes[-1] if oov == "next_code" else np.zeros(bits, dtype=codes.dtype)
    oov_a, oov_c = {"sigma": (0.0, 1.0), "zero": (0.0, 0.0), "next_code": (1.0, 0.0)}[oov]
    parts = CipherParts(codes=np.vstack([codes[:len(words)], oov_code[None, :]]), code_weight=np.r_[betas, oov_a],
                        noise_weight=np.r_[1.0 - betas, oov_c], sigma=sigma)
    return BitCipher(words=words, vectors=np.vstack([vectors, oov_vec[None, :]]), bits=bits, parts=parts)
