"""Pass 2 of Bit Cipher (§3.5, METHODS §5.3): co-occurrence of cipher vectors, Sum and Cat, over shards.

For each occurrence of target word w at position i, the noised cipher vectors ν of its context words within
radius r (same document, i excluded) are aggregated and added to w's row:

    Sum:                 M[w] += Σ_{0<|δ|≤r} ν(x_{i+δ})                                   (b dims)
    Cat, left_right:     M[w] += [Σ_{δ<0} ν(x_{i+δ}) ; Σ_{δ>0} ν(x_{i+δ})]              (2b dims)
    Cat, per_offset:     M[w] += [ν(x_{i−r}) ; … ; ν(x_{i−1}) ; ν(x_{i+1}) ; … ; ν(x_{i+r})]   (2r·b dims)

Vectorised: a shard's left-context pair counts L (r integer keys per token: pairs of the 1024 most frequent
words by one bincount into a dense block, the rest by one sort; a CSR matrix) give M = L ν + Lᵀ ν = (L + Lᵀ) ν
for Sum (the right context is the transpose), so the per-token work is O(r) integer operations and the
vector work is per distinct pair; no Python loop per token. The cipher is passed factored
(`FactoredTable`: ν_t = β_t η_t/‖η_t‖₁ + (1 − β_t) σ, k_t ≪ b bits set), so the product is a sparse × sparse
product (O(k) per distinct pair) plus one rank-one term per row, instead of b-wide random reads of a dense
(V+1) × b table (memory-bound once it outgrew the cache; bench at V = 200k, b = 128: 0.58M → 1.11M tokens per
CPU-second for Sum, 0.44M → 0.86M for Cat); a dense table is still accepted (the generic path). What bounds it now (scripts/bench_bit_cipher.py, one core, 1M
tokens, r = 8): counting the pairs (~0.5 CPU-s, half of it the sort of the infrequent pairs' int64 keys), the
dictionary look-up of each shard's word list (~0.1 s at V = 200k) and, per process, the first touch of the dense
(V+1) × D result. Counts are summed (sparse) over a group's shards and multiplied once per group, or whenever
they pass ``flush_nnz`` stored pairs. Shards are processed by a process pool in groups (``group_shards`` shards
per partial, default one contiguous block per worker; partials written atomically to ``partials/``: the factored
rows as .npz, dense rows as .npy) and summed; a crashed run resumes from its finished partials (smaller groups =
finer resume, more partial files). Memory per process: the factored rows (≤ (V+1) × D stored entries; a dense
(V+1) × D float64 accumulator for a dense table), the pending counts (≤ ``flush_nnz`` pairs) and O(r × shard
tokens) integer keys; the driver holds the one dense result.

Then ``log=True`` (the paper's setting) applies the predecessor code's transform: each b-block of a row is
normalised to sum 1 and replaced by −log10 of it (zeros floored at half the smallest positive entry; rows never
seen as a target become uniform). [inferred, configurable]: ``cat_mode`` (the paper's 2 × bits suggests
left_right; IaMaN used per_offset).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from langrepr.errors import UserError
from langrepr.models.bit_cipher import BitCipher, CipherParts
from langrepr.pipelines.bitcipher.corpus_shards import corpus_shards, load_shard
from langrepr.utils import open_mode

log = logging.getLogger("langrepr.pipelines")
MODES = ("sum", "cat")
CAT_MODES = ("left_right", "per_offset")


def output_width(bits: int, mode: str, radius: int, cat_mode: str = "left_right") -> int:
    if mode == "sum":
        return bits
    return 2 * bits if cat_mode == "left_right" else 2 * radius * bits


def check_options(mode: str, radius: int, cat_mode: str) -> None:
    if mode not in MODES:
        raise UserError(f"unknown co-occurrence mode '{mode}': choose one of {', '.join(MODES)}")
    if cat_mode not in CAT_MODES:
        raise UserError(f"unknown cat_mode '{cat_mode}': choose one of {', '.join(CAT_MODES)}")
    if int(radius) < 1:
        raise UserError(f"radius={radius}: the context window needs radius >= 1")


# ---------------------------------------------------------------- the kernel

DENSE_BLOCK = 1024   # pairs of the 1024 most frequent words are counted in a dense 1024 × 1024 block (8 MiB)


def sorted_key_counts(key: np.ndarray, n_rows: int) -> sp.csr_matrix:
    """CSR of the multiplicities of integer keys row·n_rows + col (sorted in place)."""
    key.sort()
    if key.size == 0:
        return sp.csr_matrix((n_rows, n_rows))
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    unique = key[starts]
    counts = np.diff(np.r_[starts, key.size]).astype(np.float64)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(unique // n_rows, minlength=n_rows), out=indptr[1:])
    return sp.csr_matrix((counts, (unique % n_rows).astype(np.int32), indptr), shape=(n_rows, n_rows))


def left_counts(ids: np.ndarray, doc_ids: np.ndarray, n_rows: int, offsets: range,
                dense_block: int = DENSE_BLOCK) -> sp.csr_matrix:
    """L[w, c] = #{i, δ ∈ offsets: x_i = w, x_{i−δ} = c, same document}: the left-context count matrix.

    The right-context counts are its transpose (a pair seen at −δ from w is seen at +δ from c), so only the
    left half is counted: r integer keys per token. Rows are frequency ranks, so most pairs fall among the
    `dense_block` most frequent words: those are counted by one bincount into a dense block (O(1) per key), the
    rest by one sort (the bulk of the cost; int32 keys when n_rows² fits, ~1.7x faster than int64).
    """
    key_type = np.int32 if n_rows * n_rows < 2**31 else np.int64
    ids = ids.astype(key_type, copy=False)
    k = min(int(dense_block), n_rows)
    frequent = ids < k
    dense_keys, sparse_keys = [], []
    for delta in offsets:
        if delta >= len(ids):
            continue
        same_doc = doc_ids[delta:] == doc_ids[:-delta]
        both = same_doc & frequent[delta:] & frequent[:-delta]
        dense_keys.append(ids[delta:][both] * key_type(k) + ids[:-delta][both])
        rest = same_doc & ~both
        sparse_keys.append(ids[delta:][rest] * key_type(n_rows) + ids[:-delta][rest])
    sparse = sorted_key_counts(np.concatenate(sparse_keys) if sparse_keys else np.zeros(0, key_type), n_rows)
    if not dense_keys or k == 0:
        return sparse
    block = np.bincount(np.concatenate(dense_keys), minlength=k * k).astype(np.float64).reshape(k, k)
    dense = sp.csr_matrix(block)
    dense.resize((n_rows, n_rows))
    return (sparse + dense).tocsr()


def document_chunks(doc_offsets: np.ndarray, max_tokens: int) -> list[tuple[int, int]]:
    """Token ranges [a, b) of whole documents, cut at the last document start before each multiple of max_tokens.

    A chunk is longer than max_tokens only when a document is (documents are never split).
    """
    if len(doc_offsets) < 2 or doc_offsets[-1] <= doc_offsets[0]:
        return []
    targets = np.arange(doc_offsets[0], doc_offsets[-1], max_tokens)
    starts = doc_offsets[np.searchsorted(doc_offsets, targets, side="right") - 1]
    bounds = np.unique(np.r_[starts, doc_offsets[-1]])
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def shard_counts(ids: np.ndarray, doc_offsets: np.ndarray, n_rows: int, radius: int, mode: str,
                 cat_mode: str = "left_right", max_keys: int = 1 << 25) -> list[sp.csr_matrix]:
    """A shard's left-context counts: [L] (Sum, Cat left_right) or [L_1, …, L_r] (Cat per_offset).

    Memory is bounded by counting chunks of whole documents of at most ``max_keys / radius`` tokens (r keys
    per token; 2^25 int32 keys = 128 MiB) and summing their sparse counts.
    """
    ids = np.asarray(ids, dtype=np.int64)
    doc_offsets = np.asarray(doc_offsets, dtype=np.int64)
    doc_ids = np.repeat(np.arange(len(doc_offsets) - 1), np.diff(doc_offsets))
    offset_sets = ([range(d, d + 1) for d in range(1, radius + 1)] if mode == "cat" and cat_mode == "per_offset"
                   else [range(1, radius + 1)])
    total: list[sp.csr_matrix] | None = None
    for a, b in document_chunks(doc_offsets, max(1, max_keys // max(1, radius))):
        part = [left_counts(ids[a:b], doc_ids[a:b], n_rows, offs) for offs in offset_sets]
        total = part if total is None else [x + y for x, y in zip(total, part)]
    return total if total is not None else [sp.csr_matrix((n_rows, n_rows)) for _ in offset_sets]


@dataclass(frozen=True)
class FactoredTable:
    """A context table kept as a sparse part plus a rank-one part: row t = sparse[t] + weight[t] · shared.

    The noised cipher is one (ν_t = β_t η_t/‖η_t‖₁ + (1 − β_t) σ, `langrepr.models.bit_cipher.CipherParts`): with
    k_t ≪ b bits set, counts @ table costs O(nnz · k) + O(V · b) instead of O(nnz · b) random reads of b-wide
    rows, the cost that bounded the dense product once (V+1) × b outgrew the cache.
    """

    sparse: sp.csr_matrix    # (V+1) × b
    weight: np.ndarray       # (V+1,)
    shared: np.ndarray       # (b,)

    @property
    def shape(self) -> tuple[int, int]:
        return self.sparse.shape

    def toarray(self) -> np.ndarray:
        return self.sparse.toarray() + np.outer(self.weight, self.shared)

    @classmethod
    def from_parts(cls, parts: CipherParts) -> FactoredTable:
        rows, cols = np.nonzero(parts.codes)
        k = np.bincount(rows, minlength=len(parts.codes)).astype(np.float64)
        scale = np.divide(parts.code_weight, k, out=np.zeros_like(k), where=k > 0)
        keep = scale[rows] != 0                          # words with β = 0 are σ alone: no stored zeros
        sparse = sp.csr_matrix((scale[rows[keep]], (rows[keep], cols[keep])), shape=parts.codes.shape)
        return cls(sparse, np.asarray(parts.noise_weight, dtype=np.float64), np.asarray(parts.sigma, np.float64))


def context_table(cipher: BitCipher) -> np.ndarray | FactoredTable:
    """What the co-occurrence multiplies: the factored cipher where the cipher carries its parts, else its rows."""
    return FactoredTable.from_parts(cipher.parts) if cipher.parts is not None else cipher.vectors


def add_rank_one(out: np.ndarray, coef: np.ndarray, shared: np.ndarray, rows_per_step: int = 4096) -> None:
    """Add coef ⊗ shared to `out`, a few thousand rows at a time (the temporary stays in cache)."""
    for start in range(0, len(coef), rows_per_step):
        out[start:start + rows_per_step] += coef[start:start + rows_per_step, None] * shared[None, :]


def add_sparse(out: np.ndarray, matrix: sp.csr_matrix) -> None:
    """Add a CSR matrix into a dense array (np.add.at: exact with duplicate entries, no dense temporary)."""
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    np.add.at(out, (rows, matrix.indices), matrix.data)


class FactoredRows:
    """Co-occurrence rows against a FactoredTable, kept factored: a sparse part plus rank-one coefficients.

    A worker holds these (nnz ≤ (V+1) × D, usually far fewer) instead of a dense (V+1) × D accumulator, and its
    partial file holds them too; the driver densifies once (`add_to`).
    """

    def __init__(self, table: FactoredTable, width: int) -> None:
        self.table = table
        self.sparse = sp.csr_matrix((table.shape[0], width))
        self.noise_coef = np.zeros((table.shape[0], width // table.shape[1]))   # one column per b-block

    def add(self, block: int, counts: sp.csr_matrix) -> None:
        b = self.table.shape[1]
        part = (counts @ self.table.sparse).tocsr()
        self.sparse = self.sparse + sp.csr_matrix((part.data, part.indices + block * b, part.indptr),
                                                  shape=self.sparse.shape)
        self.noise_coef[:, block] += counts @ self.table.weight

    def save(self, path: str) -> None:
        np.savez(path, data=self.sparse.data, indices=self.sparse.indices, indptr=self.sparse.indptr,
                 noise_coef=self.noise_coef)

    @staticmethod
    def add_to(out: np.ndarray, path: str | Path, table: FactoredTable) -> None:
        """Add a saved partial (see `save`) into the dense (V+1) × D `out`."""
        with np.load(path) as z:
            add_sparse(out, sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=out.shape))
            coef = z["noise_coef"]
        b = table.shape[1]
        for block in range(coef.shape[1]):
            add_rank_one(out[:, block * b:(block + 1) * b], coef[:, block], table.shared)


def add_product(out: np.ndarray, counts: sp.csr_matrix, table: np.ndarray | FactoredTable) -> None:
    """Add counts @ table to `out` (which may be a column block of the accumulator)."""
    if not isinstance(table, FactoredTable):
        out += counts @ table
        return
    add_sparse(out, (counts @ table.sparse).tocsr())
    add_rank_one(out, counts @ table.weight, table.shared)


def apply_counts(out: np.ndarray | FactoredRows, counts: list[sp.csr_matrix], table: np.ndarray | FactoredTable,
                 radius: int, mode: str, cat_mode: str = "left_right") -> None:
    """Add the context rows the counts imply to `out`: L ν (left) and Lᵀ ν (right), laid out by mode.

    Sum adds both halves with one product, (L + Lᵀ) ν: the count matrices are summed exactly (integer counts).
    """
    b = table.shape[1]

    def add(block: int, matrix: sp.csr_matrix) -> None:
        if isinstance(out, FactoredRows):
            out.add(block, matrix)
        else:
            add_product(out[:, block * b:(block + 1) * b], matrix, table)

    if mode == "cat" and cat_mode == "per_offset":
        for k, left in enumerate(counts):                        # blocks: −r … −1, +1 … +r
            add(radius - 1 - k, left)
            add(radius + k, left.T.tocsr())
    elif mode == "sum":
        add(0, (counts[0] + counts[0].T).tocsr())
    else:
        add(0, counts[0])
        add(1, counts[0].T.tocsr())


def shard_cooccurrence(out: np.ndarray, ids: np.ndarray, doc_offsets: np.ndarray, table: np.ndarray | FactoredTable,
                       radius: int, mode: str, cat_mode: str = "left_right") -> None:
    """Add one shard's co-occurrence rows (Σ of context cipher vectors per target word) into `out`."""
    apply_counts(out, shard_counts(ids, doc_offsets, table.shape[0], radius, mode, cat_mode), table, radius, mode,
                 cat_mode)


# ---------------------------------------------------------------- shards in parallel

_STATE: dict = {}


def _init_worker(table: np.ndarray | FactoredTable, index: dict[str, int], options: dict) -> None:
    _STATE.update(table=table, index=index, options=options)


def partial_path(partial_dir: str | Path, group: int, table: np.ndarray | FactoredTable) -> Path:
    """A group's partial: dense rows (.npy) or factored rows (.npz, `FactoredRows.save`)."""
    return Path(partial_dir) / f"group-{group:05d}.{'npz' if isinstance(table, FactoredTable) else 'npy'}"


def _group_partial(job: tuple[int, list[str], str]) -> str:
    group, paths, partial_dir = job
    table, index, opts = _STATE["table"], _STATE["index"], _STATE["options"]
    oov = table.shape[0] - 1
    factored = isinstance(table, FactoredTable)
    out = FactoredRows(table, opts["width"]) if factored else np.zeros((table.shape[0], opts["width"]))
    pending: list[sp.csr_matrix] | None = None      # counts summed over shards, applied to ν in one product
    for path in paths:
        shard = load_shard(Path(path))
        if len(shard["ids"]) == 0:
            raise UserError(f"corpus shard {Path(path).name} is empty: delete it and check the corpus source")
        lookup = np.fromiter((index.get(w, oov) for w in shard["words"].tolist()), dtype=np.int64,
                             count=len(shard["words"]))
        counts = shard_counts(lookup[shard["ids"]], shard["doc_offsets"], table.shape[0], opts["radius"],
                              opts["mode"], opts["cat_mode"])
        pending = counts if pending is None else [a + c for a, c in zip(pending, counts)]
        if sum(m.nnz for m in pending) > opts["flush_nnz"]:       # bounded memory: apply and start again
            apply_counts(out, pending, table, opts["radius"], opts["mode"], opts["cat_mode"])
            pending = None
    if pending is not None:
        apply_counts(out, pending, table, opts["radius"], opts["mode"], opts["cat_mode"])
    target = partial_path(partial_dir, group, table)
    fd, tmp = tempfile.mkstemp(dir=partial_dir, prefix=".partial.", suffix=target.suffix)
    open_mode(fd)  # readable as the umask allows, not mkstemp's 0600
    os.close(fd)
    if factored:
        out.save(tmp)
    else:
        np.save(tmp, out)
    os.replace(tmp, target)
    return str(target)


def cooccurrence_matrix(corpus_dir: str | Path, table: np.ndarray | FactoredTable, index: dict[str, int],
                        work_dir: str | Path, mode: str = "sum", radius: int = 4, cat_mode: str = "left_right",
                        workers: int = 2, group_shards: int | None = None, flush_nnz: int = 50_000_000) -> np.ndarray:
    """Σ over all shards of the co-occurrence rows: (V+1) × D, last row = OOV targets. Partials are resumable."""
    check_options(mode, radius, cat_mode)
    shards = [str(p) for p in corpus_shards(corpus_dir)]
    if not shards:
        raise UserError(f"no corpus shards under {corpus_dir}: tokenise the corpus first")
    partial_dir = Path(work_dir) / "partials"
    partial_dir.mkdir(parents=True, exist_ok=True)
    if not group_shards:                                         # default: one contiguous block per worker
        group_shards = -(-len(shards) // max(1, workers))
    groups = [shards[i:i + group_shards] for i in range(0, len(shards), max(1, group_shards))]
    jobs = [(g, paths, str(partial_dir)) for g, paths in enumerate(groups)
            if not partial_path(partial_dir, g, table).exists()]
    options = {"radius": int(radius), "mode": mode, "cat_mode": cat_mode, "flush_nnz": int(flush_nnz),
               "width": output_width(table.shape[1], mode, int(radius), cat_mode)}
    if workers > 1 and len(jobs) > 1:
        with mp.get_context("fork").Pool(min(workers, len(jobs)), _init_worker, (table, index, options)) as pool:
            for _ in pool.imap_unordered(_group_partial, jobs):
                pass
    else:
        _init_worker(table, index, options)
        for job in jobs:
            _group_partial(job)
    total = np.zeros((table.shape[0], options["width"]))
    for g in range(len(groups)):
        path = partial_path(partial_dir, g, table)
        try:
            if isinstance(table, FactoredTable):
                FactoredRows.add_to(total, path, table)
            else:
                total += np.load(path)
        except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as err:
            # written atomically, so a damaged partial is the disk's doing (issue 21 X10): name it, keep the others
            raise UserError(f"co-occurrence partial {path} is damaged ({type(err).__name__}): delete it and run the "
                            "same command again (the other partials are kept; only its shards are counted again)"
                            ) from None
    return total


# ---------------------------------------------------------------- log transform

def log_transform(matrix: np.ndarray, block: int) -> np.ndarray:
    """Per b-block: rows normalised to sum 1, then −log10 (zeros floored; empty rows uniform)."""
    out = np.empty_like(matrix, dtype=np.float64)
    for start in range(0, matrix.shape[1], block):
        part = matrix[:, start:start + block].astype(np.float64)
        sums = part.sum(axis=1, keepdims=True)
        probs = np.divide(part, sums, out=np.full_like(part, 1.0 / part.shape[1]), where=sums > 0)
        positive = probs[probs > 0]
        floor = positive.min() / 2 if positive.size else 1.0 / part.shape[1]
        out[:, start:start + block] = -np.log10(np.maximum(probs, floor))
    return out
