"""Causal (next-word) language modelling with an optional cipher warm start (Bit Cipher §5, Figure 4).

Loss: cross-entropy of token t+1 given tokens ≤ t inside each block, over real (unpadded) positions.
``val/ppl`` = exp(token-weighted mean NLL over the validation split), logged at every validation so the CSV log
holds the perplexity curve Figure 4 plots; ``val/ppl_best`` is its minimum, ``val/ppl_first`` its value at the first evaluation, ``test/<split>/ppl`` the
test score. With ``validate_at_start`` the validation split is also scored once before the first optimiser step
(``val/ppl`` and ``val/nll`` at step 0 in the CSV log, ``val/ppl_step0`` in metrics): the start of the curve, where
"warm-start models begin with a superior start" is read. Lightning's sanity check is not it: it scores only a
few batches and logs nothing.

Warm start (``warm_start`` not null): before training, the net's input embedding is overwritten by cipher
vectors of the datamodule's training stream (bits = the model width; built by the callback
`langrepr.pipelines.bitcipher.warm_start.CipherWarmStart`, which `langrepr.train` adds for such a task and which
hands them to `load_warm_start`) and kept frozen for ``freeze_embedding_steps`` optimiser steps, then trained like every other
weight (the paper's freeze-then-thaw). Frozen = its gradient is dropped before each optimiser step, so AdamW
neither moves nor decays it; the optimiser state starts when it thaws. A cold start (``warm_start: null``)
keeps GPT-2's random init; ``freeze_embedding_steps`` applies to it too (0 in Figure 4's cold rows).
`causal_unigram_ppl` is the reference row: the perplexity of the training unigram on the same targets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import MeanMetric, MinMetric

from langrepr.errors import UserError
from langrepr.lm_targets import next_token_targets, training_stream
from langrepr.tasks.base import NLLTask


class CausalLMTask(NLLTask):
    """Next-word LM over a net like `langrepr.models.causal_lm.CausalTransformerLM`.

    Args:
        warm_start: None (cold start) or the `cipher_embedding` options (bits, radius, doc_tokens, beta, log,
            whiten, centre, l2, scale_std) plus an optional ``cache_dir``.
        freeze_embedding_steps: optimiser steps during which the input embedding is not updated.
        validate_at_start: score the whole validation split once before the first optimiser step (step 0).
        datamodule_kwargs: the datamodule's ``task_kwargs`` (mask id of the masked-LM datamodules), unused.
    """

    # best-so-far trackers and start values, kept in checkpoints (tasks/trackers.py)
    tracked = ("val_ppl_best", "val_ppl_first", "val_ppl_step0")

    def __init__(self, net: nn.Module, optimizer: Callable, scheduler: Callable | None = None,
                 warm_start: dict | None = None, freeze_embedding_steps: int = 0, validate_at_start: bool = False,
                 **datamodule_kwargs: Any) -> None:
        super().__init__(net, optimizer, scheduler)
        if freeze_embedding_steps < 0:
            raise UserError(f"freeze_embedding_steps={freeze_embedding_steps}: use 0 (never frozen) or more steps")
        self.warm_start = dict(warm_start) if warm_start else None
        self.freeze_embedding_steps = int(freeze_embedding_steps)
        self.validate_at_start = bool(validate_at_start)
        self.val_nll, self.val_ppl_best = MeanMetric(), MinMetric()
        self._warm_started = False
        self.val_ppl_first: float | None = None        # the first evaluation (after val_check_interval steps)
        self.val_ppl_step0: float | None = None        # before any optimiser step (validate_at_start)

    # ---------------------------------------------------------------- warm start
    def load_warm_start(self, matrix: np.ndarray) -> None:
        """Take the warm-start vectors (`langrepr.pipelines.bitcipher.warm_start.CipherWarmStart` builds them)."""
        self.net.load_input_embedding(matrix)
        self._warm_started = True

    def embedding_frozen(self) -> bool:
        return self.global_step < self.freeze_embedding_steps

    def on_after_backward(self) -> None:
        if self.embedding_frozen():
            self.net.input_embedding.weight.grad = None     # AdamW skips a parameter without a gradient

    # ---------------------------------------------------------------- steps
    def _nll(self, batch: dict) -> tuple[Tensor, Tensor]:
        """(mean NLL over the real targets, their number), both device tensors: nothing is read on the host.

        A batch without targets gives 0 (with zero gradients) and weight 0, so it adds nothing to a mean.
        """
        logits = self.net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        targets, valid = next_token_targets(batch["input_ids"], batch["attention_mask"])
        n = valid.sum()
        summed = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets.masked_fill(~valid, -100).flatten(),
                                 ignore_index=-100, reduction="sum")
        return summed / n.clamp(min=1), n

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        loss, _ = self._nll(batch)
        size = batch["input_ids"].shape[0]   # per-step values: batch_size weights only epoch means (a shape: no sync)
        self.log("train/loss", loss, prog_bar=True, batch_size=size)
        self.log("train/embedding_frozen", float(self.embedding_frozen()), batch_size=size)
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, n = self._nll(batch)
        self.val_nll.update(loss, weight=n)

    def on_validation_epoch_end(self) -> None:
        nll = self.log_val_nll()
        if not self.trainer.sanity_checking:
            if self.val_ppl_first is None:
                self.val_ppl_first = float(nll.exp())
            self.val_ppl_best.update(nll.exp())
            start = {} if self.val_ppl_step0 is None else {"val/ppl_step0": self.val_ppl_step0}
            self.log_dict({"val/ppl_best": self.val_ppl_best.compute(), "val/ppl_first": self.val_ppl_first, **start})

    def on_train_start(self) -> None:
        """`validate_at_start`: score the validation split on the weights as they start (warm start applied).

        Only on a fresh start (a resumed run keeps the value its checkpoint carried). The pass is the validation
        step's own NLL, in eval mode and under the trainer's validation precision context, so it is the number a
        validation at step 0 would give; it goes to every logger at step 0, beside the later evaluations. It runs
        under a forked RNG: iterating a data loader draws from the global generator, and the training that follows
        must be the one a run without this pass trains (same batches, same dropout).
        """
        super().on_train_start()
        if not self.validate_at_start or self.global_step > 0 or self.val_ppl_step0 is not None:
            return
        loader = self.trainer.datamodule.val_dataloader()
        loader = loader[0] if isinstance(loader, list | tuple) else loader
        nll_mean = MeanMetric().to(self.device)
        was_training = self.training
        self.eval()
        cuda = [self.device.index or 0] if self.device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=cuda), torch.no_grad(), self.trainer.precision_plugin.val_step_context():
                for batch in loader:
                    batch = self.transfer_batch_to_device(batch, self.device, 0)
                    loss, n = self._nll(batch)
                    nll_mean.update(loss, weight=n)
        finally:
            self.train(was_training)
        nll = nll_mean.compute()
        self.val_ppl_step0 = float(nll.exp())
        for logger in self.loggers:
            logger.log_metrics({"val/nll": float(nll), "val/ppl": self.val_ppl_step0}, step=0)

    def test_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        loss, n = self._nll(batch)
        self.test_nll[dataloader_idx].update(loss, weight=n)


def causal_unigram_ppl(datamodule: Any, output_dir: str, smoothing: float = 1.0) -> dict[str, float]:
    """Reference row: perplexity of the add-k training unigram on exactly the targets the LM is scored on."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    vocab_size = int(datamodule.net_kwargs["vocab_size"])
    counts = torch.bincount(torch.as_tensor(training_stream(datamodule)), minlength=vocab_size).double()
    log_p = ((counts + smoothing) / (counts + smoothing).sum()).log()

    def nll(loader: Any) -> float:
        total, n = 0.0, 0
        for batch in loader:
            targets, valid = next_token_targets(batch["input_ids"], batch["attention_mask"])
            total -= float(log_p[targets[valid]].sum())
            n += int(valid.sum())
        if n == 0:
            raise UserError(f"{datamodule.name}: an evaluation split has no targets to score")
        return total / n

    val = nll(datamodule.val_dataloader())
    metrics = {"val/nll": val, "val/ppl": math.exp(val), "val/ppl_best": math.exp(val), "val/ppl_first": math.exp(val),
               "val/ppl_step0": math.exp(val)}
    for name, loader in zip(getattr(datamodule, "test_splits", ["test"]), datamodule.test_dataloader()):
        test = nll(loader)
        metrics.update({f"test/{name}/nll": test, f"test/{name}/ppl": math.exp(test)})
    return metrics
