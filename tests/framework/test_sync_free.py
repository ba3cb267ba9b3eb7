"""No host-device synchronisation from our code inside a training step, for every task (issue 32 item 2).

A CUDA tensor read on the host (`.item()`, `bool()`, `int()`, boolean-mask indexing, `nonzero`, ...) makes the CPU
wait for the GPU's queue, so the next step cannot be queued while this one runs. On a CPU nothing waits, so the
test counts the calls instead: the sync-causing tensor entry points are wrapped and a call counts as ours when
the code that made it is in `langrepr`. Each task runs a few real Lightning steps on a tiny net and batch, with
`NonFiniteGuard`, between logging steps (`log_every_n_steps` larger than the run: Lightning itself reads the
logged values only at its logging interval, and so does the guard).
"""

from __future__ import annotations

import functools
import sys
from collections import Counter
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import langrepr
from langrepr.callbacks import NonFiniteGuard
from langrepr.confpaths import CONF_DIR

OURS = str(Path(langrepr.__file__).parent)
TORCH = str(Path(torch.__file__).parent)
SYNC_METHODS = ("item", "tolist", "numpy", "nonzero", "__bool__", "__int__", "__float__", "__index__")
SYNC_FUNCTIONS = ("nonzero", "unique", "masked_select", "argwhere")


def _caller() -> str:
    """Who made the call: 'ours', 'library' (transformers, torchmetrics... reached from our code) or 'other'."""
    frame = sys._getframe(3)             # _caller <- _count <- the wrapper <- the caller
    while frame is not None and frame.f_code.co_filename.startswith(TORCH):
        frame = frame.f_back             # torch's own Python wrappers (functional, Tensor methods)
    if frame is None:
        return "other"
    if frame.f_code.co_filename.startswith(OURS):
        return "ours"
    f = frame
    while f is not None:
        if f.f_code.co_filename.startswith(OURS):
            return "library"
        f = f.f_back
    return "other"


class SyncCounter:
    """Counts sync-causing tensor calls by who made them, while `active`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.active, self.calls = False, Counter()
        self.where: Counter = Counter()
        for name in SYNC_METHODS:
            monkeypatch.setattr(torch.Tensor, name, self._wrap(getattr(torch.Tensor, name), name))
        for name in SYNC_FUNCTIONS:
            monkeypatch.setattr(torch, name, self._wrap(getattr(torch, name), name))
        monkeypatch.setattr(torch, "where", self._wrap_where(torch.where))
        monkeypatch.setattr(torch, "repeat_interleave", self._wrap_repeat(torch.repeat_interleave))
        monkeypatch.setattr(torch.Tensor, "__getitem__", self._wrap_index(torch.Tensor.__getitem__, "getitem"))
        monkeypatch.setattr(torch.Tensor, "__setitem__", self._wrap_index(torch.Tensor.__setitem__, "setitem"))

    def _count(self, name: str) -> None:
        if self.active:
            who = _caller()
            self.calls[who] += 1
            if who != "other":
                f = sys._getframe(2)
                while f.f_code.co_filename.startswith(TORCH):
                    f = f.f_back
                where = f"{name} at {Path(f.f_code.co_filename).name}:{f.f_lineno}"
                self.where[where if who == "ours" else f"(library) {where}"] += 1

    def _wrap(self, fn, name):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            self._count(name)
            return fn(*args, **kwargs)
        return wrapper

    def _wrap_where(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if len(args) + len(kwargs) == 1:          # torch.where(cond) = nonzero
                self._count("where(cond)")
            return fn(*args, **kwargs)
        return wrapper

    def _wrap_repeat(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if isinstance(args[1] if len(args) > 1 else kwargs.get("repeats"), torch.Tensor) and \
                    kwargs.get("output_size") is None:
                self._count("repeat_interleave")
            return fn(*args, **kwargs)
        return wrapper

    def _wrap_index(self, fn, name):
        def has_bool(index) -> bool:
            items = index if isinstance(index, tuple) else (index,)
            return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool and i.dim() > 0 for i in items)

        @functools.wraps(fn)
        def wrapper(tensor, index, *rest):
            if has_bool(index):
                self._count(f"bool {name}")
            return fn(tensor, index, *rest)
        return wrapper


class Window(pl.Callback):
    """Counts only inside training steps: from batch start to the end of the last per-step callback."""

    def __init__(self, counter: SyncCounter, first: bool) -> None:
        self.counter, self.first = counter, first

    def on_train_batch_start(self, *args) -> None:
        if self.first:
            self.counter.active = True

    def on_train_batch_end(self, *args) -> None:
        if not self.first:
            self.counter.active = False


def run_steps(task: pl.LightningModule, batch: dict, counter: SyncCounter, tmp_path: Path, steps: int = 3,
              log_every_n_steps: int = 50) -> SyncCounter:
    """`steps` Lightning training steps of `task` on `batch` (the same batch every step), guard included."""
    loader = torch.utils.data.DataLoader([batch] * steps, batch_size=None, collate_fn=lambda b: b)
    trainer = pl.Trainer(accelerator="cpu", max_steps=steps, logger=pl.loggers.CSVLogger(tmp_path), num_sanity_val_steps=0,
                         limit_val_batches=0, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, log_every_n_steps=log_every_n_steps,
                         callbacks=[Window(counter, True), NonFiniteGuard(), Window(counter, False)])
    trainer.fit(task, train_dataloaders=loader)
    return counter


# ---------------------------------------------------------------- one tiny net and batch per task

def optimizer():
    return functools.partial(torch.optim.AdamW, lr=1e-3, weight_decay=0.01)


def net_of(model: str, **kwargs):
    """The net of `model=<model>` at debug=smoke widths."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[f"model={model}", "debug=smoke"])
    return instantiate(cfg.model.net, **kwargs), cfg


def ids(*shape: int, low: int = 5, high: int = 40) -> torch.Tensor:
    return torch.randint(low, high, shape)


def ewe_multilabel():
    from langrepr.benchmarking import random_batch
    from langrepr.tasks.classification import MultilabelClassificationTask

    net, cfg = net_of("bert_ewe", num_labels=8)
    tok = cfg.model.tokenizer
    shape = {"u": tok.get("u", tok.get("max_length")), "v": tok.get("v", 1), "vocab": 256, "bytes": True}
    batch = random_batch(shape, 2, 8, torch.Generator().manual_seed(0))
    batch["attention_mask"][1, 5:] = 0
    return MultilabelClassificationTask(net, optimizer(), num_labels=8), batch


def leam(multilabel: bool):
    from langrepr.models.leam import LEAM
    from langrepr.tasks.label_embedding import LabelRegularisedMultilabelTask, LabelRegularisedSingleLabelTask

    net = LEAM(vocab_size=40, num_labels=3, hidden_size=8, window=3, intermediate_size=8, max_length=12)
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 7:] = 0
    if multilabel:
        labels = torch.tensor([[1, 0, 1], [0, 1, 0]]).float()
        return LabelRegularisedMultilabelTask(net, optimizer(), num_labels=3), \
            {"input_ids": ids(2, 12) * mask, "attention_mask": mask, "labels": labels}
    return LabelRegularisedSingleLabelTask(net, optimizer(), num_labels=3), \
        {"input_ids": ids(2, 12) * mask, "attention_mask": mask, "labels": torch.tensor([0, 2])}


def tensorcoder_mlm():
    from langrepr.tasks.masked_lm import MaskedLMTask

    net, _ = net_of("tensorcoder_1conv", vocab_size=40, max_len=16)
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 8:] = 0
    return MaskedLMTask(net, optimizer()), {"input_ids": ids(2, 12) * mask, "attention_mask": mask}


def causal():
    from langrepr.models.causal_lm import CausalTransformerLM
    from langrepr.tasks.causal_lm import CausalLMTask

    net = CausalTransformerLM(vocab_size=40, max_len=16, hidden_size=16, num_layers=1, num_heads=2,
                              intermediate_size=32)
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 8:] = 0
    return CausalLMTask(net, optimizer()), {"input_ids": ids(2, 12) * mask, "attention_mask": mask}


def translation():
    from langrepr.tasks.translation import TranslationTask

    net, _ = net_of("tensorcoder_1conv_nmt", vocab_size=40, max_len=16)
    src, tgt = torch.ones(2, 10, dtype=torch.long), torch.ones(2, 9, dtype=torch.long)
    src[1, 6:], tgt[1, 5:] = 0, 0
    labels = torch.where(tgt.bool(), ids(2, 9), torch.full_like(tgt, -100))
    return TranslationTask(net, optimizer(), detokenize=lambda x: " ".join(map(str, x))), \
        {"input_ids": ids(2, 10) * src, "attention_mask": src, "decoder_input_ids": ids(2, 9) * tgt,
         "decoder_attention_mask": tgt, "labels": labels}


def multihot_net():
    from langrepr.models.multihot_lm import MultiHotLM

    return MultiHotLM(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                      max_positions=16, max_group=4)


def multihot_inputs() -> dict:
    group_mask = torch.zeros(2, 10, 3, dtype=torch.bool)
    group_mask[..., 0] = True
    group_mask[0, 2, 1] = True
    att = torch.ones(2, 10, dtype=torch.long)
    att[1, 7:] = 0
    return {"ids": ids(2, 10, 3, high=50) * group_mask, "group_mask": group_mask & att[..., None].bool(),
            "pos": torch.zeros(2, 10, dtype=torch.long), "attention_mask": att,
            "token_type_ids": torch.zeros(2, 10, dtype=torch.long)}


def multihot_mlm():
    from langrepr.tasks.multihot_mlm import MultiHotMLMTask

    batch = multihot_inputs()
    masked = torch.zeros(2, 10, dtype=torch.bool)
    masked[0, [2, 5]] = masked[1, 3] = True
    batch.update(masked=masked, target_ids=batch["ids"][masked], target_mask=batch["group_mask"][masked],
                 nsp_labels=torch.tensor([0, 1]))
    return MultiHotMLMTask(multihot_net(), optimizer(), unigram_log_probs=torch.full((50,), -3.9), nsp=True), batch


def multihot_nsmc():
    from langrepr.tasks.multihot_downstream import SentenceClassificationTask

    return SentenceClassificationTask(multihot_net(), optimizer()), {**multihot_inputs(), "labels": torch.tensor([0, 1])}


def multihot_tagging():
    from langrepr.tasks.token_classification import TaggingTask

    labels = torch.randint(0, 3, (2, 10))
    labels[1, 7:] = -100
    return TaggingTask(multihot_net(), optimizer(), labels=["O", "B-X", "I-X"], types=["X"]), \
        {**multihot_inputs(), "labels": labels, "index": [0, 1]}


def multihot_span_qa():
    from langrepr.tasks.span_qa import SpanQATask

    return SpanQATask(multihot_net(), optimizer()), \
        {**multihot_inputs(), "start": torch.tensor([2, 3]), "end": torch.tensor([4, 3]), "qid": ["a", "b"]}


def grid_word_tagging():
    from langrepr.models.grid import BertEncoder, GridModel, TokenInput
    from langrepr.tasks.token_classification import WordTaggingTask

    net = GridModel(functools.partial(TokenInput), functools.partial(BertEncoder), num_labels=3, vocab_size=40,
                    hidden_size=16, num_layers=1, intermediate_size=32, per_position=True)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 6:] = 0
    labels = torch.randint(0, 3, (2, 10)).masked_fill(mask == 0, -100)
    return WordTaggingTask(net, optimizer(), labels=["O", "B-X", "I-X"], types=["X"]), \
        {"input_ids": ids(2, 10) * mask, "attention_mask": mask, "labels": labels, "index": torch.tensor([0, 1])}


TASKS = {
    "classification (EWE x BERT, multilabel)": ewe_multilabel,
    "label_embedding (LEAM, single-label)": lambda: leam(False),
    "label_embedding (LEAM, multilabel)": lambda: leam(True),
    "masked_lm (TensorCoder)": tensorcoder_mlm,
    "causal_lm (Bit Cipher GPT-2)": causal,
    "translation (TensorCoder NMT)": translation,
    "multihot_mlm (+NSP)": multihot_mlm,
    "multihot_downstream (NSMC)": multihot_nsmc,
    "token_classification (multi-hot tagging)": multihot_tagging,
    "span_qa (KorQuAD)": multihot_span_qa,
    "token_classification (grid word tagging)": grid_word_tagging,
}


@pytest.mark.parametrize("name", list(TASKS))
def test_a_training_step_makes_no_host_device_sync_from_our_code(name, monkeypatch, tmp_path):
    from langrepr.tasks import masked_lm

    monkeypatch.setattr(masked_lm, "SYNC_FREE_DEVICES", ("cpu", "cuda"))   # the path a CUDA batch takes
    torch.manual_seed(0)
    task, batch = TASKS[name]()
    counter = run_steps(task, batch, SyncCounter(monkeypatch), tmp_path, steps=3)
    per_step = counter.calls["ours"] / 3
    print(f"{name}: ours {per_step:g}/step, libraries reached from our code {counter.calls['library'] / 3:g}/step, "
          f"Lightning and the rest {counter.calls['other'] / 3:g}/step, {dict(counter.where)}")
    assert counter.calls["ours"] == 0, {k: v for k, v in counter.where.items() if not k.startswith("(library)")}


def test_the_counter_sees_the_calls_that_sync(monkeypatch):
    counter = SyncCounter(monkeypatch)
    counter.active = True
    x = torch.tensor([1.0, float("nan")])
    bool(torch.isfinite(x).all()), x.sum().item(), int(x[0]), x[x > 0], x.nonzero(), torch.where(x > 0)
    assert counter.calls["other"] == 6 and counter.calls["ours"] == 0     # this file is not langrepr


# ---------------------------------------------------------------- the sync-free forms compute what the old ones did

class NaNAt(pl.LightningModule):
    """A one-weight model whose loss is NaN from step `bad` on."""

    def __init__(self, bad: int) -> None:
        super().__init__()
        self.w, self.bad = torch.nn.Parameter(torch.ones(())), bad

    def training_step(self, batch, batch_idx):
        loss = (self.w * batch).sum()
        return loss * float("nan") if self.global_step >= self.bad else loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


@pytest.mark.parametrize("every, stops_at", [(None, 4), (1, 2)])
def test_the_guard_stops_at_the_check_that_sees_a_nan(tmp_path, every, stops_at):
    from langrepr.errors import Diverged

    trainer = pl.Trainer(accelerator="cpu", max_steps=20, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=4,
                         callbacks=[NonFiniteGuard(every_n_steps=every)])
    loader = torch.utils.data.DataLoader([torch.ones(2)] * 20, batch_size=None)
    with pytest.raises(Diverged, match=rf"train loss = nan at step {stops_at} \(epoch 0\)"):
        trainer.fit(NaNAt(bad=1), train_dataloaders=loader)


def test_the_guard_checks_at_epoch_end_and_before_a_step_checkpoint(tmp_path):
    from langrepr.callbacks import LastCheckpoint
    from langrepr.errors import Diverged

    last = LastCheckpoint(str(tmp_path), every_n_train_steps=3)
    trainer = pl.Trainer(accelerator="cpu", max_epochs=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, log_every_n_steps=50, callbacks=[NonFiniteGuard(), last])
    loader = torch.utils.data.DataLoader([torch.ones(2)] * 10, batch_size=None)
    with pytest.raises(Diverged, match="at step 3 "):
        trainer.fit(NaNAt(bad=2), train_dataloaders=loader)
    assert not last.path.exists()                        # no checkpoint of NaN weights
    trainer = pl.Trainer(accelerator="cpu", max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=50,
                         callbacks=[NonFiniteGuard()])
    with pytest.raises(Diverged, match="at step 5 "):     # 5 batches, no check step before the epoch's end
        trainer.fit(NaNAt(bad=4), train_dataloaders=torch.utils.data.DataLoader([torch.ones(2)] * 5, batch_size=None))


def old_mask_tokens(input_ids, attention_mask, mask_token_id, vocab_size, num_special_tokens, mask_prob, generator):
    """masked_lm.mask_tokens before issue 32 (it read `chosen.any()` and `real.nonzero()` on the host)."""
    from langrepr.lm_targets import IGNORE_INDEX

    real = attention_mask.bool()
    u = torch.rand(input_ids.shape, generator=generator)
    r = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(num_special_tokens, vocab_size, input_ids.shape, generator=generator)
    chosen = (u < mask_prob) & real
    if not chosen.any():
        chosen[tuple(real.nonzero()[0])] = True
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    corrupted = torch.where(chosen & (r < 0.8), torch.full_like(input_ids, mask_token_id), input_ids)
    return torch.where(chosen & (r >= 0.8) & (r < 0.9), random_ids, corrupted), labels


@pytest.mark.parametrize("mask_prob", [0.15, 0.001])     # 0.001: usually nothing drawn, the first real token chosen
def test_device_side_masking_equals_the_old_masking(mask_prob):
    from langrepr.lm_targets import mask_tokens

    for seed in range(20):
        x = torch.randint(2, 40, (3, 9))
        mask = (torch.arange(9) < torch.tensor([[0], [4], [9]])).long()    # a first row of padding only
        new = mask_tokens(x, mask, 1, 40, 2, mask_prob, torch.Generator().manual_seed(seed))
        old = old_mask_tokens(x, mask, 1, 40, 2, mask_prob, torch.Generator().manual_seed(seed))
        assert all(torch.equal(a, b) for a, b in zip(new, old))


def test_masked_lm_scores_the_same_loss_on_every_position_as_on_the_chosen_ones():
    task, batch = tensorcoder_mlm()
    task.net.eval()                                            # no dropout: the two forwards see the same net
    gathered, n_gathered = task._loss(batch, torch.Generator().manual_seed(3))
    every, n_every = task._loss(batch, torch.Generator().manual_seed(3), every_position=True)
    assert int(n_gathered) == int(n_every) > 0
    torch.testing.assert_close(every, gathered, rtol=1e-5, atol=1e-6)


def test_causal_nll_equals_the_gathered_cross_entropy():
    import torch.nn.functional as F

    from langrepr.tasks.causal_lm import next_token_targets

    task, batch = causal()
    task.net.eval()
    loss, n = task._nll(batch)
    logits = task.net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    targets, valid = next_token_targets(batch["input_ids"], batch["attention_mask"])
    torch.testing.assert_close(loss, F.cross_entropy(logits[:, :-1][valid].float(), targets[valid]), rtol=1e-5,
                               atol=1e-6)
    assert int(n) == int(valid.sum())
    empty = {k: v[:, :1] for k, v in batch.items()}           # one position: no next-token target
    loss, n = task._nll(empty)
    assert float(loss) == 0.0 and int(n) == 0


def test_masked_states_equal_boolean_indexing():
    from langrepr.tasks.multihot_mlm import masked_states

    hidden = torch.randn(3, 7, 5)
    masked = torch.rand(3, 7) < 0.3
    assert torch.equal(masked_states(hidden, masked, int(masked.sum())), hidden[masked])


@pytest.mark.parametrize("every, reads", [(None, 1), (1, 4)])   # 4 steps, log_every_n_steps=4
def test_the_progress_bar_reads_its_metrics_at_logging_steps(monkeypatch, tmp_path, every, reads):
    """Rich's bar reads `train/loss` (a device tensor) on the host whenever it updates its metrics."""
    from langrepr.callbacks import ProgressBar

    calls = []
    original = pl.callbacks.RichProgressBar.get_metrics
    monkeypatch.setattr(pl.callbacks.RichProgressBar, "get_metrics",
                        lambda self, *a: calls.append(1) or original(self, *a))
    task, batch = causal()
    loader = torch.utils.data.DataLoader([batch] * 4, batch_size=None, collate_fn=lambda b: b)
    trainer = pl.Trainer(accelerator="cpu", max_steps=4, logger=False, enable_checkpointing=False,
                         enable_model_summary=False, log_every_n_steps=4, limit_val_batches=0,
                         callbacks=[ProgressBar(every_n_steps=every)])
    trainer.fit(task, train_dataloaders=loader)
    assert len(calls) == reads + 1            # + the bar's update when the epoch ends
