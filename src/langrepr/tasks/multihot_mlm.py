"""Multi-hot masked-LM pretraining (multi-hot LM §2.2): a train cell like any other (`langrepr.train`).

`MultiHotMLMTask` trains a `MultiHotLM` on the masked positions with one of the three losses (sce | bce | mhsce,
`langrepr.models.multihot_losses`), plus next-sentence prediction on [CLS] when `nsp` (the paper pretrains with
it). Validation and test score the held-out corpus tail on fixed masks (`langrepr.data.korean.pretraining`) by
the held-out target cross-entropy H(y/n, p) of the model beside the training tokens' unigram distribution on the
same positions: threshold-free and comparable across the three losses. Keys (Table 2 reads them):

- `val/mlm_ce`, `val/unigram_ce`, `val/masked`: every masked position;
- `..._groups` / `..._single`: positions whose answer is a multi-hot group of several ids / a single id. A kind
  with no position (no group under the BPE base list) is not logged: undefined, never NaN (NaN = diverged).
- `val/mlm_top10`, `val/unigram_top10` (and `_groups` / `_single`): the share (%) of a position's distinct
  answers ranked among its 10 highest logits (of min(answers, 10)), averaged over positions. It reads only the
  order of the logits, so it scores the sigmoids BCE trains as fairly as the softmax SCE and multi-hot SCE train
  (the CE above passes BCE's logits through a softmax it never learnt); the unigram row ranks by frequency.

Both passes log under `val/` (there is one held-out part); the cell's record keeps the test pass, run on the
weights named by `test_ckpt` (the multi-hot experiments set `last`: the model the fine-tuning cells start from).
"""

from __future__ import annotations

from collections.abc import Callable

import pytorch_lightning as pl
import torch
from torch import nn

from langrepr.models.multihot_heads import NSPHead
from langrepr.models.multihot_lm import MultiHotLM
from langrepr.models.multihot_losses import LOSSES, answer_log_probs, mlm_loss, target_cross_entropy
from langrepr.tasks.optim import configure

KINDS = ("", "_groups", "_single")   # all masked positions, multi-hot groups, single tokens
TOP_K = 10                           # the rank score's cut-off (val/mlm_top10)


def top_k_recall(scores: torch.Tensor, target_ids: torch.Tensor, target_mask: torch.Tensor, k: int = TOP_K
                 ) -> torch.Tensor:
    """Per position (M,): % of its distinct answers among the k highest `scores (M, V)`, of min(distinct, k).

    Any monotone reading of the logits (softmax, sigmoid) gives the same value: the score of every loss.
    """
    top = scores.topk(min(k, scores.shape[1]), dim=1).indices                           # (M, k)
    hit = (target_ids[:, :, None] == top[:, None, :]).any(-1) & target_mask               # (M, G)
    same = (target_ids[:, :, None] == target_ids[:, None, :]) & target_mask[:, None, :]
    first = target_mask & ~torch.tril(same, diagonal=-1).any(-1)                           # first occurrence
    distinct = first.sum(1)
    return 100.0 * (hit & first).sum(1).double() / distinct.clamp(max=k).clamp(min=1).double()


def masked_states(hidden: torch.Tensor, masked: torch.Tensor, n: int) -> torch.Tensor:
    """`hidden[masked]` (n, H) for a mask with n True entries, without reading the mask on the host.

    Boolean indexing must learn the count from the device first (a sync); a stable sort puts the masked
    positions first, in the same row-major order, and n comes from the batch's target shape.
    """
    order = torch.argsort((~masked).flatten().to(torch.uint8), stable=True)[:n]
    return hidden.flatten(0, 1)[order]


class MultiHotMLMTask(pl.LightningModule):
    """MLM (+ NSP) on a multi-hot LM; the loss and its eq.-6 reading come from config.

    Args:
        net: the `MultiHotLM` encoder with its MLM output layer.
        optimizer / scheduler: Hydra partials (`optimizer:` / `scheduler:` of the config, `tasks.optim.configure`).
        unigram_log_probs: (V,) log p of the training tokens, from the datamodule's `task_kwargs`.
        loss: sce | bce | mhsce; loss_options: eq6 / label_weight of multi-hot SCE (ignored by the others).
        nsp: add the next-sentence head on [CLS] (a pretraining-only layer: the encoder is the same without it).
    """

    def __init__(self, net: MultiHotLM, optimizer: Callable, scheduler: Callable | None = None,
                 unigram_log_probs: torch.Tensor | None = None, loss: str = "mhsce",
                 loss_options: dict | None = None, nsp: bool = False):
        super().__init__()
        if loss not in LOSSES:
            raise ValueError(f"mlm.loss={loss!r}: choose one of {', '.join(LOSSES)}")
        self.net, self.loss_name, self.loss_options = net, loss, dict(loss_options or {})
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.nsp_head = NSPHead(net.hidden_size) if nsp else None
        unigram = unigram_log_probs if unigram_log_probs is not None else torch.zeros(net.vocab_size)
        self.register_buffer("unigram", unigram.float(), persistent=False)   # rebuilt from the data every run
        self.test_split_names: list[str] = ["held_out"]
        self._chunks: dict[int, list[float]] = {}   # held-out chunk index -> its sums (SUMS)

    def encode(self, batch: dict) -> torch.Tensor:
        return self.net(batch["ids"], batch["group_mask"], batch["pos"], batch["attention_mask"],
                        batch.get("token_type_ids"))

    def training_step(self, batch: dict, _: int) -> torch.Tensor:
        hidden = self.encode(batch)
        options = self.loss_options if self.loss_name == "mhsce" else {}
        n = batch["target_ids"].shape[0]          # masked positions, known from the shape: no host-device sync
        loss = mlm_loss(self.loss_name, self.net.mlm_logits(masked_states(hidden, batch["masked"], n)),
                        batch["target_ids"], batch["target_mask"], **options)
        self.log("train/mlm_loss", loss, batch_size=n)
        if self.nsp_head is not None:
            nsp = nn.functional.cross_entropy(self.nsp_head(hidden).float(), batch["nsp_labels"])
            self.log("train/nsp_loss", nsp, batch_size=len(batch["nsp_labels"]))
            loss = loss + nsp
        self.log("train/loss", loss, prog_bar=True, batch_size=n)
        return loss

    # ------------------------------------------------------------ held-out target cross-entropy
    def _accumulate(self, batch: dict) -> None:
        logits = self.net.mlm_logits(self.encode(batch)[batch["masked"]])
        ce = target_cross_entropy(answer_log_probs(logits.float(), batch["target_ids"]), batch["target_mask"])
        ref = target_cross_entropy(self.unigram[batch["target_ids"]], batch["target_mask"])
        top = top_k_recall(logits.float(), batch["target_ids"], batch["target_mask"])
        ref_top = top_k_recall(self.unigram.expand(len(logits), -1), batch["target_ids"], batch["target_mask"])
        group = batch["target_mask"].sum(1) > 1
        sums = []
        for select in (torch.ones_like(group), group, ~group):
            sums += [ce[select].double().sum(), ref[select].double().sum(), select.sum().double(),
                     top[select].sum(), ref_top[select].sum()]
        self._chunks[int(batch.get("chunk", len(self._chunks)))] = torch.stack(sums).tolist()

    def _log_held_out(self) -> None:
        chunks, self._chunks = self._chunks, {}
        if self.trainer.world_size > 1 and torch.distributed.is_initialized():
            # DDP: every rank scored its share of the chunks (the sampler repeats some to even the shares)
            parts: list = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(parts, chunks)
            chunks = {i: sums for part in parts for i, sums in part.items()}
        names = [f"{s}{k}" for k in KINDS for s in ("ce", "ref", "n", "top", "ref_top")]
        total = {name: sum(sums[j] for sums in chunks.values()) for j, name in enumerate(names)}
        out = {}
        for kind in KINDS:
            n = total[f"n{kind}"]
            out[f"val/masked{kind}"] = n
            if n:   # no position of this kind (no multi-hot group in a BPE base list): undefined, not logged
                out[f"val/mlm_ce{kind}"] = total[f"ce{kind}"] / n
                out[f"val/unigram_ce{kind}"] = total[f"ref{kind}"] / n
                out[f"val/mlm_top{TOP_K}{kind}"] = total[f"top{kind}"] / n
                out[f"val/unigram_top{TOP_K}{kind}"] = total[f"ref_top{kind}"] / n
        self.log_dict(out, sync_dist=False, rank_zero_only=False)

    def validation_step(self, batch: dict, _: int) -> None:
        self._accumulate(batch)

    def on_validation_epoch_end(self) -> None:
        self._log_held_out()

    def test_step(self, batch: dict, _: int, dataloader_idx: int = 0) -> None:
        self._accumulate(batch)

    def on_test_epoch_end(self) -> None:
        self._log_held_out()

    def configure_optimizers(self) -> dict:
        return configure(self, self.optimizer_factory, self.scheduler_factory,
                         self.trainer.estimated_stepping_batches)
