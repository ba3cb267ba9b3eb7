"""Bit Cipher LM warm start (Figure 4): cipher-initialised embedding, frozen for N steps then trained; smoke run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch

from conftest import run_cli
from langrepr.data.english.text_lm import TextLMDataModule
from langrepr.errors import UserError
from langrepr.lm_targets import next_token_targets
from langrepr.models.causal_lm import CausalTransformerLM
from langrepr.pipelines.bitcipher.cipher_embedding import (
    cached_cipher_embedding,
    cipher_embedding,
    id_statistics,
)
from langrepr.pipelines.bitcipher.cooccurrence import left_counts, shard_counts
from langrepr.pipelines.bitcipher.warm_start import CipherWarmStart, cipher_matrix
from langrepr.tasks.causal_lm import CausalLMTask, causal_unigram_ppl

ROOT = Path(__file__).resolve().parents[2]
WORDS = "the cat sat on a mat the dog ran in the park a big red cat saw the dog".split()


def write_ptb_like(folder: Path, n_lines: int = 60, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"):
        lines = [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 10)))) for _ in range(n_lines)]
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def tiny_datamodule(tmp_path: Path) -> TextLMDataModule:
    root = tmp_path / "data"
    write_ptb_like(root / "ptb")
    dm = TextLMDataModule(name="ptb", seq_len=16, data_dir=str(root), subdir="ptb", batch_size=4,
                          files={"train": "ptb.train.txt", "validation": "ptb.valid.txt", "test": "ptb.test.txt"},
                          cache_dir=str(tmp_path / "cache"))
    dm.prepare_data()
    dm.setup("fit")
    return dm


# ---------------------------------------------------------------- pieces


def test_next_token_targets_skip_padding():
    ids = torch.tensor([[5, 6, 7, 0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    targets, valid = next_token_targets(ids, mask)
    assert targets.tolist() == [[6, 7, 0]]
    assert valid.tolist() == [[True, True, False]]


def test_id_statistics_rank_ties_by_first_occurrence():
    stream = np.array([3, 2, 2, 3, 1, 1, 1])
    counts, docs, unseen = id_statistics(stream, 5, np.array([0, 4, 7]))
    assert list(counts) == ["3", "2", "1"]              # first-occurrence order, fed to the stable ranking
    assert counts == {"3": 2, "2": 2, "1": 3}
    assert docs == {"3": 1, "2": 1, "1": 1}             # documents [3 2 2 3] and [1 1 1]
    assert unseen == ["0", "4"]


def test_chunked_counts_equal_one_pass():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 30, size=500)
    offsets = np.r_[0, np.sort(rng.choice(np.arange(1, 500), 20, replace=False)), 500]
    for mode, cat_mode in (("sum", "left_right"), ("cat", "per_offset")):
        whole = shard_counts(ids, offsets, 31, 4, mode, cat_mode, max_keys=10**9)
        chunked = shard_counts(ids, offsets, 31, 4, mode, cat_mode, max_keys=100)
        assert all(abs(a - b).sum() == 0 for a, b in zip(whole, chunked))


def test_dense_block_and_sorted_counts_agree_with_a_naive_count():
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 12, size=300)
    doc_ids = np.repeat(np.arange(10), 30)
    naive = np.zeros((12, 12))
    for i in range(300):
        for delta in range(1, 4):
            if i - delta >= 0 and doc_ids[i] == doc_ids[i - delta]:
                naive[ids[i], ids[i - delta]] += 1
    for block in (0, 5, 12, 1024):                      # all sorted, mixed, all dense, block > vocabulary
        np.testing.assert_array_equal(left_counts(ids, doc_ids, 12, range(1, 4), dense_block=block).toarray(), naive)


def test_cipher_embedding_shape_scale_and_information():
    rng = np.random.default_rng(0)
    stream = rng.integers(2, 40, size=3000)             # ids 0-1 never occur (padding / mask)
    matrix = cipher_embedding(stream, 40, bits=16, radius=3, doc_tokens=100, scale_std=0.02)
    assert matrix.shape == (40, 16)
    assert math.isclose(float(matrix.std()), 0.02, rel_tol=1e-6)
    assert len({tuple(np.round(r, 8)) for r in matrix[2:]}) == 38    # every seen id gets its own vector
    plain = cipher_embedding(stream, 40, bits=16, radius=None, whiten="none", centre=False, l2=False, scale_std=None)
    np.testing.assert_allclose(plain.sum(axis=1), 1.0)                # the noised cipher alone: rows sum to 1


def test_cipher_embedding_cache_returns_the_same_matrix(tmp_path):
    stream = np.random.default_rng(1).integers(0, 20, size=500)
    first = cached_cipher_embedding(tmp_path, stream, 20, bits=8, radius=2, doc_tokens=50)
    assert len(list(tmp_path.glob("cipher-init-*.npy"))) == 1
    np.testing.assert_array_equal(first, cached_cipher_embedding(tmp_path, stream, 20, bits=8, radius=2, doc_tokens=50))


def test_bad_warm_start_inputs_are_one_line_errors():
    with pytest.raises(UserError, match="no tokens"):
        cipher_embedding(np.zeros(0, dtype=int), 10, bits=8)
    with pytest.raises(UserError, match="outside"):
        cipher_embedding(np.array([1, 12]), 10, bits=8)
    net = CausalTransformerLM(vocab_size=10, max_len=8, hidden_size=8, num_layers=1, num_heads=2)
    with pytest.raises(UserError, match="bits = model.net.hidden_size"):
        cipher_matrix({"bits": 16, "radius": 2}, np.arange(10), 10, width=8)
    with pytest.raises(UserError, match="freeze_embedding_steps"):
        CausalLMTask(net, optimizer=partial(torch.optim.AdamW), freeze_embedding_steps=-1)


# ---------------------------------------------------------------- the warm start in a real Lightning run


class EmbeddingTrace(pl.Callback):
    """The input embedding and one attention weight after every optimiser step."""

    def __init__(self) -> None:
        self.embedding: list[torch.Tensor] = []
        self.attention: list[torch.Tensor] = []

    def on_train_start(self, trainer, task) -> None:
        self.embedding.append(task.net.input_embedding.weight.detach().clone())
        self.attention.append(task.net.model.transformer.h[0].attn.c_attn.weight.detach().clone())

    def on_train_batch_end(self, trainer, task, *args) -> None:
        self.embedding.append(task.net.input_embedding.weight.detach().clone())
        self.attention.append(task.net.model.transformer.h[0].attn.c_attn.weight.detach().clone())


def test_embedding_is_cipher_initialised_frozen_for_n_steps_then_trains(tmp_path):
    pl.seed_everything(0)
    dm = tiny_datamodule(tmp_path)
    vocab = dm.net_kwargs["vocab_size"]
    net = CausalTransformerLM(**dm.net_kwargs, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
                              dropout=0.0)
    spec = {"bits": 8, "radius": 2, "doc_tokens": 64}
    task = CausalLMTask(net, optimizer=partial(torch.optim.AdamW, lr=1e-2, weight_decay=0.01), warm_start=spec,
                        freeze_embedding_steps=3, **dm.task_kwargs)
    trace = EmbeddingTrace()
    trainer = pl.Trainer(max_steps=6, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         limit_val_batches=0, callbacks=[CipherWarmStart(spec), trace])
    trainer.fit(task, datamodule=dm)
    ids, mask = dm.train_dataloader().dataset.tensors
    expected = cipher_embedding(ids[mask.bool()].numpy(), vocab, **spec)
    np.testing.assert_allclose(trace.embedding[0].numpy(), expected, rtol=1e-5, atol=1e-7)   # cipher init
    for step in (1, 2, 3):                                                 # frozen: no update, no weight decay
        assert torch.equal(trace.embedding[step], trace.embedding[0]), f"embedding moved at step {step}"
        assert not torch.equal(trace.attention[step], trace.attention[step - 1]), "the rest of the LM must train"
    assert not torch.equal(trace.embedding[4], trace.embedding[3])          # thawed after 3 steps
    assert not torch.equal(trace.embedding[6], trace.embedding[4])


def test_cold_start_trains_the_embedding_from_step_one(tmp_path):
    dm = tiny_datamodule(tmp_path)
    net = CausalTransformerLM(**dm.net_kwargs, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16)
    task = CausalLMTask(net, optimizer=partial(torch.optim.AdamW, lr=1e-2))
    trace = EmbeddingTrace()
    pl.Trainer(max_steps=1, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
               enable_model_summary=False, limit_val_batches=0, callbacks=[trace]).fit(task, datamodule=dm)
    assert not torch.equal(trace.embedding[1], trace.embedding[0])


class StartPerplexity(pl.Callback):
    """The validation perplexity of the net as training starts, computed here by hand (callbacks run before the
    task's own on_train_start)."""

    def __init__(self, dm: TextLMDataModule) -> None:
        self.dm, self.ppl = dm, None

    @torch.no_grad()
    def on_train_start(self, trainer, task) -> None:
        net = task.net.eval()
        total, n = 0.0, 0
        for batch in self.dm.val_dataloader():
            logits = net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            targets, valid = next_token_targets(batch["input_ids"], batch["attention_mask"])
            total += float(torch.nn.functional.cross_entropy(logits[:, :-1][valid].float(), targets[valid],
                                                             reduction="sum"))
            n += int(valid.sum())
        net.train()
        self.ppl = math.exp(total / n)


def csv_rows(folder: Path) -> list[dict]:
    import csv

    (path,) = folder.rglob("metrics.csv")
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("warm", [False, True])
def test_validate_at_start_scores_the_untrained_net_at_step_0(tmp_path, warm):
    """Figure 4's "begins with a superior start" is read before any optimiser step: val/ppl at step 0 in the CSV
    log and val/ppl_step0 in the metrics equal the perplexity of the net as it starts (cold, or cipher warm)."""
    from pytorch_lightning.loggers import CSVLogger

    pl.seed_everything(0)
    dm = tiny_datamodule(tmp_path)
    net = CausalTransformerLM(**dm.net_kwargs, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
                              dropout=0.1)
    spec = {"bits": 8, "radius": 2, "doc_tokens": 64} if warm else None
    task = CausalLMTask(net, optimizer=partial(torch.optim.AdamW, lr=1e-2), warm_start=spec,
                        freeze_embedding_steps=2 if warm else 0, validate_at_start=True, **dm.task_kwargs)
    start = StartPerplexity(dm)
    trainer = pl.Trainer(max_steps=4, accelerator="cpu", logger=CSVLogger(tmp_path / "logs"),
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         val_check_interval=2, callbacks=[start])
    trainer.fit(task, datamodule=dm)
    assert start.ppl is not None and start.ppl > 1.0
    assert task.val_ppl_step0 == pytest.approx(start.ppl, rel=1e-5)
    assert float(trainer.callback_metrics["val/ppl_step0"]) == pytest.approx(start.ppl, rel=1e-5)
    curve = {int(r["step"]): float(r["val/ppl"]) for r in csv_rows(tmp_path / "logs") if r.get("val/ppl")}
    assert min(curve) == 0 and curve[0] == pytest.approx(start.ppl, rel=1e-5)
    assert len(curve) == 3                                   # step 0, then the evaluations after steps 2 and 4
    assert curve[max(curve)] != pytest.approx(start.ppl, rel=1e-3)   # the later points are the trained net's


def test_the_step_0_pass_leaves_the_training_as_it_was(tmp_path):
    """The pass draws no number the training would have drawn: with or without it, the same weights after 4 steps
    (shuffled batches, dropout on)."""
    dm = tiny_datamodule(tmp_path)
    weights = []
    for at_start in (False, True):
        pl.seed_everything(3)
        net = CausalTransformerLM(**dm.net_kwargs, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
                                  dropout=0.1)
        task = CausalLMTask(net, optimizer=partial(torch.optim.AdamW, lr=1e-2), validate_at_start=at_start)
        pl.Trainer(max_steps=4, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                   enable_model_summary=False, limit_val_batches=0, num_sanity_val_steps=0).fit(task, datamodule=dm)
        weights.append({k: v.clone() for k, v in task.net.state_dict().items()})
    assert task.val_ppl_step0 is not None
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_without_validate_at_start_there_is_no_step_0_point(tmp_path):
    from pytorch_lightning.loggers import CSVLogger

    dm = tiny_datamodule(tmp_path)
    net = CausalTransformerLM(**dm.net_kwargs, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16)
    task = CausalLMTask(net, optimizer=partial(torch.optim.AdamW, lr=1e-2))
    trainer = pl.Trainer(max_steps=2, accelerator="cpu", logger=CSVLogger(tmp_path / "logs"),
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         val_check_interval=2, num_sanity_val_steps=0)
    trainer.fit(task, datamodule=dm)
    assert task.val_ppl_step0 is None and "val/ppl_step0" not in trainer.callback_metrics
    assert [int(r["step"]) for r in csv_rows(tmp_path / "logs") if r.get("val/ppl")] != [0]


def test_unigram_reference_matches_a_hand_count(tmp_path):
    dm = tiny_datamodule(tmp_path)
    metrics = causal_unigram_ppl(dm, str(tmp_path), smoothing=1.0)
    ids, mask = dm.train_dataloader().dataset.tensors
    counts = torch.bincount(ids[mask.bool()], minlength=dm.net_kwargs["vocab_size"]).double() + 1.0
    log_p = (counts / counts.sum()).log()
    nll, n = 0.0, 0
    for batch in dm.val_dataloader():
        targets, valid = next_token_targets(batch["input_ids"], batch["attention_mask"])
        nll -= float(log_p[targets[valid]].sum())
        n += int(valid.sum())
    assert math.isclose(metrics["val/ppl"], math.exp(nll / n), rel_tol=1e-9)
    assert metrics["test/test/ppl"] > 1.0


# ---------------------------------------------------------------- the make target's sweep on tiny text


def test_figure4_sweep_runs_renders_and_plots(tmp_path):
    data = tmp_path / "data"
    write_ptb_like(data / "ptb", n_lines=80)
    out = tmp_path / "outputs"
    env = {"LANGREPR_DATA_DIR": str(data)}
    run = run_cli("langrepr.train", "-m", "experiment=bitcipher_figure4", "profile=quick", "dataset=ptb_causal",
                  "++hydra.sweeper.params.seed=1", "trainer.max_steps=6", "trainer.val_check_interval=3",
                  "bitcipher_lm.freeze_embedding_steps=3",
                  f"paths.output_root={out}", f"paths.cache_dir={tmp_path / 'cache'}", env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    render = run_cli("langrepr.tables", "bitcipher_figure4", "--profile", "quick", "--outputs", str(out), env=env)
    assert render.returncode == 0, render.stderr[-3000:]
    table = json.loads((out / "tables" / "bitcipher_figure4.quick.json").read_text())
    cells = [c for row in table["rows"] for c in row["cells"].values()]
    assert all(c["ours"] is not None for c in cells), "a cell of the smoke sweep did not run"
    plot = subprocess.run([sys.executable, str(ROOT / "scripts" / "bitcipher_figure4.py"), "--profile", "quick",
                           "--outputs", str(out)], capture_output=True, text=True, timeout=300)
    assert plot.returncode == 0, plot.stderr[-3000:]
    assert (out / "figures" / "bitcipher_figure4.quick.png").stat().st_size > 0
