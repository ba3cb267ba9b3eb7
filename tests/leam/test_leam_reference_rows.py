"""LEAM across the framework (issue item 6), at smoke size through the CLI a user runs:

- `make leam-nsmc`: LEAM and its baselines on the NSMC-style split of the multi-hot LM (a generated crawl);
- `model=leam_patents` on the EWE patent tables' quick settings (tiny synthetic patents), the row the EWE tables
  can add: multi-label LEAM with the label regulariser, the head bias started at the label prior.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from conftest import run_cli

POSITIVE, NEGATIVE = "최고 재밌다 감동 배우 연기", "최악 지루하다 돈 아깝다 시간"


def _crawl(root: Path) -> Path:
    (root / "nsmc").mkdir(parents=True)
    rows = []
    for i in range(60):
        words = (POSITIVE if i % 2 else NEGATIVE).split()
        rows.append(f"{i}\t1\t{10 if i % 2 else 2}\t14.08.01\t{words[i % 5]} {words[(i + 2) % 5]} 영화 {i}")
    with gzip.open(root / "nsmc" / "nsmc_raw_reviews.tsv.gz", "wt", encoding="utf-8") as fh:
        fh.write("review_id\tmovie_id\trating\tdate\treview\n" + "\n".join(rows) + "\n")
    return root


@pytest.mark.slow   # ~16 s of CLI start-up; the LEAM make-target path is covered by the Table 2 target test
def test_leam_nsmc_target_runs_and_renders_at_smoke_size(tmp_path):
    out, data = tmp_path / "outputs", _crawl(tmp_path / "data")
    run = run_cli("langrepr.train", "-m", "experiment=leam_nsmc", "profile=quick",
                  "model=leam,majority_class,bow_lr", "dataset=nsmc_text", "++hydra.sweeper.params.seed=1",
                  "debug=leam_smoke", "dataset.datamodule.source_options.per_class=24", f"paths.output_root={out}",
                  f"paths.cache_dir={tmp_path / 'cache'}", env={"LANGREPR_DATA_DIR": str(data), "OMP_NUM_THREADS": "1"},
                  timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    render = run_cli("langrepr.tables", "leam_nsmc", "--profile", "quick", "--outputs", str(out))
    assert render.returncode == 0, render.stderr[-3000:]
    rows = {row["key"]: row["cells"]["NSMC accuracy"]["ours"]
            for row in json.loads((out / "tables" / "leam_nsmc.quick.json").read_text())["rows"]}
    assert rows["Majority class"] < 60.0 and rows["Bag-of-words LR"] > 90.0   # the generated words separate
    assert rows["LEAM (paper eqs.)"] is not None
    assert rows["SWEM-avg"] is None and rows["CNN (Kim 2014)"] is None   # not in this smoke sweep: "not run"


@pytest.mark.slow   # ~20 s of CPU; the multi-label LEAM path itself is covered in-process by test_leam_data.py
def test_leam_runs_as_a_reference_row_on_the_ewe_patent_tables(tmp_path):
    out = tmp_path / "outputs"
    run = run_cli("langrepr.train", "experiment=ewe_table3", "profile=quick", "model=leam_patents", "dataset=synthetic",
                  "seed=1", "debug=leam_smoke", "hydra.mode=RUN", "run_id=leam_ewe_smoke",
                  "dataset.datamodule.n_train=200", "dataset.datamodule.n_test=60", "dataset.datamodule.n_subclasses=8",
                  f"paths.output_root={out}", f"paths.cache_dir={tmp_path / 'cache'}", env={"OMP_NUM_THREADS": "1"},
                  timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    (record,) = (out / "quick" / "leam_ewe_smoke").glob("*/metrics.json")
    metrics = json.loads(record.read_text())
    assert metrics["status"] == "finished"
    assert {"test/2015A/f1", "test/2015B/f1", "test/2015A/auc_macro"} <= set(metrics["metrics"])
    config = (record.parent / "config_resolved.yaml").read_text()
    assert "LabelRegularisedMultilabelTask" in config and "output_bias_init: prior" in config
