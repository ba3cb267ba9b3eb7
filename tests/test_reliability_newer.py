"""Issue 21's reliability cases: each asserts the exact outcome (exit code, the one line, nothing lost).

Trainer arguments with or without '+', advice in error messages that works when followed, result files that
respect the umask, a full disk during any write, best-so-far metrics across a resume, pipeline settings and
reader data sanity before training, and the BigQuery export's stated timeout.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from conftest import run_main

PTB = ["dataset=ptb", "model=tensorcoder_1conv", "debug=smoke", "trainer.max_epochs=1", "model.net.hidden_size=16",
       "model.net.num_layers=1", "model.net.intermediate_size=16", "dataset.datamodule.seq_len=16"]


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def validate(argv: list[str]) -> list[str]:
    """What `main()` does before Hydra runs: canonical overrides, then compose + validate; the argv Hydra gets."""
    from langrepr.validation import canonical_overrides, check_command_line

    argv = canonical_overrides(list(argv))
    check_command_line(argv)
    return argv


@pytest.fixture
def ptb_root(tmp_path, monkeypatch) -> Path:
    ptb = tmp_path / "data" / "ptb"
    ptb.mkdir(parents=True)
    for name, n in [("ptb.train.txt", 120), ("ptb.valid.txt", 30), ("ptb.test.txt", 30)]:
        (ptb / name).write_text("".join(f"the w{i % 13} of w{i % 7} N\n" for i in range(n)))
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    return tmp_path / "data"


# ---------------------------------------------------------------- 1. Trainer arguments, and advice that works

@pytest.mark.parametrize("arg", ["trainer.gradient_clip_val=1.0", "trainer.accumulate_grad_batches=2",
                                 "trainer.gradient_clip_algorithm=value", "optimizer.amsgrad=true"])
def test_a_target_argument_the_config_does_not_list_is_accepted_with_or_without_plus(arg):
    key, value = arg.split("=")
    plain, plus = validate(["dataset=ptb", "model=tensorcoder_1conv", arg]), validate(
        ["dataset=ptb", "model=tensorcoder_1conv", f"+{arg}"])
    assert plain == plus == ["dataset=ptb", "model=tensorcoder_1conv", f"+{arg}"]   # one spelling: one cell folder


def test_a_listed_key_keeps_its_spelling():
    argv = ["experiment=tensorcoder_table1", "trainer.max_steps=5", "trainer.max_epochs=2"]
    assert validate(argv) == argv


def test_trainer_arguments_reach_the_trainer(ptb_root, tmp_path, capfd):
    cell = tmp_path / "out" / "cell"
    code = run_main([*PTB, f"paths.data_dir={ptb_root}", f"hydra.run.dir={cell}", f"paths.output_root={tmp_path}/out",
                     f"paths.cache_dir={tmp_path}/cache", "trainer.gradient_clip_val=1.0",
                     "trainer.accumulate_grad_batches=2"])
    err = capfd.readouterr().err
    assert code == 0 and not error_lines(err), err[-2000:]
    resolved = (cell / "config_resolved.yaml").read_text()
    assert "gradient_clip_val: 1.0" in resolved and "accumulate_grad_batches: 2" in resolved
    assert json.loads((cell / "metrics.json").read_text())["status"] == "finished"


@pytest.mark.parametrize("argv, line", [
    (["trainer.gradient_clip_vall=1.0"],
     "error: unknown key 'trainer.gradient_clip_vall' (did you mean trainer.gradient_clip_val?): fix its spelling "
     "(pytorch_lightning.Trainer takes no 'gradient_clip_vall', so adding it with '+' is refused too)"),
    (["+trainer.gradient_clip_vall=1.0"],
     "error: unknown key trainer.gradient_clip_vall: pytorch_lightning.Trainer takes no 'gradient_clip_vall' (did "
     "you mean trainer.gradient_clip_val?); remove it or fix its spelling"),
    (["trainer=ddp", "+trainer.gradient_clip_vall=1.0"],
     "error: unknown key trainer.gradient_clip_vall: pytorch_lightning.Trainer takes no 'gradient_clip_vall' (did "
     "you mean trainer.gradient_clip_val?); remove it or fix its spelling"),
    (["trainer.logger=null"],
     "error: trainer.logger is passed to the Trainer by langrepr.train itself: remove it (choose loggers with "
     "logger=csv or logger=wandb)"),
    (["trainer.gradient_clip_val=-1"],
     "error: trainer.gradient_clip_val=-1 is out of range: pass a finite number >= 0 such as 1.0"),
    (["trainer.accumulate_grad_batches=0"],
     "error: trainer.accumulate_grad_batches=0 is out of range: pass a whole number >= 1"),
    (["trainer.limit_train_batches=abc"],
     "error: trainer.limit_train_batches='abc' is not a batch limit: pass a fraction between 0.0 and 1.0 or a "
     "whole number of batches"),
])
def test_bad_trainer_arguments_are_one_line(argv, line, tmp_path, capfd):
    code = run_main([*argv, f"paths.output_root={tmp_path}/out"])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert error_lines(err) == [line]
    assert not (tmp_path / "out").exists()


def test_the_plus_refusal_the_message_claims_is_true():
    """'adding it with + is refused too' is only said where it holds: check it by doing it."""
    from langrepr.errors import UserError

    with pytest.raises(UserError, match="refused too") as plain:
        validate(["trainer.gradient_clip_vall=1.0"])
    assert "refused too" in str(plain.value)
    with pytest.raises(UserError, match="takes no 'gradient_clip_vall'"):
        validate(["+trainer.gradient_clip_vall=1.0"])


def _divergence_message() -> str:
    from types import SimpleNamespace

    import torch

    from langrepr.callbacks import NonFiniteGuard
    from langrepr.errors import Diverged

    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e6)
    trainer = SimpleNamespace(optimizers=[opt], global_step=2, current_epoch=0, sanity_checking=False)
    with pytest.raises(Diverged) as err:
        NonFiniteGuard()._stop(trainer, "val/loss", float("nan"))
    return str(err.value)


def test_the_divergence_advice_passes_validation():
    """The divergence line advises `add trainer.gradient_clip_val=1.0`: that exact text is accepted."""
    message = _divergence_message()
    advice = re.findall(r"add ([^\s=]+=[^\s,]+)", message)
    assert advice == ["trainer.gradient_clip_val=1.0"], message
    assert "lower optimizer.lr (it is 1e+06)" in message
    base = ["dataset=synthetic", "model=bert_ewe", "debug=smoke", "optimizer.lr=1e6"]
    validate([*base, *advice, "optimizer.lr=1e-4", "force=true"])   # raises UserError if refused


def test_the_divergence_advice_names_the_key_the_cell_sets_and_not_what_is_already_set():
    """Issue 33: a multi-hot cell (`optimizer.lr: ${mlm.lr}`, clipping on) was told 'lower optimizer.lr or add
    trainer.gradient_clip_val=1.0'; it sets mlm.lr and already clips."""
    from types import SimpleNamespace

    import torch
    from hydra import compose, initialize_config_dir

    from langrepr.callbacks import NonFiniteGuard
    from langrepr.confpaths import CONF_DIR
    from langrepr.errors import Diverged
    from langrepr.validation import setting_key

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        multihot = compose("train", overrides=["experiment=multihot_pretrain", "profile=quick"])
        bert = compose("train", overrides=["dataset=synthetic", "model=bert_ewe"])
    assert (setting_key(multihot, "optimizer.lr"), setting_key(bert, "optimizer.lr")) == ("mlm.lr", "optimizer.lr")
    guard = NonFiniteGuard()
    guard.lr_key = setting_key(multihot, "optimizer.lr")
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    trainer = SimpleNamespace(optimizers=[opt], global_step=2, current_epoch=0, gradient_clip_val=multihot.trainer.
                              gradient_clip_val)
    with pytest.raises(Diverged) as err:
        guard._stop(trainer, "train loss", float("nan"))
    message = str(err.value)
    assert "lower mlm.lr (it is 0.001)" in message and "optimizer.lr" not in message
    assert "add trainer.gradient_clip_val" not in message and "already clipped at trainer.gradient_clip_val=1" in message


def test_the_max_steps_advice_passes_validation():
    """`trainer.max_epochs=-1` says 'unless trainer.max_steps is set: set one of them': setting it is accepted."""
    from langrepr.errors import UserError

    base = ["dataset=synthetic", "model=bert_ewe", "debug=smoke", "trainer.max_epochs=-1"]
    with pytest.raises(UserError, match="unless trainer.max_steps is set"):
        validate(base)
    assert validate([*base, "trainer.max_steps=4"])[-1] == "+trainer.max_steps=4"


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
    """Each MinMetric/MaxMetric (and first value) a task logs is listed in its `tracked`."""
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
                    and (t.attr.endswith("_best") or t.attr.endswith("_first"))}
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


# ---------------------------------------------------------------- 6. pipeline settings before data

BC = ["experiment=bitcipher_table1", "profile=quick", "++hydra.sweeper.params.seed=1", "bitcipher_vectors=cipher"]
MH2 = ["experiment=multihot_pretrain", "profile=quick", "++hydra.sweeper.params.seed=1"]
MH3 = ["experiment=multihot_table3", "profile=quick", "++hydra.sweeper.params.seed=1"]
LE = ["experiment=leam_table2", "profile=quick", "model=leam", "dataset=ag_news", "++hydra.sweeper.params.seed=1",
      "debug=leam_smoke"]

PIPELINE_CASES = [
    ("X12", [*BC, "pipeline.probe.batch_size=-256"], "pipeline.probe.batch_size=-256 is out of range: pass a whole number >= 1"),
    ("X11", [*BC, "pipeline.probe.batch_size=0"], "pipeline.probe.batch_size=0 is out of range: pass a whole number >= 1"),
    ("probe-epochs", [*BC, "pipeline.probe.epochs=0"], "pipeline.probe.epochs=0 is out of range: pass a whole number >= 1"),
    ("probe-hidden", [*BC, "pipeline.probe.hidden=abc"], "pipeline.probe.hidden='abc' is not an integer: pass a whole number >= 1"),
    ("probe-lr", [*BC, "pipeline.probe.lr=-0.01"], "pipeline.probe.lr=-0.01 is out of range: pass a positive, finite float such as 2e-5"),
    ("probe-dropout", [*BC, "pipeline.probe.dropout=1.0"], "pipeline.probe.dropout=1.0 is out of range: pass a fraction between 0 (included) and 1 such as 0.1"),
    ("probe-dropout-at", [*BC, "+pipeline.probe.dropout_at=output"], "pipeline.probe.dropout_at='output': choose one of hidden, input, both"),
    ("probe-tasks", [*BC, "pipeline.tasks=[pos,chunk]"], "pipeline.tasks=['pos', 'chunk']: choose from pos, ner (at least one)"),
    ("probe-threads", [*BC, "pipeline.threads=0"], "pipeline.threads=0 is out of range: pass a whole number >= 1"),
    ("bc-workers", [*BC, "bitcipher.workers=0"], "bitcipher.workers=0 is out of range: pass a whole number >= 1"),
    ("bc-shard", [*BC, "bitcipher.corpus.shard_tokens=-5"], "bitcipher.corpus.shard_tokens=-5 is out of range: pass a whole number >= 1"),
    ("bc-max-tokens", [*BC, "bitcipher.corpus.max_tokens=0"], "bitcipher.corpus.max_tokens=0 is out of range: pass a whole number >= 1"),
    ("bc-bits", [*BC, "bitcipher_vectors.bits=0"], "bitcipher_vectors.bits=0 is out of range: pass a whole number >= 1"),
    ("bc-radius", [*BC, "bitcipher_vectors=sum", "bitcipher_vectors.radius=-1"], "bitcipher_vectors.radius=-1 is out of range: pass a whole number >= 1"),
    ("X05", [*BC, "bitcipher_vectors=cat", "bitcipher_vectors.cat_mode=per_offset", "bitcipher_vectors.radius=100000"],
     "bitcipher_vectors.radius=100000 with cat_mode=per_offset makes 2·r·b = 20,000,000 columns (at most 1,048,576): "
     "lower radius or bits, or use bitcipher_vectors.cat_mode=left_right (2·b columns)"),
    ("bc-cat-mode", [*BC, "bitcipher_vectors=cat", "bitcipher_vectors.cat_mode=diagonal"], "bitcipher_vectors.cat_mode='diagonal': choose one of left_right, per_offset"),
    ("glove-window", [*BC, "bitcipher_vectors=glove", "bitcipher_vectors.glove.window=0"], "bitcipher_vectors.glove.window=0 is out of range: pass a whole number >= 1"),
    ("glove-xmax", [*BC, "bitcipher_vectors=glove", "bitcipher_vectors.glove.x_max=0"], "bitcipher_vectors.glove.x_max=0 is out of range: pass a positive, finite float such as 2e-5"),
    ("w2v-negative", [*BC, "bitcipher_vectors=word2vec", "bitcipher_vectors.word2vec.negative=-1"], "bitcipher_vectors.word2vec.negative=-1 is out of range: pass a whole number >= 0"),
    ("mlm-steps", [*MH2, "mlm.steps=0"], "mlm.steps=0 is out of range: pass a whole number >= 1"),
    ("mlm-batch", [*MH2, "mlm.batch_size=-32"], "mlm.batch_size=-32 is out of range: pass a whole number >= 1"),
    ("mlm-lr", [*MH2, "mlm.lr=0"], "mlm.lr=0 is out of range: pass a positive, finite float such as 2e-5"),
    ("mlm-mask", [*MH2, "mlm.mask_prob=1.5"], "mlm.mask_prob=1.5 is out of range: pass a fraction strictly between 0 and 1 such as 0.1"),
    ("mlm-val", [*MH2, "mlm.val_fraction=0"], "mlm.val_fraction=0 is out of range: pass a fraction strictly between 0 and 1 such as 0.1"),
    ("mlm-warmup", [*MH2, "mlm.warmup_steps=-1"], "mlm.warmup_steps=-1 is out of range: pass a whole number >= 0"),
    ("mlm-decay", [*MH2, "mlm.weight_decay=-0.1"], "mlm.weight_decay=-0.1 is out of range: pass a finite number >= 0 such as 0.01"),
    ("mlm-loss", [*MH2, "mlm.loss=focal"], "mlm.loss='focal': choose one of sce, bce, mhsce"),
    ("mh-token-list", [*MH2, "pipeline.token_list=bpe"], "pipeline.token_list='bpe': choose one of bpe_base, bpe_syllable, dict_syllable"),
    ("mh-workers", [*MH2, "pipeline.workers=0"], "pipeline.workers=0 is out of range: pass a whole number >= 1"),
    ("mh-sizes", [*MH2, "dataset.token_lists.bpe_size=-1"], "dataset.token_lists.bpe_size=-1 is out of range: pass a whole number >= 1"),
    ("mh-model", [*MH2, "model.net.max_group=0"], "model.net.max_group=0 is out of range: pass a whole number >= 1"),
    ("mh-downstream", [*MH3, "downstream=qa"], "downstream='qa': choose one of korquad, ner, srl, nsmc"),
    ("mh-finetune", [*MH3, "finetune.ner.batch_size=0"], "finetune.ner.batch_size=0 is out of range: pass a whole number >= 1"),
    ("mh-finetune-lr", [*MH3, "finetune.korquad.lr=-1"], "finetune.korquad.lr=-1 is out of range: pass a positive, finite float such as 2e-5"),
    ("X31", [*LE, "dataset.datamodule.class_names=null"],
     "dataset.datamodule.class_names=null: LEAM initialises its label embeddings from the class names, so this run "
     "would silently start them at random; drop the override (conf/papers/leam/dataset/ag_news.yaml names 4 classes)"),
    ("X31-empty", [*LE, "dataset.datamodule.class_names=[World,'',Business,Science]"],
     "dataset.datamodule.class_names has an empty name at position 1: LEAM initialises each label embedding from its "
     "name's words; give every class a name"),
    ("leam-window-even", [*LE, "leam_window=4"], "model.net.window=4 is even: LEAM's phrase window is 2r+1 words, pass an odd number such as 5"),
    ("leam-dropout", [*LE, "model.net.dropout=1.0"], "model.net.dropout=1.0 is out of range: pass a fraction between 0 (included) and 1 such as 0.1"),
    ("leam-penalty", [*LE, "model.net.label_penalty=-1"], "model.net.label_penalty=-1 is out of range: pass a finite number >= 0 such as 0.01"),
    ("leam-val", [*LE, "dataset.datamodule.val_fraction=0"], "dataset.datamodule.val_fraction=0 is out of range: pass a fraction strictly between 0 and 1 such as 0.1"),
    ("leam-length", [*LE, "model.tokenizer.max_length=0"], "model.tokenizer.max_length=0 is out of range: pass a whole number >= 1"),
    ("leam-min-freq", [*LE, "model.tokenizer.min_freq=0"], "model.tokenizer.min_freq=0 is out of range: pass a whole number >= 1"),
]


END_TO_END = {"X12", "X11", "X05", "X31", "mlm-loss", "mh-downstream", "leam-window-even"}


@pytest.mark.parametrize("argv, line", [c[1:] for c in PIPELINE_CASES if c[0] in END_TO_END],
                         ids=[c[0] for c in PIPELINE_CASES if c[0] in END_TO_END])
def test_bad_pipeline_settings_are_one_line_before_data(argv, line, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("LANGREPR_DATA_DIR", str(tmp_path / "no_data_here"))   # nothing may be read
    code = run_main([*argv, f"paths.output_root={tmp_path}/out", f"paths.cache_dir={tmp_path}/cache"])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-3000:]
    assert error_lines(err) == [f"error: {line}"]
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


@pytest.fixture(scope="module")
def composed_experiments() -> dict:
    """Each experiment of the cases composed once (an experiment composes in ~0.7 s)."""
    from langrepr.validation import _compose

    return {name: _compose([a for a in base if not a.startswith("++")])
            for name, base in {"BC": BC, "MH2": MH2, "MH3": MH3, "LE": LE}.items()}


@pytest.mark.parametrize("argv, line", [c[1:] for c in PIPELINE_CASES if c[0] not in END_TO_END],
                         ids=[c[0] for c in PIPELINE_CASES if c[0] not in END_TO_END])
def test_bad_pipeline_settings_are_refused_by_validation(argv, line, composed_experiments):
    """The same check train() and the command line run, on the composed config with the one bad value set."""
    from omegaconf import OmegaConf, open_dict

    from langrepr.errors import UserError
    from langrepr.validation import _compose, validate_config

    base = next(name for name, args in {"BC": BC, "MH2": MH2, "MH3": MH3, "LE": LE}.items() if argv[:len(args)] == args)
    rest = argv[len({"BC": BC, "MH2": MH2, "MH3": MH3, "LE": LE}[base]):]
    if any("=" in a and "." not in a.split("=")[0].lstrip("+") for a in rest):   # a group choice: compose anew
        cfg = _compose([a for a in argv if not a.startswith("++")])
    else:
        cfg = composed_experiments[base].copy()
        with open_dict(cfg):
            for arg in rest:
                key, value = arg.lstrip("+").split("=", 1)
                OmegaConf.update(cfg, key, __import__("yaml").safe_load(value), merge=False)
    with pytest.raises(UserError) as err:
        validate_config(cfg)
    assert str(err.value) == line


def test_every_experiment_passes_the_pipeline_checks(compose_cfg):
    from langrepr.confpaths import group_options
    from langrepr.validation import check_pipeline_values

    for table in group_options("experiment"):
        if not table.startswith(("bitcipher", "multihot", "leam")):
            continue                              # the EWE and TensorCoder tables set none of these settings
        for profile in ("quick", "full"):
            check_pipeline_values(compose_cfg(f"experiment={table}", f"profile={profile}"))


def test_leam_without_class_names_where_the_data_has_none_is_accepted(compose_cfg):
    from langrepr.validation import check_pipeline_values

    cfg = compose_cfg("model=leam", "dataset=mimic50")
    assert cfg.dataset.datamodule.class_names is None
    check_pipeline_values(cfg)


def test_the_choices_match_the_modules():
    from langrepr.data.korean.token_lists import KINDS
    from langrepr.models.multihot_losses import LOSSES
    from langrepr.pipelines.bitcipher import cooccurrence, probing
    from langrepr.tasks.multihot_downstream import TASKS
    from langrepr.validation import CHOICES, PROBE_TASKS

    assert CHOICES == {"mlm.loss": LOSSES, "pipeline.token_list": KINDS, "downstream": TASKS,
                       "bitcipher_vectors.cat_mode": cooccurrence.CAT_MODES,
                       "pipeline.probe.dropout_at": probing.DROPOUT_AT}
    assert PROBE_TASKS == probing.TASKS


# ---------------------------------------------------------------- 6. data sanity in the newer readers

KOREAN = "대한민국의 수도는 서울이다. 오늘은 날씨가 좋아서 공원에 갔다.\n" * 30
TOPICS = {1: "world leaders summit treaty", 2: "match season team coach", 3: "market shares profit bank",
          4: "software chip research lab"}


def write_agnews(folder: Path, rows_per_class: int = 12, classes=(1, 2, 3, 4), extra: list | None = None) -> Path:
    import csv

    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "test.csv").open("w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL)
        for i in range(rows_per_class):
            for label in classes:
                words = TOPICS[label].split()
                writer.writerow([label, f"{words[i % 4]} news {i}", " ".join(words)])
        for row in extra or []:
            writer.writerow(row)
    return folder / "test.csv"


def ag_news_module(folder: Path, **kw):
    from langrepr.data.classification.datamodule import TextClassificationDataModule
    from langrepr.data.classification.vocab import WordTokenizer

    args = dict(name="ag_news", data_dir=str(folder), class_names=["World", "Sports", "Business", "Science"],
                tokenizer=WordTokenizer(max_length=8, max_vocab=100), batch_size=5, split_test_fraction=0.25,
                val_fraction=0.2)
    return TextClassificationDataModule(**{**args, **kw})


def user_error(call, *args, **kwargs) -> str:
    from langrepr.errors import UserError

    with pytest.raises(UserError) as err:
        call(*args, **kwargs)
    return str(err.value)


def test_a_class_with_no_rows_is_one_line(tmp_path):                     # X27
    write_agnews(tmp_path / "agnews", classes=(1, 2, 4))
    assert user_error(ag_news_module(tmp_path / "agnews").setup, "fit") == (
        f"ag_news ({tmp_path}/agnews/test.csv): class 3 (Business) has no training rows (27 rows, classes 1-4): the "
        "data is cut or filtered; restore the missing rows or point dataset.datamodule.data_dir at the full data")


def test_the_last_class_missing_is_named_not_blamed_on_the_class_names(tmp_path):   # X28
    write_agnews(tmp_path / "agnews", classes=(1, 2, 3))
    line = user_error(ag_news_module(tmp_path / "agnews").setup, "fit")
    assert "class 4 (Science) has no training rows" in line and "class names for" not in line


def test_a_stray_label_names_its_row(tmp_path):                           # X30
    path = write_agnews(tmp_path / "agnews", extra=[[7, "stray", "row"]])
    assert user_error(ag_news_module(tmp_path / "agnews").setup, "fit") == (
        f"{path}:49 has class 7 but the data set has 4 classes (dataset.datamodule.class_names): fix or drop that row")


def test_a_stray_label_without_class_names_leaves_empty_classes(tmp_path):
    write_agnews(tmp_path / "agnews", extra=[[7, "stray", "row"]] * 4)
    line = user_error(ag_news_module(tmp_path / "agnews", class_names=None).setup, "fit")
    assert "class 5, 6 has no training rows" in line


def test_a_header_line_is_named(tmp_path):
    path = tmp_path / "agnews" / "test.csv"
    write_agnews(tmp_path / "agnews")
    path.write_text('"Class Index","Title","Description"\n' + path.read_text())
    assert user_error(ag_news_module(tmp_path / "agnews").setup, "fit") == (
        f"{path}:1 is not a Zhang et al. row (class index >= 1, then text fields): ['Class Index', 'Title'] (a header "
        "line? the Zhang et al. files have none: delete it)")


def test_wrong_columns_are_named(tmp_path):
    path = write_agnews(tmp_path / "agnews", extra=[[2, "only a title"]])
    assert user_error(ag_news_module(tmp_path / "agnews").setup, "fit") == (
        f"{path}:49 has 2 fields where line 1 has 3: a wrong column count (an unquoted comma?); fix that row")


def test_csv_in_another_encoding_names_file_and_encoding(tmp_path):
    path = write_agnews(tmp_path / "agnews")
    path.write_bytes(path.read_text().replace("news", "뉴스").encode("cp949"))
    line = user_error(ag_news_module(tmp_path / "agnews").setup, "fit")
    assert line.startswith(f"{path} is not UTF-8 text (byte ") and "it looks like CP949" in line


def test_leam_cell_with_an_empty_class_stops_with_one_line(tmp_path, capfd, monkeypatch):   # X27 end to end
    write_agnews(tmp_path / "data" / "agnews", rows_per_class=20, classes=(1, 2, 4))
    monkeypatch.setenv("LANGREPR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    code = run_main([*LE, f"paths.output_root={tmp_path}/out", f"paths.cache_dir={tmp_path}/cache"])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-3000:]
    (line,) = error_lines(err)
    assert "class 3 (Business) has no training rows" in line
    records = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("metrics.json")]
    assert [r["status"] for r in records] == ["failed"]


def _korean_file(path: Path, encoding: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(KOREAN.encode(encoding))
    return path


@pytest.mark.parametrize("encoding, shown", [("cp949", "CP949"), ("utf-16", "UTF-16")])
def test_korean_corpus_in_another_encoding_names_file_and_encoding(encoding, shown, tmp_path):   # X16
    from langrepr.data.korean.corpus import text_file_sentences

    path = _korean_file(tmp_path / "k_text" / f"{encoding}.txt", encoding)
    line = user_error(text_file_sentences, path, 1000)
    assert line == (f"{path} is not UTF-8 text (byte 0; it looks like {shown}): re-encode it with `iconv -f {shown} "
                    f"-t UTF-8 {path} > {path}.utf8 && mv {path}.utf8 {path}`, or point dataset.corpus.path at a "
                    "UTF-8 export of the corpus")


def test_the_re_encode_advice_works(tmp_path):
    """Run the exact command the line gives; the reader then reads the file."""
    import shutil
    import subprocess

    from langrepr.data.korean.corpus import text_file_sentences

    if shutil.which("iconv") is None:
        pytest.skip("no iconv here")
    path = _korean_file(tmp_path / "k_text" / "cp949.txt", "cp949")
    command = re.search(r"`([^`]+)`", user_error(text_file_sentences, path, 1000)).group(1)
    subprocess.run(command, shell=True, check=True)
    assert text_file_sentences(path, 1000)[:2] == ["대한민국의 수도는 서울이다.", "오늘은 날씨가 좋아서 공원에 갔다."]


def test_the_gzip_re_encode_advice_works(tmp_path):
    import gzip
    import shutil
    import subprocess

    from langrepr.data.english.translation import read_lines

    if shutil.which("iconv") is None:
        pytest.skip("no iconv here")
    path = tmp_path / "train.en.gz"
    with gzip.open(path, "wb") as fh:
        fh.write("a café in Zürich\n".encode("latin-1") * 20)
    line = user_error(read_lines, path)
    assert line.startswith(f"{path} is not UTF-8 text (byte ") and line.endswith(", or re-download it")
    subprocess.run(re.search(r"`([^`]+)`", line).group(1), shell=True, check=True)
    assert read_lines(path)[0] == "a café in Zürich"


def test_quick_corpus_rating_that_is_not_a_number_names_file_and_line(tmp_path):   # X21
    import gzip

    from langrepr.data.korean.corpus import nsmc_neutral_reviews

    path = tmp_path / "nsmc" / "nsmc_raw_reviews.tsv.gz"
    path.parent.mkdir()
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("review_id\trating\treview\n" + "".join(f"{i}\t6\t좋은 영화 {i}\n" for i in range(5)) + "9\tten\t별로\n")
    assert user_error(nsmc_neutral_reviews, tmp_path, 100) == (
        f"{path} line 7: rating 'ten' is not an integer 1-10; fix or drop that row")
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("review_id\tscore\treview\n1\t6\t좋은 영화\n")
    assert user_error(nsmc_neutral_reviews, tmp_path, 100) == (
        f"{path}: header has no rating column(s) (found ['review_id', 'score', 'review']): the NSMC crawl needs "
        "rating and review columns")


def test_nsmc_crawl_in_another_encoding(tmp_path):
    from langrepr.data.korean.nsmc import read_crawl

    path = tmp_path / "crawl.tsv"
    path.write_bytes(("review_id\trating\treview\n" + "".join(f"{i}\t1\t최악의 영화 {i}\n" for i in range(30)))
                     .encode("cp949"))
    line = user_error(read_crawl, path)
    assert line.startswith(f"{path} is not UTF-8 text") and "CP949" in line


def test_klue_json_damaged_or_in_another_encoding(tmp_path):
    from langrepr.data.korean.corpus import klue_sentences

    klue = tmp_path / "klue"
    klue.mkdir()
    (klue / "klue-nli-v1.1_dev.json").write_text('[{"premise": "가", "hypothesis": "나"}]', encoding="utf-8")
    (klue / "klue-sts-v1.1_dev.json").write_text('[{"sentence": "다"}]', encoding="utf-8")
    assert user_error(klue_sentences, tmp_path, 10) == (
        f"{klue}/klue-sts-v1.1_dev.json is not the KLUE STS dev JSON (a list of records with sentence1 and "
        "sentence2; KeyError: 'sentence1'): restore the original KLUE release")
    (klue / "klue-nli-v1.1_dev.json").write_bytes('[{"premise": "가나다", "hypothesis": "라마바"}]'.encode("utf-16"))
    assert "klue-nli-v1.1_dev.json is not UTF-8 text" in user_error(klue_sentences, tmp_path, 10)


def test_klue_ner_and_korquad_in_another_encoding(tmp_path):
    from langrepr.data.korean.korquad import read_squad_json
    from langrepr.data.korean.ner import read_klue_ner

    tsv = tmp_path / "klue-ner-v1.1_dev.tsv"
    tsv.write_bytes("## 1\t<서울:LC>\n서\tB-LC\n울\tI-LC\n\n".encode("cp949") * 20)
    assert "it looks like" in user_error(read_klue_ner, tsv) and str(tsv) in user_error(read_klue_ner, tsv)
    squad = tmp_path / "KorQuAD_v1.0_dev.json"
    squad.write_bytes('{"data": [{"title": "서울", "paragraphs": []}]}'.encode("utf-16"))
    assert user_error(read_squad_json, squad).startswith(f"{squad} is not UTF-8 text (byte 0; it looks like UTF-16)")


def test_probe_data_with_one_tag_or_another_encoding(tmp_path):
    from langrepr.data.english.conll import read_conll
    from langrepr.data.english.gum import read_conllu

    conll = tmp_path / "eng.train"
    conll.write_text("".join(f"w{i} NN I-NP O\nv{i} VB I-VP O\n\n" for i in range(5)))
    assert user_error(read_conll, conll) == (
        f"{conll}: every token of its 5 sentences has the tag 'O': the NER column is missing or the file is cut; "
        "point LANGREPR_DATA_DIR at the original release")
    conll.write_bytes("Zürich NNP I-NP I-LOC\n\n".encode("utf-16") * 3)
    assert user_error(read_conll, conll).startswith(f"{conll} is not UTF-8 text (byte 0; it looks like UTF-16)")
    gum = tmp_path / "en_gum-ud-train.conllu"
    gum.write_bytes("".join("1\tcafé\tcafé\tNOUN\t_\t_\t0\troot\t_\t_\n\n" for _ in range(3)).encode("latin-1"))
    line = user_error(read_conllu, gum)
    assert line.startswith(f"{gum} is not UTF-8 text (byte ") and "point LANGREPR_DATA_DIR at the original" in line


def test_bit_cipher_corpus_sources(tmp_path):
    import gzip

    from langrepr.data.english.corpus import iter_documents

    (tmp_path / "agnews").mkdir()
    (tmp_path / "agnews" / "test.csv").write_text('"1","title"\n')
    source = {"path": "agnews/test.csv", "format": "csv", "text_columns": [1, 2]}
    assert user_error(lambda: list(iter_documents([source], tmp_path))) == (
        f"{tmp_path}/agnews/test.csv line 1 has 2 column(s) but the corpus source reads text_columns [1, 2]: fix "
        "the source's text_columns or the file")
    (tmp_path / "ptb.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1") * 30)
    line = user_error(lambda: list(iter_documents([{"path": "ptb.txt"}], tmp_path)))
    assert line.startswith(f"{tmp_path}/ptb.txt is not UTF-8 text (byte 3") and line.endswith(
        "or drop it from bitcipher.corpus.sources")
    with gzip.open(tmp_path / "m.gz", "wt") as fh:
        fh.write("some text\n" * 2000)
    (tmp_path / "m.gz").write_bytes((tmp_path / "m.gz").read_bytes()[:40])
    assert user_error(lambda: list(iter_documents([{"path": "m.gz"}], tmp_path))) == (
        f"{tmp_path}/m.gz is a damaged gzip file (EOFError): re-download it or drop it from bitcipher.corpus.sources")


def test_ptb_in_another_encoding_names_it(tmp_path):
    from langrepr.data.english.text_lm import read_local_lines

    (tmp_path / "ptb.train.txt").write_bytes("the café of w1 N\n".encode("cp1252") * 20)
    line = user_error(read_local_lines, tmp_path, "ptb.train.txt")
    assert line.startswith(f"{tmp_path}/ptb.train.txt is not UTF-8 text (byte 7; it looks like ")
    assert line.endswith("or point data_dir at the original corpus") and "iconv -f" in line


def test_binary_data_is_called_binary(tmp_path):
    from langrepr.data.korean.corpus import text_file_sentences

    path = tmp_path / "blob.txt"
    path.write_bytes(bytes(range(256)) * 8)
    assert user_error(text_file_sentences, path, 10) == (
        f"{path} is not UTF-8 text (byte 128 cannot be decoded; it looks like binary data): put a UTF-8 text file "
        "there, or point dataset.corpus.path at a UTF-8 export of the corpus")


# ---------------------------------------------------------------- 4. the BigQuery export: a stated timeout, binary claims

def _stub_bigquery(monkeypatch, query) -> dict:
    """Fake google.cloud.bigquery / google.auth (no network, no real library): `query` is the client's query()."""
    import types

    bigquery, seen = types.ModuleType("google.cloud.bigquery"), {}

    class Retry:
        def __init__(self, deadline=600.0):
            self.deadline = deadline

        def with_deadline(self, deadline):
            return Retry(deadline)

    bigquery.DEFAULT_RETRY, bigquery.DEFAULT_JOB_RETRY = Retry(), Retry()
    bigquery.ScalarQueryParameter = bigquery.ArrayQueryParameter = lambda *args: args
    bigquery.QueryJobConfig = lambda **kw: kw
    bigquery.Client = lambda **kw: types.SimpleNamespace(query=query)
    errors = types.ModuleType("google.auth.exceptions")
    errors.DefaultCredentialsError = type("DefaultCredentialsError", (Exception,), {})
    auth = types.ModuleType("google.auth")
    auth.default = lambda scopes=None: (object(), "p")
    for name, mod in {"google.cloud.bigquery": bigquery, "google.auth": auth, "google.auth.exceptions": errors}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    return seen


def test_export_with_no_route_stops_at_the_stated_timeout(tmp_path, monkeypatch, capsys):   # e13
    import threading
    import time

    from langrepr.data.patents.export import main

    release, seen = threading.Event(), {}

    def query(sql, job_config=None, retry=None, timeout=None, job_retry=None):
        seen.update(retry=retry.deadline, job_retry=job_retry.deadline, timeout=timeout)
        release.wait(30)                       # the client retrying against a network with no route

    _stub_bigquery(monkeypatch, query)
    started = time.monotonic()
    try:
        code = main(["export", "--out", str(tmp_path / "out"), "--project", "p", "--timeout", "0.5"])
    finally:
        release.set()
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert code == 2 and took < 5, took
    assert err.splitlines() == ["error: could not reach BigQuery within 0.5 s (--timeout; CallTimedOut): check the "
                                "network or proxy to bigquery.googleapis.com, or raise --timeout; then rerun (the "
                                "export resumes)"]
    assert seen == {"retry": 0.5, "job_retry": 0.5, "timeout": 0.5}   # the client is told the same limit
    assert not list((tmp_path / "out").glob("*.parquet"))


def test_export_timeout_default_and_the_clients_own_deadline(tmp_path, monkeypatch, capsys):
    from langrepr.data.patents.export import DEFAULT_TIMEOUT_S, main, parse_args

    assert parse_args(["export", "--out", "x"]).timeout_s == DEFAULT_TIMEOUT_S == 60

    class RetryError(Exception):
        pass

    def query(sql, job_config=None, retry=None, timeout=None):
        raise RetryError("Deadline of 60.0s exceeded while calling target function")

    _stub_bigquery(monkeypatch, query)
    assert main(["export", "--out", str(tmp_path), "--project", "p"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: could not reach BigQuery within 60 s (--timeout; RetryError): check the network or proxy to "
        "bigquery.googleapis.com, or raise --timeout; then rerun (the export resumes)"]
    assert main(["export", "--out", str(tmp_path), "--project", "p", "--timeout", "0"]) == 2
    assert capsys.readouterr().err.splitlines() == ["error: --timeout 0.0: pass a positive number of seconds "
                                                    "(default 60)"]


def test_export_rows_wait_for_the_job_and_fetch_pages_within_the_timeout(monkeypatch):
    import types

    import langrepr.data.patents.export as export

    monkeypatch.setattr(export, "POLL_S", 0.0)
    _stub_bigquery(monkeypatch, lambda *a, **k: None)
    backend = export.BigQueryBackend("p", timeout_s=2)
    polls, asked = iter([False, False, True]), {}

    def result(start_index=None, page_size=None, timeout=None, retry=None):
        asked.update(start_index=start_index, page_size=page_size, timeout=timeout)
        return types.SimpleNamespace(pages=iter([[{"n": 1}, {"n": 2}], [{"n": 3}]]))

    job = types.SimpleNamespace(done=lambda retry=None, timeout=None: next(polls), result=result)
    assert [r["n"] for r in backend.rows(job, 7)] == [1, 2, 3]
    assert asked == {"start_index": 7, "page_size": 10_000, "timeout": 2.0}


def _binary_claims_backend(claims):
    import types

    rows = [{"publication_number": f"US-{8000000 + i}-B2", "kind_code": "B2", "publication_date": 20120304,
             "filing_date": 20100101, "split": "train", "cpc": [{"code": "G06Q10/08", "first": True}],
             "claims_localized": [{"text": f"1. A widget number {i}.", "language": "en"}]} for i in range(5)]
    rows[3]["claims_localized"] = [{"text": claims, "language": "en"}]

    class Backend:
        def dry_run(self, sql, params):
            return 10

        def run(self, sql, params, maximum_bytes_billed):
            return types.SimpleNamespace(job_id="job-1")

        def rows(self, job, start_index):
            yield from rows[start_index:]

    return Backend()


def test_binary_claims_in_an_export_name_the_row(tmp_path, capsys):
    from langrepr.data.patents.export import main

    code = main(["export", "--out", str(tmp_path), "--project", "p", "--shard-rows", "2"],
                backend=_binary_claims_backend(b"\xff\xfe1. A widget \x80"))
    out, err = capsys.readouterr()
    assert code == 2 and err.splitlines() == [
        "error: result row 3 (US-8000003-B2): its claims text is binary data, not UTF-8 (byte 0): "
        "claims_localized.text must be STRING, as in patents-public-data.patents.publications; check --table "
        "patents-public-data.patents.publications (the shards before this row are kept)"]
    assert sorted(p.name for p in tmp_path.glob("*.parquet")) == ["train-00000.parquet"]   # rows 0-1 kept: resumable
    assert not (tmp_path / "manifest.json").exists()


def test_utf8_bytes_claims_are_decoded(tmp_path):
    import pyarrow.parquet as pq

    from langrepr.data.patents.export import ExportConfig, export

    export(ExportConfig(out=str(tmp_path), project="p"), backend=_binary_claims_backend("1. Ein Gerät.".encode()),
           echo=lambda *_: None)
    claims = pq.read_table(tmp_path / "train-00000.parquet").column("claims").to_pylist()
    assert claims[3] == "1. Ein Gerät."


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


def test_binary_claims_in_an_export_are_text_or_one_line(tmp_path):
    """u13 reading side: a parquet whose claims column is binary decodes as UTF-8, or stops with one line."""
    from langrepr.data.patents.uspto import claims_text
    from langrepr.errors import UserError
    assert claims_text(b"1. A widget.", tmp_path, "train", 3) == "1. A widget."
    with pytest.raises(UserError, match=r"split train, row 7: the claims are bytes that are not UTF-8"):
        claims_text(b"\xff\xfe1. A", tmp_path, "train", 7)
    with pytest.raises(UserError, match="holds NoneType, not text"):
        claims_text(None, tmp_path, "train", 8)
