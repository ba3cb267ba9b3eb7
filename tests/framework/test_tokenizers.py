"""Tokenizer rules with explicit expected ids (EWE paper arXiv 2302.13475 §4.2, §6.2)."""

import random

import pytest
import torch

from langrepr.data.tokenizers import (
    CodepointTokenizer,
    RawByteTokenizer,
    SubwordTokenizer,
    WhitespaceByteTokenizer,
)

F, O_, C, U, S = (ord(ch) for ch in "Focus")


def test_whitespace_truncate_pads_and_masks():
    tok = WhitespaceByteTokenizer(u=5, v=4)
    out = tok.encode(["Focus on the elements", "  a\x00b\tc\n"])
    assert out["input_ids"].dtype == torch.long and out["input_ids"].shape == (2, 5, 4)
    assert out["input_ids"][0].tolist() == [
        [F, O_, C, U],  # "Focus" truncated to v = 4 bytes
        [ord("o"), ord("n"), 0, 0],
        [ord("t"), ord("h"), ord("e"), 0],
        [ord("e"), ord("l"), ord("e"), ord("m")],
        [0, 0, 0, 0],  # sequence padded to u
    ]
    # NUL stripped ("a\x00b" -> "ab"), any whitespace separates materials
    assert out["input_ids"][1, :2].tolist() == [[97, 98, 0, 0], [99, 0, 0, 0]]
    assert out["attention_mask"].tolist() == [[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]]


def test_whitespace_split_overflow_and_sequence_truncation():
    tok = WhitespaceByteTokenizer(u=4, v=4, overflow="split")
    ids = tok.encode(["Focus on the elements"])["input_ids"][0].tolist()
    assert ids == [[F, O_, C, U], [S, 0, 0, 0], [ord("o"), ord("n"), 0, 0], [ord("t"), ord("h"), ord("e"), 0]]
    short = WhitespaceByteTokenizer(u=2, v=4).encode(["a b c d"])["input_ids"][0].tolist()
    assert short == [[97, 0, 0, 0], [98, 0, 0, 0]]


def test_whitespace_utf8_bytes_and_keys():
    ids = WhitespaceByteTokenizer(u=1, v=4).encode(["é€"])["input_ids"][0, 0].tolist()
    assert ids == [0xC3, 0xA9, 0xE2, 0x82]  # UTF-8 bytes, the 3-byte "€" cut after 2 bytes
    a, b = WhitespaceByteTokenizer(2, 4), WhitespaceByteTokenizer(2, 4, overflow="split")
    assert a.cache_key() != b.cache_key() and a.vocab_size == 256
    with pytest.raises(ValueError, match="truncate, split"):
        WhitespaceByteTokenizer(2, 4, overflow="wrap")
    assert WhitespaceByteTokenizer(3, 2).encode([])["input_ids"].shape == (0, 3, 2)


def test_raw_bytes_chunking():
    out = RawByteTokenizer(u=3, v=4).encode(["Focus on", "Focus on the elements"])
    assert out["input_ids"][0].tolist() == [[F, O_, C, U], [S, 32, ord("o"), ord("n")], [0, 0, 0, 0]]
    assert out["input_ids"][1, 2].tolist() == [
        32,
        ord("t"),
        ord("h"),
        ord("e"),
    ]  # whitespace kept, cut at u*v
    assert out["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]


def _corpus(n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = [
        "claim",
        "method",
        "apparatus",
        "wherein",
        "comprising",
        "substrate",
        "layer",
        "signal",
        "the",
        "a",
    ]
    return [" ".join(rng.choice(words) + rng.choice(["", "s", "ing"]) for _ in range(20)) for _ in range(n)]


@pytest.mark.parametrize("algorithm", ["wordpiece", "unigram"])
def test_subword_train_cache_reload(tmp_path, monkeypatch, algorithm):
    texts = _corpus()
    tok = SubwordTokenizer(algorithm, vocab_size=120, max_length=12)
    with pytest.raises(RuntimeError, match="prepare"):
        tok.cache_key()
    tok.prepare(texts, tmp_path)
    assert (tmp_path / f"{tok.cache_key()}.json").exists()
    out = tok.encode(["Claim METHOD", texts[0]])
    ids, mask = out["input_ids"], out["attention_mask"]
    assert ids.shape == mask.shape == (2, 12) and ids.dtype == torch.long
    assert ids[0, 0].item() == 2 and 3 in ids[0].tolist()  # [CLS]=2 ... [SEP]=3
    assert ids[0][mask[0] == 0].eq(0).all() and mask[1].all()  # pad id 0; long text truncated to 12
    assert ids[1, -1].item() == 3  # truncation keeps [SEP]
    assert 0 < tok.trained_vocab_size <= tok.vocab_size == 120 and ids.max() < tok.vocab_size

    # Same texts: loaded from cache, no training.
    import langrepr.data.tokenizers as mod

    monkeypatch.setattr(mod.SubwordTokenizer, "_train", lambda *a: pytest.fail("retrained"))
    again = SubwordTokenizer(algorithm, vocab_size=120, max_length=12)
    again.prepare(iter(texts), tmp_path)  # any iterable
    assert again.cache_key() == tok.cache_key()
    assert torch.equal(again.encode(["Claim METHOD", texts[0]])["input_ids"], ids)
    # Different texts: a different key (would retrain).
    other = SubwordTokenizer(algorithm, vocab_size=120, max_length=12)
    monkeypatch.undo()
    other.prepare(_corpus(seed=1), tmp_path)
    assert other.cache_key() != tok.cache_key()


_TRAIN_IN_FRESH_PROCESS = """
import random, sys
from langrepr.data.tokenizers import SubwordTokenizer
rng = random.Random(0)
letters = "abcdefghijklmnopqrstuvwxyz"
# every letter equally likely: many continuation characters and many tied counts and scores
texts = [" ".join("".join(rng.choice(letters) for _ in range(rng.randint(2, 5))) for _ in range(30))
         for _ in range(100)]
tok = SubwordTokenizer(sys.argv[1], vocab_size=400, max_length=16)
tok.prepare(texts, sys.argv[2])
"""


@pytest.mark.parametrize("algorithm", ["wordpiece", "unigram"])
def test_subword_training_is_deterministic_across_processes(tmp_path, algorithm):
    """The same texts give the same vocabulary bytes in any process.

    A cold cache retrains, so a vocabulary that depends on the process (Rust HashMap order inside
    `tokenizers`: WordPiece numbered its '##x' pieces in that order and broke merge ties by those ids;
    Unigram ordered tied scores by it) moved a same-seed re-run (EWE Table 3's BERT_ORIG, 2 F1).
    """
    import os
    import subprocess
    import sys

    runs = []
    for run, (hash_seed, threads) in enumerate([("1", "1"), ("2", "2")]):   # side by side: two imports of torch
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, RAYON_NUM_THREADS=threads)
        cache = tmp_path / f"run{run}"
        runs.append((cache, subprocess.Popen([sys.executable, "-c", _TRAIN_IN_FRESH_PROCESS, algorithm, str(cache)],
                                             env=env)))
    files = []
    for cache, proc in runs:
        assert proc.wait() == 0
        (path,) = cache.glob("*.json")
        files.append(path)
    assert files[0].name == files[1].name
    assert files[0].read_bytes() == files[1].read_bytes()


def test_subword_validation():
    with pytest.raises(ValueError, match="wordpiece, unigram"):
        SubwordTokenizer("bpe", 100, 16)
    with pytest.raises(RuntimeError, match="prepare"):
        SubwordTokenizer("wordpiece", 100, 16).encode(["x"])


def test_codepoints():
    tok = CodepointTokenizer(max_length=6)
    out = tok.encode(["hé\x00llo wörld", "a"])
    assert out["input_ids"].tolist() == [
        [0xE000, ord("h"), ord("é"), ord("l"), ord("l"), 0xE001],  # NUL stripped, truncated to 4 chars
        [0xE000, ord("a"), 0xE001, 0, 0, 0],
    ]
    assert out["attention_mask"].tolist() == [[1] * 6, [1, 1, 1, 0, 0, 0]]
    assert tok.encode(["😀"])["input_ids"][0, 1].item() == 0x1F600  # astral plane code point, not UTF-16
