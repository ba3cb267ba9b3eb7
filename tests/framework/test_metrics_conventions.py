"""One definition per multi-label metric for model rows and reference rows (CAML's conventions), by hand.

The example: 3 documents x 3 labels, label 2 never positive. Scores are multiples of 1/16 so float32 and
float64 agree exactly and the threshold 0.5 is hit exactly by cell (2, 2).

    scores          labels
    .875 .125 .9375   1 0 0
    .25  .75  .75     0 1 0
    .625 .375 .5      0 0 0

Micro AUROC over all 9 cells: positives .875 and .75 against the 7 negatives; .875 beats 6 (loses to .9375),
.75 beats 5, ties 1 (.75), loses 1: (6 + 5.5) / 14 = 23/28. Dropping label 2 (the old reference rows and the
LEAM task) leaves 4 negatives, all lower: 1.0.

Predicted at > 0.5 (cell (2, 2) = 0.5 is not): label 0 TP 1 FP 1 FN 0; label 1 TP 1; label 2 FP 2.
Micro F1 = 2*2 / (2*2 + 3) = 4/7 (at >= 0.5 one more FP: 4/8 = 1/2).
Per-label F1 (2/3, 1, 0) -> per_label_mean = 5/9. Macro P = (1/2 + 1 + 0)/3 = 1/2, macro R = (1 + 1 + 0)/3 = 2/3
-> caml = 2 * 1/2 * 2/3 / (1/2 + 2/3) = 4/7.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from langrepr import metrics
from langrepr.pipelines.references import classification as leam_reference
from langrepr.pipelines.references import patents as patent_references
from langrepr.tasks.classification import MultilabelClassificationTask
from langrepr.tasks.label_embedding import LabelRegularisedMultilabelTask

SCORES = np.array([[0.875, 0.125, 0.9375], [0.25, 0.75, 0.75], [0.625, 0.375, 0.5]])
TRUTH = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0]])
MICRO_AUROC = 23 / 28
DROPPING_AUROC = 1.0
MICRO_F1 = 4 / 7
CAML_MACRO_F1, PER_LABEL_MACRO_F1 = 4 / 7, 5 / 9


def _task_values(task) -> dict[str, float]:
    collection = task.make_metrics()
    collection.update(torch.tensor(SCORES, dtype=torch.float32), torch.tensor(TRUTH))
    return {k: float(v) for k, v in collection.compute().items()}


def _multilabel_task(cls=MultilabelClassificationTask, **kw):
    return cls(torch.nn.Identity(), partial(torch.optim.SGD), num_labels=3, threshold=0.5, **kw)


def test_the_example_separates_the_two_micro_definitions():
    present = (TRUTH.sum(0) > 0) & (TRUTH.sum(0) < len(TRUTH))
    assert roc_auc_score(TRUTH.ravel(), SCORES.ravel()) == pytest.approx(MICRO_AUROC)
    assert roc_auc_score(TRUTH[:, present], SCORES[:, present], average="micro") == pytest.approx(DROPPING_AUROC)


def test_micro_auroc_scores_every_cell_in_all_four_places():
    assert float(metrics.micro_auroc(SCORES, TRUTH)) == pytest.approx(MICRO_AUROC, abs=1e-12)
    model = _task_values(_multilabel_task())
    assert model["auroc"] == pytest.approx(MICRO_AUROC, abs=1e-7)
    leam = _task_values(_multilabel_task(LabelRegularisedMultilabelTask))
    assert leam["auc_micro"] == pytest.approx(MICRO_AUROC, abs=1e-7) and leam["auroc"] == leam["auc_micro"]
    labels = [np.flatnonzero(row).tolist() for row in TRUTH]
    ref = leam_reference.multilabel_scores(SCORES, labels, 3, threshold=0.5)
    assert ref["test/test/auc_micro"] == pytest.approx(MICRO_AUROC, abs=1e-12)
    patent = patent_references.multilabel_scores(TRUTH, SCORES, threshold=0.5)
    assert patent["auroc"] == pytest.approx(MICRO_AUROC, abs=1e-12)
    assert MICRO_AUROC != pytest.approx(DROPPING_AUROC)


def test_macro_auroc_skips_labels_without_both_classes():
    """CAML's macro: label 2 (no positive) is left out; labels 0 and 1 rank perfectly."""
    present = [0, 1]
    expected = roc_auc_score(TRUTH[:, present], SCORES[:, present], average="macro")
    assert expected == 1.0
    assert float(metrics.macro_auroc(SCORES, TRUTH)) == expected
    assert _task_values(_multilabel_task(LabelRegularisedMultilabelTask))["auc_macro"] == expected
    labels = [np.flatnonzero(row).tolist() for row in TRUTH]
    assert leam_reference.multilabel_scores(SCORES, labels, 3)["test/test/auc_macro"] == expected
    assert np.isnan(float(metrics.macro_auroc(SCORES, np.zeros_like(TRUTH))))
    assert np.isnan(float(metrics.micro_auroc(SCORES, np.zeros_like(TRUTH))))


def test_micro_auroc_equals_sklearn_on_flattened_arrays_with_ties():
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        for _ in range(20):
            scores = (rng.integers(0, 9, size=(40, 7)) / 8).astype(dtype)    # many ties
            truth = rng.random((40, 7)) < 0.2
            truth[:, 3] = False                                              # a label with no positive
            expected = roc_auc_score(truth.ravel(), scores.ravel())
            assert float(metrics.micro_auroc(scores, truth)) == pytest.approx(expected, abs=1e-12)
            assert float(metrics.micro_auroc(torch.from_numpy(scores), torch.from_numpy(truth))) == pytest.approx(
                expected, abs=1e-12)


def test_threshold_is_strict_everywhere():
    """Cell (2, 2) scores exactly the threshold 0.5: not predicted (`>=` would make micro F1 1/2)."""
    labels = [np.flatnonzero(row).tolist() for row in TRUTH]
    assert leam_reference.multilabel_scores(SCORES, labels, 3, threshold=0.5)["test/test/f1"] == pytest.approx(MICRO_F1)
    assert patent_references.multilabel_scores(TRUTH, SCORES, threshold=0.5)["f1"] == pytest.approx(MICRO_F1)
    assert _task_values(_multilabel_task())["f1"] == pytest.approx(MICRO_F1)
    assert not bool(metrics.predict(np.array([0.5]), 0.5)[0]) and bool(metrics.predict(np.array([0.5 + 1e-9]), 0.5)[0])


def test_macro_f1_conventions_by_hand():
    tp, fp, fn = metrics.label_counts(metrics.predict(SCORES, 0.5), TRUTH)
    assert (tp.tolist(), fp.tolist(), fn.tolist()) == ([1, 1, 0], [1, 0, 2], [0, 0, 0])
    assert float(metrics.macro_f1(tp, fp, fn)) == pytest.approx(CAML_MACRO_F1)                 # the default
    assert float(metrics.macro_f1(tp, fp, fn, "per_label_mean")) == pytest.approx(PER_LABEL_MACRO_F1)
    assert _task_values(_multilabel_task(LabelRegularisedMultilabelTask))["f1_macro"] == pytest.approx(CAML_MACRO_F1)
    per_label = _multilabel_task(LabelRegularisedMultilabelTask, macro_f1="per_label_mean")
    assert _task_values(per_label)["f1_macro"] == pytest.approx(PER_LABEL_MACRO_F1)
    labels = [np.flatnonzero(row).tolist() for row in TRUTH]
    ref = leam_reference.multilabel_scores
    assert ref(SCORES, labels, 3, 0.5)["test/test/f1_macro"] == pytest.approx(CAML_MACRO_F1)
    assert ref(SCORES, labels, 3, 0.5, macro_f1="per_label_mean")["test/test/f1_macro"] == pytest.approx(
        PER_LABEL_MACRO_F1)
    with pytest.raises(ValueError, match="macro_f1"):
        _multilabel_task(LabelRegularisedMultilabelTask, macro_f1="weighted")
    with pytest.raises(Exception, match="macro_f1"):
        ref(SCORES, labels, 3, 0.5, macro_f1="weighted")


def test_auroc_metrics_of_the_leam_task_store_the_scores_once():
    """auroc, auc_micro and auc_macro keep the same (scores, labels) state: one compute group, one copy."""
    collection = _multilabel_task(LabelRegularisedMultilabelTask).make_metrics()
    collection.update(torch.tensor(SCORES, dtype=torch.float32), torch.tensor(TRUTH))
    groups = [set(g) for g in collection.compute_groups.values()]
    assert {"auroc", "auc_micro", "auc_macro"} in groups


MEMORY_SCRIPT = r"""
import json, resource, sys
from functools import partial
import numpy as np, torch
from sklearn.metrics import roc_auc_score
from langrepr.tasks.classification import MultilabelClassificationTask

torch.use_deterministic_algorithms(True)          # trainer.deterministic=true, where the binned AUROC blew up
docs, labels, batch = int(sys.argv[1]), int(sys.argv[2]), 32
gen = torch.Generator().manual_seed(0)
scores = torch.rand(docs, labels, generator=gen)
truth = torch.zeros(docs, labels, dtype=torch.bool)
truth.scatter_(1, torch.randint(0, labels, (docs, 3), generator=gen), True)
metric = MultilabelClassificationTask(torch.nn.Identity(), partial(torch.optim.SGD), num_labels=labels,
                                      threshold=0.3).make_metrics()["auroc"]
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
before = peak()
for i in range(0, docs, batch):
    metric.update(scores[i:i + batch], truth[i:i + batch])
value = float(metric.compute())
growth = peak() - before
expected = roc_auc_score(truth.numpy().ravel(), scores.numpy().ravel())
print(json.dumps({"growth": growth, "value": value, "expected": expected}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux")
def test_micro_auroc_memory_is_linear_in_cells_at_the_full_label_count():
    """1,328 labels x 3,000 documents (4M cells): the peak RSS added by update + compute stays far below one
    thresholds x cells comparison matrix (200 x 4M bytes = 797 MB even as bool)."""
    docs, labels = 3000, 1328
    run = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(docs), str(labels)], capture_output=True,
                         text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["value"] == pytest.approx(out["expected"], abs=1e-9)
    dense = 200 * docs * labels
    assert out["growth"] < dense / 8, f"peak RSS grew {out['growth'] / 2**20:.0f} MiB"
