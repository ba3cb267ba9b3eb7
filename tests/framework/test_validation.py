"""What validation refuses before any data is read (wrong types, an unwritable cache, trainer
arguments, pipeline settings), with one line whose advice passes validation when followed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cases import PTB, S, error_lines, out, validate
from conftest import fails_with, run_main

pytestmark = pytest.mark.usefixtures("own_digest_cache", "fresh_root_logger")


@pytest.mark.parametrize("case, argv, line", [
    ("X50", ["trainer.limit_train_batches=abc"],
     "trainer.limit_train_batches='abc' is not a batch limit: pass a fraction between 0.0 and 1.0 or a whole number "
     "of batches"),
    ("X51", ["model.net.hidden_size=abc"], "model.net.hidden_size='abc' is not an integer: pass a whole number >= 1"),
    ("X52", ["dataset.datamodule.max_train_samples=many"],
     "dataset.datamodule.max_train_samples='many' is not an integer: pass a whole number >= 0"),
])
def test_wrong_types_are_one_line_before_data(case, argv, line, tmp_path, capfd):
    assert fails_with(capfd, [*S, *argv, *out(tmp_path)]) == line
    assert not (tmp_path / "out").exists()


def test_X48_a_cache_dir_that_cannot_be_written_names_paths_cache_dir(tmp_path, capfd, monkeypatch):
    import os

    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == ro else real(p, mode))
    assert fails_with(capfd, [*S, f"paths.output_root={tmp_path / 'out'}", f"paths.cache_dir={ro / 'cache'}"]) == (
        f"paths.cache_dir={ro / 'cache'} is not writable ({ro} is read-only): pass paths.cache_dir=<a writable folder>")
    (tmp_path / "afile").write_text("x")
    assert fails_with(capfd, [*S, f"paths.output_root={tmp_path / 'out'}",
                              f"paths.cache_dir={tmp_path / 'afile' / 'cache'}"]) == (
        f"paths.cache_dir={tmp_path / 'afile' / 'cache'} lies under {tmp_path / 'afile'}, which is a file: pass "
        "paths.cache_dir=<a writable folder>")
    assert not (tmp_path / "out").exists()


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
