"""Every derived cache is keyed by the content of its inputs plus its settings: one changed byte, a new cache.

Bit Cipher corpus shards and vector artefacts, multi-hot token lists, morpheme analyses and pretrained
checkpoints, and the subword tokenizers, each on tiny files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langrepr.data import integrity
from tiny_data import flip_one_byte, write_english_probe_data


@pytest.fixture(autouse=True)
def own_digest_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))


def write_text_corpus(root: Path, lines: list[str]) -> Path:
    (root / "ptb").mkdir(parents=True, exist_ok=True)
    (root / "ptb" / "ptb.train.txt").write_text("".join(line + "\n" for line in lines))
    return root


LINES = [["the cat sat on the mat", "john saw the dog in paris", "a big red dog ran"][i % 3] for i in range(30)]


# ---------------------------------------------------------------- integrity helpers

def test_recording_sees_files_opened_for_reading_under_the_roots_only(tmp_path):
    data, elsewhere = tmp_path / "data", tmp_path / "outputs"
    data.mkdir()
    elsewhere.mkdir()
    (data / "in.txt").write_text("x")
    (elsewhere / "other.txt").write_text("y")
    with integrity.recording_reads([data], exclude=[data / "skip"]) as reads:
        (data / "in.txt").read_text()
        (elsewhere / "other.txt").read_text()
        (data / "written.txt").write_text("z")                              # written, not read
        with integrity.recording_reads([elsewhere]) as inner:                          # nested: each sees its own roots
            (elsewhere / "other.txt").read_text()
    assert reads.files == {str((data / "in.txt").resolve())}
    assert inner.files == {str((elsewhere / "other.txt").resolve())}
    assert set(reads.digests()) == reads.files


def test_digests_are_cached_by_stat_and_redone_after_a_write(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    path.write_text("one")
    first = integrity.file_digests([path])
    calls = []
    monkeypatch.setattr(integrity, "sha256_stream", lambda p: calls.append(p) or "x")
    assert integrity.file_digests([path]) == first and not calls                       # unchanged: not read again
    path.write_text("two")
    assert integrity.file_digests([path])[str(path.resolve())] == "x" and calls        # changed: read again


# ---------------------------------------------------------------- Bit Cipher

def test_corpus_shards_are_keyed_by_the_text(tmp_path):
    from langrepr.pipelines.bitcipher.corpus_shards import merged_counts, tokenise_corpus

    sources = [{"path": "ptb/ptb.train.txt"}]
    one = write_text_corpus(tmp_path / "one", LINES)
    two = write_text_corpus(tmp_path / "two", LINES[:10])                    # same relative path, other text
    first = tokenise_corpus(tmp_path / "cache", sources, one, shard_tokens=50, workers=1)
    second = tokenise_corpus(tmp_path / "cache", sources, two, shard_tokens=50, workers=1)
    assert first != second and merged_counts(second)[3] < merged_counts(first)[3]
    copy = write_text_corpus(tmp_path / "copy", LINES)
    assert tokenise_corpus(tmp_path / "cache", sources, copy, shard_tokens=50, workers=1) == first
    flip_one_byte(one / "ptb" / "ptb.train.txt", b"cat", b"cot")
    assert tokenise_corpus(tmp_path / "cache", sources, one, shard_tokens=50, workers=1) not in (first, second)


def test_vector_artefacts_are_rebuilt_when_the_corpus_or_a_probe_file_changes(tmp_path):
    from langrepr.pipelines.bitcipher.word_vectors import ensure_vectors

    data = write_english_probe_data(write_text_corpus(tmp_path / "data", LINES))
    spec = {"kind": "cipher", "bits": 8, "corpus": {"sources": [{"path": "ptb/ptb.train.txt"}], "shard_tokens": 50},
            "cache_dir": str(tmp_path / "cache"), "extra_vocab": ["gum"], "data_dir": str(data), "workers": 1}
    folder, built = ensure_vectors(tmp_path / "vectors", spec)
    assert ensure_vectors(tmp_path / "vectors", spec)[0] == folder               # unchanged: reused
    recorded = json.loads((folder / "spec.json").read_text())["content"]
    assert recorded["corpus"][0] and "ud_english_gum/r2.5/en_gum-ud-test.conllu" in recorded["extra_vocab"]
    flip_one_byte(data / "ptb" / "ptb.train.txt", b"mat", b"hat")
    corpus_changed, rebuilt = ensure_vectors(tmp_path / "vectors", spec)
    assert corpus_changed != folder and rebuilt["corpus_tokens"] == built["corpus_tokens"]
    assert "hat" in (corpus_changed / "vocab.txt").read_text().split()
    flip_one_byte(data / "ud_english_gum" / "r2.5" / "en_gum-ud-dev.conllu", b"\tmat\t", b"\tmop\t")
    probe_changed, _ = ensure_vectors(tmp_path / "vectors", spec)
    assert probe_changed not in (folder, corpus_changed)
    assert "mop" in (probe_changed / "vocab.txt").read_text().split()


# ---------------------------------------------------------------- multi-hot

SENTENCES = ["영화가 정말 재미있었다", "배우들의 연기가 좋았다", "음악이 아름다운 영화였다", "스토리가 조금 지루했다",
             "감독의 다음 작품이 기대된다"]
SIZES = {"bpe_size": 80, "pos_joined": 5, "syllables": 20, "dictionary_size": 20}


def korean_corpus(tmp_path: Path) -> dict:
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"{SENTENCES[i % 5]} {SENTENCES[(i * 3) % 5]}\n" for i in range(40)), encoding="utf-8")
    return {"name": "tiny", "source": "text", "path": str(path), "limit": 1000}


def test_token_lists_and_analysis_follow_the_corpus_text(tmp_path):
    from langrepr.data.korean.prepare import token_lists

    corpus = korean_corpus(tmp_path)
    first = token_lists(corpus, SIZES, str(tmp_path / "cache"), workers=1)
    assert token_lists(corpus, SIZES, str(tmp_path / "cache"), workers=1)["bpe_base"].tokens == first["bpe_base"].tokens
    lists = tmp_path / "cache" / "korean_token_lists"
    assert len(list(lists.iterdir())) == 1
    Path(corpus["path"]).write_text("아르키메데스 이야기는 신기했다\n" * 40, encoding="utf-8")   # same name, new text
    second = token_lists(corpus, SIZES, str(tmp_path / "cache"), workers=1)
    assert len(list(lists.iterdir())) == 2 and second["dict_syllable"].tokens != first["dict_syllable"].tokens
    assert len(list((tmp_path / "cache" / "korean_morphemes").glob("tiny.*"))) == 2


# The multi-hot pretraining is a train cell (no checkpoint cache of its own): that its weights follow the corpus
# text is tests/multihot/test_multihot_cells.py::test_a_pretraining_cell_refuses_reuse_after_one_corpus_byte_changes


# ---------------------------------------------------------------- tokenizers

def test_subword_tokenizer_cache_follows_the_training_text(tmp_path):
    from langrepr.data.tokenizers import SubwordTokenizer

    texts = [f"the cat number {i} sat on the mat" for i in range(50)]
    one = SubwordTokenizer("wordpiece", 60, 16)
    one.prepare(texts, tmp_path)
    two = SubwordTokenizer("wordpiece", 60, 16)
    two.prepare(texts[:-1] + ["the cat number 49 sat on the hat"], tmp_path)
    assert one.cache_key() != two.cache_key() and len(list(tmp_path.glob("*.json"))) == 2
