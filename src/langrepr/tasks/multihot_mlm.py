"""Multi-hot masked-LM pretraining (multi-hot LM §2.2) and the pipeline cell that runs it once per config.

`MultiHotMLMTask` trains a `MultiHotLM` with one of the three losses (sce | bce | mhsce). `pretrained_checkpoint`
runs pretraining for a (corpus, token list, model size, loss, schedule, seed) unless a finished checkpoint for
exactly that config exists under `checkpoint_root`, so every fine-tuning cell that names the same config reuses
it (NSP on [CLS] with `mlm.nsp: true`, as the paper trains). `pretrain_pipeline` is the Table 2 MLM cell: it returns held-out target cross-entropy H(y/n, p) of the model
beside the unigram reference on the same masked positions (threshold-free, comparable across the three losses).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from langrepr.data.korean.batching import (
    SentencePair,
    collate_groups,
    collate_pairs,
    mask_positions,
    pack_pairs,
    pack_sentences,
)
from langrepr.data.korean.encoding import MorphemeEncoder
from langrepr.data.korean.prepare import analysed_corpus, corpus_content_key, token_lists
from langrepr.data.korean.token_lists import SPECIALS
from langrepr.models.multihot_lm import MultiHotLM
from langrepr.models.multihot_losses import answer_log_probs, mlm_loss, target_cross_entropy
from langrepr.utils import write_json_atomic

log = logging.getLogger(__name__)


class MultiHotMLMTask(pl.LightningModule):
    """MLM on masked positions only; the loss and its eq.-6 reading come from config."""

    def __init__(self, net: MultiHotLM, loss: str = "mhsce", loss_options: dict | None = None, lr: float = 1e-3,
                 weight_decay: float = 0.01, warmup_steps: int = 0, max_steps: int = 1000, nsp: bool = False):
        super().__init__()
        self.net, self.loss_name, self.loss_options = net, loss, dict(loss_options or {})
        self.lr, self.weight_decay, self.warmup_steps, self.max_steps = lr, weight_decay, warmup_steps, max_steps
        # NSP head on [CLS]: a pretraining-only layer, so the saved encoder is the same with or without NSP
        self.nsp_head = torch.nn.Linear(net.hidden_size, 2) if nsp else None

    def training_step(self, batch: dict, _: int) -> torch.Tensor:
        hidden = self.net(batch["ids"], batch["group_mask"], batch["pos"], batch["attention_mask"],
                          batch.get("token_type_ids"))
        options = self.loss_options if self.loss_name == "mhsce" else {}
        loss = mlm_loss(self.loss_name, self.net.mlm_logits(hidden[batch["masked"]]), batch["target_ids"],
                        batch["target_mask"], **options)
        self.log("train/mlm_loss", loss)
        if self.nsp_head is not None:
            nsp = torch.nn.functional.cross_entropy(self.nsp_head(hidden[:, 0]), batch["nsp_labels"])
            self.log("train/nsp_loss", nsp)
            loss = loss + nsp
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        from transformers import get_linear_schedule_with_warmup

        from langrepr.tasks.optim import parameter_groups

        optimizer = torch.optim.AdamW(parameter_groups(self, self.weight_decay), lr=self.lr)
        scheduler = get_linear_schedule_with_warmup(optimizer, self.warmup_steps, self.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class MaskingCollator:
    """Collate packed sequences (or NSP pairs) and mask them with the collator's own generator (seeded per run)."""

    def __init__(self, vocab_size: int, max_group: int, mask_prob: float, seed: int):
        self.vocab_size, self.max_group, self.mask_prob = vocab_size, max_group, mask_prob
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, sequences):
        pairs = bool(sequences) and isinstance(sequences[0], SentencePair)
        batch = collate_pairs(sequences, self.max_group) if pairs else collate_groups(sequences, self.max_group)
        return mask_positions(batch, self.vocab_size, self.generator, self.mask_prob)


def plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def run_key(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def prepared_sentences(corpus: dict, sizes: dict, token_list: str, max_group: int, val_fraction: float,
                       cache_dir: str, workers: int, part: str = "train"):
    """Token list, encoder and the encoded sentences of the training part (or the held-out tail)."""
    tl = token_lists(corpus, sizes, cache_dir, workers)[token_list]
    encoder = MorphemeEncoder(tl, max_group)
    _, analysed = analysed_corpus(corpus, cache_dir, workers)
    cut = int(len(analysed) * (1 - val_fraction))
    return tl, encoder, [encoder.encode(s) for s in (analysed[:cut] if part == "train" else analysed[cut:])]


def prepared_data(corpus: dict, sizes: dict, token_list: str, max_group: int, max_len: int, val_fraction: float,
                  cache_dir: str, workers: int):
    """Token list, encoder, and packed train / held-out sequences (the held-out tail of the corpus)."""
    tl, encoder, train = prepared_sentences(corpus, sizes, token_list, max_group, val_fraction, cache_dir, workers)
    _, _, held_out = prepared_sentences(corpus, sizes, token_list, max_group, val_fraction, cache_dir, workers,
                                        "held_out")
    return tl, encoder, pack_sentences(train, max_len), pack_sentences(held_out, max_len)


def unigram_log_probs(sequences, vocab_size: int) -> torch.Tensor:
    """Log p of the training tokens' unigram distribution (add-one smoothed): the reference predictor."""
    counts = Counter(i for s in sequences for g in s.groups for i in g)
    freq = torch.ones(vocab_size)
    for token, count in counts.items():
        freq[token] += count
    return (freq / freq.sum()).log()


@torch.no_grad()
def evaluate_mlm(net: MultiHotLM, held_out, vocab_size: int, max_group: int, batch_size: int, seed: int,
                 unigram: torch.Tensor) -> dict[str, float | None]:
    """Mean H(y/n, p) over held-out masked positions (all / multi-hot groups / single tokens) and the unigram's."""
    net.eval()
    collate = MaskingCollator(vocab_size, max_group, 0.15, seed=10_000 + seed)
    sums = Counter()
    for start in range(0, len(held_out), batch_size):
        batch = collate(held_out[start:start + batch_size])
        logits = net.mlm_logits(net(batch["ids"], batch["group_mask"], batch["pos"], batch["attention_mask"])
                                [batch["masked"]])
        ce = target_cross_entropy(answer_log_probs(logits, batch["target_ids"]), batch["target_mask"])
        ref = target_cross_entropy(unigram[batch["target_ids"]], batch["target_mask"])
        group = batch["target_mask"].sum(1) > 1
        for name, select in (("", torch.ones_like(group)), ("_groups", group), ("_single", ~group)):
            sums[f"ce{name}"] += ce[select].sum().item()
            sums[f"ref{name}"] += ref[select].sum().item()
            sums[f"n{name}"] += int(select.sum())
    out = {}
    for name in ("", "_groups", "_single"):
        n = sums[f"n{name}"]
        # no position of this kind (no multi-hot group in a BPE base list): undefined, None (NaN = diverged)
        out[f"val/mlm_ce{name}"] = sums[f"ce{name}"] / n if n else None
        out[f"val/unigram_ce{name}"] = sums[f"ref{name}"] / n if n else None
        out[f"val/masked{name}"] = n
    return out


def pretrained_checkpoint(corpus: Any, sizes: Any, token_list: str, model: Any, mlm: Any, cache_dir: str,
                          checkpoint_root: str, seed: int, workers: int = 2) -> tuple[Path, dict]:
    """The checkpoint folder of this pretraining config (trained now unless it already finished) and its record.

    The folder holds `model.pt` (state dict), `token_list.json` and `pretrain.json`.
    """
    corpus, sizes, model, mlm = plain(corpus), plain(sizes), plain(model), plain(mlm)
    key = run_key({"corpus": corpus, "sizes": sizes, "token_list": token_list, "model": model, "mlm": mlm,
                   "seed": seed, "content": corpus_content_key(corpus)})   # new text: a new checkpoint
    folder = Path(checkpoint_root) / f"{token_list}-{mlm['loss']}-{key}"
    if (folder / "pretrain.json").exists():
        log.info("Reusing pretrained checkpoint %s", folder)
        return folder, json.loads((folder / "pretrain.json").read_text())
    if mlm.get("torch_threads"):
        torch.set_num_threads(int(mlm["torch_threads"]))   # on a shared CPU, 1 thread beats oversubscription
    pl.seed_everything(seed, workers=True)
    tl, _, train, held_out = prepared_data(corpus, sizes, token_list, model["max_group"], model["max_positions"],
                                           mlm["val_fraction"], cache_dir, workers)
    net = instantiate(model, vocab_size=len(tl.tokens))
    nsp, spans = bool(mlm.get("nsp", False)), train
    if nsp:   # re-pack the training text as BERT's sentence pairs (the held-out MLM measure stays single spans)
        _, _, sentences = prepared_sentences(corpus, sizes, token_list, model["max_group"], mlm["val_fraction"],
                                                   cache_dir, workers)
        train = pack_pairs(sentences, model["max_positions"], torch.Generator().manual_seed(seed))
    task = MultiHotMLMTask(net, mlm["loss"], mlm.get("loss_options"), mlm["lr"], mlm["weight_decay"],
                           mlm["warmup_steps"], mlm["steps"], nsp)
    loader = torch.utils.data.DataLoader(train, batch_size=mlm["batch_size"], shuffle=True,
                                         collate_fn=MaskingCollator(len(tl.tokens), model["max_group"],
                                                                    mlm["mask_prob"], seed))
    started = time.time()
    trainer = pl.Trainer(max_steps=mlm["steps"], accelerator="cpu" if not torch.cuda.is_available() else "auto",
                         devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, gradient_clip_val=1.0)
    trainer.fit(task, train_dataloaders=loader)
    wall = time.time() - started
    record = {"steps": trainer.global_step, "wall_s": wall, "train_sequences": len(train),
              "held_out_sequences": len(held_out), "vocab_size": len(tl.tokens), "token_list": token_list,
              "loss": mlm["loss"], "seed": seed, "nsp": nsp,
              **evaluate_mlm(net, held_out, len(tl.tokens), model["max_group"], mlm["batch_size"], seed,
                             unigram_log_probs(spans, len(tl.tokens)))}
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), folder / "model.pt")
    tl.save(folder / "token_list.json")
    write_json_atomic(folder / "config.json", {"corpus": corpus, "sizes": sizes, "token_list": token_list,
                                               "model": model, "mlm": mlm, "seed": seed})
    write_json_atomic(folder / "pretrain.json", record)   # written last: its presence marks a finished stage
    return folder, record


def load_pretrained(folder: str | Path) -> tuple[MultiHotLM, dict]:
    """Rebuild the pretrained encoder of a checkpoint folder (for fine-tuning cells)."""
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    vocab = len(json.loads((folder / "token_list.json").read_text())["tokens"])
    net = instantiate(config["model"], vocab_size=vocab)
    net.load_state_dict(torch.load(folder / "model.pt", map_location="cpu"))
    return net, config


def pretrain_pipeline(output_dir: str, corpus: Any, sizes: Any, token_list: str, model: Any, mlm: Any,
                      cache_dir: str, checkpoint_root: str, seed: int, workers: int = 2) -> dict[str, float]:
    """Table 2 (MLM side): pretrain (or reuse) and report held-out target cross-entropy vs the unigram reference."""
    folder, record = pretrained_checkpoint(corpus, sizes, token_list, model, mlm, cache_dir, checkpoint_root,
                                           seed, workers)
    write_json_atomic(Path(output_dir) / "pretrained.json", {"checkpoint": str(folder)})
    return {k: v for k, v in record.items() if isinstance(v, (int, float))} | {"pretrain/wall_s": record["wall_s"]}


__all__ = ["MultiHotMLMTask", "SPECIALS", "pretrain_pipeline", "pretrained_checkpoint", "load_pretrained"]
