"""The dry run's MIMIC-III stand-in (issue 23 item 1): without the licence-gated files, a dry job reads generated
files in the Mullenbach et al. format at the paper's 50 codes; a real run still stops with one line."""

import pytest

from langrepr.data import standin
from langrepr.data.classification.datamodule import TextClassificationDataModule
from langrepr.data.classification.vocab import WordTokenizer
from langrepr.errors import UserError


def mimic(tmp_path):
    return TextClassificationDataModule("mimic50", data_dir=None, class_names=None, multilabel=True,
                                        tokenizer=WordTokenizer(max_length=305, max_vocab=5000), batch_size=10,
                                        cache_dir=str(tmp_path / "cache"))


def test_a_real_run_without_the_files_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv(standin.ENV, raising=False)
    with pytest.raises(UserError, match="MIMIC-III 50-code files not found"):
        mimic(tmp_path).setup()
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob("dry-standin-*"))


def test_a_dry_run_reads_the_stand_in_at_50_codes_and_full_length(tmp_path, monkeypatch):
    monkeypatch.setenv(standin.ENV, "1")
    dm = mimic(tmp_path)
    dm.setup()
    assert dm.net_kwargs["num_labels"] == 50 and "stand-in" in dm.data_info["standin"]
    assert dm.data_info["rows"] == {"train": 400, "val": 40, "test": 40}
    batch = next(iter(dm.train_dataloader()))
    assert batch["input_ids"].shape[1] == 305                       # notes longer than the 305 words read
    before = (tmp_path / "cache" / "dry-standin-mimic50" / "train_50.csv").read_bytes()
    standin.mimic50_files(tmp_path / "again")
    assert (tmp_path / "again" / "dry-standin-mimic50" / "train_50.csv").read_bytes() == before   # deterministic
