"""Text-classification data for LEAM: Zhang CSV reader, local test-split cut, vocabulary, MIMIC reader,
datamodule, reference pipelines and the label-regularised task, all on tiny generated fixtures."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from langrepr.data.classification.datamodule import TextClassificationDataModule
from langrepr.data.classification.sources import read_local, read_mimic50, read_zhang_csv, stratified_split
from langrepr.data.classification.vocab import WordTokenizer, split_words
from langrepr.errors import UserError
from langrepr.pipelines.references.classification import (
    bow_logistic_regression,
    majority_class,
    multilabel_scores,
    time_training_iterations,
)
from tiny_data import write_topic_csv


def write_zhang(folder: Path, name: str = "test.csv", per_class: int = 12) -> Path:
    return write_topic_csv(folder / name, per_class,
                           lambda i, w: [f"{w[i % 5]} news {i}", f"{' '.join(w)} said \\n {w[(i + 2) % 5]}"])


def test_zhang_reader_joins_fields_and_rejects_bad_rows(tmp_path):
    texts, labels = read_zhang_csv(write_zhang(tmp_path))
    assert len(texts) == 48 and sorted(set(labels)) == [0, 1, 2, 3]
    assert "\\n" not in texts[0] and texts[0].startswith("ball news 0 ball team")
    bad = tmp_path / "bad.csv"
    bad.write_text('"x","text"\n')
    with pytest.raises(UserError, match="bad.csv:1"):
        read_zhang_csv(bad)


def test_local_test_only_folder_is_cut_stratified_and_stated(tmp_path):
    write_zhang(tmp_path)
    with pytest.raises(UserError, match="no train.csv"):
        read_local(tmp_path, None, 0)
    splits, info = read_local(tmp_path, 0.25, 0)
    assert len(splits["train"][0]) == 36 and len(splits["test"][0]) == 12
    assert sorted(splits["test"][1]) == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3
    assert "TEST split cut in two" in info["split"]
    rest, held = stratified_split([0, 0, 1, 1], 0.5, seed=3)
    assert sorted(rest.tolist() + held.tolist()) == [0, 1, 2, 3]


def test_word_tokenizer_vocab_order_padding_and_names(tmp_path):
    assert split_words("Sci/Tech: don't STOP") == ["sci", "/", "tech", ":", "don't", "stop"]
    tok = WordTokenizer(max_length=4, max_vocab=5, min_freq=1)
    tok.prepare(["b a a", "c b a"], tmp_path)
    assert tok.vocab == ["[PAD]", "[UNK]", "a", "b", "c"]
    enc = tok.encode(["a zzz b", "c c c c c"])
    assert enc["input_ids"].tolist() == [[2, 1, 3, 0], [4, 4, 4, 4]]
    assert enc["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert tok.name_ids(["A & B", "Sci/Tech"]) == [[2, 3], [1, 1]]
    assert list(tmp_path.glob("words-*.json"))


def _dm(tmp_path, **kw):
    write_zhang(tmp_path / "agnews")
    args = dict(name="ag_news", data_dir=str(tmp_path / "agnews"), class_names=["Sports", "Business", "World", "Tech"],
                tokenizer=WordTokenizer(max_length=8, max_vocab=100), batch_size=5, split_test_fraction=0.25,
                val_fraction=0.2)
    return TextClassificationDataModule(**{**args, **kw})


def test_datamodule_batches_net_kwargs_and_label_words(tmp_path):
    dm = _dm(tmp_path)
    dm.setup("fit")
    assert dm.net_kwargs == {"vocab_size": dm.tokenizer.vocab_size, "num_labels": 4}
    batch = next(iter(dm.train_dataloader()))
    assert batch["input_ids"].shape == (5, 8) and batch["labels"].dtype == torch.int64
    assert dm.data_info["rows"] == {"train": 28, "test": 12, "val": 8}
    assert len(dm.label_word_ids) == 4
    with pytest.raises(UserError, match=r"test.csv:\d+ has class 4 but the data set has 3 classes"):
        _dm(tmp_path, class_names=["a", "b", "c"]).setup("fit")


def test_mimic50_reader_multilabel(tmp_path):
    rows = {"train_50.csv": [("fever cough", "401.9;428.0"), ("chest pain", "428.0")],
            "dev_50.csv": [("fever", "401.9")], "test_50.csv": [("pain cough", "428.0;999")]}
    for name, data in rows.items():
        with (tmp_path / name).open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["SUBJECT_ID", "HADM_ID", "TEXT", "LABELS", "length"])
            writer.writerows([[1, 2, text, labels, 2] for text, labels in data])
    splits, info, codes = read_mimic50(tmp_path)
    assert codes == ["401.9", "428.0"] and splits["train"][1] == [[0, 1], [1]] and splits["test"][1] == [[1]]
    with pytest.raises(UserError, match="licence-gated"):
        read_mimic50(tmp_path / "missing")


def test_multilabel_scores_hand_values():
    scores = torch.tensor([[0.9, 0.2, 0.6], [0.1, 0.8, 0.3]]).numpy()
    out = multilabel_scores(scores, [[0, 2], [1]], 3, threshold=0.5, k=2)
    assert out["test/test/f1"] == pytest.approx(1.0)
    assert out["test/test/p@2"] == pytest.approx(0.75)   # row 1: {0,2} both hit; row 2: {1} and 2 -> 1 of 2


def test_reference_pipelines_on_tiny_topics(tmp_path):
    write_zhang(tmp_path / "agnews")
    dm_cfg = OmegaConf.create({"_target_": "langrepr.data.classification.datamodule.TextClassificationDataModule",
                               "name": "ag_news", "data_dir": str(tmp_path / "agnews"), "split_test_fraction": 0.25, "val_fraction": 0.2,
                               "batch_size": 5})
    tok_cfg = OmegaConf.create({"_target_": "langrepr.data.classification.vocab.WordTokenizer", "max_length": 8})
    assert majority_class(dm_cfg, tok_cfg)["test/test/acc"] == pytest.approx(0.25)
    assert bow_logistic_regression(dm_cfg, tok_cfg)["test/test/acc"] == pytest.approx(1.0)


def test_time_training_iterations_counts_params():
    net = OmegaConf.create({"_target_": "langrepr.models.text_baselines.SWEM", "hidden_size": 4, "intermediate_size": 3,
                            "pooling": "avg"})
    out = time_training_iterations(net, vocab_size=10, num_labels=2, batch_size=2, length=5, iterations=2, warmup=1)
    # 10*4 embedding + mlp2 head: 4*3+3 + 3*2+2
    assert out["params/total"] == 40 + 15 + 8 and out["params/non_embedding"] == 23
    assert out["time/s_per_1000_iter"] > 0


def test_nsmc_reads_the_multihot_split_into_the_text_datamodule(tmp_path):
    """dataset=nsmc_text: the same `load_nsmc` split as the multi-hot NSMC cells, as (texts, 0/1 labels)."""
    import gzip

    (tmp_path / "nsmc").mkdir()
    rows = [f"{i}\t1\t{10 if i % 2 else 1}\t14.08.01\t{'최고 재밌다' if i % 2 else '최악 지루하다'} {i}" for i in range(40)]
    with gzip.open(tmp_path / "nsmc" / "nsmc_raw_reviews.tsv.gz", "wt", encoding="utf-8") as fh:
        fh.write("review_id\tmovie_id\trating\tdate\treview\n" + "\n".join(rows) + "\n")
    from langrepr.data.korean.nsmc import load_nsmc

    options = {"source": "crawl", "per_class": 10, "test_fraction": 0.25, "seed": 1234}
    dm = TextClassificationDataModule(name="nsmc", data_dir=str(tmp_path), class_names=["최악", "최고"],
                                      tokenizer=WordTokenizer(max_length=6), val_fraction=0.2, source_options=options)
    dm.setup("fit")
    same = load_nsmc(data_dir=str(tmp_path), **options)
    assert dm.texts_and_labels("test") == ([r.text for r in same["test"]], [r.label for r in same["test"]])
    assert dm.num_labels == 2 and dm.data_info["rows"] == {"train": 12, "val": 3, "test": 5}
    assert "NSMC-STYLE" in dm.data_info["split"]
    assert all(ids and ids[0] != 1 for ids in dm.label_word_ids)   # both label words are in the vocabulary
    with pytest.raises(UserError, match="nsmc_raw_reviews"):
        TextClassificationDataModule(name="nsmc", data_dir=str(tmp_path / "none"), tokenizer=WordTokenizer(),
                                     source_options=options).setup("fit")
