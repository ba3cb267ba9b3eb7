"""LEAM equations (models/leam.py) against values computed by hand, and the baselines' shapes/masking."""

from __future__ import annotations

import math

import pytest
import torch

from langrepr.errors import UserError
from langrepr.models.leam import (
    LEAM,
    attentive_average,
    class_name_embedding,
    cosine_compatibility,
    head_output_bias,
    label_targets,
    load_glove,
    make_head,
    masked_softmax,
    max_over_labels,
    phrase_compatibility,
)
from langrepr.models.text_baselines import SWEM, BiLSTM, KimCNN, masked_max, masked_mean


def test_cosine_compatibility_hand_values_and_padding():
    # words (3,4) -> unit (0.6, 0.8); (1,0); pad. labels (1,0), (0,2) -> (0,1)
    v = torch.tensor([[[3.0, 4.0], [1.0, 0.0], [5.0, 5.0]]])
    c = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    g = cosine_compatibility(v, c, torch.tensor([[1, 1, 0]]))
    expected = torch.tensor([[[0.6, 0.8], [1.0, 0.0], [0.0, 0.0]]])
    assert torch.allclose(g, expected, atol=1e-6)


def test_phrase_compatibility_depthwise_window3_hand_values():
    # one label channel pair; G over 4 positions; W_1 = (1, 2, 3), b = (0, -1), 'SAME' zero padding
    g = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 0.0]]])   # (B=1, L=4, K=2)
    w, b = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.0, -1.0])
    u = phrase_compatibility(g, w, b)
    # label 0 series (1,0,2,0): l0 = 0*1 + 1*2 + 0*3 = 2; l1 = 1*1 + 0*2 + 2*3 = 7; l2 = 0 + 4 + 0 = 4; l3 = 2*1 = 2
    # label 1 series (0,1,0,0): l0 = 3-1 = 2; l1 = 2-1 = 1; l2 = 1-1 = 0; l3 = 0-1 -> ReLU 0
    expected = torch.tensor([[[2.0, 2.0], [7.0, 1.0], [4.0, 0.0], [2.0, 0.0]]])
    assert torch.allclose(u, expected)


def test_phrase_compatibility_full_conv_mixes_labels():
    # full K->K kernel, window 1: u_l = ReLU(M g_l + b) with M = [[1, 1], [0, -1]]
    g = torch.tensor([[[1.0, 2.0], [3.0, -1.0]]])
    weight = torch.tensor([[[1.0], [1.0]], [[0.0], [-1.0]]])   # (out K, in K, W)
    u = phrase_compatibility(g, weight, torch.zeros(2))
    assert torch.allclose(u, torch.tensor([[[3.0, 0.0], [2.0, 1.0]]]))


def test_max_over_labels_and_masked_softmax_hand_values():
    u = torch.tensor([[[0.0, 1.0], [2.0, 0.5], [9.0, 9.0]]])
    m = max_over_labels(u)
    assert m.tolist() == [[1.0, 2.0, 9.0]]
    beta = masked_softmax(m, torch.tensor([[1, 1, 0]]))
    e1, e2 = math.exp(1.0), math.exp(2.0)
    assert torch.allclose(beta, torch.tensor([[e1 / (e1 + e2), e2 / (e1 + e2), 0.0]]))


def test_attentive_average_hand_values():
    beta = torch.tensor([[0.25, 0.75]])
    v = torch.tensor([[[4.0, 0.0], [0.0, 8.0]]])
    assert torch.allclose(attentive_average(beta, v), torch.tensor([[1.0, 6.0]]))


def test_heads_linear_and_mlp2_shapes_and_values():
    linear = make_head(2, 3, num_layers=1, dropout=0.0)
    with torch.no_grad():
        linear[1].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        linear[1].bias.copy_(torch.tensor([0.0, 0.0, -1.0]))
    assert torch.allclose(linear(torch.tensor([[2.0, 3.0]])), torch.tensor([[2.0, 3.0, 4.0]]))
    mlp = make_head(2, 3, num_layers=2, hidden=5, dropout=0.0)
    assert [type(m).__name__ for m in mlp] == ["Dropout", "Linear", "ReLU", "Dropout", "Linear"]
    assert mlp[1].out_features == 5
    with pytest.raises(UserError, match="head layers"):
        make_head(2, 3, num_layers=3)


def test_label_regulariser_targets():
    assert label_targets(3, multilabel=False).tolist() == [0, 1, 2]
    assert torch.equal(label_targets(3, multilabel=True), torch.eye(3))


def test_class_name_embedding_is_mean_of_name_words():
    words = torch.tensor([[0.0, 0.0], [9.0, 9.0], [1.0, 3.0], [3.0, 5.0]])
    c = class_name_embedding(words, [[2, 3], [3, 1]], unk_id=1)   # unknown id 1 is skipped
    assert torch.allclose(c, torch.tensor([[2.0, 4.0], [3.0, 5.0]]))
    fallback = class_name_embedding(words, [[1]], unk_id=1, generator=torch.Generator().manual_seed(0))
    assert fallback.shape == (1, 2)


def _tiny(conv="depthwise", head_layers=1, **kw):
    torch.manual_seed(0)
    return LEAM(vocab_size=20, num_labels=3, hidden_size=8, window=3, conv=conv, num_layers=head_layers,
                intermediate_size=6, dropout=0.0, **kw)


@pytest.mark.parametrize("conv,head_layers", [("depthwise", 1), ("full", 2), ("none", 1)])
def test_leam_forward_composes_the_equations(conv, head_layers):
    net = _tiny(conv, head_layers).eval()
    ids = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    mask = (ids != 0).long()
    v = net.embedding(ids)
    g = cosine_compatibility(v, net.label_embedding, mask)
    u = g if conv == "none" else phrase_compatibility(g, net.phrase_weight, net.phrase_bias)
    z = attentive_average(masked_softmax(max_over_labels(u), mask), v)
    assert torch.allclose(net(ids, mask), net.head(z), atol=1e-6)
    assert net.label_logits().shape == (3, 3)
    beta, _ = net.attention(ids, mask)
    assert beta[1, 2:].abs().sum() == 0 and torch.allclose(beta.sum(1), torch.ones(2))


def test_leam_parameter_counts_paper_vs_code():
    depthwise, full = _tiny("depthwise"), _tiny("full")
    assert depthwise.phrase_weight.numel() == 3 and full.phrase_weight.numel() == 3 * 3 * 3
    assert depthwise.phrase_bias.numel() == 3


def test_leam_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="window"):
        LEAM(vocab_size=10, num_labels=2, hidden_size=4, window=9, max_length=5)
    with pytest.raises(UserError, match="odd"):
        LEAM(vocab_size=10, num_labels=2, hidden_size=4, window=4)
    with pytest.raises(UserError, match="class names for 3 labels"):
        _tiny().init_label_embeddings([[2], [3]])
    glove = tmp_path / "glove.txt"
    glove.write_text("the 0.1 0.2\nof 0.3 0.4\n")
    with pytest.raises(UserError, match="expected 8"):
        load_glove(glove, ["[PAD]", "[UNK]", "the"], 8)
    glove.write_text("the 0.1 x\n")
    with pytest.raises(UserError, match="not a GloVe line"):
        load_glove(glove, ["the"], 2)


def test_glove_rows_and_label_init_from_class_names(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("sports 1 2 3 4 5 6 7 8\nworld 8 7 6 5 4 3 2 1\n")
    net = _tiny(glove_path=str(glove))
    vocab = ["[PAD]", "[UNK]", "sports", "world"] + [f"w{i}" for i in range(16)]
    net.prepare_embeddings(vocab, [[2], [3], [2, 3]])
    assert net.embedding.weight[2].tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert torch.allclose(net.label_embedding[2], torch.full((8,), 4.5))


def test_masked_pooling_and_baselines_ignore_padding():
    v = torch.tensor([[[1.0, -5.0], [3.0, 1.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert masked_mean(v, mask).tolist() == [[2.0, -2.0]]
    assert masked_max(v, mask).tolist() == [[3.0, 1.0]]
    ids = torch.tensor([[3, 4, 5, 0, 0], [6, 0, 0, 0, 0]])
    longer = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)   # more padding: same logits
    for net in (SWEM(20, 3, 8, "concat"), KimCNN(20, 3, 8, widths=(2, 3), intermediate_size=4), BiLSTM(20, 3, 8, 5),
                _tiny()):
        net.eval()
        out = net(ids, (ids != 0).long())
        assert out.shape == (2, 3)
        assert torch.allclose(out, net(longer, (longer != 0).long()), atol=1e-5), type(net).__name__


def test_label_regulariser_loss_weight_and_targets():
    from functools import partial

    from langrepr.tasks.label_embedding import LabelRegularisedMultilabelTask, LabelRegularisedSingleLabelTask

    net = _tiny(label_penalty=1.0)
    with torch.no_grad():   # head(c_k) = c_k[:3]: logits of label k are its own first 3 coordinates
        net.label_embedding.copy_(torch.tensor([[2.0, 0, 0, 0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 0, 0, 0],
                                                [0, 0, 0, 0, 0, 0, 0, 0]]))
        net.head[1].weight.copy_(torch.eye(3, 8))
        net.head[1].bias.zero_()
    single = LabelRegularisedSingleLabelTask(net, partial(torch.optim.Adam), num_labels=3)
    e = math.e
    expected = (-math.log(e**2 / (e**2 + 2)) - math.log(e / (e + 2)) - math.log(1 / 3)) / 3
    assert single.label_regulariser().item() == pytest.approx(expected, rel=1e-5)
    net.label_penalty = 0.0
    assert single.label_regulariser() is None
    net.label_penalty = 2.0
    multi = LabelRegularisedMultilabelTask(net, partial(torch.optim.Adam), num_labels=3)
    logits = net.label_logits()
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.eye(3))
    assert multi.label_regulariser().item() == pytest.approx(2.0 * bce.item(), rel=1e-5)


def test_precision_at_k_hand_values():
    from langrepr.tasks.label_embedding import PrecisionAtK

    metric = PrecisionAtK(k=2)
    metric.update(torch.tensor([[0.9, 0.1, 0.8], [0.2, 0.7, 0.6]]), torch.tensor([[1, 0, 0], [0, 1, 1]]))
    assert metric.compute().item() == pytest.approx((0.5 + 1.0) / 2)


def test_macro_auroc_skips_labels_without_both_classes_micro_keeps_every_cell():
    from langrepr.metrics import MacroAUROC, MicroAUROC

    scores = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.5], [0.6, 0.3, 0.5]])
    labels = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 0]])       # label 2 never positive
    macro, micro = MacroAUROC(), MicroAUROC()
    macro.update(scores, labels)
    micro.update(scores, labels)
    assert macro.compute().item() == pytest.approx(1.0)            # labels 0-1 rank perfectly; 2 is left out
    # micro over all 9 cells (CAML): positives 0.9, 0.8 vs the 7 negatives incl. label 2's 0.5s -> all ordered
    assert micro.compute().item() == pytest.approx(1.0)
    micro.update(torch.tensor([[0.1, 0.1, 0.95]]), torch.tensor([[0, 0, 0]]))   # label 2 now outranks both
    assert micro.compute().item() == pytest.approx(18 / 20)        # 0.9 beats 9 of 10 negatives, 0.8 beats 9


def test_output_bias_is_the_last_head_bias_and_a_prior_start_reaches_the_logits():
    """The shared net contract a multi-label task with output_bias_init=prior uses (EWE quick tables)."""
    for layers in (1, 2):
        net = LEAM(vocab_size=10, num_labels=3, hidden_size=4, window=3, num_layers=layers, intermediate_size=5).eval()
        assert net.output_bias() is net.head[-1].bias and net.output_bias().shape == (3,)
        with torch.no_grad():
            net.output_bias().copy_(torch.tensor([-2.0, 0.0, 2.0]))
            net.head[-1].weight.zero_()
        logits = net(torch.tensor([[2, 3, 0]]), torch.tensor([[1, 1, 0]]))
        torch.testing.assert_close(logits, torch.tensor([[-2.0, 0.0, 2.0]]))



def test_prior_output_bias_reaches_every_row_of_table5_default_zero_keeps_the_paper_start():
    """output_bias_init=prior on the LEAM task starts LEAM's b_2 and the make_head baselines' last bias alike."""
    from functools import partial

    from langrepr.tasks.label_embedding import LabelRegularisedMultilabelTask

    prior = [0.1, 0.5, 0.8]
    log_odds = torch.log(torch.tensor(prior) / (1 - torch.tensor(prior)))
    for make in (lambda: _tiny(), lambda: SWEM(20, 3, 8, "concat"), lambda: KimCNN(20, 3, 8, widths=(2, 3), intermediate_size=4),
                 lambda: BiLSTM(20, 3, 8, 5)):
        net = make()
        bias = head_output_bias(net)
        assert bias is net.head[-1].bias and bias.shape == (3,), type(net).__name__
        before = bias.detach().clone()
        LabelRegularisedMultilabelTask(net, partial(torch.optim.Adam), num_labels=3)      # default: zero = untouched
        torch.testing.assert_close(bias.detach(), before)
        LabelRegularisedMultilabelTask(net, partial(torch.optim.Adam), num_labels=3, output_bias_init="prior",
                                       label_prior=prior)
        torch.testing.assert_close(bias.detach(), log_odds)
        with torch.no_grad():
            net.head[-1].weight.zero_()
        ids = torch.tensor([[3, 4, 5, 0]])
        torch.testing.assert_close(torch.sigmoid(net.eval()(ids, (ids != 0).long())), torch.tensor([prior]))
    with pytest.raises(ValueError, match="label_prior"):
        LabelRegularisedMultilabelTask(KimCNN(20, 3, 8, widths=(2,), intermediate_size=4), partial(torch.optim.Adam),
                                       num_labels=3, output_bias_init="prior")
    assert head_output_bias(torch.nn.Linear(2, 2)) is None
