"""The six Table 1 models (EWE paper arXiv 2302.13475) at tiny size, plus their full-size parameter counts."""

import pytest
import torch

from langrepr.models.embeddings import ElementwiseEmbedding, VGramElementwiseEmbedding
from langrepr.models.hf_backbone import HFSequenceClassifier, count_parameters

B, V, LABELS = 3, 4, 5
TINY = dict(
    num_labels=LABELS,
    hidden_size=32,
    num_layers=2,
    num_heads=4,
    intermediate_size=37,
    max_position_embeddings=16,
)
# CANINE's classification head reads the pooled first molecule, so its upsampling projection and final
# char transformer are built (and counted, as in the paper) but receive no gradient.
CANINE_UNUSED = ("canine.projection.", "canine.final_char_encoder.")


def _build(name: str, u: int) -> HFSequenceClassifier:
    arch, kind = name.split("_")
    width = 16 if arch == "albert" else 32
    extra = dict(embedding_size=16) if arch == "albert" else {}
    if kind == "ewe":
        extra["embedding"] = ElementwiseEmbedding(width=width, v=V, u=u)
    elif kind == "vgram":
        extra["embedding"] = VGramElementwiseEmbedding(width=width, v=V, u=u)
    else:
        extra["vocab_size"] = 50 if arch != "canine" else None
    return HFSequenceClassifier(arch, **TINY, **extra)


@pytest.mark.parametrize(
    "name", ["bert_orig", "bert_ewe", "albert_orig", "albert_ewe", "canine_orig", "canine_ewe", "bert_vgram"]
)
def test_forward_backward(name):
    torch.manual_seed(0)
    u = 8 if name.startswith("canine") else 7  # CANINE needs a length divisible by its downsampling rate 4
    model = _build(name, u)
    if name.endswith("orig"):
        ids = torch.randint(1, 50, (B, u))
    else:
        ids = torch.randint(1, 256, (B, u, V))
    mask = torch.ones(B, u, dtype=torch.long)
    mask[1, 3:] = 0
    logits = model(ids, mask)
    assert logits.shape == (B, LABELS) and torch.isfinite(logits).all()
    logits.sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum()]
    expected = [n for n, _ in model.named_parameters() if any(key in n for key in CANINE_UNUSED)]
    assert missing == expected


@pytest.mark.parametrize("arch, width", [("bert", 32), ("albert", 16), ("canine", 32)])
def test_embedding_swap_widths(arch, width):
    extra = dict(embedding_size=16) if arch == "albert" else {}
    model = HFSequenceClassifier(arch, embedding=ElementwiseEmbedding(width, V, 8), **TINY, **extra)
    parent = model.model.base_model.embeddings if arch != "canine" else model.model.canine.char_embeddings
    if arch == "canine":
        assert all(getattr(parent, f"HashBucketCodepointEmbedder_{i}") is None for i in range(8))
        assert parent.char_position_embeddings.weight.shape == (16, 32)  # max_position_embeddings rows
    else:
        assert parent.word_embeddings is None  # token table removed, positions/type/LayerNorm kept
        assert parent.position_embeddings.weight.shape == (16, width)
    assert model.embedding.elements.weight.shape == (256, width // V)
    with pytest.raises(ValueError, match="embedding.width"):
        HFSequenceClassifier(arch, embedding=ElementwiseEmbedding(width * 2, V, 8), **TINY, **extra)


def test_canine_rejects_bad_length_and_bad_arch():
    with pytest.raises(ValueError, match="divisible"):
        _build("canine_ewe", 7)(torch.randint(1, 256, (1, 7, V)))
    with pytest.raises(ValueError, match="bert, albert, canine"):
        HFSequenceClassifier("gpt2", num_labels=2)


# Paper Table 1 reproduced from HF configs with the 1,328-way head (METHODS §1.5): (total, embedding).
# EWE totals in METHODS exclude the focus tables and the EWE LayerNorm, so they are checked with both off;
# the defaults add g (u*v*c) + f (u*w) + LayerNorm (2w) on top.
FULL = {
    "BERT_ORIG": (dict(arch="bert"), None, 110_503_472, 23_440_896),
    "BERT_EWE": (dict(arch="bert", num_heads=16), 768, 87_074_864, 12_288),
    "ALBERT_ORIG": (dict(arch="albert"), None, 12_704_816, 3_840_000),
    "ALBERT_EWE": (dict(arch="albert", num_heads=16), 128, 8_866_864, 2_048),
    "CANINE_ORIG": (dict(arch="canine"), None, 133_104_176, 25_179_648),
    "CANINE_EWE": (
        dict(arch="canine", num_heads=16, max_position_embeddings=1024),
        768,
        108_737_072,
        812_544,
    ),
}


@pytest.mark.parametrize("row", list(FULL))
def test_full_size_parameter_counts(row):
    kwargs, width, total, emb = FULL[row]
    if width is not None:
        bare = ElementwiseEmbedding(width, 16, 128, focus=False, layer_norm=False)
        model = HFSequenceClassifier(num_labels=1328, embedding=bare, **kwargs)
        assert (count_parameters(model), model.embedding_parameters()) == (total, emb)
        focus = 128 * 16 * (width // 16) + 128 * width + 2 * width
        model.embedding = ElementwiseEmbedding(width, 16, 128)
        assert (count_parameters(model), model.embedding_parameters()) == (total + focus, emb)
    else:
        model = HFSequenceClassifier(num_labels=1328, **kwargs)
        assert (count_parameters(model), model.embedding_parameters()) == (total, emb)
