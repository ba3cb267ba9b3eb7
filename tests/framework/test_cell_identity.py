"""A cell's identity is what its stage reads: its own config node and the content of the files it opens.

Cells of every reader family run through `train()` on tiny generated files: a Bit Cipher probe cell (GUM and
CoNLL-2003), a LEAM-family cell (Zhang CSVs) and a multi-hot token-list cell (the quick Korean corpus). Editing
another paper's model or the trainer keeps a finished pipeline cell; editing its own node, or one byte of a file
it read, does not. Records written under the previous fingerprint scheme are still recognised and migrated.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from langrepr import cell
from langrepr.errors import UserError
from langrepr.train import train
from tiny_data import flip_one_byte, write_english_probe_data, write_korean_quick, write_zhang


@pytest.fixture(autouse=True)
def own_digest_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))


# ---------------------------------------------------------------- Bit Cipher: a pipeline cell

@pytest.fixture
def bitcipher(compose_cfg, tmp_path):
    data = write_english_probe_data(tmp_path / "data")

    def _cfg(*extra: str):
        return compose_cfg("experiment=bitcipher_table1", "bitcipher_vectors=majority", f"paths.data_dir={data}",
                           *extra)
    return _cfg, data


def test_editing_another_papers_model_or_the_trainer_keeps_a_bit_cipher_cell(bitcipher, tmp_path):
    make, _ = bitcipher
    first = train(make(), tmp_path / "cell")
    assert first["status"] == "finished" and first["metrics"]["pos/test_acc"] == 100.0
    for edit in ("model.net.hidden_size=384", "model.tokenizer.v=8", "trainer.max_epochs=7", "optimizer.lr=0.1",
                 "dataset.datamodule.batch_size=3", "model=bert_orig"):
        again = train(make(edit), tmp_path / "cell")
        assert again["wall_time_s"] == first["wall_time_s"], edit          # reused, not rerun
        assert cell.config_fingerprint(make(edit)) != first["fingerprint"]   # the old identity would have refused


def test_editing_the_bit_cipher_node_or_seed_refuses_reuse(bitcipher, tmp_path):
    make, _ = bitcipher
    train(make(), tmp_path / "cell")
    for edit in ("pipeline.tasks=[pos]", "pipeline.probe.hidden=64", "seed=2", "bitcipher_vectors=random"):
        with pytest.raises(UserError, match="different config"):
            train(make(edit), tmp_path / "cell")


def test_model_none_composes_for_a_pipeline_cell_and_is_refused_for_training(bitcipher, compose_cfg, tmp_path):
    make, _ = bitcipher
    first = train(make(), tmp_path / "cell")
    assert train(make("model=none"), tmp_path / "cell")["wall_time_s"] == first["wall_time_s"]
    with pytest.raises(UserError, match="model.net names none"):
        train(compose_cfg("dataset=synthetic", "model=none", "debug=smoke"), tmp_path / "train_cell")


def test_a_changed_byte_in_a_probe_file_refuses_the_finished_cell(bitcipher, tmp_path):
    make, data = bitcipher
    first = train(make(), tmp_path / "cell")
    test_file = data / "ud_english_gum" / "r2.5" / "en_gum-ud-test.conllu"
    assert str(test_file.resolve()) in first["data_files"] and first["data_digest"]
    flip_one_byte(test_file, b"\tNOUN\t", b"\tVERB\t")
    with pytest.raises(UserError, match="changed since it finished.*en_gum-ud-test.conllu"):
        train(make(), tmp_path / "cell")
    rerun = train(make("force=true"), tmp_path / "cell")
    assert rerun["status"] == "finished" and rerun["metrics"]["pos/test_acc"] < 100.0   # the new data's result
    assert rerun["data_digest"] != first["data_digest"]


def test_a_record_in_the_previous_format_is_recognised_and_migrated(bitcipher, tmp_path):
    """Fixture: a finished cell as the previous code wrote it (whole-config fingerprint, no data digest)."""
    make, _ = bitcipher
    cfg = make()
    folder = tmp_path / "cell"
    folder.mkdir()
    old = {"status": "finished", "run_id": "bitcipher_table1", "profile": "full", "seed": 1, "commit": "6bd81db",
           "fingerprint": cell.config_fingerprint(cfg), "data_digest": None, "choices": {}, "overrides": [],
           "deterministic": False, "metrics": {"pos/test_acc": 91.5}, "params": {}, "wall_time_s": 3.0}
    (folder / "metrics.json").write_text(json.dumps(old))
    assert cell.cell_fingerprint(cfg) != old["fingerprint"]
    record = train(cfg, folder)
    assert record["metrics"] == {"pos/test_acc": 91.5} and record["wall_time_s"] == 3.0   # reused
    written = json.loads((folder / "metrics.json").read_text())
    assert written["fingerprint"] == cell.cell_fingerprint(cfg) and written["migrated_from"] == old["fingerprint"]
    # once migrated, an edit to another paper's model no longer touches it
    assert train(make("model.net.hidden_size=384"), folder)["metrics"] == {"pos/test_acc": 91.5}


def test_the_oldest_unresolved_fingerprint_is_still_accepted(bitcipher, tmp_path):
    make, _ = bitcipher
    cfg = make()
    folder = tmp_path / "cell"
    folder.mkdir()
    old = {"status": "finished", "fingerprint": cell.legacy_fingerprint(cfg), "data_digest": None,
           "metrics": {"pos/test_acc": 90.0}, "wall_time_s": 1.0}
    (folder / "metrics.json").write_text(json.dumps(old))
    assert train(cfg, folder)["metrics"] == {"pos/test_acc": 90.0}
    assert json.loads((folder / "metrics.json").read_text())["fingerprint"] == cell.cell_fingerprint(cfg)


def test_train_cells_keep_their_fingerprint(compose_cfg):
    cfg = compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke")
    assert cell.cell_fingerprint(cfg) == cell.config_fingerprint(cfg)
    assert cell.cell_fingerprint(compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke",
                                             "trainer.max_epochs=3")) != cell.cell_fingerprint(cfg)


def test_count_and_stats_cells_hash_their_own_nodes(compose_cfg):
    count = compose_cfg("experiment=ewe_table1", "model=bert_ewe")
    assert cell.cell_fingerprint(count) == cell.cell_fingerprint(
        compose_cfg("experiment=ewe_table1", "model=bert_ewe", "trainer.max_epochs=3", "optimizer.lr=0.1"))
    assert cell.cell_fingerprint(count) != cell.cell_fingerprint(
        compose_cfg("experiment=ewe_table1", "model=bert_ewe", "model.net.num_layers=2"))
    stats = compose_cfg("experiment=ewe_table2", "dataset=synthetic")
    assert cell.cell_fingerprint(stats) == cell.cell_fingerprint(
        compose_cfg("experiment=ewe_table2", "dataset=synthetic", "model=albert_orig"))
    assert cell.cell_fingerprint(stats) != cell.cell_fingerprint(
        compose_cfg("experiment=ewe_table2", "dataset=synthetic", "stats.coverage=0.8"))


def test_an_about_node_is_no_part_of_any_fingerprint(compose_cfg):
    """Facts (`about:`, wherever they sit: a dataset's sizes, a pipeline's cost) are the plan's, never a cell's."""
    from omegaconf import OmegaConf

    def fingerprints(cfg):
        return cell.config_fingerprint(cfg), cell.cell_fingerprint(cfg), cell.legacy_fingerprint(cfg)

    for overrides, edits in [
            (("dataset=ag_news", "model=leam"), {"dataset.about.size.train": 1, "dataset.about.size.source": "x",
                                                 "model.about": {"cost": "1 h"}}),
            (("experiment=bitcipher_table1", "bitcipher_vectors=majority"), {"pipeline.about": {"cost": "1 h"}})]:
        cfg = compose_cfg(*overrides)
        before = fingerprints(cfg)
        for key, value in edits.items():
            OmegaConf.update(cfg, key, value, force_add=True)
        assert fingerprints(cfg) == before, overrides
        OmegaConf.update(cfg, "seed", int(cfg.seed) + 1)                 # a real setting still moves them all
        assert all(a != b for a, b in zip(fingerprints(cfg), before)), overrides
    assert "size" in compose_cfg("dataset=ag_news", "model=leam").dataset.about   # the node a train cell carries


# ---------------------------------------------------------------- LEAM family: the classification readers

def test_leam_family_cell_with_swapped_test_labels_is_not_reused(compose_cfg, tmp_path):
    folder = write_zhang(tmp_path / "agnews")
    args = ("dataset=ag_news", "model=majority_class", f"dataset.datamodule.data_dir={folder}",
            "dataset.datamodule.val_fraction=0.25")
    first = train(compose_cfg(*args), tmp_path / "cell")
    assert first["status"] == "finished"
    assert {Path(p).name for p in first["data_files"]} == {"train.csv", "test.csv"}
    text = (folder / "test.csv").read_text()
    (folder / "test.csv").write_text(text.replace('"1",', '"X",').replace('"4",', '"1",').replace('"X",', '"4",'))
    with pytest.raises(UserError, match="changed since it finished.*test.csv"):
        train(compose_cfg(*args), tmp_path / "cell")


def test_leam_train_cell_records_its_csvs_and_refuses_changed_data(compose_cfg, tmp_path):
    folder = write_zhang(tmp_path / "agnews")
    args = ("dataset=ag_news", "model=leam", "debug=smoke", f"dataset.datamodule.data_dir={folder}",
            "dataset.datamodule.batch_size=8", "dataset.datamodule.val_fraction=0.25")
    first = train(compose_cfg(*args), tmp_path / "cell")
    assert first["status"] == "finished" and first["data_digest"]
    assert {Path(p).name for p in first["data_files"]} == {"train.csv", "test.csv"}
    flip_one_byte(folder / "train.csv", b"ball", b"bell")
    with pytest.raises(UserError, match="changed since it finished.*train.csv"):
        train(compose_cfg(*args), tmp_path / "cell")


# ---------------------------------------------------------------- multi-hot: corpus, analysis and token lists

KOREAN_TINY = ["experiment=multihot_table1", "profile=quick", "dataset=korean_quick", "dataset.corpus.nsmc=40",
               "dataset.corpus.korquad=20", "dataset.corpus.klue=10", "dataset.token_lists.bpe_size=120",
               "dataset.token_lists.pos_joined=10", "dataset.token_lists.syllables=40",
               "dataset.token_lists.dictionary_size=40", "pipeline.workers=1"]


def test_multihot_token_list_cell_refuses_a_changed_corpus_and_rebuilds_its_lists(compose_cfg, tmp_path):
    data = write_korean_quick(tmp_path / "data")
    args = (*KOREAN_TINY, f"paths.data_dir={data}", f"pipeline.cache_dir={tmp_path / 'cache'}")
    first = train(compose_cfg(*args), tmp_path / "cell")
    assert first["status"] == "finished"
    assert any(p.endswith("klue-sts-v1.1_dev.json") for p in first["data_files"])
    lists = sorted((tmp_path / "cache" / "korean_token_lists").iterdir())
    sts = data / "klue" / "klue-sts-v1.1_dev.json"
    sts.write_text(sts.read_text().replace("친절했습니다", "불친절했습니다"))
    with pytest.raises(UserError, match="changed since it finished.*klue-sts"):
        train(compose_cfg(*args), tmp_path / "cell")
    rerun = train(compose_cfg(*args, "force=true"), tmp_path / "cell")
    assert rerun["status"] == "finished"
    assert len(sorted((tmp_path / "cache" / "korean_token_lists").iterdir())) == len(lists) + 1   # new lists
    analyses = list((tmp_path / "cache" / "korean_morphemes").glob("korean_quick.*"))
    assert len(analyses) == 2                                                                  # new analysis


# ---------------------------------------------------------------- a moved checkout keeps its finished cells

def test_the_same_data_at_another_path_keeps_the_finished_cell_and_changed_bytes_do_not(tmp_path):
    from hydra import compose, initialize_config_dir

    from langrepr.confpaths import CONF_DIR

    def make(cache: Path):        # the synthetic patents are generated under paths.cache_dir
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("train", overrides=["dataset=synthetic", "model=bert_ewe", "debug=smoke",
                                               f"paths.output_root={tmp_path / 'outputs'}",
                                               f"paths.output_dir={tmp_path / 'run'}", f"paths.cache_dir={cache}"])
    first = train(make(tmp_path / "a"), tmp_path / "cell")
    shutil.move(tmp_path / "a", tmp_path / "b")          # the digest names each file by its path
    again = train(make(tmp_path / "b"), tmp_path / "cell")
    assert again["wall_time_s"] == first["wall_time_s"]    # same contents: reused, not rerun
    shard = sorted((tmp_path / "b" / "synthetic_patents").glob("train-*.parquet"))[-1]
    shard.write_bytes(shard.read_bytes() + b"\0")
    with pytest.raises(UserError, match="changed since it finished"):
        train(make(tmp_path / "b"), tmp_path / "cell")
