"""Smoke test of the multi-hot LM table targets on a generated LANGREPR_DATA_DIR.

Each experiment's cell runs at tiny size through `train()` (what `make multihot-tableN` reaches through the CLI)
and its table renders; missing local data is a UserError naming the path. Table 2's cells are train cells
(KorQuAD fine-tuning of the pretraining cell of their loss, in both profiles).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langrepr import tables
from langrepr.errors import UserError
from langrepr.train import train
from tiny_data import write_korean_quick

TINY = ["dataset=korean_quick", "dataset.corpus.nsmc=60", "dataset.corpus.korquad=40", "dataset.corpus.klue=20",
        "dataset.token_lists.bpe_size=200", "dataset.token_lists.pos_joined=20", "dataset.token_lists.syllables=60",
        "dataset.token_lists.dictionary_size=80"]
TINY_MLM = ["model.net.hidden_size=16", "model.net.num_layers=1", "model.net.intermediate_size=32",
            "model.net.max_positions=32", "mlm.steps=2", "mlm.batch_size=4", "mlm.val_fraction=0.3"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_korean_quick(tmp_path_factory.mktemp("data"), reviews=80, korquad_version="KorQuAD_v1.0_dev")


@pytest.mark.parametrize("table,extra", [("multihot_table1", []), ("multihot_pretrain", TINY_MLM),
                                         ("multihot_table4", [])])
def test_table_cell_runs_and_renders_at_tiny_size(compose_cfg, tmp_path, shared_cache, data_dir, table, extra):
    cfg = compose_cfg(f"experiment={table}", "profile=quick", *TINY, *extra, f"paths.data_dir={data_dir}",
                      "pipeline.workers=1")
    out = tmp_path / "outputs"
    record = train(cfg, out / "quick" / table / "cell")
    assert record["status"] == "finished" and record["metrics"]
    if table != "multihot_pretrain":   # its rows match the `model=` choice, which only the CLI records
        result = tables.render(table, "quick", out)
        filled = [c["ours"] for row in result["rows"] for c in row["cells"].values() if c["ours"] is not None]
        assert filled, "no cell of the table was filled"
    else:
        assert record["metrics"]["val/masked"] > 0 and record["steps"] == 2 and record["tested_on"] == "last"
        assert (tmp_path / "run" / "checkpoints" / "last.ckpt").exists(), "no checkpoint to fine-tune from"


def record_top10(cell: Path) -> float:
    return json.loads((cell / "metrics.json").read_text())["metrics"]["val/mlm_top10"]


def test_missing_local_data_names_the_path(compose_cfg, tmp_path):
    cfg = compose_cfg("experiment=multihot_table1", "profile=quick", "dataset=korean_quick",
                      f"paths.data_dir={tmp_path / 'nowhere'}")
    with pytest.raises(Exception) as err:      # the CLI prints a UserError cause as one line, exit 2
        train(cfg, tmp_path / "cell")
    cause = err.value if isinstance(err.value, UserError) else err.value.__cause__
    assert isinstance(cause, UserError) and "does not exist" in str(cause)


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_table2_cell_fine_tunes_the_pretraining_cell_of_its_loss_on_korquad(compose_cfg, tmp_path, data_dir, profile):
    """Each profile's cell fine-tunes its loss's pretrained model on KorQuAD (here: the fixture, tiny sizes)."""
    common = (*TINY, *TINY_MLM, f"paths.data_dir={data_dir}", "pipeline.workers=1", "mlm.loss=bce")
    pretrain = tmp_path / "outputs" / profile / "multihot_pretrain" / "cell"
    record = train(compose_cfg("experiment=multihot_pretrain", f"profile={profile}", *common,
                               f"callbacks.last_checkpoint.dirpath={pretrain / 'checkpoints'}"), pretrain)
    assert record["status"] == "finished" and record["data"]["nsp"] is (profile == "full")   # full: as the paper
    assert 0 <= record["metrics"]["val/mlm_top10"] <= 100 and 0 <= record["metrics"]["val/unigram_top10"] <= 100
    cfg = compose_cfg("experiment=multihot_table2", f"profile={profile}", *common,
                      "dataset.korquad.data_dir=" + str(data_dir), "finetune.steps=2", "finetune.batch_size=4",
                      "finetune.stride=8", *(["+finetune.train_windows=with_answer"] if profile == "quick" else []))
    record = train(cfg, tmp_path / "cell")
    metrics = record["metrics"]
    assert record["status"] == "finished" and 0 <= metrics["test/em"] <= 100 and 0 <= metrics["test/f1"] <= 100
    assert record["data"]["test_questions"] > 0 and "bpe_syllable/divided/finetuned_em" in metrics
    windows = record["data"]["train_examples"], record["data"]["train_windows_all"]
    assert 0 < windows[0] <= windows[1] and (profile == "quick" or windows[0] == windows[1])   # with_answer / all
    assert metrics["pretrain/nsp"] == float(profile == "full") and metrics["val/mlm_ce"] > 0   # from its pretraining
    assert metrics["val/mlm_top10"] == record_top10(pretrain)                 # the rank columns, the same cell's
    assert (tmp_path / "cell" / "predictions.json").exists()
