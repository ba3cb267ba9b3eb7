"""Synthetic patents and PatentDataModule on a tiny synthetic export (offline, seconds)."""

import json

import pyarrow.parquet as pq
import pytest
import torch

from langrepr.data.patents.files import claim_spans, first_claims_text, join_claims, read_manifest
from langrepr.data.patents.synthetic import generate
from langrepr.data.patents.uspto import PatentDataModule, export_table2_stats, main
from langrepr.errors import UserError


class FakeTokenizer:
    """Contract-shaped word-hash tokenizer; counts encode calls so cache reuse is visible."""

    vocab_size = 101

    def __init__(self, length: int = 24):
        self.length, self.encoded, self.prepared = length, 0, 0

    def prepare(self, texts, cache_dir):
        self.prepared += 1

    def cache_key(self):
        return f"fake-{self.length}"

    def encode(self, texts):
        self.encoded += len(texts)
        ids = torch.zeros(len(texts), self.length, dtype=torch.long)
        for i, t in enumerate(texts):
            words = t.split()[: self.length]
            ids[i, : len(words)] = torch.tensor([1 + hash(w) % 100 for w in words])
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    out = tmp_path_factory.mktemp("syn")
    generate(out, n_train=300, n_test=40, n_subclasses=12, seed=3, shard_rows=128)
    return out


def test_generator_is_deterministic_and_labelled(tmp_path, export):
    generate(tmp_path, n_train=300, n_test=40, n_subclasses=12, seed=3, shard_rows=128)
    a, b = read_manifest(export), read_manifest(tmp_path)
    assert [s["sha256"] for s in a["shards"]] == [s["sha256"] for s in b["shards"]]
    assert a["synthetic"] and a["rows"] == {"train": 300, "2015A": 40, "2015B": 40}
    rows = pq.read_table(export / "train-00000.parquet").to_pylist()
    assert all(r["synthetic"] for r in rows)
    assert all(1 <= len(r["cpc"]) <= 6 and sum(c["first"] for c in r["cpc"]) == 1 for r in rows)
    assert rows[0]["claims"].startswith("What is claimed is:\n1. A ")
    before = (tmp_path / "manifest.json").stat().st_mtime_ns
    generate(tmp_path, n_train=300, n_test=40, n_subclasses=12, seed=3, shard_rows=128)   # skipped
    assert (tmp_path / "manifest.json").stat().st_mtime_ns == before
    generate(tmp_path, n_train=300, n_test=40, n_subclasses=12, seed=4, shard_rows=128)
    assert read_manifest(tmp_path)["shards"][0]["sha256"] != a["shards"][0]["sha256"]


def test_claim_splitting():
    text = "What is claimed is:\n1. A method of x.\n2 . The method of claim 1, in step 3. hot.\n3. (canceled)"
    assert [n for n, _, _ in claim_spans(text)] == [1, 2, 3]
    assert join_claims(text) == "A method of x. The method of claim 1, in step 3. hot. (canceled)"
    inline = "What is claimed is: 1 . A method. 2 . The method of claim 1. 3 . A device."
    assert join_claims(inline) == "A method. The method of claim 1. A device."
    long = "\n".join(f"{i}. Claim {i}." for i in range(1, 26))
    assert join_claims(long).endswith("Claim 20.") and "Claim 21" not in join_claims(long)
    assert first_claims_text(long).endswith("20. Claim 20.")
    assert join_claims("unnumbered   text") == "unnumbered text"


def test_datamodule_shapes_labels_and_cache(export, tmp_path):
    tok = FakeTokenizer()
    dm = PatentDataModule(data_dir=str(export), tokenizer=tok, cache_dir=str(tmp_path), batch_size=16,
                          max_eval_samples=30)
    dm.prepare_data()
    dm.setup("fit")
    assert dm.data_info["synthetic"] and dm.data_info["rows"] == {"train": 285, "val": 15, "2015A": 30, "2015B": 30}
    n_sub = len({c["code"][:4] for r in pq.read_table(export / "train-00000.parquet").to_pylist() for c in r["cpc"]}
                | {c["code"][:4] for s in ("train-00001", "train-00002")
                   for r in pq.read_table(export / f"{s}.parquet").to_pylist() for c in r["cpc"]})
    assert dm.net_kwargs == {"num_labels": 2 * n_sub}
    batch = next(iter(dm.train_dataloader()))
    assert batch["input_ids"].shape == (16, 24) and batch["input_ids"].dtype == torch.long
    assert batch["attention_mask"].shape == (16, 24)
    assert batch["labels"].shape == (16, 2 * n_sub) and batch["labels"].dtype == torch.float32
    assert (batch["labels"].sum(1) >= 1).all()
    first_cols = [i for i, lab in enumerate(dm.label_vocab.labels) if lab.startswith("First-")]
    assert (batch["labels"][:, first_cols].sum(1) == 1).all()            # exactly one First per patent
    assert dm.test_splits == ["2015A", "2015B"] and len(dm.test_dataloader()) == 2
    assert sum(len(b["labels"]) for b in dm.val_dataloader()) == 15
    assert tok.encoded == 285 + 15 + 30 + 30
    vocab = json.loads(dm.save_label_vocab(tmp_path / "run" / "labels.json").read_text())
    assert vocab["labeling"] == "first_later" and dm.state_dict()["labels"] == vocab["labels"]

    tok2 = FakeTokenizer()
    dm2 = PatentDataModule(data_dir=str(export), tokenizer=tok2, cache_dir=str(tmp_path), batch_size=16,
                           max_eval_samples=30)
    dm2.setup("fit")
    assert tok2.encoded == 0 and tok2.prepared == 1                       # loaded from the cache
    assert torch.equal(next(iter(dm2.val_dataloader()))["input_ids"], next(iter(dm.val_dataloader()))["input_ids"])

    raw = PatentDataModule(data_dir=str(export), tokenizer=FakeTokenizer(), cache_dir=str(tmp_path),
                           labeling="raw", max_train_samples=100, max_eval_samples=10)
    raw.setup("fit")
    assert raw.net_kwargs["num_labels"] <= n_sub and raw.data_info["rows"]["train"] == 95


def test_errors_are_one_line(export, tmp_path, monkeypatch):
    monkeypatch.delenv("LANGREPR_USPTO_DIR", raising=False)
    with pytest.raises(UserError, match="USPTO export not found at .*LANGREPR_USPTO_DIR"):
        PatentDataModule(data_dir=str(tmp_path / "nope"), tokenizer=FakeTokenizer()).setup("fit")
    with pytest.raises(UserError, match=r"split 'val' is empty"):
        PatentDataModule(data_dir=str(export), tokenizer=FakeTokenizer(), cache_dir=str(tmp_path),
                         max_eval_samples=0).setup("fit")
    no_test = tmp_path / "no_test"
    generate(no_test, n_train=20, n_test=0, n_subclasses=4)
    with pytest.raises(UserError, match=r"split '2015A' is empty \(0 rows"):
        PatentDataModule(data_dir=str(no_test), tokenizer=FakeTokenizer()).setup("fit")
    (no_test / "manifest.json").unlink()
    with pytest.raises(UserError, match="no manifest.json"):
        PatentDataModule(data_dir=str(no_test), tokenizer=FakeTokenizer()).setup("fit")
    monkeypatch.setenv("LANGREPR_USPTO_DIR", str(export))
    dm = PatentDataModule(tokenizer=FakeTokenizer(), cache_dir=str(tmp_path), max_train_samples=40,
                          max_eval_samples=5)
    dm.setup("fit")
    assert dm.data_info["data_dir"] == str(export)


def test_table2_stats_cli(export, capsys):
    stats = export_table2_stats(export)
    assert stats["synthetic"] and stats["splits"]["train"]["samples"] == 300
    assert stats["splits"]["train"]["first_later"]["total"] < stats["splits"]["train"]["raw"]["total"]
    assert main(["stats", str(export)]) == 0 and '"first_later"' in capsys.readouterr().out
    assert main(["stats", "/nonexistent/dir"]) == 2
    assert "USPTO export not found" in capsys.readouterr().err
