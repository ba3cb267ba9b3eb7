"""Smoke test of the multi-hot LM table targets on a generated LANGREPR_DATA_DIR.

Each experiment's cell runs at tiny size through `train()` (what `make multihot-tableN` reaches through the CLI)
and its table renders; missing local data is a UserError naming the path. Table 2's cells are train cells
(pretraining in quick; in full, KorQuAD fine-tuning of the pretraining cell of their loss).
"""

from __future__ import annotations

import gzip
import json

import pytest

from langrepr import tables
from langrepr.errors import UserError
from langrepr.train import train

REVIEWS = ["영화가 정말 재미있었다", "배우들의 연기가 좋았다", "음악이 아름다운 영화였다", "스토리가 조금 지루했다",
           "감독의 다음 작품이 기대된다", "아르키메데스 이야기는 신기했다"]
TINY = ["dataset=korean_quick", "dataset.corpus.nsmc=60", "dataset.corpus.korquad=40", "dataset.corpus.klue=20",
        "dataset.token_lists.bpe_size=200", "dataset.token_lists.pos_joined=20", "dataset.token_lists.syllables=60",
        "dataset.token_lists.dictionary_size=80"]
TINY_MLM = ["model.net.hidden_size=16", "model.net.num_layers=1", "model.net.intermediate_size=32",
            "model.net.max_positions=32", "mlm.steps=2", "mlm.batch_size=4", "mlm.val_fraction=0.3"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    (root / "nsmc").mkdir()
    with gzip.open(root / "nsmc" / "nsmc_raw_reviews.tsv.gz", "wt") as fh:
        fh.write("review_id\tmovie_id\trating\tdate\treview\n")
        for i in range(80):
            fh.write(f"{i}\t{i % 7}\t{5 + i % 4}\t14.08.01\t{REVIEWS[i % 6]} {REVIEWS[(i * 5) % 6]}\n")
    (root / "korquad1").mkdir()
    articles = [{"title": f"문서{i}", "paragraphs": [{"context": f"문서{i}는 19{i}0년에 세워졌다. 그 뒤 서울로 옮겼다.", "qas": [
        {"id": f"q{i}", "question": "세워진 해는?", "answers": [{"text": f"19{i}0년", "answer_start": 5}]}]}]}
        for i in range(10)]
    (root / "korquad1" / "KorQuAD_v1.0_dev.json").write_text(
        json.dumps({"version": "KorQuAD_v1.0_dev", "data": articles}, ensure_ascii=False))
    (root / "klue").mkdir()
    (root / "klue" / "klue-nli-v1.1_dev.json").write_text(json.dumps(
        [{"premise": "숙소가 깨끗했습니다.", "hypothesis": "방이 더러웠습니다."}], ensure_ascii=False))
    (root / "klue" / "klue-sts-v1.1_dev.json").write_text(json.dumps(
        [{"sentence1": "호스트가 친절했습니다.", "sentence2": "주인이 친절했어요."}], ensure_ascii=False))
    return root


@pytest.mark.parametrize("table,extra", [("multihot_table1", []), ("multihot_table2", TINY_MLM),
                                         ("multihot_table4", [])])
def test_table_cell_runs_and_renders_at_tiny_size(compose_cfg, tmp_path, shared_cache, data_dir, table, extra):
    cfg = compose_cfg(f"experiment={table}", "profile=quick", *TINY, *extra, f"paths.data_dir={data_dir}",
                      "pipeline.workers=1")
    out = tmp_path / "outputs"
    record = train(cfg, out / "quick" / table / "cell")
    assert record["status"] == "finished" and record["metrics"]
    result = tables.render(table, "quick", out)
    filled = [c["ours"] for row in result["rows"] for c in row["cells"].values() if c["ours"] is not None]
    assert filled, "no cell of the table was filled"
    if table == "multihot_table2":
        assert record["metrics"]["val/masked"] > 0 and record["steps"] == 2 and record["tested_on"] == "last"
        assert (tmp_path / "run" / "checkpoints" / "last.ckpt").exists(), "no checkpoint to fine-tune from"


def test_missing_local_data_names_the_path(compose_cfg, tmp_path):
    cfg = compose_cfg("experiment=multihot_table1", "profile=quick", "dataset=korean_quick",
                      f"paths.data_dir={tmp_path / 'nowhere'}")
    with pytest.raises(Exception) as err:      # the CLI prints a UserError cause as one line, exit 2
        train(cfg, tmp_path / "cell")
    cause = err.value if isinstance(err.value, UserError) else err.value.__cause__
    assert isinstance(cause, UserError) and "does not exist" in str(cause)


def test_full_table2_cell_fine_tunes_the_pretraining_cell_of_its_loss_on_korquad(compose_cfg, tmp_path, data_dir):
    """The full profile's cell fine-tunes its loss's pretrained model on KorQuAD (here: the fixture, tiny sizes)."""
    common = (*TINY, *TINY_MLM, f"paths.data_dir={data_dir}", "pipeline.workers=1", "mlm.loss=sce")
    pretrain = tmp_path / "outputs" / "full" / "multihot_pretrain" / "cell"
    record = train(compose_cfg("experiment=multihot_pretrain", "profile=full", *common,
                               f"callbacks.last_checkpoint.dirpath={pretrain / 'checkpoints'}"), pretrain)
    assert record["status"] == "finished" and record["data"]["nsp"] is True   # as the paper pretrains
    cfg = compose_cfg("experiment=multihot_table2", "profile=full", *common, "dataset.korquad.data_dir=" + str(data_dir),
                      "finetune.steps=2", "finetune.batch_size=4", "finetune.stride=8")
    record = train(cfg, tmp_path / "cell")
    metrics = record["metrics"]
    assert record["status"] == "finished" and 0 <= metrics["test/em"] <= 100 and 0 <= metrics["test/f1"] <= 100
    assert record["data"]["test_questions"] > 0 and "bpe_syllable/divided/finetuned_em" in metrics
    assert metrics["pretrain/nsp"] == 1.0 and metrics["val/mlm_ce"] > 0     # the CE columns, from its pretraining
    assert (tmp_path / "cell" / "predictions.json").exists()
