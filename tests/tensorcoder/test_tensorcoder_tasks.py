"""TensorCoder tasks: BERT masking, beam search with the GNMT length penalty, and train(cfg) end to end.

The end-to-end tests run the real experiment configs at smoke size on tiny files laid out like
shared/data (written to tmp_path), so they need no network and no real data.
"""

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from langrepr.lm_targets import IGNORE_INDEX, mask_tokens
from langrepr.tasks.translation import beam_search, gnmt_length_penalty
from langrepr.train import train
from tiny_data import write_ptb_and_multi30k


def test_mask_tokens_rates_and_padding():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, 50, (64, 100), generator=g)
    attn = torch.ones_like(ids)
    attn[:, 80:] = 0
    corrupted, labels = mask_tokens(ids, attn, mask_token_id=1, vocab_size=50, num_special_tokens=2,
                                    generator=torch.Generator().manual_seed(1))
    chosen = labels != IGNORE_INDEX
    assert not chosen[:, 80:].any(), "padding is never chosen"
    assert 0.13 < chosen[:, :80].float().mean() < 0.17
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(corrupted[~chosen], ids[~chosen])
    as_mask = (corrupted[chosen] == 1).float().mean()
    unchanged = (corrupted[chosen] == ids[chosen]).float().mean()
    assert 0.75 < as_mask < 0.85 and 0.07 < unchanged < 0.15  # 80% [MASK], ~10% kept (+ random hits)
    assert (corrupted >= 1).all()  # random replacements never produce <pad>
    again, _ = mask_tokens(ids, attn, 1, 50, 2, generator=torch.Generator().manual_seed(1))
    assert torch.equal(again, corrupted), "seeded masks are reproducible (fixed validation masks)"


class ToyTranslator(nn.Module):
    """Next-token distribution depends on the last token only: 'a' is likelier first, 'b eos' is likelier overall."""

    pad_token_id, bos_token_id, eos_token_id, max_len = 0, 1, 2, 20
    table = {1: [0, 0, 0.001, 0.599, 0.4], 3: [0, 0, 0.3, 0.35, 0.35], 4: [0, 0, 0.95, 0.025, 0.025],
             0: [0.2] * 5}  # 0: dead (filler) beams end in <pad>

    def encode(self, input_ids, attention_mask):
        return torch.zeros(input_ids.shape[0], input_ids.shape[1], 4)

    def decode_step(self, decoder_input_ids, memory, memory_mask, cache):
        probs = torch.tensor([self.table[int(t)] for t in decoder_input_ids[:, -1]]) + 1e-9
        return probs.log(), [torch.zeros(decoder_input_ids.shape[0], 1)]


def test_beam_search_finds_the_likelier_sequence():
    src = torch.ones(2, 3, dtype=torch.long)
    mask = torch.ones_like(src)
    assert beam_search(ToyTranslator(), src, mask, beam_size=5, alpha=0.6, max_len=10) == [[4], [4]]
    greedy = beam_search(ToyTranslator(), src, mask, beam_size=1, alpha=0.6, max_len=6)
    assert greedy[0][0] == 3  # greedy commits to 'a'
    assert all(len(h) <= 5 for h in greedy)  # the length limit forces EOS
    assert gnmt_length_penalty(1, 0.6) == pytest.approx(1.0) and gnmt_length_penalty(7, 0.6) == pytest.approx(2**0.6)


# ---------------------------------------------------------------- end to end on tiny shared/data-like files
def _fake_shared_data(root: Path) -> Path:
    return write_ptb_and_multi30k(root, pairs=120)


@pytest.mark.parametrize(
    ("experiment", "model", "metrics"),
    [
        ("tensorcoder_table1", "tensorcoder_8conv", ["val/nll_best", "test/test/nll", "model/attn_gflops"]),
        ("tensorcoder_table1", "tensorized", ["val/nll_best", "model/attn_gflops_layer"]),
        ("tensorcoder_table3", "tensorcoder_8conv_nmt", ["val/nll", "test/test/bleu", "model/attn_gflops"]),
    ],
)
def test_train_end_to_end_at_smoke_size(compose_cfg, tmp_path, experiment, model, metrics):
    data = _fake_shared_data(tmp_path / "data")
    overrides = [f"experiment={experiment}", "profile=quick", f"model={model}", "debug=smoke",
                 f"paths.data_dir={data}", "dataset.datamodule.vocab_size=200"]
    if experiment == "tensorcoder_table1":
        overrides[-1] = "dataset=ptb"
    else:
        overrides.append("dataset=multi30k")
    cfg = compose_cfg(*overrides)
    record = train(cfg, tmp_path / "run")
    assert record["status"] == "finished"
    for key in metrics:
        assert key in record["metrics"], (key, record["metrics"])
    assert record["params"]["embedding"] > 0
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["status"] == "finished"


# ---------------------------------------------------------------- reference rows (stage: pipeline)
class _ToyLMData:
    """The datamodule surface `masked_unigram_nll` reads, with hand-checkable tokens."""

    name, test_splits = "toy", ["test"]
    net_kwargs = {"vocab_size": 4}
    task_kwargs = {"mask_token_id": 1, "num_special_tokens": 2}

    def prepare_data(self):
        pass

    def setup(self, stage):
        pass

    @staticmethod
    def _batch(ids, real):
        return {"input_ids": torch.tensor([ids]), "attention_mask": torch.tensor([real])}

    def train_dataloader(self):
        return [self._batch([2, 2, 3, 0], [1, 1, 1, 0])]  # counts: id 2 twice, id 3 once; padding ignored

    def val_dataloader(self):
        return [self._batch([2, 3], [1, 1])]

    def test_dataloader(self):
        return [[self._batch([3, 3], [1, 1])]]


def test_unigram_reference_by_hand(tmp_path):
    from langrepr.pipelines.references.lm import masked_unigram_nll

    # add-1 counts over V = 4: [1, 1, 3, 2] / 7; mask_prob ~1 chooses every real token
    got = masked_unigram_nll(_ToyLMData(), str(tmp_path), mask_prob=1 - 1e-9)
    assert got["val/nll"] == pytest.approx(-(math.log(3 / 7) + math.log(2 / 7)) / 2)
    assert got["val/nll_best"] == got["val/nll"]
    assert got["test/test/nll"] == pytest.approx(-math.log(2 / 7))


class _ToyMTData:
    name, test_splits = "toy", ["test"]
    net_kwargs = {"eos_token_id": 2}
    words = {3: "ein", 4: "kleines", 5: "Haus", 6: "am", 7: "See"}

    def prepare_data(self):
        pass

    def setup(self, stage):
        pass

    def detokenize(self, ids):
        return " ".join(self.words[i] for i in ids)

    def _loader(self, refs):
        return [{"input_ids": torch.tensor([[3, 4, 5, 6, 7, 2, 0], [5, 6, 7, 3, 4, 2, 0]]),
                 "attention_mask": torch.tensor([[1] * 6 + [0]] * 2), "references": refs}]

    def val_dataloader(self):
        return self._loader(["ein kleines Haus am See", "Haus am See ein kleines"])  # exact copies: BLEU 100

    def test_dataloader(self):
        return [self._loader(["kein Boot", "gar nichts"])]  # no word in common: BLEU 0


def test_copy_source_reference(tmp_path):
    from langrepr.pipelines.references.lm import copy_source_bleu

    got = copy_source_bleu(_ToyMTData(), str(tmp_path))
    assert got["val/bleu"] == pytest.approx(100.0) and got["test/test/bleu"] == pytest.approx(0.0)
    examples = json.loads((tmp_path / "copy_source_test.json").read_text())["examples"]
    assert examples[0] == {"hyp": "ein kleines Haus am See", "ref": "kein Boot"}  # EOS and padding are not copied


@pytest.mark.parametrize(("experiment", "model", "metric"), [
    ("tensorcoder_table1", "reference_unigram_lm", "val/nll_best"),
    ("tensorcoder_table3", "reference_copy_source", "test/test/bleu"),
])
def test_reference_cells_run_through_train(compose_cfg, tmp_path, experiment, model, metric):
    data = _fake_shared_data(tmp_path / "data")
    overrides = [f"experiment={experiment}", "profile=quick", f"model={model}", f"paths.data_dir={data}"]
    overrides += (["dataset=ptb"] if experiment == "tensorcoder_table1"
                  else ["dataset=multi30k", "dataset.datamodule.vocab_size=200"])
    record = train(compose_cfg(*overrides), tmp_path / "run")
    assert record["status"] == "finished" and record["params"] == {}
    assert metric in record["metrics"] and record["metrics"][metric] >= 0


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_smoothed_and_nll_equal_two_cross_entropies(smoothing):
    """One log-softmax gives what F.cross_entropy gives twice (with and without smoothing), ignored labels skipped."""
    from langrepr.tasks.translation import smoothed_and_nll
    torch.manual_seed(0)
    logits = torch.randn(12, 7, requires_grad=True)
    labels = torch.randint(0, 7, (12,))
    labels[[2, 5, 11]] = IGNORE_INDEX
    smoothed, nll = smoothed_and_nll(logits, labels, smoothing)
    ce = nn.functional.cross_entropy
    want_s = ce(logits, labels, ignore_index=IGNORE_INDEX, label_smoothing=smoothing)
    want_n = ce(logits, labels, ignore_index=IGNORE_INDEX)
    assert smoothed.item() == pytest.approx(want_s.item(), rel=1e-6)
    assert nll.item() == pytest.approx(want_n.item(), rel=1e-6)
    grad, = torch.autograd.grad(smoothed, logits)
    want_grad, = torch.autograd.grad(want_s, logits)
    assert torch.allclose(grad, want_grad, atol=1e-7)
    assert grad[2].abs().sum() == 0          # an ignored position gets no gradient
