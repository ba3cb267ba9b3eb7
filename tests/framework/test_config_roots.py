"""Per-paper config folders (`conf/papers/<paper>/<group>/`) sit on Hydra's search path beside `conf/`.

`model=leam` reads conf/papers/leam/model/leam.yaml as it once read conf/model/leam.yaml; every listing of a
group's options (the unknown-option error, validation, plan, tables) reads every root; no option name lives in
two roots, where Hydra would silently take the first.
"""

from __future__ import annotations

import pytest

from langrepr.confpaths import CONF_DIR, PAPERS, config_groups, config_roots, group_options, option_files
from langrepr.errors import UserError


def test_every_paper_folder_is_on_the_search_path_and_every_search_path_entry_exists():
    papers = sorted(p for p in (CONF_DIR / PAPERS).iterdir() if p.is_dir())
    assert papers, "conf/papers/ holds no paper folder"
    assert sorted(config_roots()[1:]) == papers      # conf/ first, then train.yaml's hydra.searchpath
    assert config_roots()[0] == CONF_DIR


def test_no_option_lives_in_two_roots():
    for group in config_groups():
        seen: dict[str, str] = {}
        for root in config_roots():
            for path in sorted((root / group).glob("*.yaml")):
                where = str(path.relative_to(CONF_DIR))
                assert path.stem not in seen, f"{group}={path.stem}: both {seen[path.stem]} and {where}"
                seen[path.stem] = where


def test_papers_is_a_folder_of_roots_not_a_config_group():
    from langrepr.validation import known_top_level_keys

    assert PAPERS not in config_groups()
    assert PAPERS not in known_top_level_keys()
    assert {"dataset", "model", "trainer", "experiment"} <= set(known_top_level_keys())


@pytest.mark.parametrize(("model", "paper", "target"), [
    ("bert_ewe", "ewe", "langrepr.models.hf_backbone.HFSequenceClassifier"),
    ("leam", "leam", "langrepr.models.leam.LEAM"),
    ("tensorcoder_8conv", "tensorcoder", "langrepr.models.tensorcoder.MaskedLMModel"),
    ("multihot_small", "multihot", "langrepr.models.multihot_lm.MultiHotLM"),
    ("causal_lm", "bitcipher", "langrepr.models.causal_lm.CausalTransformerLM"),
])
def test_a_paper_model_composes_by_its_flat_name_from_any_working_directory(compose_cfg, tmp_path, monkeypatch,
                                                                             model, paper, target):
    assert option_files("model")[model] == CONF_DIR / PAPERS / paper / "model" / f"{model}.yaml"
    monkeypatch.chdir(tmp_path)                    # the search path is absolute, not relative to where one runs
    cfg = compose_cfg(f"model={model}", hydra=True)
    assert cfg.hydra.runtime.choices.model == model
    assert cfg.model.net._target_ == target


def test_a_cross_paper_default_resolves_through_the_search_path(compose_cfg):
    cfg = compose_cfg("experiment=ewe_table3", "model=leam_patents")   # EWE's reference row extends LEAM's model
    assert cfg.model.net._target_ == "langrepr.models.leam.LEAM"
    assert cfg.dataset.task._target_ == "langrepr.tasks.label_embedding.LabelRegularisedMultilabelTask"


def test_an_unknown_model_lists_the_options_of_every_root_in_one_line():
    from langrepr.train import check_group_choices

    with pytest.raises(UserError) as err:
        check_group_choices(["model=foo"])
    message = str(err.value)
    assert "\n" not in message and message.startswith("unknown model 'foo': choose one of ")
    listed = message.split("choose one of ", 1)[1].split(", ")
    assert listed == group_options("model")
    assert {"none", "bert_ewe", "leam", "tensorcoder_8conv", "multihot_small", "causal_lm"} <= set(listed)
    check_group_choices(["model=leam,kim_cnn", "dataset=ag_news"])   # options of paper folders pass
