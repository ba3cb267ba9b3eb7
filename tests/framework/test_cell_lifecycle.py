"""Two runs of one cell at once (a per-cell OS lock) and non-finite pipeline results (status `diverged`)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import open_dict

from conftest import ROOT, run_cli
from langrepr import cell
from langrepr.errors import Diverged, UserError
from langrepr.train import train


def constant_metrics(output_dir: str, metrics: dict) -> dict:
    """A pipeline whose result is given by the test."""
    return {k: (float(v) if isinstance(v, str) else v) for k, v in metrics.items()}


def pipeline_cfg(compose_cfg, metrics: dict):
    cfg = compose_cfg("experiment=bitcipher_table1", "model=none", "bitcipher_vectors=majority")
    with open_dict(cfg):
        cfg.pipeline = {"_target_": f"{__name__}.constant_metrics", "metrics": metrics}
    return cfg


# ---------------------------------------------------------------- the lock

def test_a_second_holder_of_the_cell_lock_is_refused_with_one_line(tmp_path):
    with cell.lock(tmp_path):
        with pytest.raises(UserError, match=r"is running now \(pid \d+ on .* since .*\): wait for that run"):
            with cell.lock(tmp_path):                   # a second file handle, as a second process would hold
                pass
    with cell.lock(tmp_path):                           # released at the end of the first run
        pass


def test_train_refuses_a_cell_another_process_runs_and_leaves_its_files(compose_cfg, tmp_path):
    folder = tmp_path / "cell"
    folder.mkdir()
    (folder / "metrics.json").write_text(json.dumps({"status": "running"}))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; fh = open(sys.argv[1], 'a+'); "
         "fcntl.flock(fh, fcntl.LOCK_EX); fh.write('pid 4242 on elsewhere'); fh.flush(); print('locked', flush=True); "
         "time.sleep(60)", str(folder / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(UserError, match="running now .pid 4242 on elsewhere"):
            train(pipeline_cfg(compose_cfg, {"a": 1.0}), folder)
        assert json.loads((folder / "metrics.json").read_text()) == {"status": "running"}   # untouched
        assert not (tmp_path / ".replaced").exists()
    finally:
        holder.kill()
        holder.wait()
    record = train(pipeline_cfg(compose_cfg, {"a": 1.0}), folder)   # the killed holder left no stale lock
    assert record["status"] == "finished"


def test_cli_second_run_of_a_running_cell_exits_2_with_one_line(tmp_path):
    folder = tmp_path / "cell"
    folder.mkdir()
    (folder / "sentinel.txt").write_text("the first run's live file")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; fh = open(sys.argv[1], 'a+'); "
         "fcntl.flock(fh, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(120)", str(folder / ".lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = run_cli("langrepr.train", "dataset=synthetic", "model=bert_ewe", "debug=smoke",
                         f"paths.output_root={tmp_path / 'outputs'}", f"hydra.run.dir={folder}")
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "is running now" in errors[0] and "Traceback" not in result.stderr
    assert (folder / "sentinel.txt").exists() and not (tmp_path / ".replaced").exists()


def test_lock_file_is_never_moved_aside(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    with cell.lock(tmp_path):
        cell.move_aside(tmp_path)
        assert (tmp_path / cell.LOCK_FILE).exists() and not (tmp_path / "old.txt").exists()


# ---------------------------------------------------------------- non-finite results

@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_a_non_finite_pipeline_result_is_recorded_as_diverged(compose_cfg, tmp_path, bad):
    cfg = pipeline_cfg(compose_cfg, {"val/ce": bad, "val/acc": 0.5})
    with pytest.raises(Diverged, match=r"pipeline cell diverged: val/ce = (nan|inf|-inf)"):
        train(cfg, tmp_path / "cell")
    record = json.loads((tmp_path / "cell" / "metrics.json").read_text())
    assert record["status"] == "diverged" and "val/ce" in record["error"]
    assert record["metrics"]["val/acc"] == 0.5


def test_an_undefined_metric_is_none_and_the_cell_finishes(compose_cfg, tmp_path):
    record = train(pipeline_cfg(compose_cfg, {"val/acc": 0.5, "val/unseen_acc": None}), tmp_path / "cell")
    assert record["status"] == "finished" and record["metrics"]["val/unseen_acc"] is None


def test_cli_diverged_pipeline_exits_2_with_one_line(tmp_path):
    folder = tmp_path / "cell"
    result = run_cli("langrepr.train", "experiment=bitcipher_table1", "model=none", "bitcipher_vectors=majority",
                     "~pipeline", f"+pipeline={{_target_: {__name__}.constant_metrics, metrics: {{x: nan}}}}",
                     "hydra.mode=RUN", f"hydra.run.dir={folder}", f"paths.output_root={tmp_path / 'outputs'}",
                     env={"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), str(ROOT / "tests"),   # this module + conftest
                                                         os.environ.get("PYTHONPATH", "")])})
    assert result.returncode == 2, result.stderr[-3000:]
    assert "error: pipeline cell diverged: x = nan" in result.stderr and "Traceback" not in result.stderr
    assert json.loads((folder / "metrics.json").read_text())["status"] == "diverged"


def multihot_pretrain_cfg(compose_cfg, tmp_path, *extra: str):
    from tiny_data import write_korean_quick

    data = write_korean_quick(tmp_path / "data")
    return compose_cfg("experiment=multihot_pretrain", "profile=quick", "dataset=korean_quick", "dataset.corpus.nsmc=40",
                       "dataset.corpus.korquad=20", "dataset.corpus.klue=10", "dataset.token_lists.bpe_size=120",
                       "dataset.token_lists.pos_joined=10", "dataset.token_lists.syllables=40",
                       "dataset.token_lists.dictionary_size=40", "pipeline.workers=1", f"paths.data_dir={data}",
                       "model.net.hidden_size=16", "model.net.num_layers=1", "model.net.intermediate_size=32",
                       "model.net.max_positions=32", "mlm.steps=5", "mlm.batch_size=4", "mlm.val_fraction=0.3",
                       *extra)


def test_multihot_pretraining_with_a_huge_lr_is_diverged(compose_cfg, tmp_path):
    """X24 of the reliability cases: the MLM pretraining's NaN loss used to be recorded as finished."""
    cfg = multihot_pretrain_cfg(compose_cfg, tmp_path, "mlm.lr=1e12", "mlm.warmup_steps=0")
    with pytest.raises(Diverged):
        train(cfg, tmp_path / "cell")
    record = json.loads((tmp_path / "cell" / "metrics.json").read_text())
    assert record["status"] == "diverged" and record["error"].startswith("training diverged:")   # NonFiniteGuard
    # issue 33: the advice names the key this cell sets (not optimizer.lr) and not the clipping it already has
    assert "lower mlm.lr (it is 1e+12)" in record["error"] and "add trainer.gradient_clip_val" not in record["error"]


def test_bpe_base_pretraining_has_no_group_metric_and_finishes(compose_cfg, tmp_path):
    """A BPE base list has no multi-hot groups: its group cross-entropy is undefined, not a divergence."""
    record = train(multihot_pretrain_cfg(compose_cfg, tmp_path, "pipeline.token_list=bpe_base"), tmp_path / "cell")
    assert record["status"] == "finished" and math.isfinite(record["metrics"]["val/mlm_ce"])
    assert record["metrics"].get("val/mlm_ce_groups") is None and record["metrics"]["val/masked_groups"] == 0


def test_a_cell_scored_under_an_older_metric_definition_is_not_reused(tmp_path):
    """Never reused as if current: a finished record without the current metric_versions runs again."""
    from langrepr.metric_versions import METRIC_VERSIONS
    record = {"status": "finished", "fingerprint": "f", "metrics": {"test/2015A/auroc": 0.9, "test/2015A/f1": 0.5}}
    assert cell.reusable(record, tmp_path, "f", set(), None) is False
    current = {**record, "metric_versions": dict(METRIC_VERSIONS)}
    assert cell.reusable(current, tmp_path, "f", set(), None) is True


# ---------------------------------------------------------------- moving a previous attempt aside

def previous_attempt(tmp_path: Path) -> Path:
    """A failed attempt of a cell that left a `wandb/` folder (a run of another user, or an offline sync)."""
    folder = tmp_path / "cell"
    (folder / "wandb" / "run-1").mkdir(parents=True)
    (folder / "wandb" / "run-1" / "log.txt").write_text("old")
    (folder / "metrics.json").write_text(json.dumps({"status": "failed", "error": "x"}))
    return folder


def test_a_read_only_folder_of_the_previous_attempt_is_one_line_and_nothing_moves(compose_cfg, tmp_path,
                                                                                   monkeypatch):
    """Issue 33: a read-only `wandb/` gave a traceback halfway through shutil.move (copied, then not deleted)."""
    folder, access = previous_attempt(tmp_path), os.access
    # what a user without root sees for a chmod 555 folder (root may rename anything, so this test says it)
    monkeypatch.setattr(os, "access", lambda p, mode, **k: Path(p).name != "wandb" and access(p, mode, **k))
    with pytest.raises(UserError) as err:
        train(pipeline_cfg(compose_cfg, {"a": 1.0}), folder)
    wandb = folder / "wandb"
    assert str(err.value) == (f"cannot move the previous attempt's {wandb} aside (it is read-only): make it writable "
                              f"(chmod -R u+w {wandb}) or move it out of the cell folder yourself, then rerun")
    assert json.loads((folder / "metrics.json").read_text())["status"] == "failed"      # nothing moved, nothing lost
    assert (wandb / "run-1" / "log.txt").exists() and not (tmp_path / ".replaced").exists()
    monkeypatch.undo()                                                                    # made writable: it runs
    assert train(pipeline_cfg(compose_cfg, {"a": 1.0}), folder)["status"] == "finished"
    (aside,) = (tmp_path / ".replaced").iterdir()
    assert (aside / "wandb" / "run-1" / "log.txt").read_text() == "old" and (aside / "metrics.replaced.json").exists()


def test_a_move_the_file_system_refuses_is_one_line_and_each_file_is_in_one_place(tmp_path, monkeypatch):
    """A rename refused (EACCES) is named with the fix; no copy is left beside an original, as shutil.move left."""
    import errno

    folder, rename = previous_attempt(tmp_path), os.rename

    def refuse_wandb(src, dst, *args, **kwargs):
        if Path(src).name == "wandb":
            raise PermissionError(errno.EACCES, "Permission denied", str(src))
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", refuse_wandb)
    with pytest.raises(UserError, match=r"cannot move the previous attempt's .*wandb aside \(Permission denied\): "
                                        r"make it writable \(chmod -R u\+w .*wandb\)"):
        cell.move_aside(folder)
    (aside,) = (tmp_path / ".replaced").iterdir()
    assert (folder / "wandb" / "run-1" / "log.txt").exists() and not (aside / "wandb").exists()
    assert [(folder / "metrics.json").exists(), (aside / "metrics.replaced.json").exists()].count(True) == 1
