"""Multi-hot input (eqs. 1-2) by hand, the BERT wrapping through inputs_embeds, and the untied output layer."""

from __future__ import annotations

import pytest
import torch

from langrepr.models.multihot_heads import SpanQAHead
from langrepr.models.multihot_lm import MultiHotEmbedding, MultiHotLM, multi_hot_sum


def test_eq1_by_hand():
    T = torch.tensor([[[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]]])          # (B=1, L=1, G=3, H=2)
    TP = torch.tensor([[1.0, 0.5], [2.0, -1.0], [7.0, 7.0]])
    mask = torch.tensor([[[True, True, False]]])
    # 1*[1, 2]*[1, .5] + [3, 4]*[2, -1] = [1, 1] + [6, -4]; the empty slot adds nothing
    assert multi_hot_sum(T, TP, mask).tolist() == [[[7.0, -3.0]]]


def test_slot_order_matters_and_pos_tag_is_added():
    emb = MultiHotEmbedding(vocab_size=10, hidden_size=4, max_group=3, num_pos_tags=5, tp_init="normal")
    ids_ab, ids_ba = torch.tensor([[[3, 4]]]), torch.tensor([[[4, 3]]])
    mask, pos = torch.ones(1, 1, 2, dtype=torch.bool), torch.tensor([[2]])
    assert not torch.allclose(emb(ids_ab, mask, pos), emb(ids_ba, mask, pos))
    expected = (emb.token.weight[3] * emb.slot.weight[0] + emb.token.weight[4] * emb.slot.weight[1]
                + emb.pos_tag.weight[2])
    assert torch.allclose(emb(ids_ab, mask, pos)[0, 0], expected)


def test_tp_starts_at_ones_so_single_tokens_keep_their_embedding():
    emb = MultiHotEmbedding(10, 4, 3, 5)
    ids, mask, pos = torch.tensor([[[7, 0, 0]]]), torch.tensor([[[True, False, False]]]), torch.tensor([[0]])
    assert torch.allclose(emb(ids, mask, pos)[0, 0], emb.token.weight[7] + emb.pos_tag.weight[0])
    plain = MultiHotEmbedding(10, 4, 3, 5, tp_init="normal", single_tokens="plain")
    assert torch.allclose(plain(ids, mask, pos)[0, 0], plain.token.weight[7] + plain.pos_tag.weight[0])
    with pytest.raises(ValueError, match="max_group"):
        emb(torch.zeros(1, 1, 4, dtype=torch.long), torch.ones(1, 1, 4, dtype=torch.bool), pos)


def test_bert_wrapping_shapes_untied_head_and_qa_head():
    torch.manual_seed(0)
    net = MultiHotLM(vocab_size=50, hidden_size=32, num_layers=1, num_heads=4, intermediate_size=64,
                     max_positions=16, max_group=4).eval()
    ids = torch.randint(5, 50, (2, 7, 3))
    mask = torch.ones(2, 7, 3, dtype=torch.bool)
    pos, att = torch.zeros(2, 7, dtype=torch.long), torch.ones(2, 7, dtype=torch.long)
    hidden = net(ids, mask, pos, att)
    assert hidden.shape == (2, 7, 32) and net.mlm_logits(hidden).shape == (2, 7, 50)
    assert net.mlm_head.weight.data_ptr() != net.embed.token.weight.data_ptr()     # untied
    assert net.bert.embeddings.word_embeddings.num_embeddings == 1                 # T lives in MultiHotEmbedding
    # BERT's position embedding (P of eq. 2) is applied: swapping two positions changes the output
    swapped = ids.clone()
    swapped[:, [1, 2]] = ids[:, [2, 1]]
    assert not torch.allclose(net(swapped, mask, pos, att)[:, 1], hidden[:, 2], atol=1e-5)
    start, end = SpanQAHead(net)(ids, mask, pos, att)
    assert start.shape == end.shape == (2, 7)
