"""Bit Cipher pipeline: co-occurrence (vs a naive loop), shards/resume, log, whitening, readers, probes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from langrepr.data.english.conll import read_conll
from langrepr.data.english.gum import read_conllu
from langrepr.errors import UserError
from langrepr.pipelines.bitcipher.cooccurrence import (
    check_options,
    cooccurrence_matrix,
    log_transform,
    shard_cooccurrence,
)
from langrepr.pipelines.bitcipher.corpus_shards import (
    corpus_shards,
    interleaved_documents,
    merged_counts,
    save_npz_atomic,
    tokenise_corpus,
)
from langrepr.pipelines.bitcipher.postprocess import postprocess, whitening_matrix
from langrepr.pipelines.bitcipher.probing import majority_probe, probe_cell, score

# ---------------------------------------------------------------- tiny generated data

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "in", "park", "Paris", "John", "saw", "big", "red"]
TAGS = {"the": "DET", "a": "DET", "cat": "NOUN", "dog": "NOUN", "mat": "NOUN", "park": "NOUN", "sat": "VERB",
        "ran": "VERB", "saw": "VERB", "on": "ADP", "in": "ADP", "Paris": "PROPN", "John": "PROPN", "big": "ADJ",
        "red": "ADJ"}
NER = {"Paris": "I-LOC", "John": "I-PER"}


def sentences(n: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [list(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(n)]


def write_tiny_data_dir(root: Path, n: int = 40) -> Path:
    """A folder laid out like shared/data with a few sentences in every file the Bit Cipher quick profile reads."""
    (root / "ptb").mkdir(parents=True, exist_ok=True)
    (root / "ptb" / "ptb.train.txt").write_text("".join(" " + " ".join(s).lower() + " <unk>\n" for s in sentences(n, 1)))
    (root / "multi30k").mkdir(exist_ok=True)
    with gzip.open(root / "multi30k" / "train.en.gz", "wt") as fh:
        fh.write("".join(" ".join(s) + ".\n" for s in sentences(n, 2)))
    (root / "agnews").mkdir(exist_ok=True)
    (root / "agnews" / "test.csv").write_text("".join(f'"1","{s[0]}","{" ".join(s)}"\n' for s in sentences(n, 3)))
    (root / "wmt16_ende" / "opennmt_toy").mkdir(parents=True, exist_ok=True)
    (root / "wmt16_ende" / "opennmt_toy" / "src-train.txt").write_text("".join(" ".join(s) + "\n" for s in sentences(n, 4)))
    (root / "conll2003").mkdir(exist_ok=True)
    for seed, name in enumerate(("eng.train", "eng.testa", "eng.testb"), 5):
        lines = ["-DOCSTART- -X- O O", ""]
        for s in sentences(n, seed):
            lines += [f"{w} NN I-NP {NER.get(w, 'O')}" for w in s] + [""]
        (root / "conll2003" / name).write_text("\n".join(lines) + "\n")
    gum = root / "ud_english_gum" / "r2.5"
    gum.mkdir(parents=True, exist_ok=True)
    for seed, split in enumerate(("train", "dev", "test"), 8):
        lines = []
        for k, s in enumerate(sentences(n, seed)):
            lines += [f"# sent_id = s{k}"] + [f"{i}\t{w}\t{w}\t{TAGS[w]}\t_\t_\t0\tdep\t_\t_" for i, w in enumerate(s, 1)] + [""]
        (gum / f"en_gum-ud-{split}.conllu").write_text("\n".join(lines) + "\n")
    return root


# ---------------------------------------------------------------- co-occurrence kernel

def naive(ids, doc_offsets, table, radius, mode, cat_mode="left_right"):
    b = table.shape[1]
    width = b if mode == "sum" else (2 * b if cat_mode == "left_right" else 2 * radius * b)
    out = np.zeros((table.shape[0], width))
    for a, z in zip(doc_offsets[:-1], doc_offsets[1:]):
        for i in range(a, z):
            for delta in range(-radius, radius + 1):
                j = i + delta
                if delta == 0 or j < a or j >= z:
                    continue
                if mode == "sum":
                    out[ids[i]] += table[ids[j]]
                elif cat_mode == "left_right":
                    part = 0 if delta < 0 else b
                    out[ids[i], part:part + b] += table[ids[j]]
                else:
                    k = delta + radius if delta < 0 else delta + radius - 1
                    out[ids[i], k * b:(k + 1) * b] += table[ids[j]]
    return out


@pytest.mark.parametrize("mode,cat_mode", [("sum", "left_right"), ("cat", "left_right"), ("cat", "per_offset")])
def test_shard_cooccurrence_equals_naive_loop(mode, cat_mode):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 7, size=60)
    offsets = np.array([0, 5, 6, 30, 60])          # includes a one-token document
    table = rng.random((7, 3))
    want = naive(ids, offsets, table, 3, mode, cat_mode)
    got = np.zeros_like(want)
    shard_cooccurrence(got, ids, offsets, table, 3, mode, cat_mode)
    np.testing.assert_allclose(got, want)


def test_sum_by_hand():
    # one document "a b a" with radius 1: a sees b twice, b sees a twice
    table = np.array([[1.0, 0.0], [0.0, 1.0]])
    out = np.zeros((2, 2))
    shard_cooccurrence(out, np.array([0, 1, 0]), np.array([0, 3]), table, 1, "sum")
    np.testing.assert_allclose(out, [[0, 2], [2, 0]])


def test_bad_options():
    with pytest.raises(UserError, match="radius=0"):
        check_options("sum", 0, "left_right")
    with pytest.raises(UserError, match="unknown co-occurrence mode"):
        check_options("concat", 2, "left_right")
    with pytest.raises(UserError, match="unknown cat_mode"):
        check_options("cat", 2, "blocks")


def test_log_transform_by_hand():
    out = log_transform(np.array([[1.0, 3.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0]]), block=2)
    np.testing.assert_allclose(out[0], [-np.log10(0.25), -np.log10(0.75), -np.log10(0.5), -np.log10(0.5)])
    np.testing.assert_allclose(out[1], -np.log10(0.5))          # never a target → uniform


# ---------------------------------------------------------------- shards, parallel merge, resume

def test_tokenise_shards_counts_and_resume(tmp_path):
    data = write_tiny_data_dir(tmp_path / "data")
    sources = [{"path": "ptb/ptb.train.txt"}, {"path": "agnews/test.csv", "format": "csv", "text_columns": [1, 2]}]
    folder = tokenise_corpus(tmp_path / "cache", sources, data, shard_tokens=60, workers=2)
    shards = corpus_shards(folder)
    assert len(shards) > 2
    counts, docs, n_docs, n_tokens = merged_counts(folder)
    assert n_docs == 80 and sum(counts.values()) == n_tokens
    assert counts["<unk>"] == 40 and docs["<unk>"] == 40        # PTB's <unk> kept whole, once per line
    assert all(w == w.lower() for w in counts)
    assert tokenise_corpus(tmp_path / "cache", sources, data, shard_tokens=60) == folder   # complete: reused
    with pytest.raises(UserError, match="no documents"):
        tokenise_corpus(tmp_path / "cache2", sources, data, shard_tokens=60, max_tokens=0)
    save_npz_atomic(shards[0], {"words": np.array([], dtype=object), "ids": np.zeros(0, dtype=np.int32),
                                "doc_offsets": np.zeros(1, dtype=np.int64), "counts": np.zeros(0, dtype=np.int64),
                                "doc_counts": np.zeros(0, dtype=np.int64)})
    with pytest.raises(UserError, match=f"corpus shard {shards[0].name} is empty"):
        merged_counts(folder)


def test_parallel_matrix_equals_serial_and_resumes_from_partials(tmp_path):
    data = write_tiny_data_dir(tmp_path / "data")
    folder = tokenise_corpus(tmp_path / "cache", [{"path": "ptb/ptb.train.txt"}], data, shard_tokens=50, workers=1)
    counts, *_ = merged_counts(folder)
    index = {w: i for i, w in enumerate(counts)}
    table = np.random.default_rng(0).random((len(index) + 1, 4))
    serial = cooccurrence_matrix(folder, table, index, tmp_path / "serial", "cat", 2, workers=1)
    parallel = cooccurrence_matrix(folder, table, index, tmp_path / "par", "cat", 2, workers=2)
    np.testing.assert_allclose(serial, parallel)
    flushed = cooccurrence_matrix(folder, table, index, tmp_path / "flush", "cat", 2, workers=1, flush_nnz=1)
    np.testing.assert_allclose(serial, flushed)                 # counts applied after every shard
    # a finished partial is not recomputed: poison one and the total changes by exactly that amount
    partial = tmp_path / "par" / "partials" / "group-00000.npy"
    np.save(partial, np.load(partial) + 1.0)
    resumed = cooccurrence_matrix(folder, table, index, tmp_path / "par", "cat", 2, workers=2)
    np.testing.assert_allclose(resumed, parallel + 1.0)


# ---------------------------------------------------------------- whitening

@pytest.mark.parametrize("method", ["zca", "pca"])
def test_whitening_gives_identity_covariance(method):
    x = np.random.default_rng(0).standard_normal((500, 4)) @ np.array([[2, 0, 0, 0], [1, 1, 0, 0],
                                                                        [0, 0, 3, 1], [0, 0, 0, 0.5]])
    mu, w = whitening_matrix(x, method, eps=0.0)
    np.testing.assert_allclose(np.cov((x - mu) @ w, rowvar=False), np.eye(4), atol=1e-8)
    if method == "zca":
        np.testing.assert_allclose(w, w.T)                       # ZCA is the symmetric whitening
    out = postprocess(x, method)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0)
    with pytest.raises(UserError, match="unknown whitening"):
        whitening_matrix(x, "nope")


# ---------------------------------------------------------------- readers and probes

def test_readers_reject_malformed_lines_with_line_numbers(tmp_path):
    bad = tmp_path / "eng.train"
    bad.write_text("EU NNP I-NP I-ORG\nrejects\n")
    with pytest.raises(UserError, match=r"eng.train:2: malformed line"):
        read_conll(bad)
    bad_u = tmp_path / "x.conllu"
    bad_u.write_text("# c\n1\tword\tword\tNOUN\n")
    with pytest.raises(UserError, match=r"x.conllu:2: malformed CoNLL-U line"):
        read_conllu(bad_u)
    empty = tmp_path / "empty.conllu"
    empty.write_text("\n")
    with pytest.raises(UserError, match="no sentences"):
        read_conllu(empty)


def test_scores_and_majority_by_hand():
    gold = [(["John", "saw", "Paris"], ["I-PER", "O", "I-LOC"])]
    metrics = score("ner", gold, [["I-PER", "O", "O"]], {"john", "saw"})
    assert metrics["acc"] == pytest.approx(200 / 3)
    assert metrics["unseen_acc"] == 0.0                          # only "Paris" is unseen, and it is wrong
    assert metrics["f1"] == pytest.approx(100 * 2 * 1.0 * 0.5 / 1.5)   # P = 1/1, R = 1/2
    splits = {"train": [(["a", "a", "b"], ["X", "Y", "Y"]), (["a", "b"], ["X", "Y"])],
              "dev": [(["a", "b", "c"], ["X", "Y", "Y"])], "test": [(["c", "a"], ["X", "X"])]}
    result = majority_probe("pos", splits)                       # a → X (2 of 3), b → Y, unseen → Y (3 of 5)
    assert result["dev_acc"] == 100.0 and result["test_acc"] == 50.0 and result["test_unseen_acc"] == 0.0


def test_probe_cell_builds_vectors_once_and_learns(tmp_path):
    data = write_tiny_data_dir(tmp_path / "data")
    defaults = {"corpus": {"sources": [{"path": "ptb/ptb.train.txt"}, {"path": "conll2003/eng.train",
                                                                       "format": "conll"}], "shard_tokens": 100},
                "cache_dir": str(tmp_path / "cache"), "extra_vocab": ["conll2003", "gum"], "workers": 1}
    kwargs = dict(vectors_root=str(tmp_path / "vectors"), data_dir=str(data), seed=1, vector_defaults=defaults,
                  probe={"hidden": 16, "epochs": 30, "lr": 0.05, "batch_size": 8})
    sum_spec = {"kind": "sum", "bits": 8, "radius": 2}
    metrics = probe_cell(str(tmp_path / "cell1"), sum_spec, **kwargs)
    assert metrics["pos/test_acc"] > 90 and metrics["ner/test_f1"] > 90   # tags are a function of the word
    assert metrics["vectors/dim"] == 8 and metrics["vectors/vocab"] == 16     # 15 words (lower-cased) + <unk>
    artefact = json.loads((tmp_path / "cell1" / "vectors.json").read_text())["artefact"]
    built = Path(artefact, "vectors.npy").stat().st_mtime_ns
    probe_cell(str(tmp_path / "cell2"), sum_spec, **{**kwargs, "seed": 2})
    assert Path(artefact, "vectors.npy").stat().st_mtime_ns == built          # reused, not rebuilt
    majority = probe_cell(str(tmp_path / "cell3"), {"kind": "majority"}, **kwargs)
    assert majority["pos/test_acc"] == 100.0


def test_interleaved_documents_by_hand(tmp_path):
    """A hand-made three-source corpus: the merge keeps each source's order, is seeded, and mixes every prefix."""
    (tmp_path / "a.txt").write_text("".join(f"a{i}\n" for i in range(60)))
    (tmp_path / "b.txt").write_text("".join(f"b{i}\n" for i in range(30)) + "\n  \n")   # blank lines are no document
    (tmp_path / "c.csv").write_text("".join(f"1,c{i} x,y\n" for i in range(30)))
    sources = [{"path": "a.txt"}, {"path": "b.txt"}, {"path": "c.csv", "format": "csv", "text_columns": [1]}]
    merged = list(interleaved_documents(sources, tmp_path, seed=0))
    assert sorted(merged) == sorted([f"a{i}" for i in range(60)] + [f"b{i}" for i in range(30)]
                                    + [f"c{i} x" for i in range(30)])
    for name in "abc":                                           # each source keeps its own order
        own = [d for d in merged if d.startswith(name)]
        assert own == sorted(own, key=lambda d: int(d[1:].split()[0]))
    assert merged == list(interleaved_documents(sources, tmp_path, seed=0))      # same seed, same order
    assert merged != list(interleaved_documents(sources, tmp_path, seed=1))
    first = merged[:40]                                          # a third of the corpus: each source near its share
    assert 12 <= sum(d.startswith("a") for d in first) <= 28
    assert 4 <= sum(d.startswith("b") for d in first) <= 16
    assert 4 <= sum(d.startswith("c") for d in first) <= 16
    assert list(interleaved_documents(sources[:1], tmp_path, seed=0)) == [f"a{i}" for i in range(60)]
    with pytest.raises(UserError, match="needs local corpus sources"):
        list(interleaved_documents([*sources, {"hf": "x/y"}], tmp_path, seed=0))


def test_interleaved_corpus_prefix_holds_every_source(tmp_path):
    """A max_tokens prefix of the concatenation is the first source only; of the interleaved corpus, both."""
    (tmp_path / "first.txt").write_text("".join(f"pa pb pc {i}\n" for i in range(100)))
    (tmp_path / "last.txt").write_text("".join(f"qa qb qc {i}\n" for i in range(100)))
    sources = [{"path": "first.txt"}, {"path": "last.txt"}]
    plain = tokenise_corpus(tmp_path / "cache", sources, tmp_path, shard_tokens=60, max_tokens=200, workers=1)
    mixed = tokenise_corpus(tmp_path / "cache", sources, tmp_path, shard_tokens=60, max_tokens=200, workers=1,
                            interleave_seed=0)
    assert mixed != plain                                        # its own cache key
    plain_counts, mixed_counts = merged_counts(plain)[0], merged_counts(mixed)[0]
    assert plain_counts["pa"] == 50 and "qa" not in plain_counts
    assert mixed_counts["pa"] + mixed_counts["qa"] == 50 and 15 <= mixed_counts["qa"] <= 35
