"""Which logged metrics changed definition, so a table can mark cells computed under an older one as stale.

Why: a `metrics.json` record outlives the code that wrote it, and a cell computed under an older definition
must not sit beside one computed now as if they measured the same thing. Every record carries the
`METRIC_VERSIONS` it was written under (`metric_versions`); a record without it predates versioning, i.e.
version 1 for every metric.

A name is the last part of a logged key, whatever the prefix and split (`test/2015A/auroc` -> `auroc`).
Bump a name's version when its definition changes and say here what changed:

- `auroc`, `auc_micro` 2: one exact ROC over every (document, label) cell, no label dropped (CAML; the
  model rows of `tasks/` and the reference rows of `data/*/reference*.py` alike). Version 1: the model rows'
  `auroc` was torchmetrics' AUROC binned at 200 thresholds; the reference rows' `auroc` and every
  `auc_micro` dropped the labels without both a positive and a negative document.
- `f1_macro` 2: CAML's harmonic mean of macro precision and macro recall by default (`macro_f1: caml`),
  predicting at score > threshold everywhere. Version 1: the mean of per-label F1, and the LEAM reference
  rows predicted at score >= threshold.

Pure Python (no torch): the table renderer imports it.
"""

from __future__ import annotations

METRIC_VERSIONS: dict[str, int] = {"auroc": 2, "auc_micro": 2, "f1_macro": 2}


def metric_name(key: str) -> str:
    """The versioned name of a logged key: its last path part."""
    return key.rsplit("/", 1)[-1]


def stale_metrics(record: dict) -> list[str]:
    """The keys of `record["metrics"]` computed under an older definition than the current one, sorted."""
    recorded = record.get("metric_versions") or {}
    stale = []
    for key in record.get("metrics") or {}:
        name = metric_name(key)
        if int(recorded.get(name, 1)) < METRIC_VERSIONS.get(name, 1):
            stale.append(key)
    return sorted(stale)
