"""The training-step switches (conf/train.yaml: compile, pad_to_fixed, sync_free, fused_optimizer, matmul_precision).

Each is checked on CPU: it reaches the object it acts on, it computes what the step did without it (within the
float tolerance stated in each test), and it is neither part of a cell's identity nor of its folder name.
"""

from __future__ import annotations

import functools
import types

import pytest
import pytorch_lightning as pl
import torch
from test_sync_free import NaNAt, causal, leam, tensorcoder_mlm, translation

from conftest import fails_with
from langrepr import cell
from langrepr.callbacks import NonFiniteGuard
from langrepr.errors import UserError
from langrepr.tasks import optim
from langrepr.train import apply_step_switches, step_switches

SWITCHES = ("compile", "pad_to_fixed", "sync_free", "fused_optimizer", "matmul_precision")
DEFAULTS = {"compile": "none", "pad_to_fixed": False, "sync_free": True, "fused_optimizer": True,
            "matmul_precision": "high"}


def test_defaults_and_they_are_not_identity(compose_cfg):
    cfg = compose_cfg("debug=smoke", hydra=True)
    assert step_switches(cfg) == DEFAULTS
    assert set(SWITCHES) <= set(cfg.hydra.job.config.override_dirname.exclude_keys)
    changed = compose_cfg("debug=smoke", "compile=reduce-overhead", "pad_to_fixed=true", "sync_free=false",
                          "fused_optimizer=false", "matmul_precision=highest")
    assert cell.cell_fingerprint(changed) == cell.cell_fingerprint(cfg)   # a finished cell stays finished


@pytest.mark.parametrize("override, line", [
    ("compile=fast", "compile=fast: choose one of none, default, reduce-overhead"),
    ("matmul_precision=low", "matmul_precision=low: choose one of highest, high, medium"),
    ("sync_free=maybe", "sync_free=maybe: choose true or false"),
])
def test_a_bad_switch_is_one_line(compose_cfg, capfd, tmp_path, override, line):
    with pytest.raises(UserError, match=line):
        step_switches(compose_cfg(override))
    assert fails_with(capfd, ["debug=smoke", override, f"paths.output_root={tmp_path}"]) == line


def switches(**changed) -> dict:
    return {**DEFAULTS, **changed}


def test_compile_is_in_place_so_checkpoints_keep_their_keys():
    task, _ = leam(False)
    keys = list(task.state_dict())
    apply_step_switches(switches(compile="default"), object(), task, [])
    assert task.net._compiled_call_impl is not None     # nn.Module.compile: compiled at the first call
    assert list(task.state_dict()) == keys


def test_sync_free_false_is_the_old_step():
    task, _ = tensorcoder_mlm()
    guard = NonFiniteGuard()
    apply_step_switches(switches(), object(), task, [guard])
    assert guard.every_n_steps is None and task.sync_free
    apply_step_switches(switches(sync_free=False), object(), task, [guard])
    assert guard.every_n_steps == 1 and not task.sync_free


def test_the_guard_every_step_stops_at_the_first_nan():
    from langrepr.errors import Diverged

    guard = NonFiniteGuard()
    apply_step_switches(switches(sync_free=False), object(), NaNAt(bad=2), [guard])
    trainer = pl.Trainer(accelerator="cpu", max_steps=20, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=50,
                         callbacks=[guard])
    with pytest.raises(Diverged, match="at step 3 "):
        trainer.fit(NaNAt(bad=2), train_dataloaders=torch.utils.data.DataLoader([torch.ones(2)] * 20, batch_size=None))


# ---------------------------------------------------------------- fused AdamW

def adamw():
    return functools.partial(torch.optim.AdamW, lr=1e-3, weight_decay=0.01)


def test_fused_is_a_no_op_on_cpu():
    net = torch.nn.Linear(3, 2)
    net.fused_optimizer = True
    assert not optim.configure(net, adamw(), None, 10)["optimizer"].defaults["fused"]


def test_fused_is_asked_for_when_every_parameter_is_on_cuda(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))   # what the check reads
    net = torch.nn.Linear(3, 2)
    assert optim.fusable(adamw(), [{"params": list(net.parameters())}])
    assert not optim.fusable(functools.partial(torch.optim.AdamW, fused=False), [{"params": list(net.parameters())}])
    assert not optim.fusable(functools.partial(torch.optim.SGD, lr=0.1, fused=True), [{"params": []}])   # no params
    monkeypatch.undo()
    monkeypatch.setattr(optim, "fusable", lambda factory, groups: True)
    net.fused_optimizer = True
    assert optim.configure(net, adamw(), None, 10)["optimizer"].defaults["fused"] is True
    net.fused_optimizer = False
    assert not optim.configure(net, adamw(), None, 10)["optimizer"].defaults["fused"]
    net.fused_optimizer, net._trainer = True, types.SimpleNamespace(gradient_clip_val=1.0, precision="16-mixed")
    assert not optim.configure(net, adamw(), None, 10)["optimizer"].defaults["fused"]   # Lightning would refuse


def test_fused_adamw_steps_like_the_unfused_one():
    """Tolerance: rtol 1e-5, atol 1e-6 on the weights after 5 steps (the fused kernel is the same update)."""
    torch.manual_seed(0)
    nets = [torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)]
    nets[1].load_state_dict(nets[0].state_dict())
    opts = [torch.optim.AdamW(nets[0].parameters(), lr=1e-2), torch.optim.AdamW(nets[1].parameters(), lr=1e-2, fused=True)]
    for _ in range(5):
        x = torch.randn(6, 8)
        for net, opt in zip(nets, opts):
            opt.zero_grad()
            net(x).pow(2).sum().backward()
            opt.step()
    for a, b in zip(nets[0].parameters(), nets[1].parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- fixed padding

def test_pad_to_fixed_reaches_the_datamodule_and_pads_to_max_len():
    from langrepr.data.english.translation import TranslationDataModule, collate_pairs

    dm = TranslationDataModule.__new__(TranslationDataModule)
    dm.max_source_len, dm.max_target_len = 12, 10
    apply_step_switches(switches(pad_to_fixed=True), dm, leam(False)[0], [])
    rows = [([5, 6, 2], [7, 8], "a"), ([5, 2], [9], "b")]
    batch = dm._collate(rows)
    assert batch["input_ids"].shape == (2, 12) and batch["labels"].shape == (2, 10)
    longest = collate_pairs(rows)
    assert longest["input_ids"].shape == (2, 3) and longest["labels"].shape == (2, 3)
    assert torch.equal(batch["input_ids"][:, :3], longest["input_ids"])


def pad(batch: dict, source: int, target: int) -> dict:
    """The batch as collate_pairs(..., fixed=(source, target)) would give it."""
    def grow(x, n, value):
        return torch.cat([x, torch.full((x.shape[0], n - x.shape[1]), value, dtype=x.dtype)], 1)
    return {"input_ids": grow(batch["input_ids"], source, 0), "attention_mask": grow(batch["attention_mask"], source, 0),
            "decoder_input_ids": grow(batch["decoder_input_ids"], target, 0),
            "decoder_attention_mask": grow(batch["decoder_attention_mask"], target, 0),
            "labels": grow(batch["labels"], target, -100)}


def test_padding_to_fixed_lengths_gives_the_same_translation_loss():
    """Tolerance: rtol 1e-5, atol 1e-6 on the smoothed loss and the NLL (padding is masked everywhere)."""
    task, batch = translation()
    task.net.eval()
    smoothed, nll, n = task._losses(batch)
    fixed_smoothed, fixed_nll, fixed_n = task._losses(pad(batch, 15, 15))
    assert int(n) == int(fixed_n)
    torch.testing.assert_close(fixed_smoothed, smoothed, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(fixed_nll, nll, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- compile=default: the same steps

def fit_steps(task, batch, steps: int) -> list[float]:
    losses: list[float] = []

    class Record(pl.Callback):
        def on_train_batch_end(self, trainer, module, outputs, *args):
            losses.append(float(outputs["loss"]))

    trainer = pl.Trainer(accelerator="cpu", max_steps=steps, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[Record()])
    trainer.fit(task, train_dataloaders=torch.utils.data.DataLoader([batch] * steps, batch_size=None,
                                                                    collate_fn=lambda b: b))
    return losses


@pytest.mark.slow   # inductor compiles forward and backward on a CPU: 28 s cold (11 s with its cache) on a loaded 2-core machine
def test_compiled_steps_match_eager_steps():
    """compile=default vs eager, 3 AdamW steps of the causal LM (dropout off): losses and weights within
    rtol 1e-4, atol 1e-5 (inductor fuses and reorders float reductions)."""
    runs = []
    for mode in ("none", "default"):
        torch.manual_seed(0)
        task, batch = causal()
        task.net.config.resid_pdrop = 0.0
        for m in task.net.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        apply_step_switches(switches(compile=mode), object(), task, [])
        runs.append((fit_steps(task, batch, 3), {k: v.detach().clone() for k, v in task.state_dict().items()}))
    (eager, eager_w), (compiled, compiled_w) = runs
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), rtol=1e-4, atol=1e-5)
    for k in eager_w:
        torch.testing.assert_close(compiled_w[k], eager_w[k], rtol=1e-4, atol=1e-5)
