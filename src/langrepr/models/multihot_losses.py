"""Masked-LM losses with a multi-hot target (multi-hot LM §2.2, eqs. 3-7), vectorised over positions and vocabulary.

A masked position's answer is a group of token ids (one id for an ordinary token, the `@`-syllables of a
morpheme otherwise; duplicates count, so 'e' in Archimedes has y = 2 and n = 10). Groups arrive as
`target_ids (M, G)` with `target_mask (M, G)`; only the answer slots are gathered, the vocabulary enters through
one fused log-softmax per position, so the cost is that of plain cross-entropy (see scripts/bench_multihot.py).

Dims: M masked positions, V vocabulary, G group slots.

[inferred, configurable]:
- eq. 6 contradicts its own prose: `eq6="prose"` keeps answers still below their target share
  (label = 1[ℓ > 0]); `eq6="printed"` keeps those above it (label = y·1[ℓ < 0]). `label_weight` = one|count.
- positions whose label sum is 0 contribute 0 (eq. 7 undefined); the loss is the mean over masked positions.
- eq. 3 with a multi-hot y is the sum over the answer slots (not divided by n); eq. 4 is the standard BCE
  (the printed leading y_i factor would zero every negative term) averaged over the vocabulary.

Every loss computes in the logits' dtype, promoting fp16/bf16 to float32 (`loss_dtype`): a float64 check
stays float64 end to end, and the shares log(y/n) are never rounded to float32 under it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LOSSES = ("sce", "bce", "mhsce")


def loss_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype a loss computes in: the input's own, never below float32 (fp16/bf16 -> float32)."""
    return torch.promote_types(x.dtype, torch.float32)


def slot_counts(target_ids: torch.Tensor, target_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Y of each slot's token within its group (M, G) and whether the slot is the token's first occurrence."""
    same = (target_ids[:, :, None] == target_ids[:, None, :]) & target_mask[:, None, :] & target_mask[:, :, None]
    counts = same.sum(-1)                                                      # (M, G)
    earlier = torch.tril(same, diagonal=-1).any(-1)                           # an equal id in an earlier slot
    return counts, target_mask & ~earlier


def answer_log_probs(logits: torch.Tensor, target_ids: torch.Tensor) -> torch.Tensor:
    """Log S(O)_k at each answer slot (M, G): one fused log-softmax over V plus a gather.

    The same two kernels as plain cross-entropy (log_softmax + nll); `logits.gather - logsumexp` is equal in
    value but its backward takes two extra dense passes over (M, V), ~1.9x the time of CE at V = 20k.
    """
    return F.log_softmax(logits, dim=1, dtype=loss_dtype(logits)).gather(1, target_ids)


def softmax_ce(logits, target_ids, target_mask) -> torch.Tensor:
    """Eq. 3 with a multi-hot target: −Σ_k y_k log S(O)_k per position (duplicates counted), mean over M."""
    log_p = answer_log_probs(logits, target_ids)
    return -(log_p * target_mask).sum(1).mean()


def multi_hot_targets(target_ids, target_mask, vocab_size: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Dense counts y (M, V) of a group's tokens."""
    y = torch.zeros(target_ids.shape[0], vocab_size, device=target_ids.device, dtype=dtype)
    return y.scatter_add_(1, target_ids, target_mask.to(dtype))


def binary_ce(logits, target_ids, target_mask) -> torch.Tensor:
    """Eq. 4: BCE of the sigmoid outputs against 1[y_k > 0], averaged over the vocabulary and positions."""
    dtype = loss_dtype(logits)
    target = (multi_hot_targets(target_ids, target_mask, logits.shape[1], dtype) > 0).to(dtype)
    return F.binary_cross_entropy_with_logits(logits.to(dtype), target)


def multi_hot_terms(logits, target_ids, target_mask) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eq. 5 per distinct answer: ℓ_k = −(log S(O)_k − log(y_k/n)); returns (ℓ, y, first-occurrence mask)."""
    counts, first = slot_counts(target_ids, target_mask)
    dtype = loss_dtype(logits)
    n = target_mask.sum(1, keepdim=True).clamp(min=1).to(dtype)
    share = counts.clamp(min=1).to(dtype) / n
    ell = torch.log(share) - answer_log_probs(logits, target_ids)
    return ell, counts, first


def multi_hot_labels(ell, counts, first, eq6: str = "prose", label_weight: str = "one") -> torch.Tensor:
    """Eq. 6 in either reading (no gradient flows through the relabelling)."""
    ell = ell.detach()
    if eq6 == "prose":
        keep = ell > 0
    elif eq6 == "printed":
        keep = ell < 0
    else:
        raise ValueError(f"mhsce.eq6 must be prose or printed, got {eq6!r}")
    if label_weight not in ("one", "count"):
        raise ValueError(f"mhsce.label_weight must be one or count, got {label_weight!r}")
    weight = counts.to(ell.dtype) if label_weight == "count" else torch.ones_like(ell)
    return weight * (keep & first)


def multi_hot_softmax_ce(logits, target_ids, target_mask, eq6: str = "prose", label_weight: str = "one",
                         per_position: bool = False) -> torch.Tensor:
    """Eqs. 5-7: Σ_k ℓ_k label_k / Σ_k label_k per position (0 where no label survives), mean over M."""
    ell, counts, first = multi_hot_terms(logits, target_ids, target_mask)
    label = multi_hot_labels(ell, counts, first, eq6, label_weight)
    total = label.sum(1)
    loss = torch.where(total > 0, (ell * label).sum(1) / total.clamp(min=1e-12), torch.zeros_like(total))
    return loss if per_position else loss.mean()


def mlm_loss(name: str, logits, target_ids, target_mask, **options) -> torch.Tensor:
    """The configured loss: sce | bce | mhsce (options go to mhsce)."""
    if name == "sce":
        return softmax_ce(logits, target_ids, target_mask)
    if name == "bce":
        return binary_ce(logits, target_ids, target_mask)
    if name == "mhsce":
        return multi_hot_softmax_ce(logits, target_ids, target_mask, **options)
    raise ValueError(f"unknown loss {name!r}: choose one of {', '.join(LOSSES)}")


def target_cross_entropy(log_probs_at_answers: torch.Tensor, target_mask: torch.Tensor) -> torch.Tensor:
    """Threshold-free evaluation: H(y/n, p) = −Σ_k (y_k/n) log p_k per position (M,), for any loss's model.

    The same quantity with p = the unigram distribution of the training tokens is the reference row.
    """
    log_probs = log_probs_at_answers.to(loss_dtype(log_probs_at_answers))
    n = target_mask.sum(1).clamp(min=1)
    return -(log_probs * target_mask).sum(1) / n
