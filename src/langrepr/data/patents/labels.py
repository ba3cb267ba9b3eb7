"""Patent labels: subclass-level CPC codes, the First/Later relabeling and Table 2 statistics.

EWE paper (Kim & Kim, arXiv 2302.13475) §5.3: the first-listed CPC symbol names the invention
and later ones add information, so [G06Q, G06Q, A01B] and [A01B, G06Q, A01B] must differ. Each
subclass gets a position prefix: the primary code's subclass becomes ``First-X``, every other
code's subclass ``Later-X`` (a subclass can be both, as A01B in the second example), and
duplicates collapse after prefixing. ``raw`` is the older labeling (plain subclasses) that
§3.3 criticises, kept for Table 2 and for users who want it.

The primary code is the cpc element with ``first = true`` (the schema's "first/primary" flag);
if several carry it the earliest in array order wins, if none does the array's element 0 is
used (METHODS §1.6 fallback).

Vocabulary: fixed from train. Relabeled, it holds ``First-X`` *and* ``Later-X`` for every
subclass X seen in train, whichever positions X actually took, so 664 subclasses give exactly
the paper's 1,328 labels. Labels are sorted (``First-*`` before ``Later-*``), which reproduces
the paper's placeholder [First-A01B, First-G06Q, Later-A01B, Later-G06Q].
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

LABELINGS = ("first_later", "raw")
# A document's CPC list as read from parquet: [{"code": "A01N53/12", "first": bool, ...}, ...].
# Plain strings are accepted too and mean "listed in this order, element 0 is primary".
CpcList = Sequence[Mapping[str, Any] | str]


def subclass(code: str) -> str:
    """Subclass slice of a CPC code (section+class+subclass), e.g. 'A01N53/12' -> 'A01N' (paper §5.1)."""
    return code.strip().upper()[:4]


def _ordered(cpc: CpcList) -> list[tuple[str, bool]]:
    """(subclass, is_primary) per code in array order, with exactly one primary."""
    items = [(c, False) if isinstance(c, str) else (c["code"], bool(c.get("first"))) for c in cpc]
    primary = next((i for i, (_, first) in enumerate(items) if first), 0)
    return [(subclass(code), i == primary) for i, (code, _) in enumerate(items)]


def document_labels(cpc: CpcList, labeling: str = "first_later") -> list[str]:
    """Sorted distinct labels of one document.

    >>> document_labels(["G06Q", "G06Q", "A01B"])
    ['First-G06Q', 'Later-A01B', 'Later-G06Q']
    """
    if labeling not in LABELINGS:
        raise ValueError(f"labeling must be one of {LABELINGS}, got {labeling!r}")
    ordered = _ordered(cpc)
    if labeling == "raw":
        return sorted({sc for sc, _ in ordered})
    return sorted({("First-" if primary else "Later-") + sc for sc, primary in ordered})


@dataclass(frozen=True)
class LabelVocabulary:
    """The fixed label order of a run (multi-hot column i = ``labels[i]``)."""

    labels: tuple[str, ...]
    labeling: str

    @classmethod
    def fit(cls, train_cpc: Iterable[CpcList], labeling: str = "first_later") -> LabelVocabulary:
        """Vocabulary from the training documents (both prefixes per seen subclass when relabeled)."""
        if labeling not in LABELINGS:
            raise ValueError(f"labeling must be one of {LABELINGS}, got {labeling!r}")
        subclasses = sorted({sc for cpc in train_cpc for sc, _ in _ordered(cpc)})
        if labeling == "raw":
            return cls(tuple(subclasses), labeling)
        return cls(tuple(sorted([f"First-{s}" for s in subclasses] + [f"Later-{s}" for s in subclasses])),
                   labeling)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def index(self) -> dict[str, int]:
        """Label -> column (built on demand; the dataclass stays hashable and frozen)."""
        return {label: i for i, label in enumerate(self.labels)}

    def encode(self, cpc_lists: Iterable[CpcList]) -> list[list[int]]:
        """Column indices per document; labels unseen in train are dropped (they cannot be predicted)."""
        index = self.index
        return [[index[label] for label in document_labels(cpc, self.labeling) if label in index]
                for cpc in cpc_lists]

    def multi_hot(self, cpc_lists: Iterable[CpcList]) -> np.ndarray:
        """(N, L) float32 multi-hot matrix, as the paper one-hot encodes label sets."""
        rows = self.encode(cpc_lists)
        out = np.zeros((len(rows), len(self)), dtype=np.float32)
        for i, cols in enumerate(rows):
            out[i, cols] = 1.0
        return out

    def save(self, path: str | Path) -> Path:
        """Write as JSON so the run that trained on it can be evaluated with the same columns."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"labeling": self.labeling, "labels": list(self.labels)}, indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> LabelVocabulary:
        """Read a vocabulary written by `save`."""
        data = json.loads(Path(path).read_text())
        return cls(tuple(data["labels"]), data["labeling"])


def label_counts(vocab: LabelVocabulary, cpc_lists: Iterable[CpcList]) -> np.ndarray:
    """Documents per label (length len(vocab), zeros included)."""
    counts = np.zeros(len(vocab), dtype=np.int64)
    for cols in vocab.encode(cpc_lists):
        counts[cols] += 1
    return counts


def major_labels(counts: np.ndarray, coverage: float = 0.9) -> np.ndarray:
    """Indices of the most frequent labels that together cover ``coverage`` of all label occurrences.

    Table 2's "Majors": the smallest head of the frequency-sorted labels whose cumulative count
    reaches the coverage (ties broken by column order, so the set is deterministic).
    """
    order = np.argsort(-counts, kind="stable")
    total = counts.sum()
    if total == 0:
        return order[:0]
    cum = np.cumsum(counts[order])
    k = int(np.searchsorted(cum, coverage * total - 1e-9)) + 1
    return order[:k]


def table2_stats(splits: Mapping[str, Sequence[CpcList]], train_split: str = "train",
                 coverage: float = 0.9) -> dict[str, Any]:
    """Table 2: per split, samples and the std of label counts over all labels and over Majors.

    The vocabulary and the Majors set come from ``train_split`` (the caption: "codes that
    dominate over 90% of the entire labels in training examples") and are applied to every
    split. Std is the population std (ddof=0) of documents-per-label, zeros included.

    Returns:
        {split: {"samples": n, "raw": {"total", "majors", "num_labels", "num_majors"},
                 "first_later": {...}}}
    """
    out: dict[str, Any] = {name: {"samples": len(docs)} for name, docs in splits.items()}
    for labeling in ("raw", "first_later"):
        vocab = LabelVocabulary.fit(splits[train_split], labeling)
        majors = major_labels(label_counts(vocab, splits[train_split]), coverage)
        for name, docs in splits.items():
            counts = label_counts(vocab, docs)
            out[name][labeling] = {
                "total": float(counts.std()) if len(counts) else 0.0,
                "majors": float(counts[majors].std()) if len(majors) else 0.0,
                "num_labels": len(vocab),
                "num_majors": int(len(majors)),
            }
    return out
