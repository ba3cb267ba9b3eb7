"""TensorCoder Tables 2-3: the FLOPs length (issue 23 item 4). Full: the longest training source as it is; quick:
as the model reads it, cut at max_source_len. The count at that length is checked against the hand formula."""

import gzip
from pathlib import Path

import pytest

from langrepr.data.english.translation import EOS_ID, TranslationDataModule
from langrepr.errors import UserError


def parallel(folder: Path) -> dict:
    folder.mkdir(parents=True)
    en = [f"the cat number {i} sits here ." for i in range(30)]
    en[7] = " ".join(f"word{k % 9} the cat" for k in range(20))      # one training source far past the cap
    de = [f"die Katze nummer {i} sitzt hier ." for i in range(30)]
    for split, k in [("train", 30), ("val", 4), ("test", 4)]:
        for lang, lines in [("en", en), ("de", de)]:
            with gzip.open(folder / f"{split}.{lang}.gz", "wt", encoding="utf-8") as fh:
                fh.write("\n".join(lines[:k]) + "\n")
    return {"train": ["train.en.gz", "train.de.gz"], "validation": ["val.en.gz", "val.de.gz"],
            "test": ["test.en.gz", "test.de.gz"]}


def datamodule(tmp_path: Path, flops_length: str) -> TranslationDataModule:
    folder = tmp_path / "data" / "toy"
    files = parallel(folder) if not folder.exists() else {
        "train": ["train.en.gz", "train.de.gz"], "validation": ["val.en.gz", "val.de.gz"],
        "test": ["test.en.gz", "test.de.gz"]}
    dm = TranslationDataModule("toy", data_dir=str(tmp_path / "data"), subdir="toy", files=files, vocab_size=200,
                               min_frequency=1, max_source_len=16, flops_length=flops_length,
                               cache_dir=str(tmp_path / "cache"))
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_longest_counts_the_training_source_as_it_is_capped_as_the_model_reads_it(tmp_path):
    capped, longest = datamodule(tmp_path, "capped"), datamodule(tmp_path, "longest")
    assert capped.net_kwargs["flops_seq_len"] == 16                      # max_source_len
    long_source = longest._all_pairs()["train"][7][0]
    n = len(longest.tokenizer.encode(long_source).ids) + 1              # its tokens and its EOS
    assert n > 16 and longest.net_kwargs["flops_seq_len"] == n == longest.longest_train_source
    assert longest._data["train"][7][0][-1] == EOS_ID and len(longest._data["train"][7][0]) == 16   # still read cut


def test_the_count_at_that_length_is_the_hand_formula(tmp_path):
    from langrepr.models.baseline_attention import MultiHeadSDPAttention
    from langrepr.models.tensorcoder import Seq2SeqModel

    def one_head(d_model):
        return MultiHeadSDPAttention(d_model=d_model, n_heads=1)

    # hand-computed: Transformer-1head per layer 8 N d^2 + 4 N^2 d; N = 40, d = 16: 81,920 + 102,400 = 184,320
    net = Seq2SeqModel(vocab_size=50, encoder_attention=one_head, decoder_attention=one_head,
                       cross_attention=one_head, hidden_size=16, num_layers=2, intermediate_size=32, max_len=13,
                       flops_seq_len=40)
    metrics = net.extra_metrics()
    assert metrics["model/attn_gflops_layer"] * 1e9 == pytest.approx(184_320)
    assert metrics["model/attn_gflops"] * 1e9 == pytest.approx(2 * 184_320)     # 2 encoder layers, beyond max_len 13


def test_full_profile_counts_at_the_longest_quick_keeps_the_cap(compose_cfg):
    for table in ("tensorcoder_table2", "tensorcoder_table3"):
        assert compose_cfg(f"experiment={table}", "profile=full").dataset.datamodule.flops_length == "longest"
        assert compose_cfg(f"experiment={table}", "profile=quick").dataset.datamodule.get("flops_length") is None


def test_an_unknown_flops_length_is_one_line(tmp_path):
    with pytest.raises(UserError, match="flops_length"):
        TranslationDataModule("toy", data_dir=str(tmp_path), flops_length="max")
