"""TensorCoder data: word-level LM blocks (PTB/WikiText-103) and parallel corpora (WMT16/IWSLT16 stand-ins).

Unit tests use tiny files written to tmp_path. Tests marked "real data" read the copies in
$LANGREPR_DATA_DIR (or ../shared/data) and skip, saying why, when those are absent.
"""

import gzip
import os
from pathlib import Path

import pytest
import torch

from langrepr.data.english.text_lm import (
    MASK_ID,
    PAD_ID,
    TextLMDataModule,
    build_vocab,
    line_tokens,
    to_blocks,
)
from langrepr.data.english.translation import (
    BOS_ID,
    EOS_ID,
    IGNORE_INDEX,
    LengthBucketBatchSampler,
    TranslationDataModule,
)
from langrepr.errors import UserError

PTB_FILES = {"train": "ptb.train.txt", "validation": "ptb.valid.txt", "test": "ptb.test.txt"}


def real_data_root() -> Path | None:
    env = os.environ.get("LANGREPR_DATA_DIR")
    for candidate in ([Path(env)] if env else []) + [Path(__file__).resolve().parents[3] / "shared" / "data"]:
        if candidate.is_dir():
            return candidate
    return None


def needs_real(subdir: str) -> Path:
    root = real_data_root()
    if root is None or not (root / subdir).is_dir():
        pytest.skip(f"real data {subdir}/ not found: set LANGREPR_DATA_DIR to a folder laid out like shared/data")
    return root


# ---------------------------------------------------------------- word-level LM
def test_line_tokens_vocab_and_blocks():
    toks = line_tokens([" the cat sat ", "", " the dog "])
    assert toks == ["the", "cat", "sat", "<eos>", "the", "dog", "<eos>"]
    vocab = build_vocab(toks, max_vocab=None)
    assert vocab["<pad>"] == PAD_ID and vocab["<mask>"] == MASK_ID
    assert vocab["<eos>"] == 2 and vocab["the"] == 3 and vocab["cat"] == 4  # by frequency, ties alphabetical
    capped = build_vocab(toks, max_vocab=5)
    assert len(capped) == 5 and "<unk>" in capped
    ids, mask = to_blocks(list(range(2, 9)), seq_len=3)
    assert ids.tolist() == [[2, 3, 4], [5, 6, 7], [8, PAD_ID, PAD_ID]]
    assert mask.tolist() == [[1, 1, 1], [1, 1, 1], [1, 0, 0]]


def _write_ptb_like(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, n in [("ptb.train.txt", 60), ("ptb.valid.txt", 10), ("ptb.test.txt", 10)]:
        (folder / name).write_text("".join(f" w{i % 7} w{i % 3} <unk> N\n" for i in range(n)))


def test_text_lm_datamodule_on_local_files(tmp_path):
    _write_ptb_like(tmp_path / "data" / "ptb")
    dm = TextLMDataModule("ptb", seq_len=8, data_dir=str(tmp_path / "data"), subdir="ptb", files=PTB_FILES,
                          batch_size=4, cache_dir=str(tmp_path / "cache"), max_eval_samples=3)
    dm.prepare_data()
    dm.setup("fit")
    assert dm.net_kwargs == {"vocab_size": len(dm.vocab), "pad_token_id": 0, "max_len": 8, "flops_seq_len": 8}
    assert dm.task_kwargs == {"mask_token_id": MASK_ID, "num_special_tokens": 2}
    assert dm.test_splits == ["test"]
    batch = next(iter(dm.train_dataloader()))
    assert batch["input_ids"].shape == (4, 8) and batch["attention_mask"].dtype == torch.long
    assert len(dm.val_dataloader().dataset) == 3
    assert list((tmp_path / "cache").glob("ptb-*.pt")), "encoded splits are cached"


def test_text_lm_missing_files_and_sources_are_user_errors(tmp_path):
    dm = TextLMDataModule("ptb", seq_len=8, data_dir=str(tmp_path), subdir="ptb", files=PTB_FILES,
                          cache_dir=str(tmp_path / "cache"))
    with pytest.raises(UserError, match="ptb.train.txt not found"):
        dm.prepare_data()
    with pytest.raises(UserError, match="no data source"):
        TextLMDataModule("ptb", seq_len=8, data_dir=None, hub_name=None)


def test_real_ptb_counts(tmp_path):
    root = needs_real("ptb")
    dm = TextLMDataModule("ptb", seq_len=100, data_dir=str(root), subdir="ptb", files=PTB_FILES,
                          cache_dir=str(tmp_path))
    dm.prepare_data()
    dm.setup("fit")
    assert len(dm.vocab) == 10_000 + 2  # Mikolov's 10k words (with <unk>, <eos>) + <pad>, <mask>
    # 929,589 / 73,760 / 82,430 tokens with <eos> (shared/data/ptb/SOURCE.md), cut into blocks of 100
    assert [len(dm._data[s]) for s in ("train", "validation", "test")] == [9296, 738, 825]
    assert int(dm._data["train"].tensors[1].sum()) == 929_589


# ---------------------------------------------------------------- translation
def _write_parallel(folder: Path, n: int = 40) -> dict:
    folder.mkdir(parents=True)
    en = [f"the cat number {i} sits &apos;here&apos; ." for i in range(n)]
    de = [f"die Katze nummer {i} sitzt hier ." for i in range(n)]
    for split, k in [("train", n), ("val", 5), ("test", 5)]:
        for lang, lines in [("en", en), ("de", de)]:
            with gzip.open(folder / f"{split}.{lang}.gz", "wt", encoding="utf-8") as fh:
                fh.write("\n".join(lines[:k]) + "\n")
    return {"train": ["train.en.gz", "train.de.gz"], "validation": ["val.en.gz", "val.de.gz"],
            "test": ["test.en.gz", "test.de.gz"]}


def test_translation_datamodule_batches_and_detokenize(tmp_path):
    files = _write_parallel(tmp_path / "data" / "toy")
    dm = TranslationDataModule("toy", data_dir=str(tmp_path / "data"), subdir="toy", files=files, vocab_size=120,
                               min_frequency=1, batch_size=4, unescape_xml=True, cache_dir=str(tmp_path / "cache"))
    dm.prepare_data()
    dm.setup("fit")
    kw = dm.net_kwargs
    assert kw["vocab_size"] <= 120 and (kw["bos_token_id"], kw["eos_token_id"]) == (BOS_ID, EOS_ID)
    assert kw["flops_seq_len"] == max(len(s) for s, _, _ in dm._data["train"])
    batch = next(iter(dm.val_dataloader()))
    assert batch["input_ids"].shape[0] == 4 and (batch["input_ids"][:, 0] != 0).all()
    assert batch["references"][0] == "die Katze nummer 0 sitzt hier ."
    # teacher forcing: decoder input = BOS + target, labels = target + EOS, padding ignored
    assert (batch["decoder_input_ids"][:, 0] == BOS_ID).all()
    n = int(batch["decoder_attention_mask"][0].sum())
    assert batch["labels"][0, n - 1] == EOS_ID and (batch["labels"][0, n:] == IGNORE_INDEX).all()
    assert torch.equal(batch["decoder_input_ids"][0, 1:n], batch["labels"][0, : n - 1])
    target_ids = batch["labels"][0, : n - 1].tolist()
    assert dm.detokenize(target_ids) == batch["references"][0]
    src_text = dm.detokenize(batch["input_ids"][0][batch["attention_mask"][0].bool()].tolist()[:-1])
    assert src_text == "the cat number 0 sits 'here' ."  # Moses escapes undone
    assert "detokenize" in dm.task_kwargs


def test_length_bucket_sampler_covers_every_index_once():
    torch.manual_seed(0)
    lengths = torch.randint(1, 60, (1000,)).tolist()
    for shuffle in (False, True):
        sampler = LengthBucketBatchSampler(lengths, batch_size=16, shuffle=shuffle, pool_batches=10)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for b in batches for i in b) == list(range(1000))
        spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)
        assert spread < 10, "batches hold sentences of similar length (random batches: ~50)"


def test_translation_holdout_and_errors(tmp_path):
    files = _write_parallel(tmp_path / "data" / "toy")
    dm = TranslationDataModule("toy", data_dir=str(tmp_path / "data"), subdir="toy",
                               files={"train": files["train"], "test": files["test"]}, holdout_validation=6,
                               vocab_size=100, min_frequency=1, cache_dir=str(tmp_path / "cache"))
    dm.prepare_data()
    dm.setup("fit")
    assert [len(dm._data[s]) for s in ("train", "validation", "test")] == [34, 6, 5]
    (tmp_path / "data" / "toy" / "bad.de").write_text("only one line\n")
    (tmp_path / "data" / "toy" / "bad.en").write_text("one\ntwo\n")
    bad = TranslationDataModule("toy", data_dir=str(tmp_path / "data"), subdir="toy",
                                files={"train": ["bad.en", "bad.de"]}, cache_dir=str(tmp_path / "c2"))
    with pytest.raises(UserError, match="line-aligned"):
        bad.prepare_data()


def test_real_multi30k_splits(tmp_path):
    root = needs_real("multi30k")
    dm = TranslationDataModule(
        "multi30k", data_dir=str(root), subdir="multi30k", vocab_size=2000, cache_dir=str(tmp_path),
        files={"train": ["train.en.gz", "train.de.gz"], "validation": ["val.en.gz", "val.de.gz"],
               "test": ["test_2016_flickr.en.gz", "test_2016_flickr.de.gz"]})
    dm.prepare_data()
    dm.setup("fit")
    assert [len(dm._data[s]) for s in ("train", "validation", "test")] == [29_000, 1_014, 1_000]


def test_real_wmt16_slice_holdout(tmp_path):
    root = needs_real("wmt16_ende")
    dm = TranslationDataModule(
        "wmt16_slice", data_dir=str(root), subdir="wmt16_ende/opennmt_toy", holdout_validation=500,
        files={"train": ["src-train.txt", "tgt-train.txt"], "test": ["src-val.txt", "tgt-val.txt"]},
        unescape_xml=True, vocab_size=2000, cache_dir=str(tmp_path))
    dm.prepare_data()
    dm.setup("fit")
    # one training line has an empty English side and is dropped
    assert [len(dm._data[s]) for s in ("train", "validation", "test")] == [9_499, 500, 50]
    assert not any("&apos;" in ref for _, _, ref in dm._data["train"])
