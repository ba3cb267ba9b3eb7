"""The multi-hot LM's training runs as ordinary train cells through the one training entry.

- No module of src/ builds a Lightning Trainer (or a subclass) except the training entry (`langrepr.train`, from the
  `trainer:` config) and its DDP helper (`langrepr.scale_out`): found on the AST, so an alias or a subclass counts.
- A tiny pretraining cell, then a fine-tuning cell that finds it by config, run through `python -m langrepr.train`
  and record finite metrics under the keys the tables read.
- What a fine-tuning cell expects of its pretraining cell is what the pretraining sweep composes (so the table
  targets find the cells they ran), on both profiles.
- The non-gradient cells whose entry points moved to `langrepr.pipelines.multihot` still recognise their records
  written under the old `_target_` (`cell.MOVED_TARGETS`).
"""

from __future__ import annotations

import ast
import copy
import json
import math
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from conftest import ROOT, run_cli
from langrepr import cell
from langrepr.data.korean.pretrained import differences
from langrepr.train import train
from tiny_data import write_korean_quick

SRC = ROOT / "src" / "langrepr"
TRAINER_ENTRY = {"train.py", "scale_out.py"}   # the one entry and its DDP helper (SpawnedDDPTrainer, ddp_trainer)
# the benchmark harness times the entry's own `trainer:` config (`make bench`), it trains no cell
BENCHMARK = {"benchmarking.py": "lightning_fit"}


# ---------------------------------------------------------------- one Trainer

def trainer_constructions(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every Trainer built in a module: `Trainer(...)` under any name or alias, a call of a Trainer
    subclass, a class deriving from Trainer, and `instantiate(<...>.trainer ...)` (a Trainer from config)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = {"Trainer"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names if a.name == "Trainer"}

    def is_trainer(expr: ast.expr) -> bool:
        return (isinstance(expr, ast.Name) and expr.id in names) or (isinstance(expr, ast.Attribute)
                                                                     and expr.attr in names)

    found, subclasses = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(is_trainer(b) for b in node.bases):
            subclasses.add(node.name)
            found.append((node.lineno, f"class {node.name}(Trainer)"))
    names |= subclasses
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if is_trainer(node.func):
            found.append((node.lineno, f"{ast.unparse(node.func)}(...)"))
        elif (isinstance(node.func, ast.Name) and node.func.id == "instantiate" and node.args
              and "trainer" in ast.unparse(node.args[0])):
            found.append((node.lineno, f"instantiate({ast.unparse(node.args[0])})"))
    return found


def enclosing_function(path: Path, line: int) -> str | None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= node.end_lineno:
            return node.name
    return None


def test_the_detector_sees_aliases_subclasses_and_config_built_trainers(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import pytorch_lightning as pl\nfrom pytorch_lightning import Trainer as T\n"
                      "class Mine(pl.Trainer):\n    pass\n"
                      "def f(cfg):\n    pl.Trainer(max_steps=1)\n    T()\n    Mine()\n    instantiate(cfg.trainer)\n"
                      "    instantiate(cfg.model.net)\n")
    assert [line for line, _ in trainer_constructions(module)] == [3, 6, 7, 8, 9]


def test_no_trainer_is_built_outside_the_training_entry():
    outside = []
    for path in sorted(SRC.rglob("*.py")):
        for line, what in trainer_constructions(path):
            rel = path.relative_to(SRC).as_posix()
            if rel in TRAINER_ENTRY or enclosing_function(path, line) == BENCHMARK.get(rel):
                continue
            outside.append(f"src/langrepr/{rel}:{line}: {what}")
    assert not outside, "a Trainer built outside langrepr.train / scale_out:\n" + "\n".join(outside)
    assert trainer_constructions(SRC / "scale_out.py"), "the detector no longer sees the DDP helper's Trainer"


# ---------------------------------------------------------------- pretraining, then fine-tuning, through the CLI

TINY = ["dataset=korean_quick", "dataset.corpus.nsmc=40", "dataset.corpus.korquad=20", "dataset.corpus.klue=10",
        "dataset.token_lists.bpe_size=150", "dataset.token_lists.pos_joined=20", "dataset.token_lists.syllables=60",
        "dataset.token_lists.dictionary_size=60", "model=multihot_small", "model.net.hidden_size=16",
        "model.net.num_layers=1", "model.net.intermediate_size=32", "model.net.max_positions=32", "mlm.steps=3",
        "mlm.batch_size=4", "mlm.val_fraction=0.3", "pipeline.workers=1", "pipeline.token_list=bpe_syllable",
        "seed=1"]
NER = ["박씨는 서울에 산다", "김씨가 부산에서 왔다", "한국은행이 금리를 올렸다", "이씨는 대구에 갔다"]


def write_klue_ner(data: Path) -> None:
    lines = ["## 컬럼명 : CHAR\tNE_TAG"]
    for i in range(16):
        text = NER[i % 4]
        tags = ["B-OG" if i % 4 == 2 else "B-PS"] + ["O"] * (len(text) - 1)
        lines += [f"## n{i}\t{text}", *(f"{c}\t{t}" for c, t in zip(text, tags)), ""]
    (data / "klue" / "klue-ner-v1.1_dev.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def finished_metrics(folder: Path) -> dict:
    record = json.loads((folder / "metrics.json").read_text())
    assert record["status"] == "finished", record.get("error")
    return record["metrics"]


def test_a_tiny_pretraining_cell_then_a_fine_tuning_cell_run_through_the_cli(tmp_path):
    data = write_korean_quick(tmp_path / "data")
    write_klue_ner(data)
    out = tmp_path / "outputs"
    where = [f"paths.output_root={out}", f"paths.data_dir={data}", f"paths.cache_dir={tmp_path / 'cache'}"]
    env = {"OMP_NUM_THREADS": "1", "LANGREPR_DIGEST_CACHE": str(tmp_path / "digests.json")}
    run = run_cli("langrepr.train", "-m", "experiment=multihot_pretrain", "profile=quick", "mlm.loss=mhsce", *TINY,
                  *where, "hydra.sweep.subdir=pretrain", env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    pretrain = finished_metrics(out / "quick" / "multihot_pretrain" / "pretrain")
    for key in ("val/mlm_ce", "val/unigram_ce", "val/mlm_ce_groups", "val/mlm_ce_single",   # Table 2's keys
                "val/mlm_top10", "val/unigram_top10"):
        assert math.isfinite(pretrain[key]) and pretrain[key] > 0, key
    assert (out / "quick" / "multihot_pretrain" / "pretrain" / "checkpoints" / "last.ckpt").is_file()

    finetune = ["downstream=ner", "downstream_data.ner.test_fraction=0.5", "finetune.ner.steps=3",
                "finetune.ner.batch_size=4", "finetune.ner.warmup_steps=0"]
    run = run_cli("langrepr.train", "-m", "experiment=multihot_table3", "profile=quick", *TINY, *finetune, *where,
                  "hydra.sweep.subdir=ner", env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    folder = out / "quick" / "multihot_table3" / "ner"
    metrics = finished_metrics(folder)
    for key in ("test/macro_f1", "test/micro_f1", "test/f1_PER", "test/f1_LOC", "test/f1_ORG",   # Tables 3 and 5
                "reference/majority/macro_f1", "reference/all_o/micro_f1", "val/mlm_ce"):
        assert key in metrics and math.isfinite(metrics[key]), key
    record = json.loads((folder / "metrics.json").read_text())
    assert record["steps"] == 3 and record["data"]["pretrained_cell"].endswith("multihot_pretrain/pretrain")
    assert (folder / "csv" / "metrics.csv").is_file() and (folder / "checkpoints" / "last.ckpt").is_file()
    assert any(p.endswith("last.ckpt") for p in record["data_files"])   # it read its pretraining's checkpoint


# ---------------------------------------------------------------- a fine-tuning cell finds what the sweep ran

def resolved(compose_cfg, *overrides: str) -> dict:
    return OmegaConf.to_container(compose_cfg(*overrides), resolve=True)


@pytest.mark.parametrize("profile,models", [("quick", ["multihot_small"]),
                                            ("full", ["multihot_small", "multihot_basic"])])
def test_table3_cells_expect_what_the_pretraining_sweep_composes(compose_cfg, profile, models):
    for model in models:
        for token_list in ("bpe_base", "bpe_syllable", "dict_syllable"):
            common = (f"profile={profile}", f"model={model}", f"pipeline.token_list={token_list}", "seed=2")
            pretraining = resolved(compose_cfg, "experiment=multihot_pretrain", "mlm.loss=mhsce", *common)
            for task in ("korquad", "ner", "nsmc"):
                expect = resolved(compose_cfg, "experiment=multihot_table3", f"downstream={task}", *common)
                assert not differences(pretraining, expect["pretrained"]["expect"]), (profile, model, token_list)
                assert expect["model"]["net"] == pretraining["model"]["net"]


@pytest.mark.parametrize("profile", ["quick", "full"])
@pytest.mark.parametrize("loss", ["sce", "bce", "mhsce"])
def test_table2_cells_expect_the_pretraining_cell_of_their_loss(compose_cfg, loss, profile):
    common = (f"profile={profile}", f"mlm.loss={loss}", "model=multihot_small", "pipeline.token_list=bpe_syllable")
    pretraining = resolved(compose_cfg, "experiment=multihot_pretrain", *common)
    table2 = resolved(compose_cfg, "experiment=multihot_table2", *common)
    expect = table2["pretrained"]["expect"]
    assert not differences(pretraining, expect) and expect["mlm"]["nsp"] is (profile == "full")
    assert table2["dataset"]["task"]["_target_"] == "langrepr.tasks.span_qa.SpanQATask"   # KorQuAD fine-tuning
    assert table2["model"]["net"] == pretraining["model"]["net"]
    if profile == "quick":   # the KorQuAD columns of Table 2 quick: Table 3 quick's KorQuAD recipe, nothing else
        table3 = resolved(compose_cfg, "experiment=multihot_table3", "downstream=korquad", *common)
        assert table2["finetune"] == table3["finetune"]["korquad"]
        assert table2["trainer"]["max_steps"] == table3["trainer"]["max_steps"]
    other = resolved(compose_cfg, "experiment=multihot_pretrain", *common[:1], "mlm.loss=bce" if loss != "bce"
                     else "mlm.loss=sce", *common[2:])
    assert differences(other, expect) == ["mlm"]


# ---------------------------------------------------------------- moved entry points keep their records

@pytest.mark.parametrize("experiment,old", [
    ("multihot_table1", "langrepr.data.korean.prepare.table1_pipeline"),
    ("multihot_table4", "langrepr.tasks.span_qa.korquad_answer_pipeline")])
@pytest.mark.parametrize("scheme", ["cell_fingerprint", "config_fingerprint", "legacy_fingerprint"])
def test_a_record_of_the_old_target_is_recognised_and_migrated(compose_cfg, tmp_path, monkeypatch, experiment, old,
                                                               scheme):
    """Fixture: a finished cell as the code before the move wrote it (pipeline node naming the old entry point)."""
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    cfg = compose_cfg(f"experiment={experiment}", "profile=quick")
    assert cell.MOVED_TARGETS[old] == cfg.pipeline._target_
    before = copy.deepcopy(cfg)
    OmegaConf.update(before, "pipeline._target_", old)
    fingerprint = getattr(cell, scheme)(before)
    folder = tmp_path / "cell"
    folder.mkdir()
    metrics = {"bpe_base/all_tokens": 8125.0}
    (folder / "metrics.json").write_text(json.dumps({
        "status": "finished", "run_id": experiment, "profile": "quick", "seed": 1, "commit": "8537ccf",
        "fingerprint": fingerprint, "data_digest": None, "data_files": {}, "metrics": metrics, "params": {},
        "wall_time_s": 12.0}))
    assert fingerprint != cell.cell_fingerprint(cfg) and fingerprint in cell.legacy_fingerprints(cfg)
    record = train(cfg, folder)                    # reused: nothing is read or run
    assert record["metrics"] == metrics and record["wall_time_s"] == 12.0
    written = json.loads((folder / "metrics.json").read_text())
    assert written["fingerprint"] == cell.cell_fingerprint(cfg) and written["migrated_from"] == fingerprint
    assert cell.legacy_fingerprints(compose_cfg(f"experiment={experiment}", "profile=quick",
                                                "pipeline.workers=1")).isdisjoint({fingerprint})   # its own node


# ---------------------------------------------------------------- a pretraining cell is what it read

def test_a_pretraining_cell_refuses_reuse_after_one_corpus_byte_changes(compose_cfg, tmp_path, monkeypatch):
    """The pretrained weights follow the corpus text: a changed byte refuses the finished cell; force=true
    pretrains again on the new text (the token lists and the analysis are rebuilt under new content keys)."""
    from langrepr.errors import UserError
    from tiny_data import flip_one_byte

    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    data = write_korean_quick(tmp_path / "data")
    args = ("experiment=multihot_pretrain", "profile=quick", *TINY, "mlm.loss=mhsce", f"paths.data_dir={data}")
    first = train(compose_cfg(*args), tmp_path / "cell")
    assert first["status"] == "finished"
    assert any(p.endswith("nsmc_raw_reviews.tsv.gz") for p in first["data_files"])
    assert train(compose_cfg(*args), tmp_path / "cell")["wall_time_s"] == first["wall_time_s"]   # reused
    flip_one_byte(data / "klue" / "klue-sts-v1.1_dev.json", "친절했습니다".encode(), "불친절했습니다".encode())
    with pytest.raises(UserError, match="changed since it finished.*klue-sts"):
        train(compose_cfg(*args), tmp_path / "cell")
    again = train(compose_cfg(*args, "force=true"), tmp_path / "cell")
    assert again["status"] == "finished" and again["data_digest"] != first["data_digest"]


def test_the_task_gets_its_data_as_read_even_a_morpheme_spelt_like_a_missing_value():
    """KLUE-NER has a morpheme '???': through instantiate's kwargs a plain list became an OmegaConf node where
    '???' is a missing value, and every NER cell on the real data stopped before training."""
    from hydra.utils import instantiate

    from langrepr.data.korean.finetuning import passed

    morphemes = [[("???", "SF"), ("서울", "NNP")], [("가", "JKS")]]
    with pytest.raises(Exception, match="Missing"):
        instantiate({"_target_": "builtins.dict"}, test_morphemes=morphemes)["test_morphemes"][0][0]
    got = instantiate({"_target_": "builtins.dict"}, test_morphemes=passed(morphemes), n=passed(3))
    assert [list(s) for s in got["test_morphemes"]] == morphemes and got["n"] == 3
    assert list(got["test_morphemes"])[0][0] == ("???", "SF")
