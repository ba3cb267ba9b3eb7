"""EWE Table 2 as a run: label statistics of a patent export, flattened into `metrics.json` keys."""

from __future__ import annotations

from typing import Any

from langrepr.data.patents.synthetic import generate
from langrepr.data.patents.uspto import export_table2_stats


def table2_metrics(data_dir: str, coverage: float = 0.9, synthetic: dict[str, Any] | None = None) -> dict:
    """`{split}/samples` and `{split}/{raw|first_later}/{total|majors}` for every split of the export.

    `synthetic` (generator arguments) fills `data_dir` with synthetic patents first, for the quick profile.
    """
    if synthetic is not None:
        generate(data_dir, **synthetic)
    stats = export_table2_stats(data_dir, coverage=coverage)
    metrics: dict[str, float] = {"synthetic": float(stats["synthetic"])}
    for split, values in stats["splits"].items():
        metrics[f"{split}/samples"] = float(values["samples"])
        for labeling in ("raw", "first_later"):
            for key in ("total", "majors", "num_labels", "num_majors"):
                metrics[f"{split}/{labeling}/{key}"] = float(values[labeling][key])
    return metrics
