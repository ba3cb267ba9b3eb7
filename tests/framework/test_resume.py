"""kill -9 mid-run, resume with ckpt_path=auto: final metrics bit-identical to an uninterrupted run (CPU, deterministic)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

ARGS = ["dataset=synthetic", "model=bert_ewe", "debug=smoke", "trainer.max_epochs=3", "trainer.deterministic=true",
        "ckpt_path=auto", "run_id=resume"]


def run_main(argv: list[str]) -> int:
    """`python -m langrepr.train argv` in this process (saves an interpreter start per run)."""
    import langrepr.train as entry

    saved = sys.argv
    sys.argv = ["langrepr.train", *argv]
    try:
        entry.main()
        return 0
    except SystemExit as exit_:
        return int(exit_.code or 0)
    finally:
        sys.argv = saved


def checkpoint_step(root: Path) -> int:
    """global_step of the cell's last.ckpt (-1 while there is none); written atomically, so safe to read."""
    import torch

    found = list(root.rglob("last.ckpt"))
    if not found:
        return -1
    try:
        return int(torch.load(found[0], map_location="cpu", weights_only=False)["global_step"])
    except (OSError, RuntimeError, KeyError):
        return -1          # replaced between listing and reading


def only_metrics(root: Path) -> dict:
    (path,) = list(root.rglob("metrics.json"))
    return json.loads(path.read_text())


# mid-epoch (every_n=1): bit-identical in two manual kill trials (steps 2 and 4); one in-process run ended "failed"
# (cause not confirmed; suspected a kill on an epoch's last batch, where no step checkpoint is written any more since),
# not re-verified after that change: marked slow, out of CI
@pytest.mark.parametrize("every_n", [None, pytest.param(1, marks=pytest.mark.slow)], ids=["epoch-end", "mid-epoch"])
def test_kill9_then_resume_is_bit_identical(tmp_path, shared_cache, every_n):
    common = [*ARGS, f"paths.cache_dir={shared_cache}"]
    if every_n:   # a checkpoint after every step, 3 steps per epoch: the kill lands mid-epoch
        common += [f"callbacks.last_checkpoint.every_n_train_steps={every_n}", "trainer.limit_train_batches=3"]
    assert run_main([*common, f"paths.output_root={tmp_path / 'straight'}"]) == 0
    straight = only_metrics(tmp_path / "straight")

    killed_root = tmp_path / "killed"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    proc = subprocess.Popen([sys.executable, "-m", "langrepr.train", *common, f"paths.output_root={killed_root}"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while proc.poll() is None and time.time() < deadline:
        if checkpoint_step(killed_root) >= (4 if every_n else 1):   # epoch 1, batch 1 (mid-epoch) or epoch 0's end
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    interrupted = only_metrics(killed_root)
    assert interrupted["status"] == "running"           # what a kill leaves: not finished, not reused

    assert run_main([*common, f"paths.output_root={killed_root}"]) == 0
    resumed = only_metrics(killed_root)
    assert resumed["status"] == "finished"
    steps = 9 if every_n else 6
    assert resumed["resumed_from_step"] > 0 and resumed["steps"] == straight["steps"] == steps
    assert resumed["metrics"] == straight["metrics"]   # bit-identical floats, test and val alike
    # the CSV curve was appended to, not restarted: every training step logged exactly once
    (csv_path,) = list(killed_root.rglob("metrics.csv"))
    with open(csv_path, newline="") as fh:
        logged = [int(r["step"]) for r in csv.DictReader(fh) if r.get("train/loss")]
    assert logged == list(range(steps))
    assert resumed["wall_time_s"] > 0


def test_checkpoint_of_another_config_is_not_resumed(compose_cfg, tmp_path):
    from langrepr.errors import UserError
    from langrepr.train import train

    cfg = compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke", "ckpt_path=auto")
    train(cfg, tmp_path / "run")
    record = json.loads((tmp_path / "run" / "metrics.json").read_text())
    record["status"] = "running"                        # as if it had been killed after its last checkpoint
    (tmp_path / "run" / "metrics.json").write_text(json.dumps(record))
    changed = compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke", "ckpt_path=auto",
                          "optimizer.lr=0.001")
    with pytest.raises(UserError, match="different config"):
        train(changed, tmp_path / "run")
    forced = compose_cfg("dataset=synthetic", "model=bert_ewe", "debug=smoke", "ckpt_path=auto",
                         "optimizer.lr=0.001", "force=true")
    assert train(forced, tmp_path / "run")["status"] == "finished"
    (aside,) = list((tmp_path / ".replaced").iterdir())
    assert (aside / "metrics.replaced.json").exists() and not (aside / "metrics.json").exists()


# ---------------------------------------------------------------- the rule for every task type (in process)

class Killed(Exception):
    """Stands for kill -9: nothing of the run after this point happens (raised from inside the fit)."""


# 5 batches an epoch, bounded by max_steps (13: the last epoch is cut short), a validation every 4 steps across
# epochs (steps 4, 8, 12: never at an epoch end, as in the grid: 200 steps, validated every 50, 63 batches an
# epoch) and a step checkpoint every 2 steps; epoch-end checkpoints at steps 5 and 10
RECIPE = ["++trainer.limit_train_batches=5", "++trainer.max_epochs=3", "++trainer.max_steps=13",
          "++trainer.val_check_interval=4", "++trainer.check_val_every_n_epoch=null", "++trainer.limit_val_batches=2",
          "++trainer.limit_test_batches=2", "++trainer.log_every_n_steps=1", "++trainer.deterministic=true",
          "callbacks.last_checkpoint.every_n_train_steps=2", "ckpt_path=auto"]
# where each process of the interrupted cell dies: right after the step checkpoint of step 2 (mid-epoch), in the
# validation of step 8 (a step with a checkpoint of its own), right after the epoch-end checkpoint of step 10
KILLS = [("after checkpoint", 2), ("in validation", 8), ("after checkpoint", 10)]


def killed_at(monkeypatch, where: str, step: int) -> None:
    """Make this process's fit die at (where, step), once."""
    from langrepr.callbacks import AtomicCheckpointIO, LastCheckpoint

    if where == "after checkpoint":
        save = AtomicCheckpointIO.save_checkpoint

        def save_then_die(self, checkpoint, path, storage_options=None):
            save(self, checkpoint, path, storage_options)
            if Path(path).name == "last.ckpt" and checkpoint["global_step"] == step:
                raise Killed(f"{where} {step}")
        monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", save_then_die)
    else:
        def die_in_validation(self, trainer, pl_module):
            if not trainer.sanity_checking and trainer.global_step == step:
                raise Killed(f"{where} {step}")
        monkeypatch.setattr(LastCheckpoint, "on_validation_start", die_in_validation, raising=False)


def curve(folder: Path) -> list[dict]:
    """The CSV log's rows as logged (training losses and validation points), one dict a row, empty cells out."""
    (path,) = list(folder.rglob("metrics.csv"))
    with open(path, newline="") as fh:
        return [{k: v for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(fh)]


def final_weights(folder: Path) -> dict:
    """The model weights of the cell's last checkpoint (the one its test pass scored)."""
    import torch

    (path,) = list(folder.rglob("last.ckpt"))
    return torch.load(path, map_location="cpu", weights_only=False)["state_dict"]


def assert_resume_is_exact(compose_cfg, tmp_path, monkeypatch, *overrides: str, recipe: list[str] = RECIPE,
                           kills: list[tuple[str, int]] = KILLS) -> dict:
    """An uninterrupted cell vs the same cell killed at each of `kills` and resumed with ckpt_path=auto."""
    from langrepr.train import train

    def run(folder: Path) -> dict:
        cfg = compose_cfg(*overrides, *recipe)
        cfg.paths.output_dir = str(folder)              # its checkpoints and logs in its own folder
        return train(cfg, folder)

    straight = run(tmp_path / "straight")
    assert straight["steps"] == 13
    for where, step in kills:
        with monkeypatch.context() as patch:
            killed_at(patch, where, step)
            with pytest.raises(Killed):
                run(tmp_path / "killed")
    resumed = run(tmp_path / "killed")
    assert resumed["status"] == "finished" and resumed["resumed_from_step"] == 10
    assert (resumed["steps"], resumed["epochs"]) == (straight["steps"], straight["epochs"])
    assert resumed["metrics"] == straight["metrics"]                    # bit-identical, val and test
    # and the weights: a tiny cell's test scores (accuracy, F1 in whole examples) can agree by chance
    weights, resumed_weights = final_weights(tmp_path / "straight"), final_weights(tmp_path / "killed")
    assert weights.keys() == resumed_weights.keys()
    assert [k for k in weights if not weights[k].equal(resumed_weights[k])] == []
    # every validation point once, as uninterrupted; each logged training loss once and equal (the row of the
    # batch a kill lands after can be missing: it is logged after that batch's checkpoint is written)
    points, lost = curve(tmp_path / "straight"), curve(tmp_path / "killed")
    assert [r for r in lost if "train/loss" not in r] == [r for r in points if "train/loss" not in r]
    losses = [r for r in lost if "train/loss" in r]
    assert len({r["step"] for r in losses}) == len(losses) and all(r in points for r in losses)
    return straight


def test_a_grid_cell_resumes_exactly_after_mid_epoch_and_epoch_end_kills(compose_cfg, tmp_path, monkeypatch):
    """Issue 33: multi-label classification (the grid's patents column); killed after its epoch-end checkpoint,
    a max_steps-bounded cell trained one extra batch (test acc 0.854 vs 0.856 on the quick AG News cell)."""
    assert_resume_is_exact(compose_cfg, tmp_path, monkeypatch, "experiment=grid", "grid_task=synthetic",
                           "input=words", "encoder=swem", "debug=smoke")


def write_task_data(root: Path) -> Path:
    """Tiny local copies laid out as in shared/data: PTB, Multi30k, CoNLL-2003, AG News (test.csv alone)."""

    from tiny_data import write_agnews_test, write_ptb_and_multi30k

    write_ptb_and_multi30k(root, pairs=60)
    (root / "conll2003").mkdir()
    names = [("John", "I-PER"), ("Paris", "I-LOC"), ("Reuters", "I-ORG"), ("the", "O"), ("cat", "O")]
    sentences = [[names[i % 5], ("saw", "O"), names[(i + 2) % 5], (".", "O")] for i in range(40)]
    for name, part in (("eng.train", sentences), ("eng.testa", sentences[:8]), ("eng.testb", sentences[8:16])):
        lines = ["-DOCSTART- -X- -X- O", ""]
        for sentence in part:
            lines += [f"{w} NNP I-NP {t}" for w, t in sentence] + [""]
        (root / "conll2003" / name).write_text("\n".join(lines))
    write_agnews_test(root / "agnews", per_class=40)
    return root


GRID = ["experiment=grid", "profile=quick", "debug=smoke"]
TASKS = {   # one train cell of each task type, at smoke size on the data above
    "single-label classification (LEAM, label embedding)": [*GRID, "grid_task=ag_news", "input=words",
                                                            "encoder=leam"],
    "multi-label classification (LEAM, label embedding)": ["dataset=synthetic", "model=leam_patents", "debug=smoke"],
    "masked LM": ["experiment=tensorcoder_table1", "profile=quick", "model=tensorcoder_1conv", "dataset=ptb",
                  "debug=smoke"],
    "causal LM": ["experiment=bitcipher_figure4", "profile=quick", "dataset=ptb_causal", "debug=smoke"],
    "translation": ["experiment=tensorcoder_table3", "profile=quick", "model=tensorcoder_1conv_nmt",
                    "dataset=multi30k", "debug=smoke", "dataset.datamodule.vocab_size=200"],
    "token classification (NER)": [*GRID, "grid_task=conll2003", "input=words", "encoder=bert"],
}


@pytest.mark.parametrize("task", list(TASKS))
def test_every_task_type_resumes_exactly(compose_cfg, tmp_path, monkeypatch, task):
    """The rule for each kind of train cell: killed mid-epoch, in a validation and after an epoch end, then
    resumed, it ends bit-identical to an uninterrupted run."""
    data = write_task_data(tmp_path / "data")
    assert_resume_is_exact(compose_cfg, tmp_path, monkeypatch, *TASKS[task], f"paths.data_dir={data}")


MULTIHOT = ["experiment=multihot_pretrain", "profile=quick", "dataset=korean_quick", "dataset.corpus.nsmc=60",
            "dataset.corpus.korquad=20", "dataset.corpus.klue=10", "dataset.token_lists.bpe_size=150",
            "dataset.token_lists.pos_joined=20", "dataset.token_lists.syllables=60",
            "dataset.token_lists.dictionary_size=60", "model=multihot_small", "model.net.hidden_size=16",
            "model.net.num_layers=1", "model.net.intermediate_size=32", "model.net.max_positions=32",
            "mlm.loss=mhsce", "mlm.batch_size=4", "mlm.val_fraction=0.3", "pipeline.workers=1",
            "pipeline.token_list=bpe_syllable", "seed=1"]


def test_a_multihot_pretraining_cell_resumes_exactly(compose_cfg, tmp_path, monkeypatch):
    """Multi-hot MLM (the pretraining the multi-hot fine-tuning cells start from): morphemes, groups, masking."""
    from tiny_data import write_korean_quick

    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    data = write_korean_quick(tmp_path / "data")
    assert_resume_is_exact(compose_cfg, tmp_path, monkeypatch, *MULTIHOT, f"paths.data_dir={data}")


# The multi-hot fine-tuning cells (Table 3): no validation part, so the recipe has none and every kill lands right
# after a checkpoint: mid-epoch 0 (step 2), mid-epoch 1 after an epoch-end resume (step 6), an epoch end (step 10)
FINETUNE_RECIPE = [r for r in RECIPE if "val" not in r]
FINETUNE_KILLS = [("after checkpoint", 2), ("after checkpoint", 6), ("after checkpoint", 10)]
# the pretraining those cells start from, and each task at 2 examples a batch with at least 5 batches an epoch
KOREAN = ["profile=quick", "dataset=korean_quick", "dataset.corpus.nsmc=40", "dataset.corpus.korquad=0",
          "dataset.corpus.klue=10", "dataset.token_lists.bpe_size=150", "dataset.token_lists.pos_joined=20",
          "dataset.token_lists.syllables=60", "dataset.token_lists.dictionary_size=60", "model=multihot_small",
          "model.net.hidden_size=16", "model.net.num_layers=1", "model.net.intermediate_size=32",
          "model.net.max_positions=32", "mlm.steps=2", "mlm.batch_size=4", "mlm.val_fraction=0.3",
          "pipeline.workers=1", "pipeline.token_list=bpe_syllable", "seed=1"]
# one cell per task type (SRL is a tagging cell as NER is, its predicate appended to the input)
FINETUNE_TASKS = {"span QA (KorQuAD)": "korquad", "token tagging (NER)": "ner",
                  "sentence classification (NSMC)": "nsmc"}
FINETUNE = ["experiment=multihot_table3", *KOREAN, "downstream_data.nsmc.per_class=8",
            "downstream_data.ner.test_fraction=0.25",
            *(f"finetune.{task}.{key}={value}" for task in FINETUNE_TASKS.values()
              for key, value in (("batch_size", 2), ("warmup_steps", 3))), "finetune.korquad.stride=8"]


@pytest.fixture(scope="module")
def korean_pretrained(tmp_path_factory, shared_cache):
    """(data folder, pretraining run folder): one tiny finished multi-hot pretraining cell for the module."""
    from hydra import compose, initialize_config_dir

    from langrepr.confpaths import CONF_DIR
    from langrepr.train import train
    from tiny_data import write_korean_downstream

    data = write_korean_downstream(tmp_path_factory.mktemp("korean"), ner_sentences=20, korquad_articles=24)
    runs = tmp_path_factory.mktemp("pretrain")
    with pytest.MonkeyPatch.context() as patch, initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        patch.setenv("LANGREPR_DIGEST_CACHE", str(runs / "digests.json"))
        cfg = compose("train", overrides=["experiment=multihot_pretrain", *KOREAN, f"paths.data_dir={data}",
                                          f"paths.cache_dir={shared_cache}", f"paths.output_dir={runs / 'cell'}"])
        assert train(cfg, runs / "cell")["status"] == "finished"
    return data, runs


@pytest.mark.parametrize("task", list(FINETUNE_TASKS))
def test_a_multihot_fine_tuning_cell_resumes_exactly(compose_cfg, tmp_path, monkeypatch, korean_pretrained, task):
    """Multi-hot LM Table 3's cells (span QA, tagging, sentence classification), each fine-tuning the pretraining
    cell's encoder for a fixed number of steps: killed twice mid-epoch and once at an epoch end, then resumed."""
    data, runs = korean_pretrained
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    assert_resume_is_exact(compose_cfg, tmp_path, monkeypatch, *FINETUNE, f"downstream={FINETUNE_TASKS[task]}",
                           f"paths.data_dir={data}", f"pretrained.root={runs}", recipe=FINETUNE_RECIPE,
                           kills=FINETUNE_KILLS)


def test_a_cell_stopped_by_sigterm_exits_non_zero_with_one_line(tmp_path, shared_cache):
    """Lightning turns SIGTERM into a SystemExit without a code: the stopped cell's process exited 0 (issue 33)."""
    root = tmp_path / "stopped"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    proc = subprocess.Popen([sys.executable, "-m", "langrepr.train", *ARGS, "trainer.max_epochs=200",
                             f"paths.cache_dir={shared_cache}", f"paths.output_root={root}"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600      # a bound for a wedged run, not a pace: the signal goes at the first checkpoint
    while proc.poll() is None and time.time() < deadline:
        if checkpoint_step(root) >= 1:
            os.kill(proc.pid, signal.SIGTERM)
            break
        time.sleep(0.05)
    _, err = proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "was stopped by SIGTERM before it finished" in err and "ckpt_path=auto" in err
    assert only_metrics(root)["status"] == "failed"
