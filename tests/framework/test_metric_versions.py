"""Metric versions: which cells of a metrics.json record were scored under an older metric definition."""

from __future__ import annotations

import subprocess
import sys

from langrepr.metric_versions import METRIC_VERSIONS, stale_metrics


def test_stale_metrics_reads_the_recorded_versions():
    old = {"metrics": {"test/2015A/auroc": 0.9, "test/2015A/f1": 0.5, "val/auroc": 0.8, "test/test/f1_macro": 0.3,
                       "test/test/auc_micro": 0.7, "test/test/auc_macro": 0.7}}
    assert stale_metrics(old) == ["test/2015A/auroc", "test/test/auc_micro", "test/test/f1_macro", "val/auroc"]
    assert stale_metrics({**old, "metric_versions": dict(METRIC_VERSIONS)}) == []
    partly = {**old, "metric_versions": {**METRIC_VERSIONS, "f1_macro": 1}}
    assert stale_metrics(partly) == ["test/test/f1_macro"]
    assert stale_metrics({"status": "failed"}) == []


def test_metric_versions_imports_no_torch():
    """The table renderer reads it, and the renderer imports nothing heavy."""
    run = subprocess.run([sys.executable, "-c", "import sys, langrepr.metric_versions; print(' '.join(sys.modules))"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "torch" not in run.stdout.split()
