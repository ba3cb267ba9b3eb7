"""Stand-in data for dry runs only: the full schema at the full label count where no local copy exists.

A dry run at full size (`make <table> PROFILE=full DRY=1`, conf/debug/dry.yaml) proves a full cell's wiring on a
CPU. Where the cell's data has no local copy, a reader that has a stand-in generates one in the data's own schema
at the paper's label count instead of stopping, so that the model is built with its full output layer and the
whole pipeline (export reader, label vocabulary, tokenizer, cache) runs. Its records keep `status: dry` (never a
result) and their `data` says `standin`. Stand-ins:

- USPTO (EWE Tables 3-5): a synthetic export (`langrepr.data.patents.synthetic`) with the paper's 664 CPC
  subclasses, each seen in train, so the First/Later relabeling gives its 1,328 labels; 1,000 training documents
  and 50 per test half (a dry run reads 2 micro-batches of each).

Readers without a stand-in still stop a dry cell with one line naming the missing data (`dry.missing_data`).
The switch is the environment variable `LANGREPR_DRY_STANDIN=1`, which only the dry overlay sets (for its Hydra
job, `hydra.job.env_set`): a real run never generates data.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "LANGREPR_DRY_STANDIN"
USPTO_SUBCLASSES = 664          # EWE §5.1: 664 subclasses, 1,328 labels after the First/Later relabeling
USPTO_SIZES = {"n_train": 1000, "n_test": 50}


def enabled() -> bool:
    """True inside a dry run (conf/debug/dry.yaml sets the variable for its jobs)."""
    return os.environ.get(ENV, "") == "1"


def uspto_export(root: str | Path) -> Path:
    """A full-schema synthetic USPTO export under `root` (generated once, deterministic); its folder."""
    from langrepr.data.patents.synthetic import generate

    out = Path(root) / "dry-standin-uspto"
    generate(out, n_subclasses=USPTO_SUBCLASSES, seed=0, cover_all=True, **USPTO_SIZES)
    return out
