"""`dataset.datamodule.test_subsample` (issue 23 item 4): the paper's 14.5k / 15.4k test documents, seeded, the
same rows for every model seed, off by default."""

import numpy as np
import pytest

from conftest import WordLengthTokenizer
from langrepr.data.patents.synthetic import generate
from langrepr.data.patents.uspto import PatentDataModule, check_test_subsample, subsample_rows
from langrepr.errors import UserError


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    out = tmp_path_factory.mktemp("syn_sub")
    generate(out, n_train=120, n_test=50, n_subclasses=8, seed=5, shard_rows=64)
    return out


def rows_of(dm, split):
    return dm.data_info["rows"][split]


def test_off_by_default_scores_every_test_document(export, tmp_path):
    dm = PatentDataModule(data_dir=str(export), tokenizer=WordLengthTokenizer("fake-sub"), cache_dir=str(tmp_path), seed=1)
    dm.setup()
    assert rows_of(dm, "2015A") == 50 and rows_of(dm, "2015B") == 50


def test_subsample_takes_the_configured_size_and_the_same_rows_for_every_model_seed(export, tmp_path):
    plans = []
    for seed in (1, 2):
        dm = PatentDataModule(data_dir=str(export), tokenizer=WordLengthTokenizer("fake-sub"), cache_dir=str(tmp_path / str(seed)),
                              seed=seed, test_subsample={"2015A": 20, "2015B": 30})
        dm.setup()
        assert rows_of(dm, "2015A") == 20 and rows_of(dm, "2015B") == 30
        plans.append(dm._plan({"train": 120, "2015A": 50, "2015B": 50}))
    assert np.array_equal(plans[0]["2015A"], plans[1]["2015A"])      # fixed by test_subsample_seed, not the run seed
    assert np.array_equal(plans[0]["2015B"], plans[1]["2015B"])
    assert not np.array_equal(plans[0]["train"], plans[1]["train"])  # the train/val hold-out still follows the seed


def test_subsample_rows_is_deterministic_and_hand_checked():
    # recorded once (numpy PCG64, seed [0, 1000 + half]): a change of the draw would change the paper-size test sets
    first = subsample_rows(10, 5, 0, 1)
    assert first.tolist() == [3, 7, 9, 1, 0]
    assert len(set(first.tolist())) == 5 and all(0 <= i < 10 for i in first)
    assert subsample_rows(10, 5, 0, 1).tolist() == first.tolist()
    assert subsample_rows(10, 5, 0, 2).tolist() != first.tolist()      # each half its own draw
    assert sorted(subsample_rows(4, 9, 0, 1).tolist()) == [0, 1, 2, 3]  # fewer rows than asked: all of them


def test_full_profile_sets_the_paper_sizes(compose_cfg):
    for table in ("ewe_table3", "ewe_table4", "ewe_table5"):
        full = compose_cfg(f"experiment={table}", "profile=full", "dataset=uspto").dataset.datamodule
        assert dict(full.test_subsample) == {"2015A": 14500, "2015B": 15400}
        quick = compose_cfg(f"experiment={table}", "profile=quick").dataset.datamodule
        assert quick.get("test_subsample") is None


@pytest.mark.parametrize("bad", [{"2016A": 10}, {"2015A": 0}, {"2015A": "many"}, [1, 2], 5])
def test_a_bad_switch_is_one_line(bad):
    with pytest.raises(UserError, match="test_subsample"):
        check_test_subsample(bad)
