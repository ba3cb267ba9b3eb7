"""Smoke test of `make multihot-table3` / `make multihot-table5` on a generated LANGREPR_DATA_DIR.

One tiny pretraining cell (multihot_pretrain), then a KorQuAD, an NER, an SRL and an NSMC fine-tuning cell through
`train()` (what the make targets reach through the CLI): each finds the pretraining cell by config and fine-tunes
its checkpoint; both tables render, the SRL cell from a MODU-format fixture. A cell without SRL data fails with
one line naming the file, and a cell whose pretraining has not run with one line naming the make target.
"""

from __future__ import annotations

import json
import math

import pytest

from langrepr import tables
from langrepr.errors import UserError
from langrepr.train import train
from tiny_data import write_korean_downstream

CORPUS = ["dataset=korean_quick", "dataset.corpus.nsmc=40", "dataset.corpus.korquad=0", "dataset.corpus.klue=10",
          "dataset.token_lists.bpe_size=150", "dataset.token_lists.pos_joined=20", "dataset.token_lists.syllables=60",
          "dataset.token_lists.dictionary_size=60", "model.net.hidden_size=16", "model.net.num_layers=1",
          "model.net.intermediate_size=32", "model.net.max_positions=32", "mlm.steps=2", "mlm.batch_size=4",
          "mlm.val_fraction=0.3", "pipeline.workers=1", "pipeline.token_list=bpe_syllable"]
TINY = [*CORPUS, "downstream_data.nsmc.per_class=6", "downstream_data.ner.test_fraction=0.5",
        "downstream_data.srl.test_fraction=0.5",
        *(f"finetune.{t}.{k}={v}" for t in ("ner", "srl", "nsmc", "korquad") for k, v in (("steps", 2),
                                                                                           ("batch_size", 4),
                                                                                           ("warmup_steps", 0))),
        "finetune.korquad.stride=8"]
CHOICES = ({"dataset": "korean_quick", "model": "multihot_small"}, [])   # what a CLI run records (rows match `model`)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_korean_downstream(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, data_dir):
    """The outputs folder holding one finished tiny pretraining cell (quick profile, BPE + syllable, seed 1)."""
    from hydra import compose, initialize_config_dir

    from conftest import CONF_DIR

    out = tmp_path_factory.mktemp("outputs")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=["experiment=multihot_pretrain", "profile=quick", *CORPUS,
                                          f"paths.data_dir={data_dir}", f"paths.output_root={out}",
                                          f"paths.output_dir={out / 'quick' / 'multihot_pretrain' / 'cell'}",
                                          f"paths.cache_dir={out / 'cache'}"])
    record = train(cfg, out / "quick" / "multihot_pretrain" / "cell")
    assert record["status"] == "finished" and record["metrics"]["val/masked"] > 0
    return out


def finetune_cfg(compose_cfg, out, data_dir, *extra):
    # compose_cfg points paths.output_root at this test's own folder: name the pretraining run's folder directly
    return compose_cfg("experiment=multihot_table3", "profile=quick", *TINY, f"paths.data_dir={data_dir}",
                       f"pretrained.root={out / 'quick' / 'multihot_pretrain'}", *extra)


def test_table3_and_table5_cells_run_and_render(compose_cfg, data_dir, pretrained, monkeypatch):
    out = pretrained
    monkeypatch.setattr("langrepr.train.hydra_choices", lambda: CHOICES)
    for task in ("korquad", "ner", "srl", "nsmc"):
        cfg = finetune_cfg(compose_cfg, out, data_dir, f"downstream={task}",
                           f"downstream_data.srl.path={data_dir / 'srl.json'}")
        record = train(cfg, out / "quick" / "multihot_table3" / f"downstream={task}")
        metrics = record["metrics"]
        assert record["status"] == "finished", task
        assert all(math.isfinite(v) for v in metrics.values()), task
        assert record["data"]["pretrained_cell"].endswith("multihot_pretrain/cell") and record["steps"] == 2
        assert metrics["val/mlm_ce"] > 0 and metrics["pretrain/steps"] == 2       # the pretraining it starts from
        if task == "korquad":
            assert 0 <= metrics["test/em"] <= 100 and 0 <= metrics["test/f1"] <= 100
            assert record["data"]["test_questions"] > 0   # baseline/{em,f1}: the first-sentence reference row
            assert 0 <= metrics["baseline/em"] <= 100 and 0 <= metrics["baseline/f1"] <= 100
        elif task == "nsmc":
            assert 0 <= metrics["test/accuracy"] <= 100 and 0 < metrics["reference/majority/accuracy"] < 100
            assert record["data"]["train_reviews"] + record["data"]["test_reviews"] == 12   # 6 per class
        else:
            assert 0 <= metrics["test/micro_f1"] <= 100 and metrics["reference/all_o/micro_f1"] == 0.0
            assert "reference/majority/macro_f1" in metrics
        assert (out / "quick" / "multihot_table3" / f"downstream={task}" / "predictions.json").exists()
    table3 = tables.render("multihot_table3", "quick", out)
    filled = {name for row in table3["rows"] for name, c in row["cells"].items() if c["ours"] is not None}
    assert {"KorQuAD EM", "KorQuAD F1", "NER macro F1", "SRL micro F1", "NSMC accuracy"} <= filled
    table5 = tables.render("multihot_table5", "quick", out)
    assert table5["rows"][1]["cells"]["PER F1"]["ours"] is not None          # the BPE + syllable row


def test_missing_srl_data_is_one_line_before_the_pretraining_lookup(compose_cfg, tmp_path, data_dir):
    cfg = finetune_cfg(compose_cfg, tmp_path / "outputs", data_dir, "downstream=srl")
    with pytest.raises(Exception) as err:      # the CLI prints a UserError cause as one line, exit 2
        train(cfg, tmp_path / "cell")
    cause = err.value if isinstance(err.value, UserError) else err.value.__cause__
    assert isinstance(cause, UserError) and "srl.json does not exist" in str(cause)


def test_a_cell_whose_pretraining_has_not_run_names_the_make_target(compose_cfg, tmp_path, data_dir, pretrained):
    cfg = finetune_cfg(compose_cfg, pretrained, data_dir, "downstream=ner", "seed=2")   # seed 2 was not pretrained
    with pytest.raises(UserError, match=r"no finished pretraining cell under .*multihot_pretrain matches this "
                                        r"fine-tuning cell \(token list bpe_syllable, .*seed 2\): run `make "
                                        r"multihot-table3 PROFILE=quick` first"):
        train(cfg, tmp_path / "cell")
    cfg = finetune_cfg(compose_cfg, pretrained, data_dir, "downstream=ner", "mlm.steps=3")   # another recipe
    with pytest.raises(UserError, match="no finished pretraining cell"):
        train(cfg, tmp_path / "cell2")


def test_a_fine_tuning_cell_on_two_ddp_processes_scores_the_whole_test_part(compose_cfg, tmp_path, data_dir,
                                                                              pretrained):
    """trainer=ddp reaches the paper: each process predicts its share of the test part, the task gathers them."""
    one = train(finetune_cfg(compose_cfg, pretrained, data_dir, "downstream=ner"), tmp_path / "one")
    two = train(finetune_cfg(compose_cfg, pretrained, data_dir, "downstream=ner", "trainer=ddp",
                             "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp_fork"),
                tmp_path / "two")
    assert two["status"] == "finished" and two["scale_out"]["world_size"] == 2
    for key in ("reference/majority/macro_f1", "reference/all_o/micro_f1", "test/support_PER"):   # the whole part
        assert two["metrics"][key] == one["metrics"][key], key
    predictions = json.loads((tmp_path / "two" / "predictions.json").read_text())
    assert len(predictions) == one["data"]["test_examples"]


def test_a_pretraining_cell_on_two_ddp_processes_scores_every_held_out_position_once(compose_cfg, tmp_path,
                                                                                        data_dir, pretrained):
    """The held-out chunks and their masks do not depend on the devices; each chunk counts once (DDP repeats one
    to even the shares when their number is odd)."""
    single = json.loads((pretrained / "quick" / "multihot_pretrain" / "cell" / "metrics.json").read_text())
    cfg = compose_cfg("experiment=multihot_pretrain", "profile=quick", *CORPUS, f"paths.data_dir={data_dir}",
                      "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp_fork")
    record = train(cfg, tmp_path / "cell")
    assert record["status"] == "finished" and record["scale_out"]["per_device_batch"] == 2
    for key in ("val/masked", "val/masked_groups", "val/unigram_ce"):   # the reference does not depend on the model
        assert record["metrics"][key] == pytest.approx(single["metrics"][key]), key
    assert math.isfinite(record["metrics"]["val/mlm_ce"])
