"""Elementwise embeddings against values computed by hand on u=2, v=2, c=2 (w=4)."""

import pytest
import torch

from langrepr.models.embeddings import ElementwiseEmbedding, VGramElementwiseEmbedding


def _set_elements(emb) -> None:
    """Element b has embedding [b, 10*b]: every byte id is readable in the output."""
    with torch.no_grad():
        b = torch.arange(256, dtype=torch.float)
        emb.elements.weight.copy_(torch.stack([b, 10 * b], dim=1))


def _ewe(**kw) -> ElementwiseEmbedding:
    emb = ElementwiseEmbedding(width=4, v=2, u=2, dropout=0.0, layer_norm=False, **kw)
    _set_elements(emb)
    if kw.get("focus", True):
        with torch.no_grad():
            emb.global_focus.weight.zero_()
            emb.local_focus_table.weight.zero_()
    return emb


IDS = torch.tensor([[[1, 2], [3, 4]]])  # (B=1, u=2, v=2): materials [1 2] and [3 4]


def test_reshape_row_major_without_focus():
    emb = _ewe(focus=False)
    out = emb(IDS)
    # material i = concat(e[byte i,0], e[byte i,1])
    assert out.tolist() == [[[1, 10, 2, 20], [3, 30, 4, 40]]]
    assert not hasattr(emb, "global_focus") and emb.embedding_parameters() == 256 * 2


def test_global_focus_flat_index():
    emb = _ewe()
    with torch.no_grad():  # g^(p) = [100*p, 0] with p = i*v + j in 0..3
        emb.global_focus.weight[:, 0] = torch.arange(4.0) * 100
    assert emb.global_focus.weight.shape == (4, 2)  # (u*v, c)
    assert emb(IDS).tolist() == [[[1, 10, 102, 20], [203, 30, 304, 40]]]


def test_global_focus_paper_literal_index():
    emb = _ewe(focus_index="paper_literal")
    # p = i*j + j with 1-based i, j: (1,1)->2, (1,2)->4, (2,1)->3, (2,2)->6; table covers 0..v*(u+1)=6
    assert emb.global_focus.weight.shape == (7, 2)
    with torch.no_grad():
        emb.global_focus.weight[:, 1] = torch.arange(7.0) * 1000
    assert emb(IDS).tolist() == [[[1, 2010, 2, 4020], [3, 3030, 4, 6040]]]


def test_local_focus_per_material():
    emb = _ewe()
    with torch.no_grad():  # f^(i) is a w-vector added to the whole material i
        emb.local_focus_table.weight.copy_(
            torch.tensor([[1000.0, 2000, 3000, 4000], [5000, 6000, 7000, 8000]])
        )
    assert emb.local_focus_table.weight.shape == (2, 4)  # (u, w)
    assert emb(IDS).tolist() == [[[1001, 2010, 3002, 4020], [5003, 6030, 7004, 8040]]]


def test_local_focus_within_word():
    emb = _ewe(local_focus="within_word")
    with torch.no_grad():  # (v, c) table: the same offset for byte j of every material
        emb.local_focus_table.weight.copy_(torch.tensor([[1000.0, 2000], [3000, 4000]]))
    assert emb.local_focus_table.weight.shape == (2, 2)
    assert emb(IDS).tolist() == [[[1001, 2010, 3002, 4020], [1003, 2030, 3004, 4040]]]


def test_shorter_sequence_uses_leading_focus_rows():
    emb = _ewe()
    with torch.no_grad():
        emb.global_focus.weight[:, 0] = torch.arange(4.0) * 100
        emb.local_focus_table.weight[0] = torch.tensor([0.5, 0.5, 0.5, 0.5])
    out = emb(IDS[:, :1])  # u' = 1 < u
    assert out.tolist() == [[[1.5, 10.5, 102.5, 20.5]]]


def test_layer_norm_and_shapes():
    emb = ElementwiseEmbedding(width=48, v=16, u=5)
    out = emb(torch.randint(0, 256, (3, 5, 16)))
    assert out.shape == (3, 5, 48)
    assert torch.allclose(out.mean(-1), torch.zeros(3, 5), atol=1e-5)  # LayerNorm(w) with default affine


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(width=10, v=4, u=2), "embedding.width"),
        (dict(width=8, v=4, u=2, focus_index="bogus"), "flat, paper_literal"),
        (dict(width=8, v=4, u=2, local_focus="bogus"), "material, within_word"),
        (dict(width=8, v=4, u=2, focus_init_std=0.0), "focus_init_std"),
    ],
)
def test_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ElementwiseEmbedding(**kwargs)
    with pytest.raises(ValueError, match="forward, centered"):
        VGramElementwiseEmbedding(width=8, v=4, u=2, window="bogus")


def test_focus_init_std_scales_only_the_focus_tables():
    torch.manual_seed(0)
    default = ElementwiseEmbedding(width=64, v=4, u=64)
    small = ElementwiseEmbedding(width=64, v=4, u=64, focus_init_std=0.02)
    assert default.global_focus.weight.std().item() == pytest.approx(1.0, abs=0.1)  # PyTorch's N(0, 1)
    assert small.global_focus.weight.std().item() == pytest.approx(0.02, abs=0.003)
    assert small.local_focus_table.weight.std().item() == pytest.approx(0.02, abs=0.003)
    assert small.elements.weight.std().item() == pytest.approx(1.0, abs=0.1)  # elements untouched


def test_input_shape_checked():
    emb = ElementwiseEmbedding(width=8, v=4, u=2)
    with pytest.raises(ValueError, match="expected byte ids"):
        emb(torch.zeros(1, 3, 4, dtype=torch.long))  # u' > u


def _vgram(window: str) -> VGramElementwiseEmbedding:
    emb = VGramElementwiseEmbedding(width=4, v=2, u=2, window=window, dropout=0.0, layer_norm=False)
    _set_elements(emb)
    with torch.no_grad():
        emb.score.weight.copy_(torch.tensor([[1.0, 0.0]]))  # score(e_b) = b
    return emb


def _pool(a, b):
    """softmax([a, b]) weighted sum of e_a = [a, 10a] and e_b = [b, 10b]."""
    wa, wb = torch.softmax(torch.tensor([float(a), float(b)]), 0).tolist()
    x = wa * a + wb * b
    return [x, 10 * x]


def test_vgram_forward_window_by_hand():
    ids = torch.tensor([[[1, 2], [3, 0]]])  # flat stream 1 2 3 <pad>
    out = _vgram("forward")(ids)
    # windows: (1,2) (2,3) (3,pad->masked => e_3) (pad,past-end => all masked => 0)
    expected = [_pool(1, 2) + _pool(2, 3), [3.0, 30.0, 0.0, 0.0]]
    assert torch.allclose(out, torch.tensor([expected]), atol=1e-5)


def test_vgram_centered_window_by_hand():
    ids = torch.tensor([[[1, 2], [3, 4]]])
    out = _vgram("centered")(ids)
    # v=2: left = 1, right = 0 -> window (t-1, t); t=0 sees only itself
    expected = [[1.0, 10.0] + _pool(1, 2), _pool(2, 3) + _pool(3, 4)]
    assert torch.allclose(out, torch.tensor([expected]), atol=1e-5)


def test_vgram_grads_finite_with_pads():
    emb = VGramElementwiseEmbedding(width=12, v=3, u=4)
    ids = torch.zeros(2, 4, 3, dtype=torch.long)
    ids[0, :2] = torch.randint(1, 256, (2, 3))  # row 1 is all pads
    out = emb(ids)
    out.sum().backward()
    assert out.shape == (2, 4, 12) and torch.isfinite(out).all()
    assert torch.isfinite(emb.elements.weight.grad).all() and torch.isfinite(emb.score.weight.grad).all()
    assert emb.embedding_parameters() == 256 * 4
