"""What a language model is scored on: BERT masks, next-token targets and the training stream, one definition each.

Why one module under both tasks and pipelines: a reference row (`langrepr.pipelines.references.lm`'s unigram)
must be scored on exactly the tokens the model rows are scored on, so it replays the same masks from the same
seeds, and the causal LM's unigram row and the cipher warm start (a Bit Cipher callback) read the training split
as the same stream of ids. The functions live below tasks and pipelines so that neither imports the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from langrepr.errors import UserError

IGNORE_INDEX = -100
EVAL_MASK_SEED = 1234  # default seed of the fixed validation/test masks


def mask_tokens(
    input_ids: Tensor,
    attention_mask: Tensor,
    mask_token_id: int,
    vocab_size: int,
    num_special_tokens: int,
    mask_prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT masking: returns (corrupted input_ids, labels with IGNORE_INDEX at unchosen positions).

    Random replacements are drawn from ids >= num_special_tokens (never padding or [MASK]).
    At least one token per batch is chosen (the first real one when the draw chose none), so the loss is always
    defined; decided on the device, so that masking never waits for the GPU.
    """
    device = input_ids.device
    gen_device = generator.device if generator is not None else device  # eval masks: a CPU generator
    real = attention_mask.bool()
    u = torch.rand(input_ids.shape, generator=generator, device=gen_device).to(device)
    r = torch.rand(input_ids.shape, generator=generator, device=gen_device).to(device)
    random_ids = torch.randint(num_special_tokens, vocab_size, input_ids.shape, generator=generator,
                               device=gen_device).to(device)
    chosen = (u < mask_prob) & real
    flat = real.flatten()
    first_real = (flat & (flat.cumsum(0) == 1)).view_as(real)      # row-major, as real.nonzero()[0]
    chosen = chosen | (first_real & ~chosen.any())
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    corrupted = torch.where(chosen & (r < 0.8), torch.full_like(input_ids, mask_token_id), input_ids)
    corrupted = torch.where(chosen & (r >= 0.8) & (r < 0.9), random_ids, corrupted)
    return corrupted, labels


def eval_mask_generator(seed: int, batch_idx: int, dataloader_idx: int = 0) -> torch.Generator:
    """The generator of batch ``batch_idx``'s fixed evaluation masks (loader 0 = validation, 1 = first test split).

    A CPU generator, so the masks are identical on any device; reference rows
    (`langrepr.pipelines.references.lm`) replay it to score the very tokens the models are scored on.
    """
    g = torch.Generator()
    g.manual_seed(seed + 100_003 * dataloader_idx + batch_idx)
    return g


def next_token_targets(input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """(targets (B, T−1), valid (B, T−1)): position t predicts id t+1 when both are real tokens."""
    valid = attention_mask[:, 1:].bool() & attention_mask[:, :-1].bool()
    return input_ids[:, 1:], valid


def training_stream(datamodule: Any) -> np.ndarray:
    """The datamodule's training split as one stream of ids, in corpus order (padding dropped)."""
    dataset = datamodule.train_dataloader().dataset
    tensors = getattr(dataset, "tensors", None)
    if not tensors or len(tensors) < 2:
        raise UserError(f"{type(datamodule).__name__}: the cipher warm start reads the training split as "
                        "(ids, attention_mask) tensors; use a datamodule like langrepr.data.english.text_lm")
    ids, mask = tensors[0], tensors[1]
    return ids[mask.bool()].numpy()
