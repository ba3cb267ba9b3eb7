"""Stand-in data for dry runs only: the full schema at the full label count where no local copy exists.

A dry run at full size (`make <table> PROFILE=full DRY=1`, conf/debug/dry.yaml) proves a full cell's wiring on a
CPU. Where the cell's data has no local copy, a reader that has a stand-in generates one in the data's own schema
at the paper's label count instead of stopping, so that the model is built with its full output layer and the
whole pipeline (export reader, label vocabulary, tokenizer, cache) runs. Its records keep `status: dry` (never a
result) and their `data` says `standin`. Stand-ins:

- USPTO (EWE Tables 3-5): a synthetic export (`langrepr.data.patents.synthetic`) with the paper's 664 CPC
  subclasses, each seen in train, so the First/Later relabeling gives its 1,328 labels; 1,000 training documents
  and 50 per test half (a dry run reads 2 micro-batches of each).
- MIMIC-III, 50 codes (LEAM Table 5): the Mullenbach et al. files (train_50.csv, dev_50.csv, test_50.csv,
  TOP_50_CODES.csv) with 50 made-up ICD-9-style codes, each in train, and notes longer than the 305 words read.

Readers without a stand-in still stop a dry cell with one line naming the missing data (`dry.missing_data`).
The switch is the environment variable `LANGREPR_DRY_STANDIN=1`, which only the dry overlay sets (for its Hydra
job, `hydra.job.env_set`): a real run never generates data.
"""

from __future__ import annotations

import csv
import logging
import os
from pathlib import Path

import numpy as np

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


MIMIC_CODES = 50                # LEAM Table 5: the 50 most frequent ICD-9 codes
MIMIC_SIZES = {"train_50.csv": 400, "dev_50.csv": 40, "test_50.csv": 40}


def mimic50_files(root: str | Path, words: int = 320) -> Path:
    """The MIMIC-III 50-code files in the Mullenbach et al. format under `root` (written once, deterministic)."""
    out = Path(root) / "dry-standin-mimic50"
    if all((out / name).is_file() for name in [*MIMIC_SIZES, "TOP_50_CODES.csv"]):
        return out
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([0, 50])
    codes = [f"{100 + 7 * i}.{i % 10}" for i in range(MIMIC_CODES)]          # made-up ICD-9-style codes
    vocab = [f"w{k}" for k in range(3000)]
    row = 0
    for name, n in MIMIC_SIZES.items():
        tmp = out / f".{name}.tmp"
        with tmp.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(["SUBJECT_ID", "HADM_ID", "TEXT", "LABELS", "length"])
            for i in range(n):
                first = i % MIMIC_CODES if name == "train_50.csv" else int(rng.integers(MIMIC_CODES))
                labels = sorted({first, *rng.integers(MIMIC_CODES, size=int(rng.integers(0, 4))).tolist()})
                text = " ".join(vocab[k] for k in rng.integers(len(vocab), size=words))
                writer.writerow([row, row, text, ";".join(codes[c] for c in labels), words])
                row += 1
        os.replace(tmp, out / name)
    (out / "TOP_50_CODES.csv").write_text("\n".join(codes) + "\n", encoding="utf-8")
    return out
