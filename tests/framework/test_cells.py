"""A cell's folder and files: short folder names, result files that respect the umask, a full disk at any
write (one line, resumable), and best-so-far metrics kept across a resume.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from cases import PTB, error_lines, out, records
from conftest import run_main

pytestmark = pytest.mark.usefixtures("own_digest_cache", "fresh_root_logger")


def test_X59_a_dozen_overrides_name_a_short_cell_folder(tmp_path, capfd):
    """The case's 11 overrides (a 300-byte folder name) on a count cell: it runs, in a folder that fits."""
    many = ["dataset.datamodule.max_train_samples=400", "dataset.datamodule.max_eval_samples=100",
            "trainer.limit_train_batches=90", "trainer.limit_val_batches=20", "optimizer.weight_decay=0.02",
            "scheduler.num_warmup_steps=10", "model.net.hidden_size=96", "model.net.num_layers=2",
            "model.net.intermediate_size=128", "callbacks.last_checkpoint.every_n_train_steps=50",
            "dataset.task.threshold=0.4"]
    count = ["experiment=ewe_table1", "model=bert_ewe"]
    assert run_main([*count, *many, *out(tmp_path)]) == 0, capfd.readouterr().err[-3000:]
    ((name, record),) = records(tmp_path / "out").items()
    assert record["status"] == "finished" and len(name.encode()) <= 200 and ",~" in name
    assert set(many) <= {o.lstrip("+") for o in record["overrides"]}   # the full list is recorded
    # the same command names the same folder (reused), one override more another one
    assert run_main([*count, *many, *out(tmp_path)]) == 0
    assert "this cell already finished" in "".join(capfd.readouterr())
    assert run_main([*count, *many, "model.net.num_heads=4", *out(tmp_path)]) == 0
    assert len(records(tmp_path / "out")) == 2


def test_X59_short_names_are_unchanged_and_long_ones_keep_whole_overrides():
    from langrepr.confpaths import cell_dir_name

    assert cell_dir_name("") == "defaults"
    assert cell_dir_name("dataset=ptb,model=x") == "dataset=ptb,model=x"
    assert cell_dir_name("dataset.corpus.path=/a/b") == "dataset.corpus.path=%2Fa%2Fb"   # issue 33: one folder
    long = ",".join(f"key{i}=value{i}" for i in range(40))
    short = cell_dir_name(long)
    head, digest = short.rsplit(",~", 1)
    assert len(short.encode()) <= 200 and long.startswith(head + ",") and len(digest) == 16
    assert cell_dir_name(long + ",x=1") != short
    path = cell_dir_name("p=/" + "d" * 300)
    assert "/" not in path and len(path.encode()) <= 200


def test_X59_a_slash_in_an_override_value_never_nests_the_cell_folder():
    """Issue 33: `p=/a/b` was the folders `p=` / `a` / `b`; the old name is still computed, to find such a cell."""
    from langrepr.confpaths import cell_dir_name, legacy_cell_dir_name

    for name in ("dataset.corpus.path=/a/b,seed=1", "s=[{path: ptb/ptb.train.txt}],x=1", "p=/" + "d/" * 120):
        assert "/" not in cell_dir_name(name) and len(cell_dir_name(name).encode()) <= 200
    assert legacy_cell_dir_name("dataset.corpus.path=/a/b") == "dataset.corpus.path=/a/b"   # where it was
    long = ",".join(f"key{i}=value{i}" for i in range(40))
    for name in ("", "dataset=ptb,model=x", long, long + ",p=/a", "p=/" + "d" * 300):   # no '/', or shortened
        assert cell_dir_name(name) == legacy_cell_dir_name(name)                       # before: the same folder
    from langrepr.provenance import run_provenance

    # a clean clone rebuilds the command from the folder name
    assert run_provenance(f"nowhere/{cell_dir_name('p=/a/b,seed=1')}")["overrides"] == ["p=/a/b", "seed=1"]


def test_X59_a_cell_with_a_slash_runs_in_one_folder_and_a_cell_nested_before_is_found(tmp_path, capfd):
    """The count cell with a path override: one folder under its run, `.replaced/` beside it (not inside a nest),
    and a finished cell in the nested folder the code before wrote is reused, not run again or counted twice."""
    from langrepr.confpaths import legacy_cell_dir_name

    count = ["experiment=ewe_table1", "model=bert_ewe", f"dataset.datamodule.data_dir={tmp_path}/d/e", *out(tmp_path)]
    assert run_main(count) == 0, capfd.readouterr().err[-3000:]
    run = tmp_path / "out" / "exact" / "ewe_table1"
    (folder,) = [p for p in run.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert "%2F" in folder.name and (folder / "metrics.json").exists()
    legacy = run / legacy_cell_dir_name(folder.name.replace("%2F", "/"))       # as the code before wrote it
    assert legacy.parent != run
    legacy.parent.mkdir(parents=True)
    shutil.move(str(folder), str(legacy))
    before = json.loads((legacy / "metrics.json").read_text())
    capfd.readouterr()
    assert run_main(count) == 0
    assert "this cell already finished" in "".join(capfd.readouterr())
    assert records(tmp_path / "out") == {folder.name: before}                  # moved into its one folder, once
    assert run_main([*count, "force=true"]) == 0
    (aside,) = (run / ".replaced").iterdir()
    assert aside.name.startswith(folder.name + "@") and (aside / "metrics.replaced.json").exists()


# ---------------------------------------------------------------- 2. result files respect the umask

@pytest.fixture
def umask():
    import os

    saved = os.umask(0o022)
    os.umask(saved)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(saved)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_writers_give_the_mode_open_would(mask, mode, umask, tmp_path):
    from langrepr.utils import write_json_atomic, write_text_atomic

    umask(mask)
    write_json_atomic(tmp_path / "metrics.json", {"status": "finished"})
    write_text_atomic(tmp_path / "config_resolved.yaml", "seed: 1\n")
    (tmp_path / "plain.txt").write_text("what open() gives")
    assert (tmp_path / "plain.txt").stat().st_mode & 0o777 == mode
    assert (tmp_path / "metrics.json").stat().st_mode & 0o777 == mode
    assert (tmp_path / "config_resolved.yaml").stat().st_mode & 0o777 == mode
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"status": "finished"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config_resolved.yaml", "metrics.json", "plain.txt"]


def test_a_run_folder_is_readable_by_the_group(ptb_root, tmp_path, umask, capfd):
    umask(0o027)
    cell = tmp_path / "out" / "cell"
    code = run_main([*PTB, f"paths.data_dir={ptb_root}", f"hydra.run.dir={cell}", f"paths.output_root={tmp_path}/out",
                     f"paths.cache_dir={tmp_path}/cache"])
    assert code == 0, capfd.readouterr().err[-2000:]
    modes = {p.relative_to(cell).as_posix(): p.stat().st_mode & 0o777 for p in cell.rglob("*") if p.is_file()}
    assert {"metrics.json", "config_resolved.yaml", "checkpoints/last.ckpt"} <= set(modes)
    assert {k: v for k, v in modes.items() if v != 0o640} == {}


# ---------------------------------------------------------------- 3. a full disk at any write

TORCH_ENOSPC = "[enforce fail at inline_container.cc:672] . unexpected pos 267712 vs 267604"
TORCH_WRITE_FAILED = "PytorchStreamWriter failed writing file data/0: file write failed"


def _cell_args(ptb_root: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [*PTB, "trainer.max_epochs=2", f"paths.data_dir={ptb_root}", f"hydra.run.dir={tmp_path}/out/cell",
            f"paths.output_root={tmp_path}/out", f"paths.cache_dir={tmp_path}/cache", *extra]


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob(".*.tmp"))


def _fail_second_last_ckpt(monkeypatch, raise_it) -> dict:
    """torch.save fails on the 2nd write of last.ckpt (epoch 1), after epoch 0's last.ckpt is complete."""
    import hashlib

    import torch

    import langrepr.callbacks as callbacks

    real_save, seen = torch.save, {"last": 0, "sha_before": None}

    def save(obj, f, *args, **kwargs):
        name = Path(getattr(f, "name", "")).name
        if name == ".last.ckpt.tmp":
            seen["last"] += 1
            if seen["last"] == 2:
                last = Path(f.name).with_name("last.ckpt")
                seen["sha_before"] = hashlib.sha256(last.read_bytes()).hexdigest()
                f.write(b"PK\x03\x04 half a checkpoint")
                raise_it()
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(callbacks.torch, "save", save)
    return seen


def _raise_torch_enospc() -> None:
    try:
        raise OSError(28, "No space left on device")
    except OSError:
        raise RuntimeError(TORCH_ENOSPC)   # noqa: B904  (torch's own shape: the OSError is the __context__)


def _raise_torch_write_failed() -> None:
    raise RuntimeError(TORCH_WRITE_FAILED)


@pytest.mark.parametrize("raise_it, reason", [
    (_raise_torch_enospc, "No space left on device"),
    (_raise_torch_write_failed, f"the write failed ({TORCH_WRITE_FAILED})"),
])
def test_disk_full_while_checkpointing_is_one_line_and_resumable(raise_it, reason, ptb_root, tmp_path, capfd,
                                                                monkeypatch):
    import hashlib

    seen = _fail_second_last_ckpt(monkeypatch, raise_it)
    cell = tmp_path / "out" / "cell"
    code = run_main(_cell_args(ptb_root, tmp_path))
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-3000:]
    last = cell / "checkpoints" / "last.ckpt"
    (line,) = error_lines(err)
    assert re.fullmatch(
        rf"error: cannot write checkpoint {re.escape(str(last))}: {re.escape(reason)} \([0-9.]+ [KMG]?i?B free "
        r"there\); free disk space or point paths.output_root at a writable folder, then rerun the same command "
        rf"with ckpt_path=auto \(it resumes from {re.escape(str(last))}, which is intact\)", line), line
    assert hashlib.sha256(last.read_bytes()).hexdigest() == seen["sha_before"]   # epoch 0's checkpoint, whole
    assert _leftovers(tmp_path) == []
    record = json.loads((cell / "metrics.json").read_text())
    assert record["status"] == "failed" and record["error"] == line.removeprefix("error: ")

    monkeypatch.undo()                                   # the disk has room again: follow the advice
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    code = run_main(_cell_args(ptb_root, tmp_path, "ckpt_path=auto"))
    err = capfd.readouterr().err
    assert code == 0 and not error_lines(err), err[-3000:]
    record = json.loads((cell / "metrics.json").read_text())
    assert record["status"] == "finished" and record["resumed_from_step"] == 2 and record["steps"] == 4


def test_disk_full_on_the_first_checkpoint_says_the_rerun_starts_over(ptb_root, tmp_path, capfd, monkeypatch):
    import torch

    import langrepr.callbacks as callbacks

    def save(obj, f, *args, **kwargs):           # checkpoints only (the data cache also uses torch.save)
        if Path(getattr(f, "name", "")).name.endswith(".ckpt.tmp"):
            _raise_torch_enospc()
        return real_save(obj, f, *args, **kwargs)

    real_save = torch.save
    monkeypatch.setattr(callbacks.torch, "save", save)
    code = run_main(_cell_args(ptb_root, tmp_path))
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-3000:]
    (line,) = error_lines(err)
    assert line.endswith("then rerun the same command (no checkpoint of this cell was complete yet, so it starts over)")
    assert not list((tmp_path / "out" / "cell" / "checkpoints").glob("*")) and _leftovers(tmp_path) == []
    monkeypatch.setattr(callbacks.torch, "save", real_save)
    assert run_main(_cell_args(ptb_root, tmp_path)) == 0      # the advice: the same command


def test_a_real_full_device_under_torch_save_is_one_line(ptb_root, tmp_path, capfd, monkeypatch):
    """Not a mock of the exception: torch.save writes to /dev/full and raises whatever it raises there."""
    import builtins

    import langrepr.callbacks as callbacks

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    count = {"n": 0}

    def full_open(file, mode="r", *args, **kwargs):
        if Path(str(file)).name == ".last.ckpt.tmp":
            count["n"] += 1
            if count["n"] == 2:
                builtins.open(file, mode).close()          # the temporary file exists, as it would
                return builtins.open("/dev/full", mode)
        return builtins.open(file, mode, *args, **kwargs)

    monkeypatch.setattr(callbacks, "open", full_open, raising=False)
    code = run_main(_cell_args(ptb_root, tmp_path))
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-3000:]
    (line,) = error_lines(err)
    assert "No space left on device" in line and "ckpt_path=auto" in line, line
    assert _leftovers(tmp_path) == [] and (tmp_path / "out" / "cell" / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.parametrize("target", ["metrics.json", "config_resolved.yaml"])
def test_disk_full_writing_a_result_file_is_one_line_naming_it(target, ptb_root, tmp_path, capfd, monkeypatch):
    """A real ENOSPC from the kernel (the temporary file's descriptor points at /dev/full)."""
    import os
    import tempfile

    import langrepr.utils as utils

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    real_mkstemp, hits = tempfile.mkstemp, []

    def mkstemp(*args, **kwargs):
        fd, tmp = real_mkstemp(*args, **kwargs)
        if Path(tmp).name.startswith(f".{target}.") and not hits:
            hits.append(tmp)
            os.close(fd)
            return os.open("/dev/full", os.O_WRONLY), tmp
        return fd, tmp

    monkeypatch.setattr(utils.tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(utils, "open_mode", lambda fd: None)   # never chmod the device node
    code = run_main(_cell_args(ptb_root, tmp_path))
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err and hits, err[-3000:]
    cell = tmp_path / "out" / "cell"
    assert error_lines(err) == [f"error: cannot write {cell / target}: No space left on device; free disk space or "
                                "point paths.output_root at a writable folder (completed files were written "
                                "atomically)"]
    assert _leftovers(tmp_path) == [] and not Path(hits[0]).exists()


def test_disk_full_writing_the_csv_log_is_one_line(ptb_root, tmp_path, capfd, monkeypatch):
    from lightning_fabric.loggers.csv_logs import _ExperimentWriter

    def save(self):
        with open("/dev/full", "w") as fh:                # what a full disk does to the CSV append
            fh.write("step,val/loss\n" * 100)

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    monkeypatch.setattr(_ExperimentWriter, "save", save)
    code = run_main(_cell_args(ptb_root, tmp_path))
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-3000:]
    (line,) = error_lines(err)
    assert "No space left on device" in line and "paths.output_root" in line
    assert _leftovers(tmp_path) == []


# ---------------------------------------------------------------- 5. best-so-far metrics across a resume

class SimulatedKill(Exception):
    """Stands for kill -9 right after a checkpoint write (the process ends; last.ckpt is what survives)."""


def _write_shifted_ptb(root: Path) -> Path:
    """Training text in one word order, validation/test in the reverse: the model overfits, so validation gets
    worse after epoch 1 and the best epoch lies before the kill."""
    ptb = root / "shifted" / "ptb"
    ptb.mkdir(parents=True)
    (ptb / "ptb.train.txt").write_text("".join(f"the w{i % 13} of w{i % 7} N\n" for i in range(120)))
    for name in ("ptb.valid.txt", "ptb.test.txt"):
        (ptb / name).write_text("".join(f"N w{i % 7} of w{i % 13} the\n" for i in range(30)))
    return ptb.parent


def _val_curve(cell: Path) -> list[dict]:
    import csv

    with open(cell / "csv" / "metrics.csv", newline="") as fh:
        rows = [{k: v for k, v in r.items() if k.startswith("val/") and v} for r in csv.DictReader(fh)]
    return [r for r in rows if r]


RESUME_CELLS = {
    "masked_lm": (["dataset=ptb", "model=tensorcoder_1conv", "model.net.hidden_size=16", "model.net.num_layers=1",
                   "model.net.intermediate_size=16"], "val/nll", "val/nll_best"),
    "causal_lm": (["dataset=ptb_causal", "model=causal_lm", "model.net.hidden_size=16", "model.net.num_layers=1",
                   "model.net.num_heads=2", "model.net.intermediate_size=16"], "val/ppl", "val/ppl_best"),
}


@pytest.mark.parametrize("task", sorted(RESUME_CELLS))
def test_resume_keeps_the_best_so_far_metrics(task, tmp_path, capfd, monkeypatch):
    from langrepr.callbacks import LastCheckpoint

    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    args, monitor, best = RESUME_CELLS[task]
    data = _write_shifted_ptb(tmp_path)
    common = [*args, "debug=smoke", "dataset.datamodule.seq_len=16", "trainer.max_epochs=3", "optimizer.lr=0.1",
              f"paths.data_dir={data}", f"paths.cache_dir={tmp_path}/cache", "ckpt_path=auto"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert run_main([*common, f"hydra.run.dir={straight}", f"paths.output_root={straight}"]) == 0
    reference = json.loads((straight / "metrics.json").read_text())
    curve = [float(r[monitor]) for r in _val_curve(straight)]
    assert len(curve) == 3 and min(curve[:2]) < curve[2], f"the best epoch must lie before the kill: {curve}"

    real_end = LastCheckpoint.on_train_epoch_end

    def end_then_kill(self, trainer, pl_module):
        real_end(self, trainer, pl_module)
        if trainer.current_epoch == 1:              # last.ckpt of epoch 2 (of 3) is on disk
            raise SimulatedKill

    monkeypatch.setattr(LastCheckpoint, "on_train_epoch_end", end_then_kill)
    assert run_main([*common, f"hydra.run.dir={killed}", f"paths.output_root={killed}"]) == 1
    monkeypatch.setattr(LastCheckpoint, "on_train_epoch_end", real_end)
    assert "SimulatedKill" in capfd.readouterr().err

    assert run_main([*common, f"hydra.run.dir={killed}", f"paths.output_root={killed}"]) == 0
    resumed = json.loads((killed / "metrics.json").read_text())
    assert resumed["status"] == "finished" and resumed["resumed_from_step"] == 4 and resumed["steps"] == 6
    assert resumed["metrics"][best] == reference["metrics"][best] == min(curve)
    assert resumed["metrics"] == reference["metrics"]               # every metric, bit for bit
    assert _val_curve(killed) == _val_curve(straight)               # and every logged validation row


def test_every_best_tracker_of_these_tasks_is_kept():
    """Each MinMetric/MaxMetric (and first / step-0 value) a task logs is listed in its `tracked`."""
    import ast
    import inspect

    from langrepr.tasks.causal_lm import CausalLMTask
    from langrepr.tasks.masked_lm import MaskedLMTask
    from langrepr.tasks.trackers import KeepsTrackers
    from langrepr.tasks.translation import TranslationTask

    for cls in (MaskedLMTask, TranslationTask, CausalLMTask):
        assert issubclass(cls, KeepsTrackers)
        source = inspect.getsource(cls)
        trackers = {t.attr for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Assign)
                    for t in ast.walk(node.targets[0]) if isinstance(t, ast.Attribute)
                    and t.attr.endswith(("_best", "_first", "_step0"))}
        assert trackers and trackers == set(cls.tracked), (cls.__name__, trackers, cls.tracked)


def test_a_checkpoint_without_trackers_still_loads():
    """A checkpoint written before the trackers were kept resumes with fresh trackers, as before."""
    from torchmetrics import MinMetric

    from langrepr.tasks.trackers import KeepsTrackers

    class Task(KeepsTrackers, __import__("pytorch_lightning").LightningModule):
        tracked = ("best", "first")

        def __init__(self):
            super().__init__()
            self.best, self.first = MinMetric(), None

    old, new = Task(), Task()
    old.best.update(3.0)
    old.best.update(2.0)
    old.first = 3.0
    ckpt: dict = {}
    old.on_save_checkpoint(ckpt)
    new.on_load_checkpoint(ckpt)
    assert float(new.best.compute()) == 2.0 and new.first == 3.0
    new.best.update(2.5)
    assert float(new.best.compute()) == 2.0
    fresh = Task()
    fresh.on_load_checkpoint({})
    assert fresh.first is None and fresh.best._update_count == 0


def test_a_torch_write_failure_outside_checkpoints_is_one_line():
    """torch.save of a data cache on a full disk raises RuntimeError, not OSError: still one line, with the fix."""
    from langrepr.train import user_message
    err = RuntimeError("[enforce fail at inline_container.cc:626] . PytorchStreamWriter failed writing file data/0: "
                       "file write failed")
    message = user_message(err)
    assert message and message.startswith("a write failed") and "ckpt_path=auto" in message
    assert user_message(RuntimeError("shape mismatch")) is None       # a bug keeps its traceback


def test_classification_best_so_far_survives_a_checkpoint():
    """f09: val/<monitor>_best of the classification tasks is carried through a checkpoint like the LM tasks'."""
    import torch

    from langrepr.tasks.classification import SingleLabelClassificationTask
    net = torch.nn.Linear(2, 3)
    task = SingleLabelClassificationTask(net=net, optimizer=torch.optim.SGD, num_labels=3)
    task.val_best.update(torch.tensor(0.8))
    checkpoint: dict = {}
    task.on_save_checkpoint(checkpoint)
    fresh = SingleLabelClassificationTask(net=torch.nn.Linear(2, 3), optimizer=torch.optim.SGD, num_labels=3)
    fresh.on_load_checkpoint(checkpoint)
    fresh.val_best.update(torch.tensor(0.5))
    assert float(fresh.val_best.compute()) == pytest.approx(0.8)
