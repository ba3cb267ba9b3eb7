"""The Bit Cipher probe behind Tables 1-7: seen/unseen scores by hand, and the MLP reaching the ceiling of a
type-level probe (each seen word's majority tag) on a Zipf-skewed vocabulary, where rare words count."""

from __future__ import annotations

import numpy as np
import pytest

from langrepr.pipelines.bitcipher.probing import majority_probe, mlp_probe, score


def test_seen_and_unseen_accuracy_by_hand():
    gold = [(["The", "cat", "sat"], ["DET", "NOUN", "VERB"]), (["A", "dog"], ["DET", "NOUN"])]
    predicted = [["DET", "NOUN", "NOUN"], ["DET", "VERB"]]
    metrics = score("pos", gold, predicted, train_words={"the", "cat", "a"})
    assert metrics["acc"] == pytest.approx(300 / 5)
    assert metrics["seen_acc"] == pytest.approx(100.0)      # the, cat, a: all right (case-folded)
    assert metrics["unseen_acc"] == pytest.approx(0.0)      # sat, dog: both wrong
    all_seen = score("pos", gold, predicted, train_words={"the", "cat", "sat", "a", "dog"})
    assert all_seen["seen_acc"] == all_seen["acc"] and all_seen["unseen_acc"] is None   # undefined, not NaN


def zipf_splits(types: int = 120, tokens: int = 6000, tags: int = 5, seed: int = 0):
    """Sentences over `types` words with Zipf frequencies; every word has one fixed tag (so a type-level probe
    can be perfect on seen words), and the rare half of the vocabulary carries a sizeable share of tokens."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(types)]
    tag_of = {w: f"T{rng.integers(tags)}" for w in words}
    p = 1.0 / np.arange(1, types + 1)
    p /= p.sum()

    def split(n):
        flat = rng.choice(words, size=n, p=p)
        return [(list(flat[i:i + 10]), [tag_of[w] for w in flat[i:i + 10]]) for i in range(0, n, 10)]

    return {"train": split(tokens), "dev": split(tokens // 4), "test": split(tokens // 4)}, words


def test_mlp_probe_reaches_the_majority_row_on_seen_words():
    splits, words = zipf_splits()
    vectors = np.random.default_rng(1).standard_normal((len(words) + 1, 32))   # random codes: pure memorising
    probe = mlp_probe("pos", splits, words, vectors, seed=1, hidden=64, dropout=0.5, epochs=8, lr=1e-2,
                      batch_size=64)
    majority = majority_probe("pos", splits)
    assert majority["test_seen_acc"] == 100.0                    # tags are a function of the word
    assert probe["test_seen_acc"] >= 97.0, probe                 # the probe memorises rare words too


def test_dropout_placement_switch():
    from torch import nn

    from langrepr.errors import UserError
    from langrepr.pipelines.bitcipher.probing import ProbeMLP

    def layers(at):
        return [type(m).__name__ for m in ProbeMLP(8, 4, 3, dropout_at=at).net]

    assert layers("hidden") == ["Linear", "LeakyReLU", "Dropout", "Linear", "LogSoftmax"]   # the default
    assert layers("input") == ["Dropout", "Linear", "LeakyReLU", "Linear", "LogSoftmax"]
    assert layers("both").count("Dropout") == 2
    assert isinstance(ProbeMLP(8, 4, 3, dropout=0.3).net[2], nn.Dropout) and ProbeMLP(8, 4, 3, dropout=0.3).net[2].p == 0.3
    with pytest.raises(UserError, match="dropout_at"):
        ProbeMLP(8, 4, 3, dropout_at="output")


def test_standardise_makes_the_probe_blind_to_each_dimension_scale():
    """Standardised, a vector set scaled per dimension gives the same probe as the set itself; unstandardised not."""
    splits, words = zipf_splits(types=60, tokens=1500)
    vectors = np.random.default_rng(2).standard_normal((len(words) + 1, 16))
    scaled = vectors * np.geomspace(1e-3, 1e2, 16) + 5.0
    kwargs = dict(seed=1, hidden=16, dropout=0.0, epochs=2, lr=1e-2, batch_size=64)
    same = mlp_probe("pos", splits, words, vectors, standardise=True, **kwargs)
    assert mlp_probe("pos", splits, words, scaled, standardise=True, **kwargs)["dev_acc"] == pytest.approx(
        same["dev_acc"], abs=1e-6)
    assert mlp_probe("pos", splits, words, scaled, **kwargs)["dev_acc"] != pytest.approx(same["dev_acc"], abs=1e-6)


def test_patience_stops_and_schedule_is_checked():
    from langrepr.errors import UserError

    splits, words = zipf_splits(types=40, tokens=800)
    vectors = np.zeros((len(words) + 1, 4))                     # nothing to learn: the dev score never improves
    out = mlp_probe("pos", splits, words, vectors, seed=1, hidden=4, epochs=20, patience=2, schedule="linear")
    assert out["best_epoch"] == 1 and out["epochs_run"] == 3
    with pytest.raises(UserError, match="unknown probe schedule 'cosine'"):
        mlp_probe("pos", splits, words, vectors, seed=1, schedule="cosine")
