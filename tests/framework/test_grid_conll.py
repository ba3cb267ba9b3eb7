"""The grid's CoNLL-2003 NER column (issue 24 item 2): IOB1 -> IOB2, the first-piece alignment of every word-aligned
input, the composition rule before any data is read, the reference rows, and a tiny tagging cell end to end."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from conftest import fails_with
from langrepr.data.english.conll import iob1_to_iob2
from langrepr.data.english.tagging import IGNORE, first_piece_labels
from langrepr.errors import UserError
from langrepr.train import train

# a tiny CoNLL-2003 layout (word POS chunk NER, IOB1 as distributed): sentences are blank-line separated
TRAIN = [[("John", "I-PER"), ("visited", "O"), ("Paris", "I-LOC"), (".", "O")],
         [("John", "I-PER"), ("Smith", "I-PER"), ("left", "O"), ("Paris", "I-LOC")],
         [("The", "O"), ("EU", "I-ORG"), ("visited", "O"), ("Germany", "I-LOC"), ("and", "O"), ("France", "I-LOC")],
         [("Germany", "I-LOC"), ("France", "B-LOC"), ("talks", "O")]] * 6
TEST = [[("John", "I-PER"), ("visited", "O"), ("Rome", "I-LOC")]]


def write_conll(root: Path) -> Path:
    folder = root / "conll2003"
    folder.mkdir(parents=True)
    for name, sentences in (("eng.train", TRAIN), ("eng.testa", TRAIN[:4]), ("eng.testb", TEST)):
        lines = ["-DOCSTART- -X- -X- O", ""]
        for sentence in sentences:
            lines += [f"{w} NNP I-NP {t}" for w, t in sentence] + [""]
        (folder / name).write_text("\n".join(lines))
    return root


# ---------------------------------------------------------------- tags and alignment (values by hand)
def test_iob1_becomes_iob2():
    assert iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG", "I-MISC"]) == \
        ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-ORG", "B-MISC"]
    assert iob1_to_iob2(["B-PER", "I-PER", "O"]) == ["B-PER", "I-PER", "O"]       # IOB2 stays as it is


def test_first_piece_carries_the_tag_and_the_rest_is_ignored():
    assert first_piece_labels([0, 2, -1], [3, 5, 7], 4).tolist() == [3, IGNORE, 5, IGNORE]


def test_each_word_aligned_input_gives_the_first_position_of_each_word(tmp_path):
    from langrepr.data.classification.vocab import WordTokenizer
    from langrepr.data.tokenizers import RawByteTokenizer, SubwordTokenizer, WhitespaceByteTokenizer

    words = [["EU", "rejects", "German", "call"]]
    # EWE materials: one per word (truncate); split: 'rejects' (7 bytes) takes 4 materials of 2, 'German' 3
    assert WhitespaceByteTokenizer(u=3, v=2).encode_words(words)["first"] == [[0, 1, 2, -1]]
    assert WhitespaceByteTokenizer(u=8, v=2, overflow="split").encode_words(words)["first"] == [[0, 1, 5, -1]]
    # raw bytes joined by one space: 'EU' at 0, 'rejects' at 3, 'German' at 11 (cut off by u = 10)
    enc = RawByteTokenizer(u=10, v=1).encode_words([["EU", "rejects", "German"]])
    assert enc["first"] == [[0, 3, -1]] and bytes(enc["input_ids"][0, :, 0].tolist()) == b"EU rejects"
    with pytest.raises(UserError, match="does not compose: raw bytes in materials of v = 4"):
        RawByteTokenizer(u=10, v=4).encode_words(words)
    # word rule: 'U.S.' is 4 tokens (u . s .), so 'call' starts at 6, beyond max_length 5
    tok = WordTokenizer(max_length=5, max_vocab=100)
    tok.prepare(["EU rejects U.S. call"])
    enc = tok.encode_words([["EU", "rejects", "U.S.", "call"]])
    assert enc["first"] == [[0, 1, 2, -1]]
    assert enc["input_ids"][0].tolist() == [tok.index[w] for w in ["eu", "rejects", "u", ".", "s"]]
    # word pieces: [CLS] first, then each word's first piece, in order, read from the tokenizer's word ids
    pieces = SubwordTokenizer("wordpiece", vocab_size=60, max_length=16)
    pieces.prepare(["EU rejects German call to boycott British lamb"] * 5, tmp_path)
    enc = pieces.encode_words([["EU", "rejects", "German", "call"]])
    first = enc["first"][0]
    assert first[0] == 1 and first == sorted(first) and len(set(first)) == 4
    ids = enc["input_ids"][0].tolist()
    assert ids[0] == 2 and ids[first[-1] + 1:].count(3) == 1            # [CLS] ... [SEP]


# ---------------------------------------------------------------- composition before data
@pytest.mark.parametrize("encoder", ["leam", "swem"])
def test_a_document_encoder_on_conll_is_one_line_before_any_data(capfd, tmp_path, encoder):
    line = fails_with(capfd, ["experiment=grid", "profile=quick", "grid_task=conll2003", "input=words",
                              f"encoder={encoder}", f"paths.data_dir={tmp_path / 'no_such_data'}",
                              f"paths.output_root={tmp_path}", "hydra.mode=RUN"])
    assert line == (f"does not compose: encoder {encoder} is a document encoder (one vector per text) and task "
                    "conll2003 tags every token"), line


def test_grid_model_refuses_per_position_logits_from_a_document_encoder():
    from langrepr.models.grid import GridModel, SWEMEncoder, TensorCoderEncoder, TokenInput

    with pytest.raises(UserError, match="does not compose: encoder SWEMEncoder is a document encoder"):
        GridModel(functools.partial(TokenInput, width=8), functools.partial(SWEMEncoder), num_labels=3,
                  vocab_size=10, per_position=True)
    net = GridModel(functools.partial(TokenInput, width=8),
                    functools.partial(TensorCoderEncoder, hidden_size=8, num_layers=1, intermediate_size=8),
                    num_labels=3, vocab_size=10, per_position=True)
    import torch
    assert net(torch.tensor([[1, 2, 3, 0]])).shape == (1, 4, 3)


# ---------------------------------------------------------------- reference rows and a tiny cell
def test_reference_rows_on_a_tiny_conll(compose_cfg, tmp_path):
    data = write_conll(tmp_path / "data")
    overrides = ["experiment=grid", "profile=quick", "grid_task=conll2003", "input=none", "encoder=none",
                 f"paths.data_dir={data}"]
    majority = train(compose_cfg(*overrides, "model=majority_tagger"), tmp_path / "majority")
    # John -> B-PER (seen), visited -> O, Rome -> O (unseen): 1 of 2 gold entities, no false one: F1 = 2/3
    assert majority["metrics"]["test/micro_f1"] == pytest.approx(200 / 3)
    lr = train(compose_cfg(*overrides, "model=token_lr"), tmp_path / "lr")
    assert 0.0 <= lr["metrics"]["test/micro_f1"] <= 100.0 and lr["metrics"]["reference/features"] > 10


@pytest.mark.parametrize("inp,enc", [("words", "bert"), ("ewe", "tensorcoder"), ("bytes", "bert"),
                                     ("wordpiece", "tensorcoder")])
def test_a_tiny_conll_grid_cell_trains_and_scores(compose_cfg, tmp_path, inp, enc):
    data = write_conll(tmp_path / "data")
    cfg = compose_cfg("experiment=grid", "profile=quick", "grid_task=conll2003", f"input={inp}", f"encoder={enc}",
                      "debug=smoke", f"paths.data_dir={data}")
    assert cfg.dataset.task._target_ == "langrepr.tasks.token_classification.WordTaggingTask"
    record = train(cfg, tmp_path / "run")
    assert record["status"] == "finished"
    assert 0.0 <= record["metrics"]["test/micro_f1"] <= 100.0 and record["metrics"]["test/sentences"] == 1
    assert record["data"]["labels"] == ["O", "B-LOC", "B-ORG", "B-PER", "I-PER"]     # IOB2 from the IOB1 files


def test_the_quick_recipe_of_the_ner_column_leaves_the_other_columns_alone(compose_cfg):
    ner = compose_cfg("experiment=grid", "profile=quick", "grid_task=conll2003", "input=ewe", "encoder=bert")
    news = compose_cfg("experiment=grid", "profile=quick", "grid_task=ag_news", "input=words", "encoder=bert")
    assert (ner.trainer.max_steps, ner.dataset.datamodule.max_train_samples) == (1000, 8000)
    assert (news.trainer.max_steps, news.trainer.max_epochs, news.dataset.datamodule.max_train_samples) == (200, 5, 2000)
    # a byte-level input's own quick budget (conf/papers/ewe/input/ewe.yaml) reaches the document columns, not the NER one
    ewe_news = compose_cfg("experiment=grid", "profile=quick", "grid_task=ag_news", "input=ewe", "encoder=bert")
    assert (ewe_news.trainer.max_steps, ewe_news.trainer.max_epochs) == (1000, 20) and ner.trainer.max_epochs == 30
    assert "grid_task_quick" not in news and "conll2003" not in news.grid.tasks    # their identity is unchanged
    assert np.isfinite(ner.optimizer.lr)


def test_the_local_reader_without_a_data_folder_says_where_the_hub_copy_is_read():
    from langrepr.data.english.conll import HUB_ID, conll2003_splits

    with pytest.raises(UserError, match="LANGREPR_DATA_DIR") as err:
        conll2003_splits(None)
    assert HUB_ID in str(err.value) and "IOB1" in str(err.value) and "\n" not in str(err.value)
