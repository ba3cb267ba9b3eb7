"""A network's training step rebuilt from the config (`Workload`) and a gradient stage of a cell (`Stage`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# ---------------------------------------------------------------- a network step, rebuilt from the config

@dataclass
class Workload:
    """One network's training step: the `_target_` node, its runtime kwargs and the input shapes (random ids)."""

    kind: str            # hf_classifier | text_classifier | masked_lm | seq2seq | causal_lm | multihot_mlm | multihot_encoder
    net: Any
    net_kwargs: dict
    shape: dict

    def build(self):
        from langrepr.build import build_net

        return build_net(self.net, **self.net_kwargs)

    def key(self) -> str:
        from omegaconf import OmegaConf

        node = OmegaConf.to_container(self.net, resolve=True) if OmegaConf.is_config(self.net) else self.net
        return json.dumps([self.kind, node, self.net_kwargs, self.shape], sort_keys=True, default=str)

    def inputs(self, batch: int, device: Any, generator: Any) -> dict:
        """Random inputs of the real shapes and vocabulary (no data files)."""
        import torch

        s, rand = self.shape, lambda *size: torch.randint(5, max(6, self.shape.get("vocab", 6)), size, generator=generator)
        if self.kind == "hf_classifier":
            from langrepr.benchmarking import random_batch

            out = random_batch(s, batch, s["labels"], generator)
        elif self.kind == "grid_classifier":   # the grid's input x encoder: ids in the input's shape
            ids = rand(batch, *s["ids"])
            if s.get("pos_tags"):                 # multi-hot groups: column 0 is the POS tag id
                ids[..., 0] = torch.randint(0, s["pos_tags"], ids.shape[:-1], generator=generator)
            labels = ((torch.rand(batch, s["labels"], generator=generator) < 0.05).float() if s["multilabel"]
                      else torch.randint(0, s["labels"], (batch,), generator=generator))
            out = {"input_ids": ids, "attention_mask": torch.ones(batch, s["ids"][0], dtype=torch.long),
                   "labels": labels}
        elif self.kind == "text_classifier":
            ids = rand(batch, s["length"])
            labels = ((torch.rand(batch, s["labels"], generator=generator) < 0.05).float() if s["multilabel"]
                      else torch.randint(0, s["labels"], (batch,), generator=generator))
            out = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
        elif self.kind == "masked_lm":
            ids = rand(batch, s["length"])
            select = torch.rand(batch, s["length"], generator=generator) < s.get("mask_prob", 0.15)
            select[:, 0] = True
            out = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "select": select,
                   "labels": ids[select]}
        elif self.kind == "seq2seq":
            src, tgt = rand(batch, s["source"]), rand(batch, s["target"])
            out = {"input_ids": src, "attention_mask": torch.ones_like(src), "decoder_input_ids": tgt,
                   "decoder_attention_mask": torch.ones_like(tgt), "labels": rand(batch, s["target"])}
        elif self.kind == "causal_lm":
            ids = rand(batch, s["length"])
            out = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        else:   # multihot_mlm | multihot_encoder: every group slot filled (the widest batch a list allows)
            ids = rand(batch, s["length"], s["group"])
            out = {"ids": ids, "group_mask": torch.ones_like(ids, dtype=torch.bool),
                   "pos": torch.randint(0, s["pos_tags"], (batch, s["length"]), generator=generator),
                   "attention_mask": torch.ones(batch, s["length"], dtype=torch.long)}
            if self.kind == "multihot_mlm":
                masked = torch.rand(batch, s["length"], generator=generator) < 0.15
                masked[:, 1] = True
                out.update(masked=masked, target_ids=ids[masked], target_mask=out["group_mask"][masked])
        return {k: v.to(device) for k, v in out.items()}

    def loss(self, net: Any, x: dict):
        """The task's loss on the network's output (a surrogate where only a one-layer head is missing)."""
        import torch.nn.functional as F

        if self.kind == "hf_classifier":
            return F.binary_cross_entropy_with_logits(net(input_ids=x["input_ids"], attention_mask=x["attention_mask"])
                                                      .float(), x["labels"])
        if self.kind in ("text_classifier", "grid_classifier"):
            logits = net(x["input_ids"], x["attention_mask"]).float()
            loss = (F.binary_cross_entropy_with_logits(logits, x["labels"]) if self.shape["multilabel"]
                    else F.cross_entropy(logits, x["labels"]))
            if hasattr(net, "label_logits") and getattr(net, "label_penalty", 0):   # LEAM eq. (9)
                import torch

                target = torch.arange(self.shape["labels"], device=logits.device)
                loss = loss + net.label_penalty * F.cross_entropy(net.label_logits().float(), target)
            return loss
        if self.kind == "masked_lm":
            return F.cross_entropy(net(x["input_ids"], x["attention_mask"], x["select"]).float(), x["labels"])
        if self.kind == "seq2seq":
            logits = net(x["input_ids"], x["attention_mask"], x["decoder_input_ids"], x["decoder_attention_mask"])
            return F.cross_entropy(logits.flatten(0, 1).float(), x["labels"].flatten(), label_smoothing=0.1)
        if self.kind == "causal_lm":
            logits = net(x["input_ids"], x["attention_mask"])
            return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), x["input_ids"][:, 1:].flatten())
        hidden = net(x["ids"], x["group_mask"], x["pos"], x["attention_mask"])
        if self.kind == "multihot_mlm":
            from langrepr.models.multihot_losses import mlm_loss

            logits = net.mlm_logits(hidden[x["masked"]]).float()
            return mlm_loss(self.shape.get("loss", "mhsce"), logits, x["target_ids"], x["target_mask"],
                            **self.shape.get("loss_options", {}))
        return hidden.float().pow(2).mean()   # fine-tuning heads are one linear layer: the encoder is the cost


@dataclass
class Stage:
    """A gradient stage of a cell: a workload at a batch for a number of optimiser steps."""

    name: str
    work: Workload
    batch: int
    steps: int | None
    steps_note: str
    examples: str
    optimizer: str = "AdamW"
    precision: str = "16-mixed"
    eval_forwards: int = 0          # examples run forward-only for validation and test
    eval_batches: int = 0           # the batches they make (each pays the per-step floor, as a training step does)
    eval_note: str = ""
    share_key: str = ""             # stages with one key train once (multi-hot pretraining)
    batch_setting: str = "dataset.datamodule.batch_size"
    notes: list[str] = field(default_factory=list)
