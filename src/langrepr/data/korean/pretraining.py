"""Masked-LM pretraining data of the multi-hot LM (multi-hot LM §2.2): corpus → token list → masked batches.

`PretrainingDataModule` reads the configured corpus (analysed and listed once, cached by content), encodes it
with one token list, holds out the corpus tail (`val_fraction`) and packs sentences into sequences of
≤ `max_len` positions. Training batches are masked as BERT does (`batching.mask_positions`) from the global RNG,
so a resumed run continues the same stream (`langrepr.callbacks.LastCheckpoint` restores it); with `nsp` the
training text is re-packed as BERT's sentence pairs. The held-out sequences are scored on fixed masks: chunk i
of `eval_batch_size` sequences is masked from its own generator, the same for every validation pass, every model
and any number of devices. The task receives the training tokens' unigram distribution (`task_kwargs`), the
reference predictor scored on the same masked positions.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader

from langrepr.data.korean.base import MultiHotDataModule
from langrepr.data.korean.batching import (
    SentencePair,
    collate_groups,
    collate_pairs,
    mask_positions,
    pack_pairs,
    pack_sentences,
)
from langrepr.data.korean.encoding import Encoded, MorphemeEncoder
from langrepr.data.korean.prepare import analysed_corpus, token_lists
from langrepr.errors import UserError

log = logging.getLogger(__name__)
EVAL_MASK_SEED = 10_000      # + a per-seed, per-chunk offset: the held-out masks


def unigram_log_probs(sequences: Sequence[Encoded], vocab_size: int) -> torch.Tensor:
    """Log p of the training tokens' unigram distribution (add-one smoothed): the reference predictor."""
    counts = Counter(i for s in sequences for g in s.groups for i in g)
    freq = torch.ones(vocab_size)
    for token, count in counts.items():
        freq[token] += count
    return (freq / freq.sum()).log()


class MaskingCollator:
    """Collate packed sequences (or NSP pairs) and mask them; `generator=None` draws from the global RNG."""

    def __init__(self, vocab_size: int, max_group: int, mask_prob: float):
        self.vocab_size, self.max_group, self.mask_prob = vocab_size, max_group, mask_prob

    def __call__(self, sequences: Sequence, generator: torch.Generator | None = None) -> dict:
        pairs = bool(sequences) and isinstance(sequences[0], SentencePair)
        batch = collate_pairs(sequences, self.max_group) if pairs else collate_groups(sequences, self.max_group)
        return mask_positions(batch, self.vocab_size, generator, self.mask_prob)


@dataclass
class EvalChunk:
    """Chunk `index` of the held-out sequences; its masks come from a generator of its own."""

    index: int
    sequences: list[Encoded]


class EvalCollator:
    """Masks chunk i from `Generator(seed + i)`: the same positions in every pass, for every model."""

    def __init__(self, collate: MaskingCollator, seed: int):
        self.collate, self.seed = collate, seed

    def __call__(self, chunk: EvalChunk) -> dict:
        batch = self.collate(chunk.sequences, torch.Generator().manual_seed(self.seed + chunk.index))
        return {**batch, "chunk": chunk.index}   # a chunk scored twice (DDP evens the shares) counts once


class PretrainingDataModule(MultiHotDataModule):
    """Multi-hot MLM batches of one corpus and token list; `val` and `test` both score the held-out tail.

    Args:
        corpus / sizes: the corpus and token-list sizes nodes of the dataset config (`dataset.corpus`,
            `dataset.token_lists`); token_list: bpe_base | bpe_syllable | dict_syllable.
        max_group / max_len: the model's group slots and input positions ([CLS] and [SEP] included).
        nsp: re-pack the training text as sentence pairs for next-sentence prediction (the held-out measure
            stays single spans).
        torch_threads: intra-op threads for this process (1 on a shared CPU box), None = torch's default.
        eval_batch_size: sequences per held-out chunk (None = batch_size). The experiments set the configured
            batch, which `trainer=ddp` leaves alone when it splits `batch_size` per device: the held-out masks are
            then the same on any number of devices.
    """

    def __init__(self, corpus: dict, sizes: dict, token_list: str, max_group: int, max_len: int, batch_size: int,
                 mask_prob: float = 0.15, val_fraction: float = 0.01, nsp: bool = False, seed: int = 1,
                 cache_dir: str = "outputs/cache", workers: int = 2, torch_threads: int | None = None,
                 num_workers: int = 0, eval_batch_size: int | None = None):
        super().__init__()
        self.corpus, self.sizes, self.token_list = dict(corpus), dict(sizes), token_list
        self.max_group, self.max_len, self.batch_size = max_group, max_len, batch_size
        self.mask_prob, self.val_fraction, self.nsp, self.seed = mask_prob, val_fraction, bool(nsp), seed
        self.cache_dir, self.workers, self.num_workers = cache_dir, workers, num_workers
        self.eval_batch_size = eval_batch_size or batch_size
        if torch_threads:
            torch.set_num_threads(int(torch_threads))   # on a shared CPU, 1 thread beats oversubscription
        self.test_splits = ["held_out"]
        self.data_info: dict[str, Any] = {}
        self._built = False

    def setup(self, stage: str | None = None) -> None:
        if self._built:
            return
        tl = token_lists(self.corpus, self.sizes, self.cache_dir, self.workers)[self.token_list]
        encoder = MorphemeEncoder(tl, self.max_group)
        _, analysed = analysed_corpus(self.corpus, self.cache_dir, self.workers)
        cut = int(len(analysed) * (1 - self.val_fraction))
        if cut == 0 or cut == len(analysed):
            raise UserError(f"mlm.val_fraction={self.val_fraction} of {len(analysed)} corpus sentences leaves an "
                            "empty training or held-out part: use a larger corpus or another fraction")
        train = [encoder.encode(s) for s in analysed[:cut]]
        held_out = pack_sentences([encoder.encode(s) for s in analysed[cut:]], self.max_len)
        spans = pack_sentences(train, self.max_len)
        self.vocab_size = len(tl.tokens)
        self.unigram = unigram_log_probs(spans, self.vocab_size)
        self.train_items = pack_pairs(train, self.max_len, torch.Generator().manual_seed(self.seed)) if self.nsp \
            else spans
        size = self.eval_batch_size
        self.eval_chunks = [EvalChunk(i, held_out[start:start + size])
                            for i, start in enumerate(range(0, len(held_out), size))]
        self.collate = MaskingCollator(self.vocab_size, self.max_group, self.mask_prob)
        self.data_info = {"token_list": self.token_list, "vocab_size": self.vocab_size,
                          "corpus_sentences": len(analysed), "train_sequences": len(self.train_items),
                          "held_out_sequences": len(held_out), "nsp": self.nsp}
        log.info("multi-hot pretraining data: %s", self.data_info)
        self._built = True

    @property
    def task_kwargs(self) -> dict:
        return {"unigram_log_probs": self.unigram}

    def _eval_loader(self) -> DataLoader:
        seed = EVAL_MASK_SEED + 1_000_003 * self.seed
        return DataLoader(self.eval_chunks, batch_size=None, collate_fn=EvalCollator(self.collate, seed))

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader()

    def test_dataloader(self) -> list[DataLoader]:
        return [self._eval_loader()]
