"""Every HF hub id the full profile loads is configured right for today's `datasets` (issue 23 item 5).

Offline: each id's config (or code constant) is checked against a recorded copy of the id's metadata
(tests/fixtures/hub_ids.json, read from the hub cards); the readers are checked to forward `hub_revision` /
`hub_data_dir` to `datasets.load_dataset` with a stand-in for it.
"""

from __future__ import annotations

import importlib
import json
import re

import pytest
from omegaconf import OmegaConf

from conftest import ROOT
from langrepr.data.hub import PARQUET_BRANCH, SCRIPT_ONLY, load_kwargs, resolve

RECORD = json.loads((ROOT / "tests" / "fixtures" / "hub_ids.json").read_text())["ids"]
READERS = [(hub_id, where) for hub_id, meta in RECORD.items() for where in meta["read_by"]]


def hub_settings(where: str, compose_cfg) -> dict:
    """{name, config, revision, data_dir, fields, splits, langs} as the config / code constant `where` reads the id."""
    kind, _, rest = where.partition(":")
    if kind == "dataset":
        node = compose_cfg(f"dataset={rest}").dataset
        node = node.get("datamodule", node) if "hub_name" not in node else node
        node = OmegaConf.to_container(node, resolve=False)
        fields = [node[k] for k in ("text_field",) if k in node] + [node[k] for k in ("src_lang", "tgt_lang")
                                                                     if k in node]
        return {"name": node["hub_name"], "config": node.get("hub_config"), "revision": node.get("hub_revision"),
                "data_dir": node.get("hub_data_dir"), "fields": fields,
                "splits": list((node.get("hub_splits") or {}).values()),
                "langs": [node[k] for k in ("src_lang", "tgt_lang") if k in node]}
    if kind == "experiment":
        sources = compose_cfg(f"experiment={rest}").bitcipher.corpus.sources   # the full corpus (quick: local)
        source = next(s for s in sources if "hf" in s)
        return {"name": source.hf, "config": source.get("config"), "revision": source.get("revision"),
                "data_dir": source.get("data_dir"), "fields": [source.get("text_field", "text")],
                "splits": [source.get("split", "train")], "langs": []}
    module, _, attr = rest.partition(":")
    mod = importlib.import_module(module)
    if attr.startswith("HF_IDS."):                        # the LEAM classification sets: (id, text columns)
        name = attr.split(".", 1)[1]
        hub_id, columns = mod.HF_IDS[name]
        return {"name": hub_id, "config": None, "revision": None, "data_dir": None,
                "fields": [*columns, mod.LABEL_COLUMNS.get(name, "label")], "splits": ["train", "test"], "langs": []}
    if module.endswith("conll"):                           # CoNLL-2003 NER: its reader's defaults
        import inspect

        defaults = inspect.signature(mod.conll2003_hub).parameters
        return {"name": mod.HUB_ID, "config": None, "revision": defaults["revision"].default,
                "data_dir": defaults["data_dir"].default, "fields": ["tokens", "ner_tags"],
                "splits": list(mod.HUB_SPLITS.values()), "langs": []}
    if module.endswith("nsmc"):
        return {"name": mod.HUB_ID, "config": None, "revision": None, "data_dir": None,
                "fields": ["id", "document", "label"], "splits": ["train", "test"], "langs": []}
    return {"name": mod.HUB_ID, "config": None, "revision": None, "data_dir": None,     # KorQuAD
            "fields": ["id", "title", "context", "question", "answers"], "splits": ["train", "validation"],
            "langs": []}


@pytest.mark.parametrize("hub_id,where", READERS, ids=[f"{w}" for _, w in READERS])
def test_each_hub_id_is_configured_as_its_recorded_metadata_requires(hub_id, where, compose_cfg):
    meta = RECORD[hub_id]
    got = hub_settings(where, compose_cfg)
    assert got["name"] == hub_id, f"{where} reads {got['name']!r}; the hub id is {hub_id!r}"
    config, revision, data_dir = resolve(got["name"], got["config"], got["revision"], got["data_dir"])  # as read
    kwargs = load_kwargs(config, revision, data_dir)
    assert (hub_id in SCRIPT_ONLY) == meta["script_only"], f"langrepr.data.hub.SCRIPT_ONLY disagrees on {hub_id}"
    if meta["script_only"]:   # datasets >= 4 refuses the loading script: read the parquet conversion
        assert revision == PARQUET_BRANCH, f"{where}: {hub_id} is script-only; it must be read from the parquet branch"
        if len(meta["parquet_folders"]) > 1 or data_dir:
            assert data_dir in meta["parquet_folders"], f"{where}: the data folder must be one config's ({data_dir!r})"
            assert "name" not in kwargs, f"{where}: with a data folder the config name is not passed"
    else:
        assert revision in (None, "main") and not data_dir
        if config is not None:
            assert config in meta["configs"], f"{where}: config {config!r} is not one of {meta['configs']}"
        else:
            assert len(meta["configs"]) == 1, f"{where}: {hub_id} has several configs; name one"
    missing = [f for f in got["fields"] if f not in meta["columns"] + meta.get("languages", [])]
    assert not missing, f"{where} reads column(s) {missing} that {hub_id} does not have ({meta['columns']})"
    assert set(got["splits"]) <= set(meta["splits"]), f"{where} reads splits {got['splits']}; {hub_id} has {list(meta['splits'])}"
    assert set(got["langs"]) <= set(meta.get("languages", got["langs"]))


def test_no_config_or_reader_names_a_renamed_id():
    renamed = {m["renamed_from"]: i for i, m in RECORD.items() if m.get("renamed_from")}
    for path in [*ROOT.joinpath("conf").rglob("*.yaml"), *ROOT.joinpath("src").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        for old, new in renamed.items():
            assert not re.search(rf"(?<![\w/]){re.escape(old)}(?![\w/])", text), f"{path}: bare {old!r}; use {new!r}"


def test_every_hub_id_is_listed_with_its_licence_and_gating():
    listing = (ROOT / "docs" / "framework.md").read_text(encoding="utf-8")
    for hub_id, meta in RECORD.items():
        rows = [line for line in listing.splitlines() if line.startswith("|") and f"`{hub_id}`" in line]
        assert rows, f"docs/framework.md lists no row for {hub_id}"
        assert meta["license"].split(" (")[0] in rows[0], f"{hub_id}: its row does not give the licence {meta['license']}"
        assert ("yes" if meta["gated"] else "no") in rows[0].split("|")[-2], f"{hub_id}: its row does not say gated or not"


def test_load_kwargs_pass_the_folder_instead_of_the_config_name():
    assert load_kwargs("iwslt2017-en-de", PARQUET_BRANCH, "iwslt2017-en-de") == {
        "data_dir": "iwslt2017-en-de", "revision": PARQUET_BRANCH}
    assert load_kwargs("de-en") == {"name": "de-en"}
    assert load_kwargs() == {}


def test_unset_settings_of_a_script_only_id_read_its_parquet_conversion_and_set_ones_win():
    assert resolve("ptb-text-only/ptb_text_only", "penn_treebank") == ("penn_treebank", PARQUET_BRANCH, "penn_treebank")
    assert resolve("e9t/nsmc") == (None, PARQUET_BRANCH, None)
    assert resolve("wmt/wmt16", "de-en") == ("de-en", None, None)                       # not script-only: as given
    assert resolve("IWSLT/iwslt2017", None, "main", None) == (None, "main", None)        # an explicit branch wins


class FakeSplit(dict):
    """A column-addressed split that counts how often each column is read (as a `datasets.Dataset` would copy it)."""

    def __init__(self, columns: dict[str, list]):
        super().__init__(columns)
        self.reads: dict[str, int] = {}
        self.column_names = list(columns)

    def __getitem__(self, key):
        self.reads[key] = self.reads.get(key, 0) + 1
        return list(dict.__getitem__(self, key))

    def __len__(self):
        return len(next(iter(self.values())))

    def select(self, idx):
        return FakeSplit({k: [v[i] for i in idx] for k, v in self.items()})


def fake_hub(monkeypatch, splits: dict[str, FakeSplit]) -> list[dict]:
    import datasets

    calls: list[dict] = []

    def load_dataset(path, **kwargs):
        calls.append({"path": path, **kwargs})
        return splits[kwargs["split"]] if "split" in kwargs else splits

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_text_lm_and_translation_readers_forward_revision_and_data_dir(monkeypatch, tmp_path):
    from langrepr.data.english.text_lm import TextLMDataModule
    from langrepr.data.english.translation import TranslationDataModule

    calls = fake_hub(monkeypatch, {s: FakeSplit({"sentence": ["a b c", "d e"]}) for s in ("train", "validation", "test")})
    as_configured = TextLMDataModule("ptb", seq_len=4, data_dir=None, hub_name="ptb-text-only/ptb_text_only",
                                     hub_config="penn_treebank", text_field="sentence", cache_dir=str(tmp_path))
    assert as_configured._lines("test") == ["a b c", "d e"]                 # conf/papers/tensorcoder/dataset/ptb.yaml's settings
    assert calls[-1] == {"path": "ptb-text-only/ptb_text_only", "revision": PARQUET_BRANCH,
                         "data_dir": "penn_treebank", "split": "test"}
    dm = TextLMDataModule("ptb", seq_len=4, data_dir=None, hub_name="ptb-text-only/ptb_text_only", hub_config=None,
                          hub_revision=PARQUET_BRANCH, hub_data_dir="penn_treebank", text_field="sentence",
                          cache_dir=str(tmp_path))
    assert dm._lines("train") == ["a b c", "d e"]
    assert calls[-1] == {"path": "ptb-text-only/ptb_text_only", "revision": PARQUET_BRANCH,
                         "data_dir": "penn_treebank", "split": "train"}

    pairs = {"translation": [{"en": "a b", "de": "x y"}]}
    calls = fake_hub(monkeypatch, {s: FakeSplit(pairs) for s in ("train", "validation", "test")})
    tm = TranslationDataModule("iwslt16", data_dir=None, hub_name="IWSLT/iwslt2017", hub_config=None,
                               hub_revision=PARQUET_BRANCH, hub_data_dir="iwslt2017-en-de", cache_dir=str(tmp_path))
    assert tm._read_split("validation") == [("a b", "x y")]
    assert calls[-1] == {"path": "IWSLT/iwslt2017", "revision": PARQUET_BRANCH, "data_dir": "iwslt2017-en-de",
                         "split": "validation"}


def test_nsmc_korquad_and_classification_readers_read_each_column_once(monkeypatch):
    from langrepr.data.classification.sources import read_hub
    from langrepr.data.korean.korquad import read_hub as read_korquad
    from langrepr.data.korean.nsmc import hub_nsmc

    nsmc = {s: FakeSplit({"id": ["1", "2"], "document": ["좋다 ", None], "label": [1, 0]}) for s in ("train", "test")}
    calls = fake_hub(monkeypatch, nsmc)
    out = hub_nsmc()
    assert [(r.id, r.text, r.label) for r in out["train"]] == [("1", "좋다", 1), ("2", "", 0)]
    assert calls[-1] == {"path": "e9t/nsmc", "revision": PARQUET_BRANCH}
    assert nsmc["train"].reads == {"id": 1, "document": 1, "label": 1}

    answers = [{"text": ["서울"], "answer_start": [0]}]
    kq = FakeSplit({"id": ["q1"], "title": ["t"], "context": ["서울은"], "question": ["어디?"], "answers": answers})
    calls = fake_hub(monkeypatch, {"train": kq})
    assert read_korquad("train")[0].answers == ("서울",)
    assert calls[-1]["path"] == "KorQuAD/squad_kor_v1" and set(kq.reads.values()) == {1}

    part = FakeSplit({"title": ["A", "B", "C"], "content": ["x", None, "z"], "label": [0, 1, 2]})
    calls = fake_hub(monkeypatch, {"train": part, "test": part})
    splits, info = read_hub("dbpedia")
    assert splits["train"] == (["A x", "B ", "C z"], [0, 1, 2]) and info["source"] == "hf:fancyzhx/dbpedia_14"
    assert part.reads == {"title": 2, "content": 2, "label": 2}      # once per split (train and test share it here)
