"""Bit Cipher §4 post-processing: whitening (Kessy et al. 2016), then mean-centring and L2 normalisation.

    X_c = X − μ,   Σ = X_cᵀ X_c / (n − 1) = U diag(λ) Uᵀ
    ZCA:  W = U diag((λ + ε)^−½) Uᵀ        PCA:  W = U diag((λ + ε)^−½)        X_w = X_c W

ε = `eps` × mean(λ) keeps near-null directions (e.g. bits no word uses) from blowing up. Statistics are fitted
on the vocabulary rows and applied to every row (the OOV row too). [inferred, configurable]: ZCA is the default
(the paper cites Kessy et al. without naming the variant).
"""

from __future__ import annotations

import numpy as np

from langrepr.errors import UserError

WHITENINGS = ("zca", "pca", "none")


def whitening_matrix(x: np.ndarray, method: str = "zca", eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray]:
    """(μ, W) such that (X − μ) W has identity covariance (up to ε)."""
    if method not in WHITENINGS:
        raise UserError(f"unknown whitening '{method}': choose one of {', '.join(WHITENINGS)}")
    x = np.asarray(x, dtype=np.float64)
    mu = x.mean(axis=0)
    if method == "none":
        return mu, np.eye(x.shape[1])
    cov = np.cov(x - mu, rowvar=False)
    lam, u = np.linalg.eigh(np.atleast_2d(cov))
    lam = np.clip(lam, 0.0, None)
    scale = 1.0 / np.sqrt(lam + eps * max(lam.mean(), 1e-12))
    w = (u * scale) @ u.T if method == "zca" else u * scale
    return mu, w


def mean_centre(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=0, keepdims=True)


def l2_normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def postprocess(vectors: np.ndarray, whiten: str = "zca", centre: bool = True, l2: bool = True,
                eps: float = 1e-5, fit_rows: int | None = None) -> np.ndarray:
    """Whiten (fitted on the first `fit_rows` rows, default all), then mean-centre and L2-normalise each row."""
    x = np.asarray(vectors, dtype=np.float64)
    fit = x[:fit_rows] if fit_rows else x
    mu, w = whitening_matrix(fit, whiten, eps)
    out = (x - mu) @ w
    if centre:
        out = out - out[:fit_rows or len(out)].mean(axis=0, keepdims=True)
    return l2_normalise(out) if l2 else out
