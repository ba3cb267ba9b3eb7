"""langrepr.plan: the sweep is expanded as Hydra's basic sweeper does, every cell renders, and the numbers the plan
is built from (FLOPs, memory, accumulation, peaks) equal their hand counts."""

from __future__ import annotations

import json
import math

import pytest
import torch

from langrepr import plan
from langrepr.plan import Workload

# IWSLT cells at their real widths, cut to 8-token pairs and a 100-word vocabulary so that they build in seconds
TINY_IWSLT = ["dataset.datamodule.max_source_len=8", "dataset.datamodule.max_target_len=8",
              "dataset.datamodule.vocab_size=100"]


class TwoLinear(Workload):
    """8 -> 16 -> ReLU -> 4, summed: small enough to count by hand."""

    def build(self):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

    def key(self) -> str:
        return "two-linear"

    def inputs(self, batch, device, generator):
        return {"x": torch.randn(batch, 8, generator=generator)}

    def loss(self, net, x):
        return net(x["x"]).sum()


def test_flops_and_saved_activations_of_a_tiny_linear_model_equal_the_hand_count():
    m = plan.measure(TwoLinear("test", None, {}, {}))
    forward = 2 * (8 * 16 + 16 * 4)                 # 2 FLOPs per multiply-add, both layers
    backward = 2 * (8 * 16 + 16 * 4) + 2 * 16 * 4   # both weight gradients + the second layer's input gradient
    assert m["fwd_flops"] == forward == 384
    assert m["step_flops"] == forward + backward == 896
    assert m["params"] == 8 * 16 + 16 + 16 * 4 + 4
    # saved for backward: the input x (8 floats) and the ReLU output (16 floats, also the second layer's input,
    # one storage counted once); the weights are parameters, not activations
    assert m["act_fp32_bytes"] == (8 + 16) * 4 and m["act_fp16_bytes"] == (8 + 16) * 2
    stage = plan.Stage("train", TwoLinear("test", None, {}, {}), batch=32, steps=1000, steps_note="", examples="")
    row = plan.project(stage, m, plan.assumption_for("ewe", "rtx4090", 0.5, {}))
    assert row["flops_per_step"] == 896 * 32                      # batch 1, scaled linearly
    assert row["gpu_hours"] == pytest.approx(896 * 32 * 1000 / (165.2e12 * 0.5) / 3600)


class BiLSTMWork(Workload):
    """A bidirectional LSTM over 7 steps of 3 features, 5 units per direction."""

    def build(self):
        return torch.nn.LSTM(3, 5, batch_first=True, bidirectional=True)

    def key(self) -> str:
        return "bilstm"

    def inputs(self, batch, device, generator):
        return {"x": torch.randn(batch, 7, 3, generator=generator)}

    def loss(self, net, x):
        return net(x["x"])[0].sum()


def test_lstm_flops_are_counted_by_hand():
    m = plan.measure(BiLSTMWork("test", None, {}, {}))
    forward = 2 * 4 * (3 + 5) * 5 * 7 * 2          # 2 x gates x (input + hidden) x hidden x tokens x directions
    assert m["rnn_flops_analytic"] == forward == m["fwd_flops"]
    assert m["step_flops"] == 3 * forward


def test_memory_formula_by_hand():
    # 10M parameters, AMP: fp32 master 40 MB + fp16 autocast copy 20 MB + fp32 grads 40 MB + AdamW 80 MB
    mem = plan.memory_bytes(10_000_000, act_per_example=1_000_000, micro_batch=8, optimizer="AdamW")
    assert mem["weights_fp16_copy"] == 20_000_000
    assert (mem["weights_fp32"], mem["gradients"], mem["optimizer"]) == (40_000_000, 40_000_000, 80_000_000)
    assert mem["activations"] == 8_000_000
    assert mem["total"] == 188_000_000
    sgd = plan.memory_bytes(10_000_000, 0, 1, optimizer="SGD", mixed=False)
    assert sgd["optimizer"] == 0 and sgd["weights_fp16_copy"] == 0 and sgd["total"] == 80_000_000


def test_accumulation_is_the_fewest_steps_whose_micro_batch_fits():
    static = 18 * 1_000_000                                   # 1M params: 18 MB before activations
    per_example = 10_000_000
    budget = static + 8 * per_example                         # room for 8 examples
    assert plan.accumulation(1_000_000, per_example, 32, budget) == (4, 8)
    assert plan.accumulation(1_000_000, per_example, 32, budget + 16 * per_example) == (2, 16)
    assert plan.accumulation(1_000_000, per_example, 6, static + 5 * per_example) == (2, 3)   # k divides the batch
    assert plan.accumulation(1_000_000, per_example, 32, static - 1) == (None, None)          # weights alone too big


def test_peak_table_matches_device_names():
    assert plan.peak_for("NVIDIA H200")["bf16"] == 989.4
    assert plan.peak_for("NVIDIA A100-SXM4-80GB")["label"] == "NVIDIA A100"    # not the A10
    assert plan.peak_for("NVIDIA A10")["fp16"] == 125.0
    assert plan.peak_for("NVIDIA GeForce RTX 4090")["memory_gib"] == 24
    assert plan.peak_for("NVIDIA H100 PCIe")["fp16"] < plan.peak_for("NVIDIA H100 80GB HBM3")["fp16"]
    assert plan.peak_for("NVIDIA A10G") is None                               # unknown: MFU left null
    for gpu in plan.GPU_CLASSES.values():
        assert plan.peak_for(gpu) is not None


def test_measured_utilisation_replaces_the_assumed_one(tmp_path):
    record = {"device_name": "NVIDIA H200", "small": False,
              "papers": {"ewe": {"bert_ewe": {"fp16": {"mfu": 0.4}}},
                         "tensorcoder": {"a": {"fp16": {"mfu": 0.1}}, "b": {"fp16": {"mfu": 0.3}}}}}
    (tmp_path / "gpu_check_h200.json").write_text(json.dumps(record))
    (tmp_path / "gpu_check_small_cpu.json").write_text(json.dumps({**record, "small": True,
                                                                    "papers": {"leam": {"x": {"fp16": {"mfu": 0.9}}}}}))
    measured = plan.measured_utilisation(tmp_path)
    assert measured["ewe"][0] == 0.4 and measured["tensorcoder"][0] == pytest.approx(0.2)
    assert "leam" not in measured                                             # a --small run measures nothing
    assert plan.assumption_for("ewe", "rtx4090", None, measured).utilisation == 0.4
    assert plan.assumption_for("leam", "rtx4090", None, measured).utilisation == plan.DEFAULT_UTILISATION
    assert plan.assumption_for("ewe", "rtx4090", 0.2, measured).utilisation == 0.2   # --utilisation wins


def test_sweep_expands_as_the_basic_sweeper():
    params = plan.compose(["experiment=tensorcoder_table1", "profile=full"], hydra=True).hydra.sweeper.params
    cells = plan.sweep_cells("tensorcoder_table1", "full")
    assert len(cells) == math.prod(len(str(v).split(",")) for v in params.values())   # the product of the sweeps
    assert all("experiment=tensorcoder_table1" in c and "profile=full" in c for c in cells)
    assert {next(o for o in c if o.startswith("dataset=")) for c in cells} == {"dataset=ptb", "dataset=wikitext103"}
    assert len({tuple(c) for c in cells}) == len(cells)


def test_a_sweep_key_no_file_declares_is_a_finding_and_still_planned():
    cfg, findings = plan.compose_cell(["experiment=tensorcoder_table3", "profile=full",
                                       "model=transformer_1head_nmt", "leam_window=5"])
    assert cfg.leam_window == 5 and len(findings) == 1 and "leam_window" in findings[0]


def test_plan_of_a_small_table_renders_every_cell(tmp_path):
    result = plan.plan_table("tensorcoder_table3", "full", "rtx4090", None, {}, TINY_IWSLT, log=lambda *_: None)
    names = [plan.cell_name(c) for c in plan.sweep_cells("tensorcoder_table3", "full", TINY_IWSLT)]
    assert [c["cell"] for c in result["cells"]] == names and len(names) >= 5
    gradient = [c for c in result["cells"] if c["stages"]]
    assert [c["cell"] for c in gradient] == [n for n in names if "reference_copy_source" not in n]
    assert [c["cell"] for c in result["cells"] if c.get("cpu")] == [n for n in names if "reference_copy_source" in n]
    for cell in gradient:
        (s,) = cell["stages"]
        assert s["steps"] == 50_000 and s["batch"] == 64 and s["flops_per_step"] > 0 and s["gpu_hours"] > 0
        assert s["fits"] and s["accumulation"] == 1
    assert result["totals"]["gpu_hours"] == pytest.approx(sum(c["stages"][0]["gpu_hours"] for c in gradient))
    assert result["downloads"] == ["iwslt16"] and not result["findings"]
    text = plan.render_table(result)
    for name in names:
        assert name in text
    assert "35%" in text and "RTX 4090" in text and "CC BY-NC-ND 4.0" in text
    assert "All papers" in plan.render_all([result])


def test_a_datamodule_training_cap_is_what_the_plan_counts():
    cell = ["experiment=grid", "grid_task=conll2003", "encoder=bert", "input=words", "seed=1"]
    (full,) = plan.stages(plan.compose_cell([*cell, "profile=full"])[0])
    (quick,) = plan.stages(plan.compose_cell([*cell, "profile=quick"])[0])
    assert full.examples.startswith("14,041 sentences")
    assert quick.examples == "8,000 sentences (max_train_samples)"
