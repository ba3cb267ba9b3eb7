"""GloVe (Pennington, Socher & Manning 2014) trained here on the Bit Cipher corpus shards: Table 1's baseline.

    J = Σ_{i,j: X_ij > 0} f(X_ij) (w_iᵀ w̃_j + b_i + b̃_j − log X_ij)²
    f(x) = (x / x_max)^α  if x < x_max,  else 1                (x_max = 100, α = 3/4)

X is the symmetric co-occurrence matrix within `window` words (same document), each pair weighted 1/d for a
distance d, as the reference C code (`cooccur`) does; it is counted by the co-occurrence kernel of
`langrepr.pipelines.bitcipher.cooccurrence` (one left-count matrix per offset, shard by shard, bounded memory). Training:
AdaGrad (lr 0.05) on the non-zero entries in shuffled mini-batches with sparse embedding gradients, `epochs`
passes; the word vectors are W + W̃ (the paper's choice; `output: word` keeps W). No maintained PyPI GloVe
trainer exists (glove-python, glove-python-binary and mittens were last released in 2016-2020), hence this small
implementation of the published objective.

Dims: n = vocabulary rows (V words + OOV), d = vector size, K = non-zero entries of X, B = batch.
[inferred, configurable]: mini-batch AdaGrad on the summed loss instead of the C code's per-entry updates;
words with no co-occurrence (probe-only words, the OOV row) get the zero vector, as the word2vec baseline does.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor, nn

from langrepr.errors import UserError
from langrepr.pipelines.bitcipher.cooccurrence import shard_counts
from langrepr.pipelines.bitcipher.corpus_shards import corpus_shards, load_shard

log = logging.getLogger("langrepr.pipelines")
OUTPUTS = ("sum", "word")


# ---------------------------------------------------------------- the objective

def glove_weight(x: Tensor, x_max: float = 100.0, alpha: float = 0.75) -> Tensor:
    """f(x) = (x / x_max)^α below x_max, 1 above: rare pairs count less, frequent ones are capped."""
    return torch.clamp(x / x_max, max=1.0) ** alpha


def glove_loss(w: Tensor, w_tilde: Tensor, b: Tensor, b_tilde: Tensor, counts: Tensor, x_max: float = 100.0,
               alpha: float = 0.75) -> Tensor:
    """Σ_k f(X_k) (w_kᵀ w̃_k + b_k + b̃_k − log X_k)² over a batch of K entries: w, w̃ (K, d); b, b̃, X (K,)."""
    error = (w * w_tilde).sum(dim=1) + b + b_tilde - torch.log(counts)
    return (glove_weight(counts, x_max, alpha) * error.pow(2)).sum()


class GloVe(nn.Module):
    """Word and context vectors and biases, initialised uniform in ±0.5/d as the reference code."""

    def __init__(self, n_rows: int, dim: int) -> None:
        super().__init__()
        self.w, self.w_tilde = nn.Embedding(n_rows, dim, sparse=True), nn.Embedding(n_rows, dim, sparse=True)
        self.b, self.b_tilde = nn.Embedding(n_rows, 1, sparse=True), nn.Embedding(n_rows, 1, sparse=True)
        for table in (self.w, self.w_tilde, self.b, self.b_tilde):
            nn.init.uniform_(table.weight, -0.5 / dim, 0.5 / dim)

    def forward(self, rows: Tensor, cols: Tensor, counts: Tensor, x_max: float, alpha: float) -> Tensor:
        return glove_loss(self.w(rows), self.w_tilde(cols), self.b(rows).squeeze(1), self.b_tilde(cols).squeeze(1),
                          counts, x_max, alpha)


# ---------------------------------------------------------------- counts and training

def glove_cooccurrence(corpus_dir: str | Path, index: dict[str, int], n_rows: int, window: int = 10) -> sp.coo_matrix:
    """X[i, j] = Σ over pairs at distance d ≤ window (either side, same document) of 1/d, summed over shards."""
    if window < 1:
        raise UserError(f"glove window={window}: the context window needs at least 1 word")
    total = sp.csr_matrix((n_rows, n_rows))
    oov = n_rows - 1
    for path in corpus_shards(corpus_dir):
        shard = load_shard(Path(path))
        if len(shard["ids"]) == 0:
            raise UserError(f"corpus shard {Path(path).name} is empty: delete it and check the corpus source")
        lookup = np.fromiter((index.get(w, oov) for w in shard["words"].tolist()), dtype=np.int64,
                             count=len(shard["words"]))
        per_offset = shard_counts(lookup[shard["ids"]], shard["doc_offsets"], n_rows, window, "cat", "per_offset")
        for distance, left in enumerate(per_offset, start=1):
            total = total + (left + left.T) / distance
    return total.tocoo()


def entries(counts: sp.coo_matrix) -> tuple[Tensor, Tensor, Tensor]:
    """(rows, cols, values) of the non-zero entries as tensors."""
    return (torch.as_tensor(counts.row, dtype=torch.long), torch.as_tensor(counts.col, dtype=torch.long),
            torch.as_tensor(counts.data, dtype=torch.float32))


def fit_glove(counts: sp.coo_matrix, dim: int, seed: int = 1, epochs: int = 50, lr: float = 0.05,
              x_max: float = 100.0, alpha: float = 0.75, batch_size: int = 65536) -> GloVe:
    """A GloVe model fitted to the non-zero entries of `counts` by mini-batch AdaGrad.

    The global RNG is left as it was: LEAM trains GloVe inside its cell only when the vectors are not cached yet, so
    a fit that reseeded it would make the cell's dropout and batch order depend on whether the cache was warm.
    """
    if counts.nnz == 0:
        raise UserError("GloVe got an empty co-occurrence matrix: the corpus has no word pairs within the window")
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GloVe(counts.shape[0], dim)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=lr)
    rows, cols, values = entries(counts)
    for epoch in range(epochs):
        started, total = time.time(), 0.0
        for batch in torch.randperm(values.numel(), generator=generator).split(batch_size):
            optimizer.zero_grad()
            loss = 0.5 * model(rows[batch], cols[batch], values[batch], x_max, alpha)
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
        log.info("glove epoch %d/%d: loss %.4g per entry (%.1fs)", epoch + 1, epochs, total / values.numel(),
                 time.time() - started)
    return model


def train_glove(counts: sp.coo_matrix, dim: int, seed: int = 1, output: str = "sum", **fit: object) -> np.ndarray:
    """(n, dim) vectors W + W̃ (or W) from `fit_glove`; rows without any co-occurrence are zero."""
    if output not in OUTPUTS:
        raise UserError(f"unknown glove output '{output}': choose one of {', '.join(OUTPUTS)}")
    model = fit_glove(counts, dim, seed, **fit)
    vectors = model.w.weight.detach().numpy().astype(np.float64)
    if output == "sum":
        vectors = vectors + model.w_tilde.weight.detach().numpy()
    seen = np.zeros(counts.shape[0], dtype=bool)
    seen[counts.row] = True
    vectors[~seen] = 0.0
    return vectors


def glove_vectors(corpus_dir: str | Path, words: list[str], dim: int, seed: int, window: int = 10,
                  **training: object) -> np.ndarray:
    """(V+1) × dim GloVe vectors for `words` (row V = OOV) trained on the tokenised shards in `corpus_dir`."""
    index = {w: i for i, w in enumerate(words)}
    counts = glove_cooccurrence(corpus_dir, index, len(words) + 1, window)
    return train_glove(counts, dim, seed, **training)
