"""First/Later relabeling (EWE paper §5.3), raw mode, vocabulary persistence and Table 2 statistics."""

import numpy as np
import pytest

from langrepr.data.patents.labels import (
    LabelVocabulary,
    document_labels,
    label_counts,
    major_labels,
    subclass,
    table2_stats,
)

PAPER_DOCS = [["G06Q", "G06Q", "A01B"], ["A01B", "G06Q", "A01B"], ["G06Q", "A01B"]]


def test_paper_example_encodes_exactly():
    vocab = LabelVocabulary.fit(PAPER_DOCS, "first_later")
    assert vocab.labels == ("First-A01B", "First-G06Q", "Later-A01B", "Later-G06Q")
    assert vocab.multi_hot(PAPER_DOCS).tolist() == [[0, 1, 1, 1], [1, 0, 1, 1], [0, 1, 1, 0]]
    assert document_labels(PAPER_DOCS[1]) == ["First-A01B", "Later-A01B", "Later-G06Q"]


def test_first_flag_decides_primary_not_array_order():
    cpc = [{"code": "A01B1/00", "first": False}, {"code": "G06Q10/08", "first": True, "inventive": True},
           {"code": "A01B3/12", "first": False}]
    assert document_labels(cpc) == ["First-G06Q", "Later-A01B"]
    # no flag at all: element 0 is primary (METHODS §1.6 fallback)
    assert document_labels([{"code": "H04L9/00", "first": False}, {"code": "G06F1/00", "first": False}]) == \
        ["First-H04L", "Later-G06F"]
    assert subclass("a01n53/12") == "A01N"


def test_raw_mode_is_the_old_labeling():
    vocab = LabelVocabulary.fit(PAPER_DOCS, "raw")
    assert vocab.labels == ("A01B", "G06Q")
    assert vocab.multi_hot(PAPER_DOCS).tolist() == [[1, 1], [1, 1], [1, 1]]   # all three collapse


def test_relabeled_vocab_doubles_and_drops_unseen(tmp_path):
    vocab = LabelVocabulary.fit([["A01B"], ["G06Q", "H04L"]])
    assert len(vocab) == 2 * 3                                                 # 664 -> 1,328 in the paper
    assert vocab.encode([["Z99Z", "A01B"]]) == [[vocab.index["Later-A01B"]]]   # unseen subclass dropped
    path = vocab.save(tmp_path / "labels.json")
    assert LabelVocabulary.load(path) == vocab
    with pytest.raises(ValueError):
        LabelVocabulary.fit(PAPER_DOCS, "bogus")


def test_majors_cover_ninety_percent():
    counts = np.array([50, 30, 10, 5, 5])
    assert major_labels(counts).tolist() == [0, 1, 2]          # 50+30+10 = 90 of 100
    assert major_labels(np.array([0, 0])).tolist() == []


def test_table2_stats_by_hand():
    train = [["A"], ["A"], ["A", "B"], ["B", "A"]]               # codes are 1-char subclasses here
    test = [["B"]]
    stats = table2_stats({"train": train, "2015A": test})
    assert stats["train"]["samples"] == 4 and stats["2015A"]["samples"] == 1
    # raw train counts A=4, B=2 -> std 1; majors (90% of 6 = 5.4 -> both) -> std 1
    assert stats["train"]["raw"] == {"total": 1.0, "majors": 1.0, "num_labels": 2, "num_majors": 2}
    # relabeled train counts: First-A=3, First-B=1, Later-A=1, Later-B=1 -> mean 1.5, std sqrt(0.75)
    fl = stats["train"]["first_later"]
    assert fl["total"] == pytest.approx(np.sqrt(0.75)) and fl["num_labels"] == 4
    # majors: 90% of 6 = 5.4 -> all four -> same std
    assert fl["majors"] == pytest.approx(np.sqrt(0.75)) and fl["num_majors"] == 4
    # 2015A raw counts A=0, B=1 -> std 0.5; relabeled First-B=1, others 0 -> std sqrt(3)/4
    assert stats["2015A"]["raw"]["total"] == pytest.approx(0.5)
    assert stats["2015A"]["first_later"]["total"] == pytest.approx(np.sqrt(3) / 4)
    assert label_counts(LabelVocabulary.fit(train, "raw"), test).tolist() == [0, 1]
