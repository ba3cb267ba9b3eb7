"""LEAM with its defining initialisation (issue 35 item 3): GloVe trained here on the training split, its rows and
the class names' mean vectors as LEAM's word and label starts, cached by its inputs; and the labelled share of
Fig. 2(b)."""

from types import SimpleNamespace

import pytest
import torch

from langrepr.data.classification.datamodule import TextClassificationDataModule
from langrepr.data.classification.vocab import WordTokenizer
from langrepr.errors import UserError
from langrepr.models.leam import LEAM
from langrepr.pipelines.trained_glove import TrainedGloveStart, glove_settings, trained_glove
from langrepr.tasks.label_embedding import LabelRegularisedSingleLabelTask

TINY = {"epochs": 2, "window": 3}


def folder(tmp_path):
    data = tmp_path / "agnews"
    data.mkdir(parents=True)
    rows = [f'"{1 + i % 2}","{"world cup goal" if i % 2 else "sports stocks fall"} report {i % 5}","the market"'
            for i in range(60)]
    (data / "train.csv").write_text("\n".join(rows) + "\n")
    (data / "test.csv").write_text('"1","secretword world","x"\n"2","secretword sports","x"\n')   # test-only word
    return data


def datamodule(tmp_path, **kw):
    return TextClassificationDataModule("ag_news", data_dir=str(folder(tmp_path)), class_names=["World", "Sports"],
                                        tokenizer=WordTokenizer(max_length=8, max_vocab=50), batch_size=4,
                                        cache_dir=str(tmp_path / "cache"), **kw)


def test_trained_glove_starts_leam_words_and_labels_from_training_text_only(tmp_path):
    dm = datamodule(tmp_path)
    dm.setup()
    net = LEAM(vocab_size=dm.tokenizer.vocab_size, num_labels=2, hidden_size=4, window=3, word_init="trained_glove",
               glove=TINY)
    task = LabelRegularisedSingleLabelTask(net=net, optimizer=torch.optim.Adam, num_labels=2)
    trainer = SimpleNamespace(datamodule=dm)
    task._trainer = trainer
    TrainedGloveStart().setup(trainer, task, "fit")      # Lightning calls callbacks' setup before the task's
    task.setup("fit")
    rows = {line.split(" ")[0]: torch.tensor([float(x) for x in line.split(" ")[1:]])
            for line in open(net.glove_path, encoding="utf-8")}
    assert "secretword" not in rows and "secretword" not in dm.tokenizer.index     # the test cut never reaches GloVe
    index = dm.tokenizer.index
    for word in ("world", "sports", "market"):
        assert torch.allclose(net.embedding.weight[index[word]], rows[word], atol=1e-5)
    assert torch.allclose(net.label_embedding[0], rows["world"], atol=1e-5)         # class "World" = its word's vector
    assert torch.allclose(net.label_embedding[1], rows["sports"], atol=1e-5)
    assert dm.data_info["word_vectors"].startswith("trained_glove") and dm.data_info["glove_docs"] == len(dm._raw["train"][0])


def test_the_glove_artefact_is_keyed_by_its_inputs(tmp_path):
    texts, vocab = ["a b c a b", "b c d"], ["[PAD]", "[UNK]", "a", "b", "c", "d"]
    first, _ = trained_glove(texts, vocab, 4, tmp_path, TINY)
    stamp = first.stat().st_mtime_ns
    again, _ = trained_glove(texts, vocab, 4, tmp_path, TINY)
    assert again == first and again.stat().st_mtime_ns == stamp                     # reused, not retrained
    others = {trained_glove(texts + ["a d"], vocab, 4, tmp_path, TINY)[0],            # corpus content
              trained_glove(texts, vocab, 6, tmp_path, TINY)[0],                      # dims
              trained_glove(texts, vocab, 4, tmp_path, {**TINY, "window": 2})[0],     # window
              trained_glove(texts, vocab, 4, tmp_path, {**TINY, "epochs": 3})[0],     # epochs
              trained_glove(texts, vocab, 4, tmp_path, {**TINY, "seed": 2})[0]}       # seed
    assert first not in others and len(others) == 5


def test_a_cold_glove_cache_leaves_the_cells_random_stream_as_a_warm_one_does(tmp_path):
    """The cell's dropout and batch order follow its seed, not whether GloVe was trained or read from the cache.

    Before the fix, fitting GloVe reseeded the global RNG, so the first cell of a sweep (cold cache) drew other
    numbers than the next ones (warm cache): LEAM + GloVe moved between identical re-runs (88.49 vs 88.57).
    """
    texts, vocab = ["a b c a b", "b c d"], ["[PAD]", "[UNK]", "a", "b", "c", "d"]
    draws = []
    for _ in ("cold", "warm"):
        torch.manual_seed(7)
        trained_glove(texts, vocab, 4, tmp_path, TINY)
        draws.append(torch.rand(3))
    torch.manual_seed(7)
    assert torch.equal(draws[0], draws[1]) and torch.equal(draws[0], torch.rand(3))


@pytest.mark.parametrize("make,match", [
    (lambda: glove_settings({"epoch": 3}), "unknown setting"),
    (lambda: LEAM(vocab_size=10, num_labels=2, hidden_size=4, window=3, word_init="glove"), "word_init must be"),
])
def test_a_bad_glove_setting_is_one_line(make, match):
    with pytest.raises(UserError, match=match):
        make()


def test_a_label_fraction_labels_a_share_of_the_training_rows_with_the_whole_vocabulary(tmp_path):
    whole = datamodule(tmp_path / "a")
    whole.setup()
    part = datamodule(tmp_path / "b", label_fraction=0.1, seed=3)
    part.setup()
    n = len(whole._raw["train"][0])
    assert len(part._raw["train"][0]) == int(n * 0.1) and part.data_info["rows"]["train"] == int(n * 0.1)
    assert part.tokenizer.vocab == whole.tokenizer.vocab                              # vocabulary from every text
    assert part._raw["val"] == whole._raw["val"] and part._raw["test"] == whole._raw["test"]
    other = datamodule(tmp_path / "c", label_fraction=0.1, seed=4)
    other.setup()
    assert other._raw["train"] != part._raw["train"]                                  # the draw follows the run's seed
    with pytest.raises(UserError, match="label_fraction=0"):
        datamodule(tmp_path / "d", label_fraction=0)
