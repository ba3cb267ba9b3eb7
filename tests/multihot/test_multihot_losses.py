"""Multi-hot LM losses (eqs. 3-7) against values computed by hand, incl. the paper's 'Archimedes' example."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from langrepr.models.multihot_losses import (
    answer_log_probs,
    binary_ce,
    mlm_loss,
    multi_hot_softmax_ce,
    multi_hot_targets,
    multi_hot_terms,
    slot_counts,
    softmax_ce,
    target_cross_entropy,
)

LETTERS = "Archimedes"                      # 10 letters, 9 distinct, 'e' twice
VOCAB = sorted(set(LETTERS))                 # V = 9


def archimedes(logits_row=None):
    ids = torch.tensor([[VOCAB.index(c) for c in LETTERS]])
    mask = torch.ones_like(ids, dtype=torch.bool)
    logits = torch.zeros(1, len(VOCAB)) if logits_row is None else torch.tensor([logits_row])
    return logits, ids, mask


def test_archimedes_counts_and_shares():
    _, ids, mask = archimedes()
    counts, first = slot_counts(ids, mask)
    e_slots = [i for i, c in enumerate(LETTERS) if c == "e"]
    assert counts[0, e_slots].tolist() == [2, 2] and counts.sum() == 12        # 8 singles + 2 slots of count 2
    assert first.sum() == 9 and not first[0, e_slots[1]]
    assert multi_hot_targets(ids, mask, len(VOCAB))[0, VOCAB.index("e")] == 2


def test_archimedes_eq5_terms_under_uniform_softmax():
    logits, ids, mask = archimedes()                           # p_k = 1/9 for every letter
    ell, _, _ = multi_hot_terms(logits, ids, mask)
    a, e = LETTERS.index("A"), LETTERS.index("e")
    assert ell[0, a].item() == pytest.approx(math.log(0.1 * 9))   # log(1/10) − log(1/9) = log 0.9 < 0
    assert ell[0, e].item() == pytest.approx(math.log(0.2 * 9))   # y_e/n = 2/10 → log 1.8 > 0


def test_archimedes_eq6_eq7_both_readings():
    logits, ids, mask = archimedes()
    # prose: only 'e' is still below its target share → loss = log 1.8 (label weight does not change a mean)
    assert multi_hot_softmax_ce(logits, ids, mask, "prose", "one").item() == pytest.approx(math.log(1.8))
    assert multi_hot_softmax_ce(logits, ids, mask, "prose", "count").item() == pytest.approx(math.log(1.8))
    # printed: the 8 letters already above 1/10 are kept → loss = log 0.9 (negative)
    assert multi_hot_softmax_ce(logits, ids, mask, "printed", "count").item() == pytest.approx(math.log(0.9))


def test_archimedes_sce_counts_duplicates():
    logits, ids, mask = archimedes()
    assert softmax_ce(logits, ids, mask).item() == pytest.approx(10 * math.log(9))


def test_two_answer_group_by_hand():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))          # p = (0.6, 0.3, 0.1), answers {0, 1}, n = 2
    ids, mask = torch.tensor([[0, 1]]), torch.tensor([[True, True]])
    assert softmax_ce(logits, ids, mask).item() == pytest.approx(-math.log(0.6) - math.log(0.3))
    assert multi_hot_softmax_ce(logits, ids, mask, "prose").item() == pytest.approx(math.log(0.5 / 0.3))
    assert multi_hot_softmax_ce(logits, ids, mask, "printed").item() == pytest.approx(math.log(0.5 / 0.6))
    assert target_cross_entropy(logits.log_softmax(1).gather(1, ids), mask).item() == pytest.approx(
        -(math.log(0.6) + math.log(0.3)) / 2)


def test_bce_by_hand():
    logits = torch.tensor([[2.0, -1.0]])
    ids, mask = torch.tensor([[0]]), torch.tensor([[True]])
    expected = (math.log1p(math.exp(-2.0)) + math.log1p(math.exp(-1.0))) / 2
    assert binary_ce(logits, ids, mask).item() == pytest.approx(expected)


def test_single_token_mhsce_is_plain_cross_entropy():
    torch.manual_seed(0)
    logits, ids = torch.randn(5, 7), torch.randint(0, 7, (5, 1))
    mask = torch.ones_like(ids, dtype=torch.bool)
    expected = F.cross_entropy(logits, ids[:, 0])
    assert multi_hot_softmax_ce(logits, ids, mask).item() == pytest.approx(expected.item(), rel=1e-6)
    assert softmax_ce(logits, ids, mask).item() == pytest.approx(expected.item(), rel=1e-6)


def test_batch_is_the_mean_of_rows_and_padding_is_ignored():
    torch.manual_seed(1)
    logits = torch.randn(3, 11)
    ids = torch.tensor([[1, 2, 2, 0], [5, 0, 0, 0], [3, 4, 6, 3]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    for name in ("sce", "bce", "mhsce"):
        rows = [mlm_loss(name, logits[i:i + 1], ids[i:i + 1, :int(mask[i].sum())],
                         mask[i:i + 1, :int(mask[i].sum())]) for i in range(3)]
        assert mlm_loss(name, logits, ids, mask).item() == pytest.approx(torch.stack(rows).mean().item(), rel=1e-5)


def test_prose_gradient_raises_only_the_answers_below_target():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]])).requires_grad_()
    multi_hot_softmax_ce(logits, torch.tensor([[0, 1]]), torch.tensor([[True, True]])).backward()
    grad = logits.grad[0]
    assert grad[1] < 0 < grad[0] and grad[2] > 0       # descent raises answer 1, lowers 0 (over target) and 2


def test_printed_reading_has_no_signal_from_a_uniform_start():
    """Printed eq. 6 keeps only answers already above target: at init (all below) nothing is learned."""
    logits = torch.zeros(2, 50, requires_grad=True)
    ids, mask = torch.tensor([[3, 4], [7, 9]]), torch.ones(2, 2, dtype=torch.bool)
    loss = multi_hot_softmax_ce(logits, ids, mask, "printed")
    loss.backward()
    assert loss.item() == 0 and torch.count_nonzero(logits.grad) == 0


def test_unknown_options_are_rejected():
    logits, ids, mask = archimedes()
    with pytest.raises(ValueError, match="eq6"):
        multi_hot_softmax_ce(logits, ids, mask, eq6="both")
    with pytest.raises(ValueError, match="unknown loss"):
        mlm_loss("focal", logits, ids, mask)


def test_float64_logits_give_float64_losses_by_hand():
    """A float64 check stays float64: log(y/n) with n = 3 is not rounded to float32 (off by ~1e-8 if it is)."""
    p = [0.5, 0.3, 0.2]
    logits = torch.log(torch.tensor([p], dtype=torch.float64))
    ids, mask = torch.tensor([[0, 1, 1]]), torch.tensor([[True, True, True]])    # y = (1, 2), n = 3
    ell, _, _ = multi_hot_terms(logits, ids, mask)
    assert ell.dtype == torch.float64
    assert abs(ell[0, 0].item() - (math.log(1 / 3) - math.log(0.5))) < 1e-14
    assert abs(ell[0, 1].item() - (math.log(2 / 3) - math.log(0.3))) < 1e-14
    prose = multi_hot_softmax_ce(logits, ids, mask, "prose")                      # only answer 1 is below 2/3
    assert prose.dtype == torch.float64 and abs(prose.item() - math.log((2 / 3) / 0.3)) < 1e-14
    sce = softmax_ce(logits, ids, mask)
    assert sce.dtype == torch.float64 and abs(sce.item() + math.log(0.5) + 2 * math.log(0.3)) < 1e-14
    bce_logits = torch.tensor([[2.0, -1.0, 0.5]], dtype=torch.float64)           # answer 0 only
    bce = binary_ce(bce_logits, torch.tensor([[0]]), torch.tensor([[True]]))
    expected = (math.log1p(math.exp(-2.0)) + math.log1p(math.exp(-1.0)) + math.log1p(math.exp(0.5))) / 3
    assert bce.dtype == torch.float64 and abs(bce.item() - expected) < 1e-15


def test_half_precision_logits_are_promoted_to_float32():
    logits, ids, mask = archimedes()
    for dtype in (torch.float16, torch.bfloat16):
        for name in ("sce", "bce", "mhsce"):
            assert mlm_loss(name, logits.to(dtype), ids, mask).dtype == torch.float32, (dtype, name)
        assert target_cross_entropy(answer_log_probs(logits.to(dtype), ids), mask).dtype == torch.float32


def test_top_k_recall_reads_only_the_order_of_the_logits():
    """The rank score of Table 2 (val/mlm_top10): distinct answers among the k best, of min(distinct, k)."""
    from langrepr.tasks.multihot_mlm import top_k_recall

    scores = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0, 0.0],
                           [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]])
    target_ids = torch.tensor([[0, 3, 0, 5], [5, 0, 0, 0]])      # a group (0, 3, 0 again) and a single 5
    target_mask = torch.tensor([[True, True, True, False], [True, False, False, False]])
    got = top_k_recall(scores, target_ids, target_mask, k=2)
    # position 0: distinct answers {0, 3}, top-2 = {0, 1}: 1 of min(2, 2); position 1: 5 is the best: 1 of 1
    assert got.tolist() == [50.0, 100.0]
    # any monotone map of the logits (BCE's sigmoids, a softmax) ranks alike
    assert torch.equal(top_k_recall(torch.sigmoid(scores), target_ids, target_mask, k=2), got)
    assert torch.equal(top_k_recall(scores.log_softmax(1), target_ids, target_mask, k=2), got)
    # an answer outside the top k is a miss: reverse the first row's order
    assert top_k_recall(-scores, target_ids, target_mask, k=2).tolist() == [0.0, 0.0]
