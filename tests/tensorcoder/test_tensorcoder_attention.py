"""TensorCoder attention vs naive references written straight from the paper's equations."""

from functools import partial

import pytest
import torch

from langrepr.models.baseline_attention import MultiHeadSDPAttention, MultiLinearAttention
from langrepr.models.tensorcoder import MaskedLMModel, Seq2SeqModel
from langrepr.models.tensorcoder_attention import (
    MaskedTensorCoderAttention,
    TensorCoderAttention,
    TensorCoderCrossAttention,
    score_scale,
)


@pytest.fixture(autouse=True)
def _float64():
    """Exact comparisons in float64; the default dtype is restored afterwards."""
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    yield
    torch.set_default_dtype(torch.float32)


def _scale(n, d, mode):
    return {"sqrt_n": n**-0.5, "n": 1.0 / n, "sqrt_d": d**-0.5, "none": 1.0}[mode]


def naive_encoder(attn, x, mask=None):
    """Eqs. (4), (7), (12) with the N x d x d tensor materialised, one sequence at a time."""
    outs = []
    for b in range(x.shape[0]):
        xb = x[b] if mask is None else x[b][mask[b]]  # padding removed = padding masked out
        q, k, v = attn.q_proj(xb), attn.k_proj(xb), attn.v_proj(xb)
        n, d = q.shape
        s = torch.zeros(d, d)
        for i in range(d):  # eq. (4): S_ij = sum_n Q_ni K_nj
            for j in range(d):
                s[i, j] = sum(q[t, i] * k[t, j] for t in range(n))
        f = (s * _scale(n, d, attn.scale)).softmax(-1) if attn.normalize == "softmax" else s * _scale(n, d, attn.scale)
        o_filters = []
        for w in attn.filters:
            big_x = f[None, :, :] * v[:, None, :]  # eq. (7): X_ijk = f(S)_jk V_ik, (N, d, d)
            o_filters.append(torch.einsum("jm,ijm->ij", w, big_x))  # eq. (12)
        out = attn.out_proj(torch.cat(o_filters, dim=-1))
        if mask is not None:
            full = torch.zeros(x.shape[1], out.shape[-1])
            full[mask[b]] = out
            out = full
        outs.append(out)
    return torch.stack(outs)


def naive_masked(attn, x):
    """Eqs. (10)-(12) with the explicit upper-triangular M and the (d, d, N) tensor S."""
    outs = []
    for b in range(x.shape[0]):
        q, k, v = attn.q_proj(x[b]), attn.k_proj(x[b]), attn.v_proj(x[b])
        n, d = q.shape
        m = torch.triu(torch.ones(n, n))  # M_nt = 1 iff n <= t
        s = torch.einsum("ni,nj,nt->ijt", q, k, m)  # eq. (10)
        counts = torch.arange(1, n + 1, dtype=x.dtype)
        s = s * torch.tensor([_scale(c, d, attn.scale) for c in counts.tolist()])
        f = s.softmax(dim=1) if attn.normalize == "softmax" else s  # softmax over k for each t-slice
        big_x = f.permute(2, 0, 1) * v[:, None, :]  # eq. (11): X_ijk = S_jki V_ik
        o = [torch.einsum("jm,ijm->ij", w, big_x) for w in attn.filters]  # eq. (12)
        outs.append(attn.out_proj(torch.cat(o, dim=-1)))
    return torch.stack(outs)


@pytest.mark.parametrize("n_filters", [1, 3])
@pytest.mark.parametrize("scale", ["sqrt_n", "n", "sqrt_d", "none"])
@pytest.mark.parametrize("normalize", ["softmax", "scale"])
def test_encoder_matches_paper_equations(n_filters, scale, normalize):
    attn = TensorCoderAttention(8, d_head=5, n_filters=n_filters, scale=scale, normalize=normalize).eval()
    x = torch.randn(2, 7, 8)
    torch.testing.assert_close(attn(x), naive_encoder(attn, x))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_score_scale_is_exact_in_the_callers_dtype(dtype):
    """1/sqrt(3) etc. in the scores' own dtype: float64 callers must not get float32-rounded factors."""
    counts = torch.tensor([1, 3, 7])
    for mode, want in (("sqrt_n", [1.0, 3**-0.5, 7**-0.5]), ("n", [1.0, 1 / 3, 1 / 7]), ("sqrt_d", [3**-0.5] * 3)):
        got = score_scale(counts, 3, mode, dtype)
        assert got.dtype == dtype
        tol = 1e-15 if dtype == torch.float64 else 2e-7  # a float32-rounded 1/sqrt(3) is off by 1.8e-8
        torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64).to(dtype), rtol=tol, atol=0)
    assert score_scale(counts, 3, "sqrt_n", torch.float16).dtype == torch.float32  # half is computed in float32


def test_encoder_padding_is_masked_out():
    attn = TensorCoderAttention(8, d_head=4, n_filters=2).eval()
    x = torch.randn(2, 6, 8)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]]).bool()
    out = attn(x, mask)
    torch.testing.assert_close(out[mask], naive_encoder(attn, x, mask)[mask])
    x2 = x.clone()
    x2[0, 4:] = 100 * torch.randn(2, 8)  # garbage in the padding changes no real output
    torch.testing.assert_close(attn(x2, mask)[0, :4], out[0, :4])
    short = attn(x[:1, :4])  # and equals the unpadded sequence
    torch.testing.assert_close(short[0], out[0, :4])


@pytest.mark.parametrize("n_filters", [1, 2])
@pytest.mark.parametrize("chunk_size", [1, 3, 64])
@pytest.mark.parametrize("scale", ["sqrt_n", "n", "none"])
def test_masked_matches_paper_equations(n_filters, chunk_size, scale):
    attn = MaskedTensorCoderAttention(8, d_head=5, n_filters=n_filters, scale=scale, chunk_size=chunk_size).eval()
    x = torch.randn(2, 7, 8)
    torch.testing.assert_close(attn(x), naive_masked(attn, x))


@pytest.mark.parametrize(
    "make",
    [
        lambda: MaskedTensorCoderAttention(8, d_head=4, n_filters=2, chunk_size=3),
        lambda: MultiHeadSDPAttention(8, n_heads=2, causal=True),
    ],
)
def test_causality_future_tokens_never_change_the_past(make):
    attn = make().eval()
    x = torch.randn(2, 9, 8)
    base = attn(x)
    for t in range(9):
        x2 = x.clone()
        x2[:, t:] = torch.randn(2, 9 - t, 8)
        torch.testing.assert_close(attn(x2)[:, :t], base[:, :t])
    assert not torch.allclose(attn(x2)[:, -1], base[:, -1])


def test_masked_padding_matches_unpadded():
    attn = MaskedTensorCoderAttention(8, d_head=4, n_filters=2, chunk_size=2).eval()
    x = torch.randn(1, 5, 8)
    padded = torch.cat([x, torch.randn(1, 3, 8)], dim=1)
    mask = torch.tensor([[1] * 5 + [0] * 3]).bool()
    torch.testing.assert_close(attn(padded, mask)[:, :5], attn(x))


def test_sdpa_matches_softmax_qkt():
    attn = MultiHeadSDPAttention(8, n_heads=2).eval()
    x = torch.randn(2, 5, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1] * 5]).bool()
    q, k, v = (p(x).view(2, 5, 2, 4).transpose(1, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    scores = (q @ k.transpose(-1, -2)) / 2.0  # eq. (2), sqrt(d_k) = 2
    scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
    ref = attn.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 5, 8))
    torch.testing.assert_close(attn(x, mask), ref)
    wide = MultiHeadSDPAttention(8, n_heads=8, full_width_heads=True)
    assert wide.q_proj.out_features == 64 and wide.out_proj.in_features == 64


def test_multilinear_matches_block_term_formula():
    attn = MultiLinearAttention(6, max_len=5, d_head=3, n_cores=2).eval()
    x = torch.randn(2, 4, 6)
    mask = torch.tensor([[1, 1, 1, 0], [1] * 4]).bool()
    q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
    k, v = k * mask[..., None], v * mask[..., None]
    t = torch.zeros(2, 4, 5, 5)
    for c in range(2):  # T_ijk = sum_h g_h Q_ih K_jh V_kh, averaged over cores
        t[:, :, :4, :4] += torch.einsum("h,bih,bjh,bkh->bijk", attn.cores[c], q, k, v) / 2
    torch.testing.assert_close(attn(x, mask), attn.out_proj(t.flatten(2)))
    with pytest.raises(ValueError, match="max_len"):
        attn(torch.randn(1, 6, 6))


def test_cross_attention_handles_different_lengths():
    attn = TensorCoderCrossAttention(8, d_head=4, n_filters=2).eval()
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 6, 8)
    mem_mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1] * 6]).bool()
    out = attn(x, None, memory=memory, memory_mask=mem_mask)
    assert out.shape == (2, 3, 8)
    memory2 = memory.clone()
    memory2[0, 4:] = 50.0
    torch.testing.assert_close(attn(x, None, memory=memory2, memory_mask=mem_mask), out)
    # reference: S = K_src^T V_src over the real source tokens, O^c_ij = sum_m W^c_jm f(S)_jm Q_im
    q = attn.q_proj(x[0])
    k, v = attn.k_proj(memory[0, :4]), attn.v_proj(memory[0, :4])
    f = (k.T @ v / 2.0).softmax(-1)  # scale 1/sqrt(4 source tokens)
    o = [torch.einsum("jm,jm,im->ij", w, f, q) for w in attn.filters]
    torch.testing.assert_close(out[0], attn.out_proj(torch.cat(o, dim=-1)))


def test_invalid_options_raise():
    with pytest.raises(ValueError, match="scale"):
        TensorCoderAttention(8, scale="sqrt_t")
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadSDPAttention(10, n_heads=3)


ATTENTIONS = {
    "tensorcoder": partial(TensorCoderAttention, n_filters=2),
    "transformer": partial(MultiHeadSDPAttention, n_heads=2),
    "tensorized": partial(MultiLinearAttention, max_len=12, d_head=4),
}


@pytest.mark.parametrize("name", sorted(ATTENTIONS))
def test_mlm_model_forward_backward(name):
    torch.set_default_dtype(torch.float32)
    net = MaskedLMModel(vocab_size=30, attention=ATTENTIONS[name], hidden_size=16, num_layers=2, intermediate_size=32,
                        max_len=12, flops_seq_len=12)
    ids = torch.randint(0, 30, (3, 12))
    mask = torch.ones(3, 12, dtype=torch.long)
    mask[0, 8:] = 0
    logits = net(ids, mask)
    assert logits.shape == (3, 12, 30)
    logits.sum().backward()
    assert all(p.grad is not None for p in net.parameters() if p.requires_grad)
    metrics = net.extra_metrics()
    assert metrics["model/attn_gflops"] == pytest.approx(2 * metrics["model/attn_gflops_layer"])
    assert metrics["model/attn_gflops_layer"] > 0
    assert net.embedding_parameters() == 30 * 16 + 12 * 16


@pytest.mark.parametrize("cross", ["sdpa", "tensorcoder"])
def test_seq2seq_model_forward_backward(cross):
    torch.set_default_dtype(torch.float32)
    cross_factory = (partial(MultiHeadSDPAttention, n_heads=2) if cross == "sdpa"
                     else partial(TensorCoderCrossAttention, n_filters=2))
    net = Seq2SeqModel(
        vocab_size=25, encoder_attention=partial(TensorCoderAttention, n_filters=2),
        decoder_attention=partial(MaskedTensorCoderAttention, n_filters=2, chunk_size=4),
        cross_attention=cross_factory, hidden_size=16, num_layers=2, intermediate_size=32,
        max_len=20, flops_seq_len=10,
    )
    src, tgt = torch.randint(3, 25, (2, 9)), torch.randint(3, 25, (2, 6))
    logits = net(src, torch.ones_like(src), tgt, torch.ones_like(tgt))
    assert logits.shape == (2, 6, 25)
    logits.mean().backward()
    assert net.extra_metrics()["model/attn_gflops"] > 0
    net.eval()  # the decoder is causal end to end: later target tokens leave earlier logits alone
    with torch.no_grad():
        a = net(src, None, tgt)
        tgt2 = tgt.clone()
        tgt2[:, 3:] = 3
        torch.testing.assert_close(net(src, None, tgt2)[:, :3], a[:, :3])


@pytest.mark.parametrize("decoder", ["tensorcoder", "sdpa", "dimcross"])
def test_incremental_decode_step_matches_full_decode(decoder):
    self_attn = (partial(MultiHeadSDPAttention, n_heads=2, causal=True) if decoder == "sdpa"
                 else partial(MaskedTensorCoderAttention, n_filters=2, chunk_size=3))
    cross = (partial(TensorCoderCrossAttention, n_filters=2) if decoder == "dimcross"
             else partial(MultiHeadSDPAttention, n_heads=2))
    net = Seq2SeqModel(vocab_size=20, encoder_attention=partial(TensorCoderAttention, n_filters=2),
                       decoder_attention=self_attn, cross_attention=cross, hidden_size=8, num_layers=2,
                       intermediate_size=16, max_len=12).eval()
    src, tgt = torch.randint(3, 20, (3, 5)), torch.randint(3, 20, (3, 7))
    src_mask = torch.ones_like(src)
    src_mask[0, 3:] = 0
    memory = net.encode(src, src_mask)
    full = net.decode(tgt, memory, src_mask)  # (B, T, V)
    cache = None
    for t in range(1, 8):
        logits, cache = net.decode_step(tgt[:, :t], memory, src_mask, cache)
        torch.testing.assert_close(logits, full[:, t - 1])
