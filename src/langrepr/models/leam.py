"""LEAM, the Label-Embedding Attentive Model (Wang et al., ACL 2018, arXiv 1805.04174).

Words and labels share one P-dim space. Equations (numbered as in the paper; restored in METHODS.md §4.1):

- (2) ``G = cos(C, V)``: cosine compatibility of every label with every word, (B, L, K);
- (3) ``u_l = ReLU(G_{l-r:l+r} W_1 + b_1)``: phrase compatibility over a window of 2r+1 words;
- (4) ``m_l = max_k u_lk``: the best label score of each phrase;
- (5) ``beta = softmax(m)`` over the real (non-padding) positions;
- (6) ``z = sum_l beta_l v_l``: attention-weighted average of the (unnormalised) word vectors;
- (7)/(8) ``f_2(z)``: logits for softmax CE (single-label) or per-label sigmoid BCE (multi-label);
- (9) the label regulariser: each label embedding c_k, fed through the same head f_2, must be
  classified as class k (weight 1). The loss itself is computed by the task
  (`tasks/label_embedding.py`) from `LEAM.label_logits()`, so single- and multi-label share it.

Paper vs official code (guoyinwang/LEAM), both selectable [configurable, paper default]:

- ``conv``: ``depthwise`` = the paper's W_1 in R^{2r+1}, one kernel shared by all K label channels,
  bias b_1 in R^K; ``full`` = the code's K -> K Conv1d (K*K*(2r+1) weights).
- ``conv: none`` is the paper's "LEAM-linear" ablation (Table 2): eq. (3) dropped, m = max_k G.
- ``num_layers`` of the head f_2: 1 = eq. (7) ``W_2 z + b_2`` (linear); 2 = the code's dropout ->
  FC(H, ReLU) -> dropout -> linear K ("mlp2").

Decisions the paper leaves open [inferred, configurable]:

- ``window`` is the phrase length 2r+1 (odd); the code's ``ngram = 55`` (r = 27) is the default.
  Positions outside the text see G = 0 ('SAME' zero padding, as the code), and padded words have
  G = 0 too because their vectors are zeroed before the cosine.
- Label embeddings start at the mean word vector of the words of each class name (the code's
  ``load_class_embedding``) when the task hands over class-name token ids; otherwise N(0, 1), as
  the paper suggests for classes without descriptive names.
- Word vectors: U(-init_scale, init_scale) (code: 0.001) or rows of a local GloVe text file.

Dim legend: B batch, L tokens, P = ``hidden_size`` width of word and label vectors, K labels,
H = ``intermediate_size`` width of the 2-layer head, W = 2r+1 window. (The argument names are the
project's shared width names, so `debug=smoke` shrinks these nets like every other.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from langrepr.errors import UserError

CONVS = ("depthwise", "full", "none")


# --------------------------------------------------------------------------- pure functions (eqs. 2-6)
def cosine_compatibility(v: Tensor, c: Tensor, mask: Tensor | None = None, eps: float = 1e-8) -> Tensor:
    """Eq. (2): G[b, l, k] = <v_bl, c_k> / (|v_bl| |c_k|); padded words (mask 0) give 0.

    v: (B, L, P) word vectors, c: (K, P) label embeddings, mask: (B, L). Returns (B, L, K).
    """
    if mask is not None:
        v = v * mask.unsqueeze(-1).to(v.dtype)
    return F.normalize(v, dim=-1, eps=eps) @ F.normalize(c, dim=-1, eps=eps).T


def phrase_compatibility(g: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """Eq. (3): u = ReLU(conv over positions of G + b_1), 'SAME' zero padding. Returns (B, L, K).

    ``weight`` of shape (W,) is the paper's depthwise W_1 (one kernel for every label channel);
    shape (K, K, W) is the official code's full K -> K convolution. bias: (K,).
    """
    k = g.shape[-1]
    if weight.dim() == 1:
        kernel, groups = weight.expand(k, 1, weight.shape[0]), k
    elif weight.dim() == 3:
        kernel, groups = weight, 1
    else:
        raise ValueError(f"phrase weight must be (W,) or (K, K, W), got {tuple(weight.shape)}")
    window = kernel.shape[-1]
    u = F.conv1d(g.transpose(1, 2), kernel, bias, padding=window // 2, groups=groups)
    return F.relu(u).transpose(1, 2)


def max_over_labels(u: Tensor) -> Tensor:
    """Eq. (4): m_l = max_k u_lk, (B, L, K) -> (B, L)."""
    return u.max(dim=-1).values


def masked_softmax(m: Tensor, mask: Tensor | None = None) -> Tensor:
    """Eq. (5): beta = softmax over positions, padding excluded (-inf) so it gets exactly 0."""
    if mask is not None:
        m = m.masked_fill(mask == 0, float("-inf"))
    return torch.softmax(m, dim=-1)


def attentive_average(beta: Tensor, v: Tensor) -> Tensor:
    """Eq. (6): z = sum_l beta_l v_l, (B, L) x (B, L, P) -> (B, P)."""
    return torch.einsum("bl,blp->bp", beta, v)


def label_targets(num_labels: int, multilabel: bool, device: torch.device | None = None) -> Tensor:
    """Targets of the label regulariser (eq. 9): c_k is class k (indices) or the k-th one-hot row."""
    if multilabel:
        return torch.eye(num_labels, device=device)
    return torch.arange(num_labels, device=device)


def class_name_embedding(word_vectors: Tensor, name_ids: Sequence[Sequence[int]], unk_id: int | None = 1,
                         generator: torch.Generator | None = None) -> Tensor:
    """Mean word vector of each class name's words (the code's `load_class_embedding`), (K, P).

    A name with no known word (every id unknown) falls back to N(0, 1), as the paper suggests.
    """
    rows = []
    for ids in name_ids:
        known = [i for i in ids if i != unk_id]
        if known:
            rows.append(word_vectors[torch.tensor(known, device=word_vectors.device)].mean(dim=0))
        else:
            rows.append(torch.randn(word_vectors.shape[1], generator=generator).to(word_vectors))
    return torch.stack(rows)


# --------------------------------------------------------------------------- shared parts
def make_head(in_dim: int, num_labels: int, num_layers: int = 1, hidden: int = 300,
              dropout: float = 0.5) -> nn.Module:
    """f_2 of eq. (7): 1 layer = linear (paper) or 2 = MLP (official code, `discriminator_2layer`)."""
    if num_layers == 1:
        return nn.Sequential(nn.Dropout(dropout), nn.Linear(in_dim, num_labels))
    if num_layers == 2:
        return nn.Sequential(nn.Dropout(dropout), nn.Linear(in_dim, hidden), nn.ReLU(), nn.Dropout(dropout),
                             nn.Linear(hidden, num_labels))
    raise UserError(f"model.net.num_layers (head layers) must be 1 (linear, paper) or 2 (MLP, code), got {num_layers!r}")


def head_output_bias(net: nn.Module) -> Tensor | None:
    """The bias of a net's last output layer, which a multi-label task may start at the label prior's log-odds.

    ``net.output_bias()`` when the net defines it (LEAM); otherwise the last layer of a `make_head` head
    (``net.head[-1]``, an ``nn.Linear``), as the baselines of `text_baselines.py` build theirs; None if neither.
    """
    if hasattr(net, "output_bias"):
        return net.output_bias()
    head = getattr(net, "head", None)
    if isinstance(head, nn.Sequential) and len(head) and isinstance(head[-1], nn.Linear) and head[-1].bias is not None:
        return head[-1].bias
    return None


def load_glove(path: str | Path, vocab: Sequence[str], dim: int) -> tuple[Tensor, int]:
    """Rows of a GloVe text file (``word x1 .. xdim`` per line) for `vocab`; returns (vectors, hits).

    Words absent from the file keep a zero row (the caller re-initialises them). A line with a
    different number of values is an error naming the line, so a 100-d file given for dim=300 fails early.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"GloVe file {path} does not exist: set model.net.glove_path to a GloVe .txt file or null")
    index = {w: i for i, w in enumerate(vocab)}
    vectors = torch.zeros(len(vocab), dim)
    found = torch.zeros(len(vocab), dtype=torch.bool)
    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split(" ")
            if len(parts) - 1 != dim:
                raise UserError(f"{path}:{n} has {len(parts) - 1} values, expected {dim} (model.net.hidden_size): "
                                "use a GloVe text file of that dimension")
            i = index.get(parts[0])
            if i is not None:
                try:
                    vectors[i] = torch.tensor([float(x) for x in parts[1:]])
                except ValueError as err:
                    raise UserError(f"{path}:{n} is not a GloVe line (word followed by numbers): {err}") from None
                found[i] = True
    return vectors, int(found.sum())


class WordEmbedding(nn.Embedding):
    """Trainable word vectors: U(-init_scale, init_scale) (official code: 0.001) or GloVe rows."""

    def __init__(self, vocab_size: int, embed_dim: int, init_scale: float = 0.001, pad_id: int = 0):
        super().__init__(vocab_size, embed_dim, padding_idx=pad_id)
        nn.init.uniform_(self.weight, -init_scale, init_scale)
        with torch.no_grad():
            self.weight[pad_id].zero_()

    def load_glove(self, path: str | Path, vocab: Sequence[str]) -> int:
        vectors, hits = load_glove(path, vocab, self.embedding_dim)
        with torch.no_grad():
            has = vectors.abs().sum(-1) > 0
            self.weight[has] = vectors[has]
        return hits


# --------------------------------------------------------------------------- the model
WORD_INITS = ("datamodule", "trained_glove")

class LEAM(nn.Module):
    """LEAM text classifier: ``(input_ids, attention_mask) -> logits (B, K)``.

    Args:
        vocab_size, num_labels: given by the datamodule (`net_kwargs`).
        hidden_size: P. window: 2r+1 (odd). conv: depthwise (paper) | full (code) | none (LEAM-linear).
        num_layers: head layers, 1 (paper) | 2 (code); intermediate_size: H of the 2-layer head;
        dropout: before each head layer
            (the code's keep-prob 0.5; 0 gives the paper-literal linear map).
        label_penalty: weight of the label regulariser (eq. 9; paper default 1, 0 = off).
        max_length: the datamodule's truncation length, to reject a window longer than the text.
        init_scale: word vectors U(-s, s) when no GloVe file. glove_path: a local GloVe text file.
            It is read in `prepare_embeddings`, once the datamodule's vocabulary exists.
        word_init: where the word vectors (and through the class names, the label vectors) start:
            ``datamodule`` (the datamodule's `word_vectors` file when it has one, else U(-s, s)) or
            ``trained_glove`` (GloVe trained here on the training split, `glove` its settings; built before training by
            `langrepr.pipelines.trained_glove.TrainedGloveStart`). glove: settings of that GloVe (its `GLOVE_DEFAULTS`).
    """

    def __init__(self, vocab_size: int, num_labels: int, hidden_size: int = 300, window: int = 55,
                 conv: str = "depthwise", num_layers: int = 1, intermediate_size: int = 300, dropout: float = 0.5,
                 label_penalty: float = 1.0, max_length: int | None = None, init_scale: float = 0.001,
                 glove_path: str | None = None, pad_id: int = 0, word_init: str = "datamodule",
                 glove: dict | None = None):
        super().__init__()
        if word_init not in WORD_INITS:
            raise UserError(f"model.net.word_init must be one of {', '.join(WORD_INITS)}, got {word_init!r}")
        self.word_init, self.glove = word_init, dict(glove or {})
        if conv not in CONVS:
            raise UserError(f"model.net.conv must be one of {', '.join(CONVS)}, got {conv!r}")
        if window < 1 or window % 2 == 0:
            raise UserError(f"model.net.window is the phrase length 2r+1 and must be odd and >= 1, got {window}")
        if max_length is not None and window > max_length:
            raise UserError(f"model.net.window={window} is longer than the texts (max_length={max_length}): "
                            f"choose an odd window <= {max_length} or raise dataset.datamodule.max_length")
        self.num_labels, self.window, self.conv, self.label_penalty = num_labels, window, conv, float(label_penalty)
        self.embedding = WordEmbedding(vocab_size, hidden_size, init_scale, pad_id)
        self.label_embedding = nn.Parameter(torch.randn(num_labels, hidden_size))  # C, rows c_k
        if conv != "none":
            shape = (window,) if conv == "depthwise" else (num_labels, num_labels, window)
            fan_in = window if conv == "depthwise" else num_labels * window
            self.phrase_weight = nn.Parameter(torch.empty(shape).uniform_(-fan_in ** -0.5, fan_in ** -0.5))  # W_1
            self.phrase_bias = nn.Parameter(torch.zeros(num_labels))  # b_1
        self.glove_path = glove_path
        self.head = make_head(hidden_size, num_labels, num_layers, intermediate_size, dropout)

    def prepare_embeddings(self, vocab: Sequence[str] | None, name_ids: Sequence[Sequence[int]] | None) -> None:
        """Before training: GloVe rows for the vocabulary (if glove_path), then C from the class names."""
        if self.glove_path:
            if vocab is None:
                raise UserError("model.net.glove_path needs a datamodule with a word vocabulary")
            self.embedding.load_glove(self.glove_path, vocab)
        if name_ids is not None:
            self.init_label_embeddings(name_ids)

    def init_label_embeddings(self, name_ids: Sequence[Sequence[int]], unk_id: int | None = 1) -> None:
        """Set C to the mean word vector of each class name."""
        if len(name_ids) != self.num_labels:
            raise UserError(f"{len(name_ids)} class names for {self.num_labels} labels: give one name per label "
                            "(dataset.datamodule.class_names)")
        with torch.no_grad():
            self.label_embedding.copy_(class_name_embedding(self.embedding.weight, name_ids, unk_id))

    def attention(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        """The attention beta (B, L) and the word vectors V (B, L, P): eqs. (2)-(5)."""
        v = self.embedding(input_ids)
        g = cosine_compatibility(v, self.label_embedding, attention_mask)
        u = g if self.conv == "none" else phrase_compatibility(g, self.phrase_weight, self.phrase_bias)
        return masked_softmax(max_over_labels(u), attention_mask), v

    def document_embedding(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """The text vector z (B, P), eq. (6): what the t-SNE figure maps beside the label embeddings."""
        beta, v = self.attention(input_ids, attention_mask)
        return attentive_average(beta, v)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        return self.head(self.document_embedding(input_ids, attention_mask))

    def label_logits(self) -> Tensor:
        """f_2(c_k) for every label, (K, K): the input of the label regulariser (eq. 9)."""
        return self.head(self.label_embedding)

    def output_bias(self) -> Tensor:
        """b_2, the bias of f_2's last layer (K,), which a multi-label task may start at the label prior's log-odds."""
        return self.head[-1].bias

    def embedding_parameters(self) -> int:
        return self.embedding.weight.numel() + self.label_embedding.numel()
