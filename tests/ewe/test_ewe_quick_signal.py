"""What makes the EWE quick profile learn: mean pooling, the head bias at the label prior, AUROC, references.

Each piece is checked against values computed by hand (arXiv 2302.13475 defines none of them; they are
quick-profile switches whose full-profile defaults keep the paper's reading).
"""

import math
from functools import partial

import numpy as np
import pytest
import torch
from test_uspto_datamodule import FakeTokenizer

from langrepr.data.patents.synthetic import generate
from langrepr.data.patents.uspto import PatentDataModule
from langrepr.models.hf_backbone import HFSequenceClassifier
from langrepr.pipelines.references.patents import multilabel_scores
from langrepr.tasks.classification import MultilabelClassificationTask

TINY = dict(num_labels=3, hidden_size=16, num_layers=1, num_heads=4, intermediate_size=8,
            max_position_embeddings=8, vocab_size=20, dropout=0.0)


def test_mean_pooling_is_the_masked_mean_of_the_last_states():
    torch.manual_seed(0)
    net = HFSequenceClassifier("bert", pooling="mean", **TINY).eval()
    ids = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
    mask = (ids != 0).long()
    hidden = net.model.bert(input_ids=ids, attention_mask=mask).last_hidden_state
    by_hand = torch.stack([hidden[0, :3].mean(0), hidden[1, :2].mean(0)])
    assert torch.allclose(net(ids, mask), net.model.classifier(by_hand), atol=1e-6)
    first = HFSequenceClassifier("bert", **TINY).eval()
    first.load_state_dict(net.state_dict())
    assert not torch.allclose(first(ids, mask), net(ids, mask))        # the paper's pooler reads position 0
    with pytest.raises(ValueError, match="pooling"):
        HFSequenceClassifier("bert", pooling="max", **TINY)


def test_output_bias_starts_at_the_prior_log_odds():
    net = HFSequenceClassifier("bert", **TINY)
    MultilabelClassificationTask(net, partial(torch.optim.AdamW), num_labels=3, output_bias_init="prior",
                                 label_prior=[0.5, 0.2, 0.0])
    # log(0.5/0.5) = 0, log(0.2/0.8) = -1.3863, prior 0 is clamped to 1e-4: log(1e-4/0.9999) = -9.2102
    assert net.output_bias().tolist() == pytest.approx([0.0, math.log(0.25), math.log(1e-4 / (1 - 1e-4))], abs=1e-4)
    zero = HFSequenceClassifier("bert", **TINY)
    MultilabelClassificationTask(zero, partial(torch.optim.AdamW), num_labels=3)
    assert zero.output_bias().abs().sum() == 0
    with pytest.raises(ValueError, match="output_bias_init"):
        MultilabelClassificationTask(zero, partial(torch.optim.AdamW), num_labels=3, output_bias_init="prior")


def test_reference_scores_by_hand():
    y = np.array([[1, 0], [0, 1], [1, 1], [0, 0]])
    scores = np.array([[0.9, 0.1], [0.2, 0.6], [0.4, 0.8], [0.1, 0.7]])
    out = multilabel_scores(y, scores, threshold=0.3)
    # predicted at > 0.3: (0,0) (1,1) (2,0) (2,1) (3,1): TP 4, FP 1, FN 0 -> P 0.8, R 1.0, F1 0.8889
    assert out["precision"] == pytest.approx(0.8) and out["recall"] == pytest.approx(1.0)
    assert out["f1"] == pytest.approx(8 / 9)
    # micro AUROC over the 8 (doc, label) pairs: positives {.9,.6,.4,.8}, negatives {.1,.2,.1,.7}: 14/16 pairs
    assert out["auroc"] == pytest.approx(14 / 16)


def test_datamodule_gives_label_prior_and_raw_texts(tmp_path):
    generate(tmp_path / "syn", n_train=60, n_test=10, n_subclasses=6, seed=0)
    dm = PatentDataModule(data_dir=str(tmp_path / "syn"), tokenizer=FakeTokenizer(), cache_dir=str(tmp_path / "c"))
    dm.setup("fit")
    texts, y = dm.texts_and_labels("train")
    assert len(texts) == y.shape[0] == len(dm._splits["train"]) and texts[0].startswith("A ")
    assert dm.task_kwargs["label_prior"] == pytest.approx(y.mean(0).tolist())
    batch_labels = torch.cat([b["labels"] for b in dm.test_dataloader()[0]])
    assert np.array_equal(dm.texts_and_labels("2015A")[1], batch_labels.numpy())
