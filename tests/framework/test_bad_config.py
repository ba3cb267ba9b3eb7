"""Bad command-line values and keys: one line naming the value and the fix, exit 2, before any data is read."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from bad_inputs import Case, a_file_as_output_root, run_case
from conftest import run_main

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


@pytest.mark.parametrize("case", CONFIG, ids=lambda c: c.id)
def test_bad_input_gives_one_line(case: Case, paths: dict, capfd, monkeypatch):
    run_case(case, paths, capfd, monkeypatch)


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
