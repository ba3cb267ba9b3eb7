"""The grid's model: one input representation composed with one encoder (issue 24).

`GridModel(input, encoder)` is a plain classifier ``(input_ids, attention_mask) -> logits (B, K)`` built from two
independent parts, each chosen by its own config group (`conf/input/*.yaml`, `conf/encoder/*.yaml`):

- an **input** maps the tokenizer's ids to vectors and a mask: ``input(ids) -> (x (B, L, W), mask (B, L))``, and
  exposes its width ``W`` (`TokenInput`, `ElementInput`, `MultiHotInput`);
- an **encoder** maps those vectors to logits: ``encoder(x, mask) -> (B, K)`` (`BertEncoder`, `TensorCoderEncoder`,
  `LEAMEncoder`, `SWEMEncoder`); it is built by the model once the input's width is known
  (``encoder(width=W, num_labels=K)``, a Hydra partial). An encoder that keeps one state per position (BERT,
  TensorCoder: ``can_tag``) is built with ``per_position=True`` for a tagging task and then gives logits
  ``(B, L, K)``, its head applied at every position instead of to the masked mean.

Each part reuses the papers' own modules or pure functions (EWE's `ElementwiseEmbedding`, the multi-hot LM's
`MultiHotEmbedding`, TensorCoder's `TensorCoderAttention` in its encoder block, LEAM's equations (2)-(7), SWEM's
pooling, a `transformers` BERT built from a config); nothing here knows data, tasks or a training loop.

The mask is computed from the ids by the input (a 3-d id tensor, EWE materials or multi-hot groups, has one mask
value per position, not per element), so the model ignores the datamodule's mask, which some datamodules derive
element-wise. Dim legend: B batch, L positions, W input width, K labels, G slots of a multi-hot group, v bytes of
an EWE material.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn
from transformers import BertConfig, BertModel

from langrepr.errors import UserError
from langrepr.models.embeddings import ElementwiseEmbedding
from langrepr.models.leam import (
    attentive_average,
    cosine_compatibility,
    make_head,
    masked_softmax,
    max_over_labels,
    phrase_compatibility,
)
from langrepr.models.multihot_lm import MultiHotEmbedding
from langrepr.models.tensorcoder import TransformerEncoderLayer
from langrepr.models.tensorcoder_attention import TensorCoderAttention
from langrepr.models.text_baselines import masked_max, masked_mean


# --------------------------------------------------------------------------- inputs
class TokenInput(nn.Module):
    """One vector per token id (word pieces, words, bytes): ``ids (B, L)`` -> ``(B, L, W)``, mask ``ids != 0``.

    Args:
        vocab_size: rows of the table (the datamodule's vocabulary size when it gives one).
        width: W. init_std: N(0, init_std) rows (id 0, the pad, is zero).
        vectors_path: a `.npy` matrix (one row per id) of vectors trained outside the gradient (Bit Cipher,
            word2vec), written into the cell's folder by the tokenizer that trained them; rows start from it.
        freeze: keep the table fixed (with vectors: frozen pre-trained vectors; without: initialising ones).
    A byte tokenizer that gives ids (B, L, 1) (one byte per material) is read as (B, L).
    """

    def __init__(self, vocab_size: int, width: int = 64, init_std: float = 0.1, freeze: bool = False,
                 vectors_path: str | None = None):
        super().__init__()
        if vocab_size < 2 or width < 1:
            raise UserError(f"input needs vocab_size >= 2 and width >= 1, got {vocab_size}, {width}")
        self.width, self.freeze = width, freeze
        self.table = nn.Embedding(vocab_size, width, padding_idx=0)
        nn.init.normal_(self.table.weight, std=init_std)
        with torch.no_grad():
            self.table.weight[0].zero_()
        self.table.weight.requires_grad_(not freeze)
        self.loaded_vectors = 0
        if vectors_path:
            try:
                vectors = np.load(vectors_path)
            except OSError as err:
                raise UserError(f"input vectors {vectors_path} cannot be read ({err.strerror or err}): the input's "
                                "tokenizer writes them when it is prepared on the training texts") from None
            self.load_vectors(vectors)

    def load_vectors(self, vectors: np.ndarray) -> None:
        """Rows from vectors trained outside the gradient (Bit Cipher, word2vec), one per vocabulary id."""
        rows = min(len(vectors), self.table.num_embeddings)
        if vectors.shape[1] != self.width:
            raise UserError(f"pre-trained vectors are {vectors.shape[1]}-d but input.net.width is {self.width}: "
                            "set the input's vector dimension to its width")
        with torch.no_grad():
            self.table.weight[:rows] = torch.as_tensor(vectors[:rows], dtype=self.table.weight.dtype)
            self.table.weight[0].zero_()
        self.loaded_vectors = rows

    def forward(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        if ids.dim() == 3 and ids.shape[-1] == 1:
            ids = ids[..., 0]
        if ids.dim() != 2:
            raise ValueError(f"TokenInput reads ids (B, L); got shape {tuple(ids.shape)}")
        return self.table(ids), ids != 0

    def embedding_parameters(self) -> int:
        return self.table.weight.numel()


class ElementInput(nn.Module):
    """EWE elements (EWE §4): byte materials ``ids (B, u, v)`` -> ``(B, u, W)`` through `ElementwiseEmbedding`."""

    def __init__(self, width: int, u: int, v: int, focus: bool = True, focus_init_std: float | None = 0.02,
                 vocab_size: int | None = None):
        super().__init__()
        self.width = width
        self.embedding = ElementwiseEmbedding(width=width, v=v, u=u, focus=focus, focus_init_std=focus_init_std)

    def forward(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        return self.embedding(ids), (ids != 0).any(-1)

    def embedding_parameters(self) -> int:
        return self.embedding.embedding_parameters()


class MultiHotInput(nn.Module):
    """Multi-hot syllable groups (multi-hot LM eq. 1-2): ``ids (B, L, 1 + G)`` -> ``(B, L, W)``.

    Column 0 of each position is its morpheme's POS tag id, columns 1..G the token ids of its group (one id for
    a listed morpheme, its syllables' ids otherwise; 0 = empty slot). Mask: a position with any token.
    """

    def __init__(self, vocab_size: int, width: int, max_group: int, num_pos_tags: int, tp_init: str = "ones",
                 init_std: float = 0.1):
        super().__init__()
        self.width, self.max_group = width, max_group
        self.embedding = MultiHotEmbedding(vocab_size, width, max_group, num_pos_tags, tp_init=tp_init,
                                           init_std=init_std)

    def forward(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        if ids.dim() != 3:
            raise ValueError(f"MultiHotInput reads ids (B, L, 1 + G); got shape {tuple(ids.shape)}")
        pos, groups = ids[..., 0], ids[..., 1:]
        filled = groups != 0
        return self.embedding(groups, filled.float(), pos), filled.any(-1)

    def embedding_parameters(self) -> int:
        return self.embedding.token.weight.numel()


# --------------------------------------------------------------------------- encoders
class SWEMEncoder(nn.Module):
    """SWEM (Shen et al. 2018), the floor encoder: parameter-free pooling of the input vectors, then an MLP head."""

    can_tag = False

    def __init__(self, width: int, num_labels: int, pooling: str = "avg", num_layers: int = 2,
                 intermediate_size: int = 64, dropout: float = 0.1):
        super().__init__()
        if pooling not in ("avg", "max", "concat"):
            raise UserError(f"encoder.net.pooling must be avg, max or concat, got {pooling!r}")
        self.pooling = pooling
        out = 2 * width if pooling == "concat" else width
        self.head = make_head(out, num_labels, num_layers, intermediate_size, dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        if self.pooling == "avg":
            z = masked_mean(x, mask)
        elif self.pooling == "max":
            z = masked_max(x, mask)
        else:
            z = torch.cat([masked_mean(x, mask), masked_max(x, mask)], -1)
        return self.head(z)


class LEAMEncoder(nn.Module):
    """LEAM's label-embedding attention (eqs. 2-7) over any input's vectors, with the label regulariser hook.

    The label embeddings C (K, W) start N(0, 1), as the paper suggests for classes without descriptive names:
    the grid's inputs share no word vocabulary to start them from class-name words.
    """

    can_tag = False

    def __init__(self, width: int, num_labels: int, window: int = 11, conv: str = "depthwise", num_layers: int = 1,
                 intermediate_size: int = 64, dropout: float = 0.1, label_penalty: float = 1.0):
        super().__init__()
        if window < 1 or window % 2 == 0:
            raise UserError(f"encoder.net.window is the phrase length 2r+1 and must be odd, got {window}")
        if conv not in ("depthwise", "none"):
            raise UserError(f"encoder.net.conv must be depthwise or none, got {conv!r}")
        self.conv, self.label_penalty = conv, float(label_penalty)
        self.label_embedding = nn.Parameter(torch.randn(num_labels, width))
        if conv == "depthwise":
            self.phrase_weight = nn.Parameter(torch.empty(window).uniform_(-window ** -0.5, window ** -0.5))
            self.phrase_bias = nn.Parameter(torch.zeros(num_labels))
        self.head = make_head(width, num_labels, num_layers, intermediate_size, dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        g = cosine_compatibility(x, self.label_embedding, mask)
        u = g if self.conv == "none" else phrase_compatibility(g, self.phrase_weight, self.phrase_bias)
        beta = masked_softmax(max_over_labels(u), mask)
        return self.head(attentive_average(beta, x))

    def label_logits(self) -> Tensor:
        return self.head(self.label_embedding)


def fits_positions(x: Tensor, max_positions: int) -> None:
    """A positional encoder reads at most `max_positions` positions: say so in one line, not an index error."""
    if x.shape[1] > max_positions:
        raise UserError(f"the input has {x.shape[1]} positions but encoder.net.max_position_embeddings is "
                        f"{max_positions}: raise it or shorten the input")


class BertEncoder(nn.Module):
    """A small BERT (`transformers.BertModel` from a config, random init) read through `inputs_embeds`.

    The input's width W is projected to `hidden_size` when they differ. Pooling: masked mean of the last states.
    Its token table is removed (the input is the grid's input), so parameter counts are honest.
    """

    can_tag = True

    def __init__(self, width: int, num_labels: int, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4,
                 intermediate_size: int = 128, max_position_embeddings: int = 512, dropout: float = 0.1,
                 per_position: bool = False):
        super().__init__()
        self.per_position = per_position
        if hidden_size % num_heads:
            raise UserError(f"encoder.net.hidden_size ({hidden_size}) must be a multiple of num_heads ({num_heads})")
        self.project = nn.Identity() if width == hidden_size else nn.Linear(width, hidden_size)
        config = BertConfig(vocab_size=2, hidden_size=hidden_size, num_hidden_layers=num_layers,
                            num_attention_heads=num_heads, intermediate_size=intermediate_size,
                            max_position_embeddings=max_position_embeddings, hidden_dropout_prob=dropout,
                            attention_probs_dropout_prob=dropout)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.bert.embeddings.word_embeddings = None
        self.max_positions = max_position_embeddings
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden_size, num_labels))

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        fits_positions(x, self.max_positions)
        hidden = self.bert(inputs_embeds=self.project(x), attention_mask=mask.long()).last_hidden_state
        return self.head(hidden if self.per_position else masked_mean(hidden, mask))


class TensorCoderEncoder(nn.Module):
    """TensorCoder's encoder (dimension-wise attention, eq. 12; post-LN blocks) as a sequence classifier.

    Learned positions are added to the projected input (the attention mixes dimensions, not positions, so
    without them word order is invisible); pooling: masked mean of the last states.
    """

    can_tag = True

    def __init__(self, width: int, num_labels: int, hidden_size: int = 64, num_layers: int = 2, n_filters: int = 1,
                 intermediate_size: int = 128, max_position_embeddings: int = 512, dropout: float = 0.1,
                 per_position: bool = False):
        super().__init__()
        self.per_position = per_position
        self.project = nn.Identity() if width == hidden_size else nn.Linear(width, hidden_size)
        self.positions = nn.Embedding(max_position_embeddings, hidden_size)
        nn.init.normal_(self.positions.weight, std=0.02)
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(hidden_size, TensorCoderAttention(hidden_size, n_filters=n_filters,
                                                                      dropout=dropout),
                                    intermediate_size, dropout, "gelu")
            for _ in range(num_layers))
        self.max_positions = max_position_embeddings
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden_size, num_labels))

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        fits_positions(x, self.max_positions)
        h = self.project(x) + self.positions.weight[: x.shape[1]]
        for layer in self.layers:
            h = layer(h, mask)
        return self.head(h if self.per_position else masked_mean(h, mask))


# --------------------------------------------------------------------------- the composition
def _accepted(part: Callable[..., nn.Module], **values: int | None) -> dict:
    """The values that are set and that the partial `part` takes as keyword arguments."""
    params = inspect.signature(part).parameters
    return {k: v for k, v in values.items() if v is not None and k in params}


class GridModel(nn.Module):
    """Input x encoder: ``(input_ids, attention_mask) -> logits (B, K)``, or ``(B, L, K)`` with `per_position`.

    Args:
        input: a built input module, or a partial taking ``vocab_size`` (the datamodule's, when it gives one).
        encoder: a partial taking ``width`` and ``num_labels``.
        num_labels, vocab_size: runtime values from the datamodule (`net_kwargs`).
        hidden_size, num_layers, intermediate_size: when set (e.g. by `debug=smoke`), the input's width and the
            encoder's sizes, passed to the parts that take them.
        per_position: logits at every position (a tagging task's datamodule asks for them); only an encoder that
            keeps one state per position can give them (a document encoder stops with one line).
    Hooks the shared tasks call: `label_logits` / `label_penalty` (LEAM's regulariser, eq. 9, only with the LEAM encoder), `output_bias`.
    """

    def __init__(self, input: Callable[..., nn.Module] | nn.Module, encoder: Callable[..., nn.Module],
                 num_labels: int, vocab_size: int | None = None, hidden_size: int | None = None,
                 num_layers: int | None = None, intermediate_size: int | None = None, per_position: bool = False):
        super().__init__()
        if per_position and "per_position" not in inspect.signature(encoder).parameters:
            name = getattr(getattr(encoder, "func", encoder), "__name__", type(encoder).__name__)
            raise UserError(f"does not compose: encoder {name} is a document encoder (one vector per text) and the "
                            "task tags every token")
        if not isinstance(input, nn.Module):
            input = input(**_accepted(input, vocab_size=vocab_size, width=hidden_size))
        self.input = input
        self.encoder = encoder(width=input.width, num_labels=num_labels,
                               **_accepted(encoder, hidden_size=hidden_size, num_layers=num_layers,
                                           intermediate_size=intermediate_size, per_position=per_position or None))
        if hasattr(self.encoder, "label_logits"):
            self.label_penalty = self.encoder.label_penalty

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        x, mask = self.input(input_ids)
        return self.encoder(x, mask)

    def label_logits(self) -> Tensor:
        if not hasattr(self.encoder, "label_logits"):
            raise AttributeError("label_logits")
        return self.encoder.label_logits()

    def output_bias(self) -> Tensor:
        return self.encoder.head[-1].bias

    def extra_metrics(self) -> dict[str, float]:
        """Recorded in metrics.json: how many input rows started from pre-trained vectors (0 = a random start)."""
        return {"input/pretrained_rows": float(getattr(self.input, "loaded_vectors", 0))}

    def embedding_parameters(self) -> int:
        return int(self.input.embedding_parameters())
