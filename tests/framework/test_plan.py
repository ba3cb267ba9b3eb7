"""langrepr.plan: the sweep is expanded as Hydra's basic sweeper does, every cell renders, and the numbers the plan
is built from (FLOPs, memory, accumulation, peaks) equal their hand counts."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from conftest import ROOT
from langrepr import plan
from langrepr.plan import Workload

GPU_DIR = ROOT / "docs" / "gpu"
H200 = json.loads((GPU_DIR / "gpu_check_nvidia_h200.json").read_text())
PACKED = json.loads((GPU_DIR / "packed_tensorcoder_table1_ptb_nvidia_h200.json").read_text())

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


def test_measured_floors_and_utilisation_replace_the_assumed_ones(tmp_path):
    cell = lambda kind, step_s, mfu: {"kind": kind, "fp16": {"step_s": step_s, "mfu": mfu}}   # noqa: E731
    record = {"device_name": "NVIDIA H200", "small": False,
              "papers": {"ewe": {"bert_ewe": cell("hf_classifier", 0.04, 0.06)},
                         "tensorcoder": {"a": cell("masked_lm", 0.02, 0.001), "b": cell("masked_lm", 0.04, 0.3)}}}
    (tmp_path / "gpu_check_h200.json").write_text(json.dumps(record))
    (tmp_path / "gpu_check_small_cpu.json").write_text(json.dumps({**record, "small": True, "device_name": "NVIDIA L4",
                                                                    "papers": {"leam": {"x": cell("x", 1, 0.9)}}}))
    checks = plan.load_checks(tmp_path)
    assert list(checks) == ["NVIDIA H200"]                                 # a --small run measures nothing
    a = plan.assumption_for("ewe", "h200", None, checks)
    assert a.utilisation == 0.3                                            # the most FLOP-bound cell's MFU
    assert a.floors == {"hf_classifier": 0.04, "masked_lm": 0.02}       # b set the utilisation: FLOP-bound, no floor
    assert a.floor_for("seq2seq")[0] == 0.02                               # the same layers as masked_lm
    assert a.floor_for("causal_lm") == (0.02, "not measured: the smallest measured (masked_lm; a lower bound)")
    borrowed = plan.assumption_for("ewe", "rtx4090", None, checks)
    assert borrowed.floors == a.floors and "borrowed from NVIDIA H200" in borrowed.text()
    assert plan.assumption_for("ewe", "rtx4090", None, {}).utilisation == plan.DEFAULT_UTILISATION
    assert plan.assumption_for("ewe", "rtx4090", 0.2, checks).utilisation == 0.2   # --utilisation wins


def test_h200_is_a_gpu_class():
    peak = plan.peak_for(plan.GPU_CLASSES["h200"])
    assert (peak["fp16"], peak["memory_gib"]) == (989.4, 141)


def _measured_cell(row: str) -> tuple[dict, dict]:
    """(the H200 check's cell, the plan's batch-1 measurement rebuilt from it): the pricing, not the counter."""
    cell = next(c for rows in H200["papers"].values() for r, c in rows.items() if r == row)
    per_example = cell["flops_per_step"] / cell["batch"]
    return cell, {"params": cell["params"], "step_flops": per_example, "fwd_flops": per_example / 3,
                  "act_fp32_bytes": 0, "act_fp16_bytes": 0}


def _priced(overrides: list[str], row: str, pack: int = 1) -> dict:
    (stage,) = plan.stages(plan.compose_cell(overrides)[0])
    cell, m = _measured_cell(row)
    return plan.project(stage, m, plan.assumption_for("", "h200", None, plan.load_checks(GPU_DIR), pack))


PTB = ["experiment=tensorcoder_table1", "profile=full", "dataset=ptb", "seed=1"]


@pytest.mark.parametrize("overrides,row", [([*PTB, "model=transformer_8head"], "transformer_8head"),
                                           ([*PTB, "model=tensorcoder_8conv"], "tensorcoder_8conv"),
                                           (["experiment=ewe_table3", "profile=full", "dataset=uspto", "seed=1",
                                             "model=bert_ewe"], "bert_ewe")])
def test_a_full_cell_alone_on_the_h200_is_priced_at_its_measured_rate(overrides, row):
    cell, _ = _measured_cell(row)
    s = _priced(overrides, row)
    measured = 1 / cell["fp16"]["steps_per_s"]
    assert s["bound"] == "floor" and s["step_s"] == pytest.approx(measured, rel=0.3)
    train = s["steps"] * measured / 3600
    assert train * 0.7 <= s["gpu_hours"] <= (s["steps"] + s["eval_batches"]) * measured / 3600 * 1.3


@pytest.mark.parametrize("model", sorted(PACKED["cells"]))
def test_five_ptb_cells_sharing_the_h200_are_priced_at_the_measured_packed_rate(model):
    ran = PACKED["cells"][model]
    s = _priced([*PTB, f"model={model}", f"trainer.max_steps={ran['steps']}"], "transformer_8head",
                pack=PACKED["cells_sharing"])
    assert s["wall_hours"] * 3600 == pytest.approx(PACKED["seconds"], rel=0.3)      # each cell's own 410 s
    assert s["gpu_hours"] == pytest.approx(s["wall_hours"] / PACKED["cells_sharing"])
    # the plan's validation schedule is the one the run logged (plus one test pass)
    assert s["eval_batches"] == pytest.approx(ran["validations"] * PACKED["val_batches"], rel=0.1)


def test_a_committed_plan_does_not_depend_on_the_machines_data_folder(monkeypatch):
    from langrepr.cell import cell_fingerprint

    prints = []
    for folder in ("/data/a", "/elsewhere/b"):
        monkeypatch.setenv("LANGREPR_DATA_DIR", folder)
        cfg, _ = plan.compose_cell([*PTB, "model=transformer_8head"])
        prints.append((cell_fingerprint(cfg), plan.portable_fingerprint(cfg, cell_fingerprint)))
    assert prints[0][0] != prints[1][0]                # the real identity counts where the data lives
    assert prints[0][1] == prints[1][1]                # the plan's does not


def _fake_plan(table, profile, gpu, utilisation, checks, extra=(), log=print, pack=1):
    a = plan.assumption_for("", gpu, utilisation, checks, pack)
    return {"table": table, "profile": profile, "settings": plan.settings(profile, gpu, utilisation, pack, extra),
            "assumption": a.__dict__ | {"text": a.text()}, "cells": [], "downloads": [], "findings": [],
            "totals": plan.totals([])}


def test_a_plan_with_other_settings_writes_beside_the_committed_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plan.cli, "plan_table", _fake_plan)
    plan.main(["--table", "leam_table3", "--out", str(tmp_path)])
    committed = (tmp_path / "leam_table3.json").read_text()
    plan.main(["--table", "leam_table3", "--out", str(tmp_path), "+trainer.max_steps=100"])
    plan.main(["--table", "leam_table3", "--out", str(tmp_path), "--gpu", "h200"])
    assert (tmp_path / "leam_table3.json").read_text() == committed
    assert json.loads((tmp_path / "leam_table3.partial.json").read_text())["settings"]["gpu"] == "h200"
    out = capsys.readouterr().out
    assert out.count("kept ") == 2 and "leam_table3.partial.md" in out
    plan.main(["--table", "leam_table3", "--out", str(tmp_path)])          # the same settings replace it
    assert (tmp_path / "leam_table3.json").read_text() == committed


@pytest.mark.parametrize("argv,says", [(["--utilisation", "0"], "--utilisation 0 "),
                                       (["--utilisation", "-0.5"], "--utilisation -0.5 "),
                                       (["--utilisation", "abc"], "invalid float"),
                                       (["--profile", "weird"], "unknown profile 'weird'"),
                                       (["--pack", "0"], "--pack 0 "), (["--pack", "9"], "--pack 9"),
                                       (["--gpu", "k80"], "invalid choice"),
                                       (["no_such_key=1"], "unknown key 'no_such_key'"),
                                       (["model=nosuch"], "unknown model 'nosuch'"),
                                       (["--table", "nosuch"], "unknown table nosuch")])
def test_a_bad_value_is_one_line_before_any_work(argv, says, monkeypatch, capsys):
    """Exit 2 as every entry point (`errors.exits_on_user_error`), not SystemExit(text)'s 1; `make plan` shows it."""
    monkeypatch.setattr(plan.cli, "plan_table", lambda *a, **k: pytest.fail("planned with a bad value"))
    with pytest.raises(SystemExit) as exit:
        plan.main(["--table", "leam_table3", "--out", "/nonexistent/plan", *argv])
    err = capsys.readouterr().err
    assert exit.value.code == 2
    assert err.startswith("error: ") and says in err and err.count("\n") == 1


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


# Training-set sizes as they stood in langrepr.plan.facts.SIZES before they moved into each dataset's `about:` node
TRAIN_SIZES = {"uspto": 1_900_000, "ptb": 929_589, "wikitext103": 103_227_021, "babylm10m": 10_000_000,
               "wmt16": 4_548_885, "iwslt16": 206_000, "ag_news": 120_000, "dbpedia": 560_000, "yahoo": 1_400_000,
               "yelp_polarity": 560_000, "yelp_full": 650_000, "nsmc_text": 150_000, "nsmc_style": 150_000,
               "conll2003": 14_041, "mimic50": None}
# Data sets with a datamodule and no size: their cells are planned at "unknown" steps per epoch
UNSIZED = {"synthetic", "multi30k", "wmt16_slice", "ptb_causal"}


def test_every_trained_data_set_keeps_its_size_in_its_about_node():
    """A dataset config losing its `about: size:` (or a new one without it) would silently plan unknown steps."""
    import yaml

    from langrepr.confpaths import option_files

    trained = {name for name, path in option_files("dataset").items()
               if "datamodule" in (yaml.safe_load(path.read_text()) or {})}
    assert trained - UNSIZED == set(TRAIN_SIZES) - {"nsmc_style"}     # nsmc_style reads nsmc_text's facts
    for name, train in TRAIN_SIZES.items():
        size = plan.size_of(name)
        assert size["train"] == train and size["unit"] and size["source"], name
        assert (ROOT / size["file"]).is_file() and "about:" in (ROOT / size["file"]).read_text(), name
        for cited in re.findall(r"\b(?:conf|docs)/[\w./-]+", size["source"]):
            assert (ROOT / cited.rstrip(".")).exists(), (name, cited)     # a source names a file that exists
    assert [plan.labels_of(n) for n in ("uspto", "mimic50", "conll2003", "ag_news")] == [1328, 50, 9, None]
    assert [plan.token_list_size(k) for k in ("bpe_base", "bpe_syllable", "dict_syllable")] == [37_027, 20_892, 37_822]
