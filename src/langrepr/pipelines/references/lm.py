"""Reference rows of the TensorCoder tables: what a model must beat to have learned anything.

Run as ``stage: pipeline`` cells (``conf/papers/tensorcoder/model/reference_*.yaml``) on the same datamodule,
split and evaluation protocol as the model rows, so a table shows at a glance whether a model is above chance:

- `masked_unigram_nll` (Table 1): cross-entropy, in nats, of a unigram model of the training split on
  exactly the tokens the models are scored on (the fixed, seeded validation/test masks of
  `langrepr.tasks.masked_lm`). It is comparable to the models' ``val/nll``: a masked LM that ignores its
  context can do no better than this (up to smoothing).
- `copy_source_bleu` (Tables 2-3): sacreBLEU of a system that outputs its source sentence unchanged,
  read back through the models' own tokenizer (``detokenize`` of the source ids), against the raw
  references. Names, numbers and punctuation shared by En and De earn it a few BLEU points.

Both return flat metrics under the keys the model rows use, so the table spec reads them the same way.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import sacrebleu
import torch

from langrepr.errors import UserError
from langrepr.lm_targets import EVAL_MASK_SEED, IGNORE_INDEX, eval_mask_generator, mask_tokens
from langrepr.utils import write_json_atomic


def unigram_log_probs(counts: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Unigram log p(w) = log((c_w + k) / (sum c + k V)), add-k smoothed so unseen evaluation tokens stay finite."""
    counts = counts.double() + smoothing
    return (counts / counts.sum()).log()


def masked_targets(batches, vocab_size: int, mask_token_id: int, num_special_tokens: int, mask_prob: float,
                   seed: int, dataloader_idx: int) -> torch.Tensor:
    """The ids the masked-LM task scores on these evaluation batches (its masks replayed from the same seeds)."""
    out = []
    for batch_idx, batch in enumerate(batches):
        _, labels = mask_tokens(batch["input_ids"], batch["attention_mask"], mask_token_id, vocab_size,
                                num_special_tokens, mask_prob, eval_mask_generator(seed, batch_idx, dataloader_idx))
        out.append(labels[labels != IGNORE_INDEX])
    return torch.cat(out)


def masked_unigram_nll(
    datamodule: Any, output_dir: str, mask_prob: float = 0.15, eval_mask_seed: int = EVAL_MASK_SEED,
    smoothing: float = 1.0,
) -> dict[str, float]:
    """Unigram cross-entropy (nats) of the masked validation/test tokens; keys as `MaskedLMTask` logs them."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    vocab_size = int(datamodule.net_kwargs["vocab_size"])
    task = datamodule.task_kwargs
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for batch in datamodule.train_dataloader():
        real = batch["input_ids"][batch["attention_mask"].bool()]
        counts += torch.bincount(real, minlength=vocab_size)
    if counts.sum() == 0:
        raise UserError(f"{datamodule.name}: the training split has no tokens to count")
    log_p = unigram_log_probs(counts, smoothing)
    replay = {"vocab_size": vocab_size, "mask_token_id": task["mask_token_id"],
              "num_special_tokens": task["num_special_tokens"], "mask_prob": mask_prob, "seed": eval_mask_seed}
    val = masked_targets(datamodule.val_dataloader(), dataloader_idx=0, **replay)
    metrics = {"val/nll": float(-log_p[val].mean()), "val/ppl": math.exp(float(-log_p[val].mean()))}
    metrics["val/nll_best"] = metrics["val/nll"]
    for i, (name, loader) in enumerate(zip(datamodule.test_splits, datamodule.test_dataloader())):
        nll = float(-log_p[masked_targets(loader, dataloader_idx=i + 1, **replay)].mean())
        metrics.update({f"test/{name}/nll": nll, f"test/{name}/ppl": math.exp(nll)})
    metrics["reference/train_tokens"] = float(counts.sum())
    metrics["reference/val_targets"] = float(val.numel())
    return metrics


def copy_source_bleu(datamodule: Any, output_dir: str) -> dict[str, float]:
    """BLEU (sacreBLEU) of copying the source sentence as the translation, on validation and the test split(s)."""
    datamodule.prepare_data()
    datamodule.setup("fit")
    eos = int(datamodule.net_kwargs["eos_token_id"])
    splits = [("val", datamodule.val_dataloader())] + list(zip(datamodule.test_splits, datamodule.test_dataloader()))
    metrics: dict[str, float] = {}
    for name, loader in splits:
        hyps, refs = [], []
        for batch in loader:
            for ids, mask in zip(batch["input_ids"], batch["attention_mask"]):
                hyps.append(datamodule.detokenize([t for t in ids[mask.bool()].tolist() if t != eos]))
            refs.extend(batch["references"])
        bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
        metrics["val/bleu" if name == "val" else f"test/{name}/bleu"] = bleu
        if name != "val":
            Path(output_dir).mkdir(parents=True, exist_ok=True)
            write_json_atomic(Path(output_dir) / f"copy_source_{name}.json",
                              {"examples": [{"hyp": h, "ref": r} for h, r in zip(hyps[:20], refs[:20])]})
    metrics["val/bleu_best"] = metrics["val/bleu"]
    return metrics
