"""Table-driven bad inputs and faults: each gives a non-zero exit, ONE line naming the problem and the fix,
no traceback, and nothing half-written.

Every case runs `langrepr.train.main()` in this process (as `python -m langrepr.train` would, minus the
interpreter start), so the suite stays cheap: most cases stop at validation, before any data is read.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from conftest import run_main

SMOKE = ["debug=smoke", "trainer.max_epochs=1"]
USPTO = ["dataset=uspto", "model=bert_ewe", *SMOKE]
PTB = ["dataset=ptb", "model=tensorcoder_1conv", *SMOKE, "model.net.hidden_size=16", "model.net.num_layers=1",
       "model.net.intermediate_size=16", "dataset.datamodule.seq_len=16"]


@dataclass
class Case:
    """argv (with {export}, {ptb_root}, {cell}, {tmp} placeholders), the words the line must contain, and an
    optional setup(tmp, paths) that breaks something before the run."""

    id: str
    argv: list[str]
    expect: list[str]
    setup: Callable[[Path, dict], None] | None = None
    env: dict = field(default_factory=dict)


# ---------------------------------------------------------------- fixtures: tiny data, made once

@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict:
    from langrepr.data.patents.synthetic import generate

    root = tmp_path_factory.mktemp("pristine")
    generate(root / "export", n_train=60, n_test=12, n_subclasses=6, seed=1, shard_rows=32)
    generate(root / "export_other", n_train=60, n_test=12, n_subclasses=6, seed=2, shard_rows=32)
    ptb = root / "data" / "ptb"
    ptb.mkdir(parents=True)
    for name, n in [("ptb.train.txt", 120), ("ptb.valid.txt", 30), ("ptb.test.txt", 30)]:
        (ptb / name).write_text("".join(f"the w{i % 13} of w{i % 7} N\n" for i in range(n)))
    return {"root": root}


@pytest.fixture
def paths(pristine, tmp_path, monkeypatch) -> dict:
    shutil.copytree(pristine["root"] / "export", tmp_path / "export")
    shutil.copytree(pristine["root"] / "data", tmp_path / "data")
    monkeypatch.setenv("LANGREPR_DIGEST_CACHE", str(tmp_path / "digests.json"))
    return {"export": tmp_path / "export", "export_other": pristine["root"] / "export_other",
            "ptb_root": tmp_path / "data", "ptb": tmp_path / "data" / "ptb", "cell": tmp_path / "out" / "cell",
            "tmp": tmp_path}


# ---------------------------------------------------------------- setups that break things

def flip_byte(path: Path, offset: int = 200) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def first_shard(p: dict) -> Path:
    return p["export"] / json.loads((p["export"] / "manifest.json").read_text())["shards"][0]["file"]


def empty_claims(_tmp: Path, p: dict) -> None:
    import pyarrow.parquet as pq

    from langrepr.data.patents.files import write_manifest, write_shard

    manifest = json.loads((p["export"] / "manifest.json").read_text())
    for shard in manifest["shards"]:
        rows = pq.read_table(p["export"] / shard["file"]).to_pylist()
        for row in rows:
            row["claims"] = ""
        shard.update(write_shard(p["export"] / shard["file"], rows))
    write_manifest(p["export"], manifest)


def write_cell_file(rel: str, content: bytes) -> Callable[[Path, dict], None]:
    def setup(_tmp: Path, p: dict) -> None:
        (p["cell"] / rel).parent.mkdir(parents=True, exist_ok=True)
        (p["cell"] / rel).write_bytes(content)
    return setup


def a_file_as_output_root(_tmp: Path, p: dict) -> None:
    (p["tmp"] / "afile").write_text("not a folder")


CONFIG = [
    Case("unknown-model", ["model=no_such_model"], ["unknown model 'no_such_model'", "bert_ewe"]),
    Case("unknown-dataset", ["dataset=nope"], ["unknown dataset 'nope'", "synthetic"]),
    Case("unknown-key", ["foo=1"], ["unknown key 'foo'", "spelling"]),
    Case("unknown-key-plus", ["+foo=1"], ["unknown key 'foo'", "remove it"]),
    Case("typo-plus-top", ["+optimzer.lr=0.1"], ["unknown key 'optimzer'", "did you mean optimizer"]),
    Case("typo-nested", ["optimizer.lrr=0.1"], ["optimizer.lrr", "did you mean optimizer.lr"]),
    Case("bogus-net-kwarg", ["+model.net.bogus=1"], ["model.net.bogus", "remove it"]),
    Case("bogus-trainer-kwarg", ["+trainer.max_epoch=3"], ["trainer.max_epoch", "did you mean trainer.max_epochs"]),
    Case("plus-existing", ["+seed=3"], ["'seed' already exists", "without the leading '+'"]),
    Case("through-interpolation", ["experiment=multihot_pretrain", "dataset.datamodule.max_len=64"],
         ["'dataset.datamodule' is an interpolation (${mlm_cell.datamodule})", "set 'mlm_cell.datamodule.max_len' instead"]),
    Case("seed-text", ["seed=abc"], ["seed='abc'", "whole number"]),
    Case("seed-negative", ["seed=-1"], ["seed=-1", ">= 0"]),
    Case("epochs-text", ["trainer.max_epochs=abc"], ["trainer.max_epochs='abc'", "whole number"]),
    Case("epochs-zero", ["trainer.max_epochs=0"], ["trainer.max_epochs=0", ">= 1"]),
    Case("epochs-forever", ["trainer.max_epochs=-1"], ["trainer.max_epochs=-1", "trainer.max_steps"]),
    Case("lr-negative", ["optimizer.lr=-1"], ["optimizer.lr=-1", "positive"]),
    Case("lr-text", ["optimizer.lr=fast"], ["optimizer.lr='fast'", "positive float"]),
    Case("lr-inf", ["optimizer.lr=inf"], ["optimizer.lr=inf", "finite"]),
    Case("batch-zero", ["dataset.datamodule.batch_size=0"], ["batch_size=0", ">= 1"]),
    Case("batch-float", ["dataset.datamodule.batch_size=1.5"], ["batch_size=1.5", "whole number"]),
    Case("test-ckpt", ["test_ckpt=newest"], ["test_ckpt='newest'", "best", "last"]),
    Case("stage", ["stage=evaluate"], ["stage='evaluate'", "train, count, stats, pipeline"]),
    Case("force-text", ["force=maybe"], ["force='maybe'", "force=true"]),
    Case("ckpt-missing", ["ckpt_path=/no/such.ckpt"], ["/no/such.ckpt does not exist", "ckpt_path=auto"]),
    Case("precision", ["trainer.precision=17"], ["trainer.precision='17'", "32-true"]),
    Case("accelerator", ["trainer.accelerator=quantum"], ["trainer.accelerator='quantum'", "cpu"]),
    Case("canine-u", ["model=canine_ewe", "model.tokenizer.u=126"], ["model.tokenizer.u=126", "multiple of 4"]),
    Case("canine-len", ["model=canine_orig", "model.tokenizer.max_length=130"],
         ["max_length=130", "multiple of 4"]),
    Case("every-n-steps", ["callbacks.last_checkpoint.every_n_train_steps=0"], ["every_n_train_steps=0", ">= 1"]),
    Case("unparseable", ["seed=[1"], ["cannot parse the command line"]),
    Case("experiment-dataset", ["-m", "experiment=ewe_table3", "dataset=ptb"], ["ewe_table3", "not ptb"]),
    Case("experiment-dataset-first", ["-m", "experiment=leam_table2", "profile=quick", "dataset=ptb"], ["leam_table2", "ag_news", "not ptb"]),
    Case("output-root-is-file", ["paths.output_root={tmp}/afile/out"], ["afile", "writable folder"],
         setup=a_file_as_output_root),
    Case("unresolvable", ["dataset=ptb", "paths.data_dir=${{oc.env:LANGREPR_NO_SUCH_VAR}}"],
         ["does not resolve", "LANGREPR_NO_SUCH_VAR"]),
]
if not torch.cuda.is_available():
    CONFIG.append(Case("gpu-without-cuda", ["trainer.accelerator=gpu"], ["no CUDA GPU", "trainer=cpu"]))

DATA = [
    Case("uspto-missing-dir", [*USPTO, "dataset.datamodule.data_dir={tmp}/nowhere"], ["nowhere", "export"]),
    Case("uspto-unset", [*USPTO], ["(unset)", "LANGREPR_USPTO_DIR"], env={"LANGREPR_USPTO_DIR": None}),
    Case("uspto-no-manifest", [*USPTO, "dataset.datamodule.data_dir={export}"], ["no manifest.json", "rerun"],
         setup=lambda t, p: (p["export"] / "manifest.json").unlink()),
    Case("uspto-truncated-manifest", [*USPTO, "dataset.datamodule.data_dir={export}"],
         ["manifest.json is damaged", "re-run the export"],
         setup=lambda t, p: (p["export"] / "manifest.json").write_text('{"shards": [')),
    Case("shard-byte-flipped", [*USPTO, "dataset.datamodule.data_dir={export}"],
         ["does not match the sha256", "re-run the export"], setup=lambda t, p: flip_byte(first_shard(p))),
    Case("shard-truncated", [*USPTO, "dataset.datamodule.data_dir={export}"], ["does not match the sha256"],
         setup=lambda t, p: first_shard(p).write_bytes(first_shard(p).read_bytes()[:100])),
    Case("shard-replaced", [*USPTO, "dataset.datamodule.data_dir={export}"], ["does not match the sha256"],
         setup=lambda t, p: shutil.copy(p["export_other"] / first_shard(p).name, first_shard(p))),
    Case("shard-missing", [*USPTO, "dataset.datamodule.data_dir={export}"], ["is missing", "re-run the export"],
         setup=lambda t, p: first_shard(p).unlink()),
    Case("claims-all-empty", [*USPTO, "dataset.datamodule.data_dir={export}"], ["have no text", "re-export"],
         setup=empty_claims),
    Case("empty-split", [*USPTO, "dataset.datamodule.data_dir={export}", "dataset.datamodule.max_train_samples=0"],
         ["is empty", "max_*_samples"]),
    Case("ptb-missing-file", [*PTB, "paths.data_dir={ptb_root}"], ["ptb.valid.txt not found", "LANGREPR_DATA_DIR"],
         setup=lambda t, p: (p["ptb"] / "ptb.valid.txt").unlink()),
    Case("ptb-tiny", [*PTB, "paths.data_dir={ptb_root}"], ["only 5 tokens", "real corpus"],
         setup=lambda t, p: (p["ptb"] / "ptb.train.txt").write_text("a tiny training file\n")),
    Case("ptb-not-utf8", [*PTB, "paths.data_dir={ptb_root}"], ["ptb.test.txt is not UTF-8", "re-encode"],
         setup=lambda t, p: (p["ptb"] / "ptb.test.txt").write_bytes(b"caf\xe9 au lait\n" * 20)),
    Case("ptb-foreign-eval", [*PTB, "paths.data_dir={ptb_root}"], ["covers only", "same corpus"],
         setup=lambda t, p: (p["ptb"] / "ptb.valid.txt").write_text("ganz andere woerter hier\n" * 30)),
    Case("ptb-data-dir-missing", [*PTB, "paths.data_dir={tmp}/nowhere"], ["not found", "data_dir"]),
]


def train_once(_tmp: Path, p: dict) -> None:
    """A finished cell in {cell} (smoke size) that the next run must not silently reuse."""
    assert run_main([*USPTO, f"dataset.datamodule.data_dir={p['export']}", f"hydra.run.dir={p['cell']}",
                     f"paths.output_root={p['tmp'] / 'out'}", f"paths.cache_dir={p['tmp'] / 'cache'}"]) == 0


def then(*steps: Callable[[Path, dict], None]) -> Callable[[Path, dict], None]:
    def setup(tmp: Path, p: dict) -> None:
        for step in steps:
            step(tmp, p)
    return setup


def swap_export(_tmp: Path, p: dict) -> None:
    shutil.rmtree(p["export"])
    shutil.copytree(p["export_other"], p["export"])


IN_CELL = [*USPTO, "dataset.datamodule.data_dir={export}", "hydra.run.dir={cell}"]
FAULTS = [
    Case("damaged-metrics-json", IN_CELL, ["metrics.json is damaged", "force=true"],
         setup=write_cell_file("metrics.json", b'{"status": "fini')),
    Case("truncated-last-ckpt", [*IN_CELL, "ckpt_path=auto"], ["last.ckpt cannot be read", "force=true"],
         setup=write_cell_file("checkpoints/last.ckpt", b"PK\x03\x04 truncated")),
    Case("data-changed-after-finish", IN_CELL, ["data of", "changed", "force=true"],
         setup=then(train_once, swap_export)),
    Case("config-changed-after-finish", [*IN_CELL, "seed=2"], ["different config", "force=true"], setup=train_once),
    Case("diverged", [*IN_CELL, "optimizer.lr=1e20"], ["training diverged", "nan", "lower optimizer.lr"]),
    Case("diverged-clipped", [*IN_CELL, "optimizer.lr=1e20", "trainer.gradient_clip_val=1.0"],
         ["training diverged", "lower optimizer.lr", "already clipped at trainer.gradient_clip_val=1"]),
]


def half_written(root: Path) -> list[str]:
    """Temporary files left behind, or a cell that claims to be finished."""
    bad = [str(p) for p in root.rglob(".*.tmp")]
    for path in root.rglob("metrics.json"):
        try:
            if json.loads(path.read_text()).get("status") == "finished" and "out" in path.parts:
                bad.append(f"{path} says finished")
        except ValueError:
            pass
    return bad


@pytest.mark.parametrize("case", CONFIG + DATA + FAULTS, ids=lambda c: c.id)
def test_bad_input_gives_one_line(case: Case, paths: dict, capfd, monkeypatch):
    for key, value in case.env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    if case.setup is not None:
        case.setup(paths["tmp"], paths)
        capfd.readouterr()
    # earlier finished cells (train_once) are legitimately finished: only what this run writes is judged
    finished_before = {p for p in paths["tmp"].rglob("metrics.json")}
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in case.argv]
    if not any(a.startswith("paths.output_root=") for a in argv):
        argv.append(f"paths.output_root={paths['tmp'] / 'out'}")
    argv.append(f"paths.cache_dir={paths['tmp'] / 'cache'}")
    code = run_main(argv)
    out, err = capfd.readouterr()
    assert code == 2, (code, err[-3000:])
    assert "Traceback" not in out + err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err[-3000:]
    for word in case.expect:
        assert word.lower() in errors[0].lower(), (word, errors[0])
    leftovers = [b for b in half_written(paths["tmp"]) if not any(str(p) in b for p in finished_before)]
    assert not leftovers, leftovers


def test_diverged_cell_is_recorded_as_diverged(paths, capfd):
    code = run_main([*USPTO, f"dataset.datamodule.data_dir={paths['export']}", f"hydra.run.dir={paths['cell']}",
                     "optimizer.lr=1e20", f"paths.output_root={paths['tmp'] / 'out'}",
                     f"paths.cache_dir={paths['tmp'] / 'cache'}"])
    assert code == 2
    record = json.loads((paths["cell"] / "metrics.json").read_text())
    assert record["status"] == "diverged" and "step" in record["error"]
    assert "metrics" not in record


def test_disk_full_while_checkpointing_leaves_no_partial_file(paths, capfd, monkeypatch):
    import langrepr.callbacks as callbacks

    def full_disk(obj, fh, *args, **kwargs):
        fh.write(b"partial")
        raise OSError(28, "No space left on device", getattr(fh, "name", "?"))

    real_save = torch.save

    def save(obj, f, *args, **kwargs):      # only checkpoint files (written through a handle) hit the full disk
        return full_disk(obj, f) if hasattr(f, "write") else real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(callbacks.torch, "save", save)
    code = run_main([*USPTO, f"dataset.datamodule.data_dir={paths['export']}", f"hydra.run.dir={paths['cell']}",
                     f"paths.output_root={paths['tmp'] / 'out'}", f"paths.cache_dir={paths['tmp'] / 'cache'}"])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "No space left on device" in line and "paths.output_root" in line
    assert not list((paths["cell"] / "checkpoints").glob("*.ckpt")) and not half_written(paths["tmp"])
    assert json.loads((paths["cell"] / "metrics.json").read_text())["status"] == "failed"


def test_wandb_login_failure_is_one_line(paths, capfd, monkeypatch):
    wandb = pytest.importorskip("wandb")
    from pytorch_lightning.loggers import WandbLogger

    def refuse(*args, **kwargs):
        raise wandb.errors.AuthenticationError("API key must be 40 characters long, yours was 3")

    monkeypatch.setattr(WandbLogger, "log_hyperparams", refuse)
    code = run_main([*USPTO, "logger=wandb", f"dataset.datamodule.data_dir={paths['export']}",
                     f"hydra.run.dir={paths['cell']}", f"paths.output_root={paths['tmp'] / 'out'}",
                     f"paths.cache_dir={paths['tmp'] / 'cache'}"])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "wandb could not start" in line and "WANDB_MODE=offline" in line


def test_same_override_names_one_cell_with_and_without_multirun(paths, capfd):
    root = paths["tmp"] / "out"
    for argv in ([], ["-m"]):
        assert run_main([*argv, "optimizer.lr=1e-3" if not argv else "optimizer.lr=0.001", "dataset=synthetic", "model=bert_ewe", "debug=smoke", "stage=count",
                         "+count_net_kwargs.num_labels=4", "run_id=canon", f"paths.output_root={root}"]) == 0
    (cell,) = [p.parent.name for p in root.rglob("metrics.json")]   # the second run found the first one's cell
    assert "optimizer.lr=0.001" in cell
    assert "already finished" in "".join(capfd.readouterr())


def test_make_unknown_target_is_one_line():
    import subprocess

    from conftest import ROOT

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    result = subprocess.run(["make", "ewe-table9"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "MAKEFLAGS": ""}, timeout=60)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "ewe-table9" in lines[0] and "make help" in lines[0], result.stderr


@pytest.mark.parametrize("content,expect", [(None, "no such file"), (b"{not json", "not a JSON key file"),
                                            (b'{"client_email": "x"}', "not a Google credentials file")])
def test_bad_credentials_file_is_named(tmp_path, monkeypatch, capsys, content, expect):
    from langrepr.data.patents import export as uspto_export

    key = tmp_path / "key.json"
    if content is not None:
        key.write_bytes(content)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    assert uspto_export.main(["export", "--out", str(tmp_path / "out"), "--project", "p"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err and str(key) in err and "Traceback" not in err


def test_unreachable_network_is_one_line():
    from langrepr.data.patents.export import _is_network_error

    assert _is_network_error(ConnectionRefusedError(111, "refused"))
    assert _is_network_error(RuntimeError("wrapped").with_traceback(None)) is False
    assert _is_network_error(TimeoutError())
