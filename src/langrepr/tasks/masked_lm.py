"""Masked language modelling task (TensorCoder §5.1, Table 1; BERT-style masking).

15% of the real tokens of each sequence are chosen; of those, 80% become [MASK], 10% a random
token and 10% stay unchanged; the loss is cross-entropy on the chosen positions only. Table 1
reports validation NLL ("valid Loss"): ``val/nll`` is the token-weighted mean over the whole
validation set, ``val/nll_best`` its minimum over epochs. Validation and test masks are drawn from
a generator seeded per batch, so every epoch (and every model) is scored on the same masks.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import MeanMetric, MinMetric

from langrepr.lm_targets import EVAL_MASK_SEED, IGNORE_INDEX, eval_mask_generator, mask_tokens
from langrepr.tasks.base import NLLTask

SYNC_FREE_DEVICES = ("cuda",)  # where `MaskedLMTask.sync_free` scores every position (a host read waits there)


class MaskedLMTask(NLLTask):
    """Encoder-only masked LM over a net like `langrepr.models.tensorcoder.MaskedLMModel`.

    The net maps (input_ids, attention_mask, select) to the logits of the selected positions (K, V).

    Args:
        mask_token_id / num_special_tokens: come from the datamodule's ``task_kwargs`` (its vocabulary).
        eval_mask_seed: seed of the fixed validation/test masks.

    `sync_free` (set by `langrepr.train` from the top-level `sync_free` switch): on a CUDA batch, training scores
    every position's logits and lets the loss ignore the unchosen ones, instead of projecting only the chosen
    positions: how many were chosen is a device value, and gathering them would make the host wait for the GPU
    every step. Same loss (float rounding apart), more output-layer work; on a CPU nothing waits, so the cheaper
    gather stays.
    """

    sync_free = True

    tracked = ("val_nll_best",)   # best-so-far trackers, carried through checkpoints (tasks/trackers.py)

    def __init__(
        self,
        net: nn.Module,
        optimizer: Callable,
        scheduler: Callable | None = None,
        mask_token_id: int = 1,
        num_special_tokens: int = 2,
        mask_prob: float = 0.15,
        eval_mask_seed: int = EVAL_MASK_SEED,
    ) -> None:
        super().__init__(net, optimizer, scheduler)
        if not 0.0 < mask_prob < 1.0:
            raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob}")
        self.mask_token_id, self.num_special_tokens = mask_token_id, num_special_tokens
        self.mask_prob, self.eval_mask_seed = mask_prob, eval_mask_seed
        self.val_nll, self.val_nll_best = MeanMetric(), MinMetric()

    def _loss(self, batch: dict, generator: torch.Generator | None, every_position: bool = False
              ) -> tuple[Tensor, Tensor]:
        """(mean NLL over the chosen positions, their number as a device tensor)."""
        ids, labels = mask_tokens(batch["input_ids"], batch["attention_mask"], self.mask_token_id,
                                  self.net.vocab_size, self.num_special_tokens, self.mask_prob, generator)
        chosen = labels != IGNORE_INDEX
        if every_position:
            logits = self.net(input_ids=ids, attention_mask=batch["attention_mask"])  # (B, N, V)
            return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX), \
                chosen.sum()
        logits = self.net(input_ids=ids, attention_mask=batch["attention_mask"], select=chosen)  # (K, V)
        return F.cross_entropy(logits.float(), labels[chosen]), chosen.sum()

    def _eval_generator(self, batch_idx: int, dataloader_idx: int = 0) -> torch.Generator:
        return eval_mask_generator(self.eval_mask_seed, batch_idx, dataloader_idx)

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        loss, _ = self._loss(batch, None, every_position=self.sync_free and batch["input_ids"].device.type in SYNC_FREE_DEVICES)
        # a per-step value: batch_size only weights epoch means, so the sequence count (a shape, no sync) does
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["input_ids"].shape[0])
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, n = self._loss(batch, self._eval_generator(batch_idx))
        self.val_nll.update(loss, weight=n)

    def on_validation_epoch_end(self) -> None:
        nll = self.log_val_nll()
        if not self.trainer.sanity_checking:
            self.val_nll_best.update(nll)
            self.log("val/nll_best", self.val_nll_best.compute())

    def test_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        loss, n = self._loss(batch, self._eval_generator(batch_idx, dataloader_idx + 1))
        self.test_nll[dataloader_idx].update(loss, weight=n)
