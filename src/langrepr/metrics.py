"""Multi-label metrics shared by model rows (tasks) and reference rows (pipelines), one definition each.

Why one module: a table sets a model row beside a reference row cell by cell, so both must be scored by the
same code. The conventions are CAML's (Mullenbach et al. 2018, `evaluation.py`), which LEAM Table 5 follows:

- prediction: a label is predicted when its score is `> threshold` (also torchmetrics' rule);
- micro AUROC: ONE ROC over every (document, label) cell, no label dropped, exact (ties count one half,
  i.e. the trapezoid, equal to scikit-learn's `roc_auc_score` on the flattened arrays);
- macro AUROC: the mean of per-label AUROCs over the labels with both a positive and a negative document
  (CAML skips the others: their ROC is undefined);
- macro F1: `caml` = the harmonic mean of macro precision and macro recall (both averaged over every label,
  0 where undefined); `per_label_mean` = the mean of per-label F1 (scikit-learn's and torchmetrics'
  `average="macro"`).

The AUROC is computed by sorting, not binning: memory O(documents x labels) and no thresholds x cells
matrix (torchmetrics' binned AUROC under `deterministic=true` fell into a bincount that reached 15 GB at
1,328 labels). No data or task code is imported here.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric

MACRO_F1 = ("caml", "per_label_mean")


def _tensor(x) -> Tensor:
    """Accept numpy arrays (reference rows) as well as tensors (model rows), without copying."""
    return x if isinstance(x, Tensor) else torch.as_tensor(x)


def _scores(x) -> Tensor:
    x = _tensor(x).detach()
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def _select(values: Tensor, mask: Tensor) -> Tensor:
    """values[mask]; on CPU through numpy, which allocates no index array (torch's takes 8 bytes a cell)."""
    if values.device.type == "cpu":
        return torch.from_numpy(values.numpy()[mask.numpy()])
    return values[mask]


def _sort_(values: Tensor) -> Tensor:
    """Sort a fresh 1-D copy; on CPU in place through numpy, so no int64 index array is allocated."""
    if values.device.type == "cpu":
        values.numpy().sort()
        return values
    return torch.sort(values).values


def auroc(scores, labels) -> Tensor:
    """Exact ROC AUC of all cells taken together (any shape): P(s_pos > s_neg) + P(s_pos = s_neg) / 2.

    Only the negatives are sorted (positives set to +inf sort last and are cut off); each positive finds
    its rank among them by binary search. Extra memory: one copy of the scores plus O(positives) on CPU,
    and the sort's int64 indices on GPU. NaN when there is no positive or no negative.
    """
    scores, labels = _scores(scores).reshape(-1), _tensor(labels).reshape(-1).bool()
    positives = _select(scores, labels)
    n_pos, n_neg = positives.numel(), labels.numel() - positives.numel()
    if n_pos == 0 or n_neg == 0:
        return torch.tensor(float("nan"), dtype=torch.float64, device=scores.device)
    inf = torch.tensor(float("inf"), dtype=scores.dtype, device=scores.device)
    negatives = _sort_(torch.where(labels, inf, scores))[:n_neg]
    below = torch.searchsorted(negatives, positives, right=False).sum()          # negatives strictly lower
    not_above = torch.searchsorted(negatives, positives, right=True).sum()       # ... lower or tied
    return (below + not_above).double() / (2.0 * n_pos * n_neg)


def micro_auroc(scores, labels) -> Tensor:
    """One ROC over every (document, label) cell of `(documents, labels)` arrays, no label dropped (CAML)."""
    return auroc(scores, labels)


def macro_auroc(scores, labels) -> Tensor:
    """Mean per-label AUROC over labels with both classes among the documents (CAML's macro; NaN if none)."""
    scores, labels = _scores(scores), _tensor(labels).bool()
    positives = labels.sum(0)
    present = ((positives > 0) & (positives < labels.shape[0])).nonzero().flatten().tolist()
    if not present:
        return torch.tensor(float("nan"), dtype=torch.float64, device=scores.device)
    return torch.stack([auroc(scores[:, j], labels[:, j]) for j in present]).mean()


def predict(scores, threshold: float) -> Tensor:
    """The decision rule of every multi-label row: score > threshold."""
    return _tensor(scores) > threshold


def label_counts(predicted, labels) -> tuple[Tensor, Tensor, Tensor]:
    """Per-label true positives, false positives and false negatives of `(documents, labels)` 0/1 arrays."""
    predicted, labels = _tensor(predicted).bool(), _tensor(labels).bool()
    return ((predicted & labels).sum(0), (predicted & ~labels).sum(0), (~predicted & labels).sum(0))


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """The ratio num / den, 0 where den is 0 (CAML's and scikit-learn's zero_division=0)."""
    return torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(num))


def micro_f1(tp, fp, fn) -> Tensor:
    """2 ΣTP / (2 ΣTP + ΣFP + ΣFN), 0 when nothing is predicted or true."""
    tp, fp, fn = (_tensor(x).double().sum() for x in (tp, fp, fn))
    return _ratio(2 * tp, 2 * tp + fp + fn)


def macro_f1(tp, fp, fn, convention: str = "caml") -> Tensor:
    """Macro F1 from per-label counts, averaged over every label.

    `caml`: 2PR / (P + R) of macro P = mean_l TP/(TP+FP) and macro R = mean_l TP/(TP+FN), each 0 where its
    denominator is 0 (CAML's `macro_f1`, the convention of the numbers LEAM Table 5 cites).
    `per_label_mean`: mean_l 2TP/(2TP+FP+FN) (scikit-learn / torchmetrics `average="macro"`, zero_division=0).
    """
    tp, fp, fn = (_tensor(x).double() for x in (tp, fp, fn))
    if convention == "caml":
        p, r = _ratio(tp, tp + fp).mean(), _ratio(tp, tp + fn).mean()
        return _ratio(2 * p * r, p + r)
    if convention == "per_label_mean":
        return _ratio(2 * tp, 2 * tp + fp + fn).mean()
    raise ValueError(f"macro_f1 must be one of {', '.join(MACRO_F1)}, got {convention!r}")


class _ScoresAndLabels(Metric):
    """Keeps every (document, label) score (float32) and label (bool): 5 bytes a cell.

    Subclasses share these state names, so a MetricCollection's compute groups store them once.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.add_state("scores", default=[], dist_reduce_fx="cat")
        self.add_state("labels", default=[], dist_reduce_fx="cat")

    def update(self, scores: Tensor, labels: Tensor) -> None:
        self.scores.append(scores.detach().float())
        self.labels.append(labels.detach().bool())

    def _cat(self) -> tuple[Tensor, Tensor]:
        scores, labels = self.scores, self.labels
        if isinstance(scores, Tensor):               # after a distributed sync the lists are one tensor
            return scores, labels
        if not scores:
            return torch.zeros(0, 0), torch.zeros(0, 0, dtype=torch.bool)
        return torch.cat(scores), torch.cat(labels)


class MicroAUROC(_ScoresAndLabels):
    """`micro_auroc` over the documents seen: every (document, label) cell, exact."""

    def compute(self) -> Tensor:
        return micro_auroc(*self._cat())


class MacroAUROC(_ScoresAndLabels):
    """`macro_auroc` over the documents seen: labels without both classes are skipped (CAML's macro)."""

    def compute(self) -> Tensor:
        scores, labels = self._cat()
        if scores.numel() == 0:
            return torch.tensor(float("nan"))
        return macro_auroc(scores, labels)


class MacroF1(Metric):
    """`macro_f1` at `score > threshold` from per-label counts accumulated over batches (O(labels) state)."""

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(self, num_labels: int, threshold: float = 0.5, convention: str = "caml", **kwargs):
        super().__init__(**kwargs)
        if convention not in MACRO_F1:
            raise ValueError(f"macro_f1 must be one of {', '.join(MACRO_F1)}, got {convention!r}")
        self.threshold, self.convention = threshold, convention
        for name in ("tp", "fp", "fn"):
            self.add_state(name, default=torch.zeros(num_labels, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, scores: Tensor, labels: Tensor) -> None:
        tp, fp, fn = label_counts(predict(scores.detach(), self.threshold), labels)
        self.tp += tp
        self.fp += fp
        self.fn += fn

    def compute(self) -> Tensor:
        return macro_f1(self.tp, self.fp, self.fn, self.convention)
