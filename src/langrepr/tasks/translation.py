"""Translation task (TensorCoder §5.2, Tables 2-3).

Training: label-smoothed cross-entropy on the target tokens (teacher forcing). Validation:
``val/loss`` (smoothed), ``val/nll`` (unsmoothed, token-weighted) and, when ``val_bleu`` is on,
greedy-decoding BLEU. Test: beam search with beam 5 and the GNMT length penalty
lp(Y) = ((5 + |Y|) / 6)^alpha, alpha = 0.6 (Wu et al. 2016), then corpus BLEU from sacrebleu on
detokenized hypotheses against the raw reference strings (the paper used multi-bleu on tokenized
text; sacrebleu is the reproducible equivalent and the table says so).

The net must provide ``encode(input_ids, attention_mask)``, ``decode_step(decoder_input_ids, memory,
memory_mask, cache)`` (incremental next-token logits) and ``bos_token_id``/``eos_token_id``/
``pad_token_id``/``max_len`` (`langrepr.models.tensorcoder.Seq2SeqModel`). ``detokenize``
(ids -> text) comes from the datamodule's ``task_kwargs``.
"""

from __future__ import annotations

from collections.abc import Callable

import sacrebleu
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import MaxMetric, MeanMetric

from langrepr.tasks.base import NetTask

IGNORE_INDEX = -100


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6)^alpha."""
    return ((5.0 + length) / 6.0) ** alpha


def smoothed_and_nll(logits: Tensor, labels: Tensor, smoothing: float) -> tuple[Tensor, Tensor]:
    """Label-smoothed cross-entropy and plain NLL, both averaged over the labels that are not IGNORE_INDEX.

    Equal to ``F.cross_entropy(logits, labels, label_smoothing=smoothing)`` and ``F.cross_entropy(logits, labels)``
    (ignore_index=IGNORE_INDEX), from one log-softmax instead of two: ops over the vocabulary (output matmul,
    softmax, loss) were 60% of a Transformer-1head training step's CPU time at BPE 4k (torch.profiler, one
    thread); one log-softmax brings them to 50%. Smoothed = (1 - eps) * NLL + eps * mean over classes of -log p.
    """
    logp = F.log_softmax(logits, dim=-1)   # (M, V)
    keep = labels != IGNORE_INDEX
    n = keep.sum().clamp(min=1)
    nll = -logp.gather(1, labels.clamp(min=0)[:, None])[:, 0].masked_fill(~keep, 0.0).sum() / n
    uniform = -logp.mean(dim=-1).masked_fill(~keep, 0.0).sum() / n
    return (1.0 - smoothing) * nll + smoothing * uniform, nll


@torch.no_grad()
def beam_search(
    net: nn.Module, input_ids: Tensor, attention_mask: Tensor, beam_size: int = 5, alpha: float = 0.6,
    max_len: int = 100,
) -> list[list[int]]:
    """Beam search per sentence; returns generated ids without BOS/EOS.

    A hypothesis is finished when it emits EOS and is scored sum(log p) / lp(|Y|) with |Y| counting
    EOS; a sentence stops once it has ``beam_size`` finished hypotheses or reaches ``max_len``.
    """
    b, k = input_ids.shape[0], beam_size
    memory = net.encode(input_ids, attention_mask).repeat_interleave(k, dim=0)  # (B*k, N, D)
    memory_mask = attention_mask.repeat_interleave(k, dim=0)
    tokens = torch.full((b * k, 1), net.bos_token_id, dtype=torch.long, device=input_ids.device)
    scores = torch.full((b, k), float("-inf"), device=input_ids.device)
    scores[:, 0] = 0.0  # one live hypothesis per sentence at the start
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    done = [False] * b
    cache = None
    for step in range(max_len):
        logits, cache = net.decode_step(tokens, memory, memory_mask, cache)  # (B*k, V), incremental
        logp = F.log_softmax(logits.float(), dim=-1)
        vocab = logp.shape[-1]
        if step == max_len - 1:  # force EOS at the length limit
            logp = torch.full_like(logp, float("-inf")).index_fill_(1, torch.tensor([net.eos_token_id],
                                                                    device=logp.device), 0.0)
        cand = (scores.view(-1, 1) + logp).view(b, k * vocab)
        top_scores, top_ids = cand.topk(2 * k, dim=1)
        top_scores, top_ids = top_scores.tolist(), top_ids.tolist()
        next_rows, next_tokens, next_scores = [], [], []
        for i in range(b):
            live: list[tuple[int, int, float]] = []
            for score, flat in zip(top_scores[i], top_ids[i]):
                if done[i] or len(live) == k or score == float("-inf"):
                    break
                beam, tok = divmod(flat, vocab)
                row = i * k + beam
                if tok == net.eos_token_id:
                    hyp = tokens[row, 1:].tolist()
                    finished[i].append((score / gnmt_length_penalty(len(hyp) + 1, alpha), hyp))
                    done[i] = len(finished[i]) >= k
                else:
                    live.append((row, tok, score))
            live += [(i * k, net.pad_token_id, float("-inf"))] * (k - len(live))  # dead filler beams
            for row, tok, score in live:
                next_rows.append(row)
                next_tokens.append(tok)
                next_scores.append(score)
        if all(done):
            break
        rows = torch.tensor(next_rows, device=tokens.device)
        tokens = torch.cat([tokens[rows], torch.tensor(next_tokens, device=tokens.device)[:, None]], dim=1)
        cache = [c[rows] for c in cache]
        scores = torch.tensor(next_scores, device=tokens.device).view(b, k)
    return [max(f)[1] if f else [] for f in finished]


class TranslationTask(NetTask):
    """Sequence-to-sequence translation with label smoothing, beam search and sacreBLEU."""

    tracked = ("val_bleu_best",)   # best-so-far trackers, carried through checkpoints (tasks/trackers.py)

    def __init__(
        self,
        net: nn.Module,
        optimizer: Callable,
        scheduler: Callable | None = None,
        detokenize: Callable[[list[int]], str] | None = None,
        label_smoothing: float = 0.1,
        beam_size: int = 5,
        length_penalty: float = 0.6,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
        val_bleu: bool = False,
    ) -> None:
        super().__init__(net, optimizer, scheduler)
        self.detokenize = detokenize
        self.label_smoothing, self.beam_size, self.length_penalty = label_smoothing, beam_size, length_penalty
        self.max_len_a, self.max_len_b, self.val_bleu = max_len_a, max_len_b, val_bleu
        self.val_nll, self.val_bleu_best = MeanMetric(), MaxMetric()
        self._hyps: dict[str, list[str]] = {}
        self._refs: dict[str, list[str]] = {}

    def setup(self, stage: str) -> None:
        if self.detokenize is None:
            raise ValueError("TranslationTask needs `detokenize` (the datamodule's task_kwargs provide it)")

    def _logits(self, batch: dict) -> Tensor:
        return self.net(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        decoder_input_ids=batch["decoder_input_ids"],
                        decoder_attention_mask=batch["decoder_attention_mask"])

    def _losses(self, batch: dict) -> tuple[Tensor, Tensor, Tensor]:
        """(smoothed loss, NLL, number of target tokens): device tensors, nothing read on the host."""
        logits = self._logits(batch).float().flatten(0, 1)
        labels = batch["labels"].flatten()
        smoothed, nll = smoothed_and_nll(logits, labels, self.label_smoothing)
        return smoothed, nll, (labels != IGNORE_INDEX).sum()

    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        loss, _, _ = self._losses(batch)
        # a per-step value: batch_size only weights epoch means, so the sentence count (a shape, no sync) does
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["labels"].shape[0])
        return loss

    def _translate(self, batch: dict, beam_size: int) -> list[str]:
        src_len = int(batch["attention_mask"].sum(dim=1).max())
        max_len = min(self.net.max_len - 1, int(self.max_len_a * src_len) + self.max_len_b)
        ids = beam_search(self.net, batch["input_ids"], batch["attention_mask"], beam_size, self.length_penalty,
                          max_len)
        return [self.detokenize(h) for h in ids]

    def _collect(self, split: str, batch: dict, beam_size: int) -> None:
        self._hyps.setdefault(split, []).extend(self._translate(batch, beam_size))
        self._refs.setdefault(split, []).extend(batch["references"])

    def _bleu(self, split: str) -> float:
        hyps, refs = self._hyps.pop(split, []), self._refs.pop(split, [])
        return sacrebleu.corpus_bleu(hyps, [refs]).score if hyps else 0.0

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, nll, n = self._losses(batch)
        self.val_nll.update(nll, weight=n)
        self.log("val/loss", loss, batch_size=int(n))
        if self.val_bleu:
            self._collect("val", batch, beam_size=1)

    def on_validation_epoch_end(self) -> None:
        nll = self.val_nll.compute()
        self.val_nll.reset()
        self.log_dict({"val/nll": nll, "val/ppl": nll.exp()}, prog_bar=True)
        if self.val_bleu:
            bleu = torch.tensor(self._bleu("val"))
            self.log("val/bleu", bleu, prog_bar=True)
            if not self.trainer.sanity_checking:
                self.val_bleu_best.update(bleu)
                self.log("val/bleu_best", self.val_bleu_best.compute())

    def test_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        name = self.test_split_names[dataloader_idx]
        _, nll, n = self._losses(batch)
        self.log(f"test/{name}/nll", nll, batch_size=int(n), add_dataloader_idx=False)
        self._collect(name, batch, beam_size=self.beam_size)

    def on_test_epoch_end(self) -> None:
        for name in self.test_split_names:
            self.log(f"test/{name}/bleu", torch.tensor(self._bleu(name)), add_dataloader_idx=False)
