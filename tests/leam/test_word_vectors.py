"""LEAM word vectors from GloVe (issue 23 item 4): a file or a hub file, random init as the stated fallback."""

import logging
import shutil
import zipfile

import pytest
import torch

from langrepr.data.classification.datamodule import TextClassificationDataModule
from langrepr.data.classification.vocab import WordTokenizer
from langrepr.data.classification.word_vectors import fetch, glove_subset
from langrepr.errors import UserError
from langrepr.models.leam import LEAM

GLOVE = ("the 0.1 0.2 0.3 0.4\n"
         "sports 1 2 3 4\n"
         ". . . 9 9 9 9\n"                   # glove.840B has tokens with spaces: never a vocabulary word
         "world 4 3 2 1\n"
         "unused 7 7 7 7\n")


def csv_folder(tmp_path):
    folder = tmp_path / "agnews"
    folder.mkdir()
    rows = [f'"{1 + i % 2}","the sports news {i}","world cup"' for i in range(40)]
    (folder / "train.csv").write_text("\n".join(rows) + "\n")
    (folder / "test.csv").write_text("\n".join(rows[:10]) + "\n")
    return folder


def datamodule(tmp_path, word_vectors):
    return TextClassificationDataModule("ag_news", data_dir=str(csv_folder(tmp_path)), class_names=["World", "Sports"],
                                        tokenizer=WordTokenizer(max_length=8, max_vocab=50), batch_size=4,
                                        cache_dir=str(tmp_path / "cache"), word_vectors=word_vectors,
                                        word_vector_dim=4)


def test_glove_rows_reach_the_leam_net_and_its_label_vectors(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text(GLOVE)
    dm = datamodule(tmp_path, str(glove))
    dm.setup()
    assert dm.data_info["word_vectors_found"] == 3                      # the, sports, world
    assert dm.word_vectors_file.read_text().split("\n")[0].split(" ")[0] in {"the", "sports", "world"}
    net = LEAM(vocab_size=dm.tokenizer.vocab_size, num_labels=2, hidden_size=4, window=3,
               glove_path=str(dm.word_vectors_file))
    net.prepare_embeddings(dm.tokenizer.vocab, dm.label_word_ids)
    index = dm.tokenizer.index
    assert torch.equal(net.embedding.weight[index["sports"]], torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert torch.equal(net.embedding.weight[index["world"]], torch.tensor([4.0, 3.0, 2.0, 1.0]))
    assert torch.equal(net.label_embedding[0], torch.tensor([4.0, 3.0, 2.0, 1.0]))    # class "World"
    assert net.embedding.weight[index["news"]].abs().max() <= 0.001                    # not in GloVe: U(-s, s)


def test_a_zipped_glove_file_reads_its_one_text_member(tmp_path):
    with zipfile.ZipFile(tmp_path / "glove.4d.zip", "w") as archive:
        archive.writestr("glove.4d.txt", GLOVE)
    path, hits = glove_subset(fetch(str(tmp_path / "glove.4d.zip")), ["[PAD]", "[UNK]", "world", "nope"], 4, tmp_path)
    assert hits == 1 and path.read_text() == "world 4 3 2 1\n"


def test_no_word_vectors_is_random_init_with_one_log_line(tmp_path, caplog):
    dm = datamodule(tmp_path, None)
    with caplog.at_level(logging.INFO, logger="langrepr.data.classification.word_vectors"):
        dm.setup()
    lines = [r.getMessage() for r in caplog.records if r.name.endswith("word_vectors")]
    assert len(lines) == 1 and "random" in lines[0]
    assert dm.word_vectors_file is None and dm.data_info["word_vectors"].startswith("random")


@pytest.mark.parametrize("spec,match", [("missing.txt", "do not exist"), ("hub:onlyrepo", "hub:<owner>/<repo>/<file>")])
def test_a_bad_source_is_one_line(spec, match):
    with pytest.raises(UserError, match=match):
        fetch(spec)


def test_a_file_of_another_width_names_its_line(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("the 0.1 0.2\n")
    with pytest.raises(UserError, match=r"glove.txt:1 has 2 values, expected 4"):
        glove_subset(glove, ["the"], 4, tmp_path)


def test_the_task_hands_the_file_to_a_net_that_reads_glove(tmp_path):
    from types import SimpleNamespace

    from langrepr.tasks.label_embedding import LabelRegularisedSingleLabelTask

    glove = tmp_path / "glove.txt"
    glove.write_text(GLOVE)
    dm = datamodule(tmp_path, str(glove))
    dm.setup()
    net = LEAM(vocab_size=dm.tokenizer.vocab_size, num_labels=2, hidden_size=4, window=3)
    task = LabelRegularisedSingleLabelTask(net=net, optimizer=torch.optim.Adam, num_labels=2)
    task._trainer = SimpleNamespace(datamodule=dm)
    task.setup("fit")
    assert net.glove_path == str(dm.word_vectors_file)
    assert torch.equal(net.embedding.weight[dm.tokenizer.index["sports"]], torch.tensor([1.0, 2.0, 3.0, 4.0]))


def test_a_dry_run_without_the_vectors_starts_random_and_says_so(tmp_path, monkeypatch):
    from langrepr.data import standin

    monkeypatch.setenv(standin.ENV, "1")
    dm = datamodule(tmp_path, str(tmp_path / "absent.zip"))
    dm.setup()
    assert dm.word_vectors_file is None and dm.data_info["word_vectors"].startswith("random (dry run")
    monkeypatch.delenv(standin.ENV)
    with pytest.raises(UserError, match="do not exist"):                 # a real run stops with the line
        (tmp_path / "real").mkdir()
        datamodule(tmp_path / "real", str(tmp_path / "absent.zip")).setup()


class NoVocabTokenizer:
    """A tokenizer with no word list (the grid's wrapped piece / byte inputs): fine unless GloVe is asked for."""

    def __init__(self):
        self.inner = WordTokenizer(max_length=8, max_vocab=50)
        self.vocab_size, self.max_length = 50, 8

    def prepare(self, texts, cache_dir=None):
        self.inner.prepare(texts, cache_dir)
        self.vocab_size = self.inner.vocab_size

    def encode(self, texts):
        return self.inner.encode(texts)

    def cache_key(self):
        return "no-vocab"

    def name_ids(self, names):
        return self.inner.name_ids(names)


def test_a_tokenizer_without_a_vocabulary_builds_unless_vectors_are_asked_for(tmp_path):
    def dm(vectors):
        return TextClassificationDataModule("ag_news", data_dir=str(csv_folder(tmp_path)), class_names=["World", "Sports"],
                                            tokenizer=NoVocabTokenizer(), batch_size=4, cache_dir=str(tmp_path / "c"),
                                            word_vectors=vectors, word_vector_dim=4)
    plain = dm(None)
    plain.setup()
    assert plain.word_vectors_file is None
    shutil.rmtree(tmp_path / "agnews")
    with pytest.raises(UserError, match="needs a word tokenizer with a vocabulary; NoVocabTokenizer has none"):
        dm(str(tmp_path / "glove.txt")).setup()
