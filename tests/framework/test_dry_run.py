"""Dry runs at full size (`make <table> PROFILE=full DRY=1`, conf/debug/dry.yaml; issue 23 item 1).

One dry cell per paper, the smallest: it composes the full cell, builds the model at the paper's size, reads its
data through the full pipeline from the local copies under LANGREPR_DATA_DIR, runs 2 optimiser steps and a
validation and test pass on micro-batches of 2, and writes `status: dry` under outputs/dry/. A cell whose data has
no local copy must stop with one line naming it (status dry, `dry.missing_data`) and the sweep go on (exit 0).
A test is skipped, with the reason, where LANGREPR_DATA_DIR lacks the data it needs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run_cli
from langrepr.confpaths import option_files

CONF = ROOT / "conf"
DATA = Path(os.environ["LANGREPR_DATA_DIR"]) if os.environ.get("LANGREPR_DATA_DIR") else None
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}   # no hub in tests


def needs(*parts: str) -> Path:
    if DATA is None:
        pytest.skip("LANGREPR_DATA_DIR is not set: the dry cell reads a local copy of its data")
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: this dry cell reads it")
    return path


def dry_cell(tmp_path: Path, *overrides: str, timeout: int = 240) -> list[dict]:
    """Run one dry cell (a one-seed sweep); its records, each with its folder."""
    out = tmp_path / "outputs"
    run = run_cli("langrepr.train", "-m", "profile=full", "debug=dry", "seeds=1", *overrides,
                  f"paths.output_root={out}", f"paths.cache_dir={tmp_path / 'cache'}", env=OFFLINE, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    paths = sorted((out / "dry").rglob("metrics.json"))
    assert paths, f"no dry record under {out / 'dry'}: a dry run must write under outputs/dry/"
    records = [dict(json.loads(p.read_text()), dir=p.parent) for p in paths]
    for record in records:
        assert record["status"] == "dry", record
        assert not (record["dir"] / "checkpoints").exists() or not any((record["dir"] / "checkpoints").iterdir())
    return records


def ran_two_steps(record: dict) -> None:
    assert not record.get("dry"), record.get("dry")
    assert record["steps"] == 2, record
    assert any(k.startswith("val/") for k in record["metrics"]) and any(k.startswith("test/") for k in record["metrics"])
    cfg = yaml.safe_load((record["dir"] / "config_resolved.yaml").read_text())
    assert cfg["dataset"]["datamodule"]["batch_size"] == 2


# ---------------------------------------------------------------- a dry record is never a result

def test_a_dry_record_never_counts_as_finished(tmp_path):
    from langrepr import cell, tables

    run = tmp_path / "dry" / "t" / "model=x,seed=1"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"status": "dry", "fingerprint": "f", "seed": 1}))
    assert tables.load_runs(tmp_path / "dry" / "t") == []                     # a real render ignores it
    assert len(tables.load_runs(tmp_path / "dry" / "t", tables.DRY)) == 1     # the dry render reads it
    assert not cell.reusable(cell.read_record(run), run, "f", set(), None)    # a real run never reuses it


def test_the_dry_overlay_writes_where_no_real_run_does():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=["experiment=ewe_table3", "profile=full", "debug=dry"])
    assert cfg.profile_name == "dry" and cfg.dry is True
    assert cfg.trainer.max_steps == 2 and cfg.trainer.limit_val_batches == 2 and cfg.trainer.limit_test_batches == 2
    assert cfg.callbacks.last_checkpoint is None and cfg.trainer.enable_checkpointing is False
    assert cfg.model.net.hidden_size == 768        # the paper's size, not the smoke widths


# ---------------------------------------------------------------- one dry cell per paper

def test_tensorcoder_table3_dry_cell_at_full_size_renders_dry(tmp_path):
    needs("multi30k", "train.en.gz")
    (record,) = dry_cell(tmp_path, "experiment=tensorcoder_table3", "dataset=multi30k", "model=tensorcoder_1conv_nmt")
    ran_two_steps(record)
    assert record["params"]["total"] > 10_000_000          # the paper's d_model 512 NMT model (13.9M), not a smoke one
    render = run_cli("langrepr.tables", "tensorcoder_table3", "--dry", "--outputs", str(tmp_path / "outputs"))
    assert render.returncode == 0, render.stderr[-3000:]
    md = (tmp_path / "outputs" / "tables" / "tensorcoder_table3.dry.md").read_text()
    assert md.startswith("# DRY RUN")
    row = next(line for line in md.splitlines() if line.startswith("| TensorCoder-1conv |"))
    assert "dry ✓" in row and not any(ch.isdigit() for ch in row.split("|")[2].split("/")[0])
    assert not (tmp_path / "outputs" / "tables" / "tensorcoder_table3.md").exists()   # the real table is untouched


def test_bitcipher_figure4_dry_cell_on_ptb(tmp_path):
    needs("ptb", "ptb.train.txt")
    (record,) = dry_cell(tmp_path, "experiment=bitcipher_figure4", "dataset=ptb_causal", "lm_init=cold", "seed=1")
    ran_two_steps(record)


def test_leam_table2_dry_cell_on_ag_news(tmp_path):
    needs("agnews")
    (record,) = dry_cell(tmp_path, "experiment=leam_table2", "dataset=ag_news", "model=leam")
    if (DATA / "agnews" / "train.csv").exists() and not record.get("dry"):
        ran_two_steps(record)
    else:   # the local copy holds the test split only: the full cell names the data it could not read
        assert "ag_news" in record["dry"]["missing_data"], record["dry"]


def test_ewe_table3_dry_cell_without_the_export_reads_the_full_schema_stand_in(tmp_path):
    """The full USPTO export is not in CI (a BigQuery export): the dry cell reads the generated stand-in in the
    export's schema at the paper's 1,328 labels (langrepr.data.standin), and its record says so."""
    if os.environ.get("LANGREPR_USPTO_DIR"):
        pytest.skip("LANGREPR_USPTO_DIR is set: the full export is present (the slow test runs it)")
    (record,) = dry_cell(tmp_path, "experiment=ewe_table3", "model=albert_ewe")
    ran_two_steps(record)
    assert record["data"]["num_labels"] == 1328 and "stand-in" in record["data"]["standin"]
    assert record["data"]["rows"]["2015A"] == 50          # test_subsample asks 14,500: the stand-in has 50


@pytest.mark.slow   # ~20 s; an EWE Table 3 dry cell at full size also runs in the full-schema stand-in test above
def test_ewe_table3_dry_cell_on_the_synthetic_stand_in_at_full_size(tmp_path):
    """The wiring of a full EWE cell (ALBERT_EWE, the smallest) on the generated synthetic patents (no data needed)."""
    (record,) = dry_cell(tmp_path, "experiment=ewe_table3", "dataset=synthetic", "model=albert_ewe")
    ran_two_steps(record)
    assert record["params"]["total"] > 5_000_000     # the paper's ALBERT_EWE (~8M), not the smoke widths


def test_multihot_pretrain_dry_cell_names_the_missing_corpus(tmp_path):
    if DATA is not None and (DATA / "nikl_modu" / "newspaper.txt").exists():
        pytest.skip("the MODU newspaper corpus is present: the slow test runs its dry cells")
    (record,) = dry_cell(tmp_path, "experiment=multihot_pretrain", "model=multihot_small",
                         "pipeline.token_list=bpe_syllable", "seed=1")
    assert "newspaper.txt" in record["dry"]["missing_data"]


# ---------------------------------------------------------------- every full cell of every table

TABLES = sorted(t for t, p in option_files("experiment").items()
                if "table:" in p.read_text() or t.startswith("bitcipher_figure"))


@pytest.mark.slow
@pytest.mark.parametrize("table", TABLES)
def test_every_full_cell_of_every_table_runs_dry(tmp_path, table):
    out = tmp_path / "outputs"
    run = run_cli("langrepr.train", "-m", f"experiment={table}", "profile=full", "debug=dry",
                  f"paths.output_root={out}", f"paths.cache_dir={tmp_path / 'cache'}", env=OFFLINE, timeout=3600)
    assert run.returncode == 0, run.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in (out / "dry").rglob("metrics.json")]
    assert records and all(r["status"] == "dry" for r in records), [r.get("error") for r in records]
    render = run_cli("langrepr.tables", table, "--dry", "--outputs", str(out))
    assert render.returncode == 0, render.stderr[-3000:]
