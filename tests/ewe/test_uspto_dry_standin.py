"""The dry run's USPTO stand-in (issue 23 item 1): without an export, a dry job reads a generated export in the
export's schema at the paper's 664 subclasses / 1,328 First/Later labels; a real run still stops with one line."""

import time

import pytest

from conftest import WordLengthTokenizer
from langrepr.data import standin
from langrepr.data.patents.files import read_manifest
from langrepr.data.patents.uspto import PatentDataModule
from langrepr.errors import UserError


def test_a_real_run_without_the_export_is_still_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv(standin.ENV, raising=False)
    monkeypatch.delenv("LANGREPR_USPTO_DIR", raising=False)
    dm = PatentDataModule(data_dir=None, tokenizer=WordLengthTokenizer("fake-standin"), cache_dir=str(tmp_path))
    with pytest.raises(UserError, match="USPTO export not found"):
        dm.setup()
    assert not list(tmp_path.glob("dry-standin-*"))          # nothing generated outside a dry run


def test_a_dry_run_reads_a_full_schema_stand_in_at_1328_labels(tmp_path, monkeypatch):
    monkeypatch.setenv(standin.ENV, "1")
    monkeypatch.delenv("LANGREPR_USPTO_DIR", raising=False)
    started = time.time()
    dm = PatentDataModule(data_dir=None, tokenizer=WordLengthTokenizer("fake-standin"), cache_dir=str(tmp_path), seed=1)
    dm.setup()
    assert dm.net_kwargs == {"num_labels": 1328}             # 664 subclasses x First/Later, the paper's count
    assert dm.data_info["synthetic"] and "stand-in" in dm.data_info["standin"]
    assert dm.data_info["rows"]["2015A"] == 50 and dm.data_info["rows"]["2015B"] == 50
    manifest = read_manifest(tmp_path / "dry-standin-uspto")
    assert len(manifest["subclasses"]) == 664 and manifest["params"]["cover_all"] is True
    assert time.time() - started < 120                       # generated in seconds, once
    shards = [s["sha256"] for s in manifest["shards"]]
    standin.uspto_export(tmp_path)                           # deterministic: a second call keeps the same shards
    assert [s["sha256"] for s in read_manifest(tmp_path / "dry-standin-uspto")["shards"]] == shards


def test_the_dry_overlay_and_only_it_sets_the_switch():
    from pathlib import Path

    import yaml

    conf = Path(__file__).resolve().parents[2] / "conf"
    dry = yaml.safe_load((conf / "debug" / "dry.yaml").read_text())
    assert dry["hydra"]["job"]["env_set"] == {standin.ENV: "1"}
    others = [p for p in conf.rglob("*.yaml") if p.name != "dry.yaml" and standin.ENV in p.read_text()]
    assert not others, others
