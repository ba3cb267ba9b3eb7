"""The judge: learning floor, one Welch-t noise rule for every comparison (ratios too), equivalence margins,
stability only with ≥ 5 seeds, and verdicts recomputable from a table's JSON alone."""

from __future__ import annotations

import json
import math

import pytest

from conftest import ROOT
from langrepr import verdicts
from langrepr.errors import UserError
from langrepr.table_spec import TableSpec
from langrepr.tables import build, claim_line, rejudge, render, to_markdown


def run(model: str, seed: int, value: float) -> dict:
    return {"status": "finished", "seed": seed, "commit": "abc1234", "choices": {"model": model},
            "metrics": {"test/bleu": value}, "params": {}, "config": {}, "dir": f"{model}/{seed}", "mtime": 0.0}


BLEU = {
    "name": "toy_mt", "title": "Toy MT",
    "columns": [{"name": "BLEU", "metric": "test/bleu", "fmt": "{:.1f}", "floor": "Copy", "margin": 5.0}],
    "rows": [{"key": "T8", "match": {"model": "t8"}}, {"key": "C8", "match": {"model": "c8"}},
             {"key": "Copy", "match": {"model": "copy"}, "reference": True}],
    "claims": [{"text": "C8 is comparable to T8: at least 95% of it", "a": ["C8", "BLEU"], "op": "ratio_ge",
                "b": ["T8", "BLEU"], "value": 0.95}],
}


def test_welch_bound_by_hand():
    # a: mean 10, sd 1, n 3; b: mean 8, sd 2, n 3 -> var of means 1/3 and 4/3, se = sqrt(5/3) = 1.29099
    # Welch df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = 2.7778/0.9444 = 2.9412; t_.975(2.9412) = 3.2188 (scipy.stats.t.ppf)
    noise = verdicts.welch_bound({"ours": 10, "std": 1.0, "n": 3}, {"ours": 8, "std": 2.0, "n": 3})
    assert noise["se"] == pytest.approx(math.sqrt(5 / 3))
    assert noise["df"] == pytest.approx(2.9412, abs=1e-4)
    assert noise["t"] == pytest.approx(3.2188, abs=1e-3)
    # ratio claims: d = a - v*b, se = sqrt(sa^2/na + (v sb)^2/nb)
    ratio = verdicts.welch_bound({"ours": 10, "std": 1.0, "n": 3}, {"ours": 8, "std": 2.0, "n": 3}, v=0.5)
    assert ratio["se"] == pytest.approx(math.sqrt(1 / 3 + 0.25 * 4 / 3))


def test_rows_below_the_floor_are_not_judged():
    # the committed TensorCoder T3 quick case: BLEU 1.3 vs 0.7 with copy-source at 0.5 (margin 5)
    runs = [run("t8", s, v) for s, v in ((1, 0.4), (2, 0.7), (3, 1.0))]
    runs += [run("c8", s, v) for s, v in ((1, 1.1), (2, 1.3), (3, 1.5))]
    runs += [run("copy", 1, 0.5)]
    table = build(BLEU, runs, "quick")
    claim = table["claims"][0]
    assert claim["holds"] is None and claim["verdict"] == "not judged"
    assert claim["reason"] == "C8 does not clear Copy in BLEU"
    assert table["rows"][0]["cells"]["BLEU"]["floor"]["clears"] is False
    assert table["rows"][2]["cells"]["BLEU"]["role"] == "floor"
    md = to_markdown(table, BLEU)
    assert "- not judged: C8 is comparable to T8" in md and "T8: BLEU: **below** Copy" in md
    assert "(floor)" in md


def test_ratio_claims_follow_the_noise_rule():
    # TensorCoder T3 quick: 1conv 1.3 ± 0.6 vs 1head 1.3 ± 0.5 rendered ✓ on "≥ 95%"; the floor is met here
    spec = {**BLEU, "columns": [{**BLEU["columns"][0], "margin": 0.0}]}
    runs = [run("t8", s, v) for s, v in ((1, 20.8), (2, 21.3), (3, 21.8))]
    runs += [run("c8", s, v) for s, v in ((1, 20.7), (2, 21.3), (3, 21.9))]
    runs += [run("copy", 1, 0.5)]
    claim = build(spec, runs, "quick")["claims"][0]
    assert claim["holds"] == "noise"          # d = 21.3 - 0.95*21.3 = 1.07 < t*se
    assert claim["diff"] == pytest.approx(21.3 * 0.05) and claim["bound"] > claim["diff"]
    far = [run("t8", s, v) for s, v in ((1, 10.0), (2, 10.1), (3, 10.2))] + runs[3:]
    assert build(spec, far, "quick")["claims"][0]["holds"] is True


def test_equivalence_and_stability():
    eq = {"op": "equiv", "margin": 2.0, "a": {"row": "A", "column": "x", "mean": 65.4, "std": 0.3, "n": 3},
          "b": {"row": "B", "column": "x", "mean": 74.6, "std": 3.4, "n": 3}}
    # EWE T5 quick: v-gram 65.4 ± 0.3 vs whitespace 74.6 ± 3.4 over 3 seeds: Welch df 2.03, bound 8.42:
    # |d| 9.2 - 8.42 = 0.78 is not beyond the margin 2, so three seeds cannot say it fails
    assert verdicts.judge(eq)["holds"] == "noise"
    eq["b"] = {**eq["b"], "mean": 80.0}
    assert verdicts.judge(eq)["holds"] is False        # |d| 14.6 - 8.42 > 2: does not recover the level
    eq["b"] = {**eq["b"], "mean": 65.6, "std": 0.2}
    assert verdicts.judge(eq)["holds"] is True         # |d| 0.2 + bound < 2
    stab = {"op": "stabler", "a": {"row": "A", "column": "x", "mean": 1, "std": 3.4, "n": 3},
            "b": {"row": "B", "column": "x", "mean": 1, "std": 0.9, "n": 3}}
    judged = verdicts.judge(stab)
    assert judged["holds"] is None and "≥ 5 seeds per side (have 3 and 3)" in judged["reason"]
    stab["a"], stab["b"] = {**stab["a"], "std": 0.5, "n": 6}, {**stab["b"], "std": 3.0, "n": 6}
    assert verdicts.judge(stab)["holds"] is True


def side(mean: float, std: float, n: int = 3) -> dict:
    return {"row": "R", "column": "x", "mean": mean, "std": std, "n": n}


def test_a_within_noise_verdict_says_which_way_the_means_lean():
    # a 10 ± 1, b 8 ± 2, 3 seeds each: d = 2, bound = t(2.9412) * sqrt(5/3) = 3.2188 * 1.2910 = 4.155 > 2
    judged = verdicts.judge({"op": "gt", "a": side(10, 1), "b": side(8, 2)})
    assert judged["verdict"] == "within noise" and judged["lean"] == "with"
    assert judged["bound"] == pytest.approx(4.155, abs=1e-3)
    assert verdicts.judge({"op": "lt", "a": side(10, 1), "b": side(8, 2)})["lean"] == "against"
    # ratio_ge 0.95: d = 10 - 0.95 * 10.2 = 0.31 > 0, within noise: the means lean the paper's way
    assert verdicts.judge({"op": "ratio_ge", "value": 0.95, "a": side(10, 1), "b": side(10.2, 2)})["lean"] == "with"
    # a decided verdict carries no lean: a 10 ± 0.1 vs b 8 ± 0.1, d = 2 far beyond the bound
    decided = verdicts.judge({"op": "gt", "a": side(10, 0.1), "b": side(8, 0.1)})
    assert decided["verdict"] == "✓" and decided["lean"] is None


def test_an_equivalence_within_noise_says_when_its_difference_exceeds_the_margin():
    # EWE T5 quick: |d| = |65.4 - 74.6| = 9.2 > margin 2, yet |d| - bound 8.42 = 0.78 is not beyond it
    beyond = verdicts.judge({"op": "equiv", "margin": 2.0, "a": side(65.4, 0.3), "b": side(74.6, 3.4)})
    assert beyond["verdict"] == "within noise" and beyond["lean"] == "against" and beyond["margin_exceeded"]
    # a 10 ± 1 vs b 9 ± 2: |d| = 1 ≤ 2, but 1 + 4.155 > 2: within noise, the means lean the paper's way
    inside = verdicts.judge({"op": "equiv", "margin": 2.0, "a": side(10, 1), "b": side(9, 2)})
    assert inside["verdict"] == "within noise" and inside["lean"] == "with" and inside["margin_exceeded"] is False
    record = {"text": "A is comparable to B", "op": "equiv", "margin": 2.0, "a": side(65.4, 0.3),
              "b": side(74.6, 3.4), "ours": [65.4, 74.6], "paper": [70.0, None], "source": "§6"}
    line = claim_line({**record, **beyond}, ["{:.1f}", "{:.1f}"])
    assert line == ("- within noise: A is comparable to B: ours 65.4 vs 74.6 (paper 70.0 vs —) (means lean against "
                    "the paper; |d| = 9.2 exceeds the margin 2) — §6")
    assert "(means lean with the paper) — §6" in claim_line({**record, **inside}, ["{:.1f}", "{:.1f}"])


def test_one_seed_is_noise_unknown_unless_the_reference_is_deterministic():
    rec = {"op": "gt", "a": {"row": "A", "column": "x", "mean": 70.0, "std": None, "n": 1},
           "b": {"row": "B", "column": "x", "mean": 50.0, "std": None, "n": 1}}
    assert verdicts.judge(rec)["verdict"] == "noise unknown"
    rec["a"] = {**rec["a"], "std": 1.0, "n": 3}
    rec["b"] = {**rec["b"], "deterministic": True}
    assert verdicts.judge(rec)["holds"] is True


def test_a_typo_in_a_spec_is_one_line():
    with pytest.raises(UserError, match="unknown key 'flor' \\(did you mean floor\\?\\)"):
        TableSpec.parse({**BLEU, "columns": [{**BLEU["columns"][0], "flor": "Copy"}]})
    with pytest.raises(UserError, match="floor 'T8' is not a reference row"):
        TableSpec.parse({**BLEU, "columns": [{**BLEU["columns"][0], "floor": "T8"}]})


def test_rejudge_recomputes_from_the_json_alone(tmp_path):
    d = tmp_path / "quick" / "tensorcoder_table3" / "model=x"
    render("tensorcoder_table3", "quick", tmp_path, force=True)   # empty table, then fill its cells by hand
    path = tmp_path / "tables" / "tensorcoder_table3.quick.json"
    table = json.loads(path.read_text())
    for row in table["rows"]:
        if row["key"] in ("TensorCoder-8conv", "Transformer-8head"):
            row["cells"]["BLEU"].update(ours=1.3, std=0.3, n=3)
        if row["key"].startswith("Reference: copy"):
            row["cells"]["BLEU"].update(ours=0.5, std=0.0, n=3)
    path.write_text(json.dumps(table))
    result = rejudge("tensorcoder_table3", "quick", tmp_path)
    judged = {c["text"]: c for c in result["claims"]}
    assert any(c["verdict"] == "not judged" and "does not clear" in c["reason"] for c in judged.values())
    assert not d.exists()


def test_every_committed_verdict_recomputes_from_its_json():
    """Anyone can check a verdict from the JSON alone: re-judging each recorded claim gives its verdict."""
    paths = sorted((ROOT / "outputs" / "tables").glob("*.json"))
    assert paths
    for path in paths:
        for claim in json.loads(path.read_text()).get("claims", []):
            assert "a" in claim and "op" in claim, f"{path.name}: claim without its inputs: {claim['text']}"
            again = verdicts.judge(claim)
            assert again["verdict"] == claim["verdict"], f"{path.name}: {claim['text']}"
            assert again["holds"] == claim["holds"]
            assert again["lean"] == claim.get("lean"), f"{path.name}: lean not re-judged: {claim['text']}"
            assert again.get("margin_exceeded") == claim.get("margin_exceeded"), f"{path.name}: {claim['text']}"


def test_a_cell_scored_under_an_older_metric_definition_is_stale_not_reused():
    old = run("c8", 1, 30.0)
    old["metrics"] = {"test/test/bleu": 30.0, "test/auroc": 0.9}
    spec = {"name": "t", "title": "t",
            "columns": [{"name": "AUROC", "metric": "test/auroc"}, {"name": "BLEU", "metric": "test/test/bleu"}],
            "rows": [{"key": "C8", "match": {"model": "c8"}}],
            "claims": [{"text": "AUROC above 0.5", "a": ["C8", "AUROC"], "op": "gt", "value": 0.5}]}
    table = build(spec, [old], "quick")               # the record carries no metric_versions: auroc is v1
    cell = table["rows"][0]["cells"]["AUROC"]
    assert cell["ours"] is None and cell["stale"] == ["c8/1"]
    assert table["rows"][0]["cells"]["BLEU"]["ours"] == 30.0
    assert table["claims"][0]["verdict"] == "not judged" and "older metric" in table["claims"][0]["reason"]
    assert "stale (metric redefined" in to_markdown(table, spec)
    current = dict(old, metric_versions={"auroc": 2})
    assert build(spec, [current], "quick")["rows"][0]["cells"]["AUROC"]["ours"] == 0.9


def test_rejudge_fills_a_row_read_from_another_table_from_that_tables_json(tmp_path):
    render("ewe_table3", "quick", tmp_path, force=True)
    render("ewe_table5", "quick", tmp_path, force=True)
    t3_path = tmp_path / "tables" / "ewe_table3.quick.json"
    t3 = json.loads(t3_path.read_text())
    for row in t3["rows"]:
        if row["key"] == "CANINE_ORIG":
            row["cells"]["2015A F1"].update(ours=55.8, std=1.4, n=3)
    t3_path.write_text(json.dumps(t3))
    t5_path = tmp_path / "tables" / "ewe_table5.quick.json"
    t5 = json.loads(t5_path.read_text())
    t5["rows"] = [r for r in t5["rows"] if "CANINE_ORIG" not in r["key"]]   # a JSON from before the row existed
    t5_path.write_text(json.dumps(t5))
    result = rejudge("ewe_table5", "quick", tmp_path)
    row = next(r for r in result["rows"] if "CANINE_ORIG" in r["key"])
    assert row["cells"]["2015A F1"]["ours"] == 55.8 and row["cells"]["2015A F1"]["n"] == 3


def test_rejudge_keeps_the_data_line_of_the_runs_and_notes_a_newer_recipe(tmp_path):
    render("tensorcoder_table3", "quick", tmp_path, force=True)
    path = tmp_path / "tables" / "tensorcoder_table3.quick.json"
    table = json.loads(path.read_text())
    table["data"] = "QUICK: the recipe these cells ran"
    path.write_text(json.dumps(table))
    result = rejudge("tensorcoder_table3", "quick", tmp_path)
    assert result["data"] == "QUICK: the recipe these cells ran"
    assert any(n.startswith("These cells ran under an earlier recipe") for n in result["notes"])


def test_rejudge_blanks_a_column_the_spec_now_marks_not_run(tmp_path):
    """A column the profile stops running (TensorCoder Table 2 quick BLEU) shows its reason, never the old zeros."""
    render("tensorcoder_table2", "quick", tmp_path, force=True)
    path = tmp_path / "tables" / "tensorcoder_table2.quick.json"
    table = json.loads(path.read_text())
    for row in table["rows"]:
        if row["key"] in ("TensorCoder-8conv", "Transformer-8head"):
            row["cells"]["BLEU"].update(ours=0.0, std=0.0, n=3, runs=["r1", "r2", "r3"])
            row["cells"]["valid NLL"].update(ours=6.88, std=0.0, n=3)
    path.write_text(json.dumps(table))
    result = rejudge("tensorcoder_table2", "quick", tmp_path)
    row = next(r for r in result["rows"] if r["key"] == "TensorCoder-8conv")
    assert row["cells"]["BLEU"]["ours"] is None and row["cells"]["BLEU"]["not_run"]
    assert row["cells"]["valid NLL"]["ours"] == 6.88
    assert "BLEU" in result["not_run"]          # the reason is printed under the table
    bleu_claims = [c for c in result["claims"] if "BLEU" in c["text"] or "bleu" in c["text"]]
    assert bleu_claims and all(c["verdict"] in ("not run", "not judged") for c in bleu_claims)


def test_rejudge_keeps_a_row_measured_by_the_tables_own_runs_over_another_tables(tmp_path):
    """Bit Cipher Table 1 reads its Sum row from Table 3's cells: when Table 1 was re-run under a new recipe and
    Table 3 was not, re-judging Table 1 keeps the row its own render measured."""
    render("ewe_table3", "quick", tmp_path, force=True)
    render("ewe_table5", "quick", tmp_path, force=True)
    for stem, value in (("ewe_table3", 55.8), ("ewe_table5", 61.2)):
        path = tmp_path / "tables" / f"{stem}.quick.json"
        table = json.loads(path.read_text())
        for row in table["rows"]:
            if "CANINE_ORIG" in row["key"]:
                row["cells"]["2015A F1"].update(ours=value, std=1.0, n=3)
        path.write_text(json.dumps(table))
    result = rejudge("ewe_table5", "quick", tmp_path)
    row = next(r for r in result["rows"] if "CANINE_ORIG" in r["key"])
    assert row["cells"]["2015A F1"]["ours"] == 61.2


def test_a_row_can_be_judged_against_its_own_floor_row():
    # a 50-d row against random 50-d vectors, not the column's random 200-d: 80 clears 70 + 1 by hand, not 82 + 1
    spec = {"name": "toy_probe", "title": "Toy probe",
            "columns": [{"name": "Acc", "metric": "test/bleu", "fmt": "{:.1f}", "floor": "R200", "margin": 1.0}],
            "rows": [{"key": "S50", "match": {"model": "s50"}, "floors": {"R200": "R50"}},
                     {"key": "S200", "match": {"model": "s200"}},
                     {"key": "R200", "match": {"model": "r200"}, "reference": True},
                     {"key": "R50", "match": {"model": "r50"}, "reference": True}]}
    runs = [run(m, s, v + d) for m, v in (("s50", 80), ("s200", 84), ("r200", 82), ("r50", 70))
            for s, d in ((1, -0.1), (2, 0.0), (3, 0.1))]
    table = build(spec, runs, "quick")
    cells = {r["key"]: r["cells"]["Acc"] for r in table["rows"]}
    assert cells["S50"]["floor"]["reference"] == "R50" and cells["S50"]["floor"]["clears"] is True
    assert cells["S50"]["floor"]["gap"] == pytest.approx(10.0)
    assert cells["S200"]["floor"]["reference"] == "R200" and cells["S200"]["floor"]["gap"] == pytest.approx(2.0)
    assert cells["R200"]["role"] == "floor" and cells["R50"]["role"] == "floor"
    with pytest.raises(UserError, match="floors maps 'R200' to 'S200'"):
        TableSpec.parse({**spec, "rows": [{**spec["rows"][0], "floors": {"R200": "S200"}}, *spec["rows"][1:]]})


def test_rejudge_reads_a_column_of_count_cells_and_judges_the_flops_claims_there(tmp_path):
    """TensorCoder Table 3 quick: the committed JSON (from before the paper-size columns) plus the count cells at the
    paper's size (no training) is a table whose FLOPs claims are judged at N = 134, d = 64 [inferred]; the quick
    cells' own counts (Multi30k, N = 57 < d) stay as they were measured."""
    committed = json.loads((ROOT / "outputs" / "tables" / "tensorcoder_table3.quick.json").read_text())
    for row in committed["rows"]:   # as the JSON was before the columns existed
        row["cells"] = {k: v for k, v in row["cells"].items() if "paper size" not in k}
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "tensorcoder_table3.quick.json").write_text(json.dumps(committed))
    before = rejudge("tensorcoder_table3", "quick", tmp_path)
    flops = [c for c in before["claims"] if "FLOPs" in c["text"]]
    assert len(flops) == 3 and all(c["verdict"] == "not run" for c in flops)   # no count cell here yet: not ✗
    d, n, layers = 64, 134, 6
    by_hand = {"transformer_1head_nmt": layers * (8 * n * d * d + 4 * n * n * d),
               "transformer_8head_nmt": layers * 8 * (8 * n * d * d + 4 * n * n * d),
               "tensorcoder_1conv_nmt": layers * 12 * n * d * d, "tensorcoder_8conv_nmt": layers * 40 * n * d * d}
    for model, flop in by_hand.items():
        cell = tmp_path / "quick" / "tensorcoder_paper_size" / f"+paper_size=iwslt16,model={model},seed=1"
        cell.mkdir(parents=True)
        (cell / "metrics.json").write_text(json.dumps({
            "status": "finished", "run_id": "tensorcoder_paper_size", "seed": 1, "commit": "c0ffee1",
            "choices": {"model": model, "paper_size": "iwslt16"}, "wall_time_s": 0.5,
            "metrics": {"model/attn_gflops": flop / 1e9}}))
    result = rejudge("tensorcoder_table3", "quick", tmp_path)
    rows = {r["key"]: r["cells"] for r in result["rows"]}
    assert rows["Transformer-1head"]["GFLOPs at paper size"]["ours"] == pytest.approx(0.053925888)
    assert rows["Transformer-8head"]["FLOPs ratio at paper size"]["ours"] == pytest.approx(3.275)
    assert rows["Transformer-1head"]["FLOPs ratio at paper size"]["ours"] == pytest.approx(1.3646, abs=1e-4)
    assert rows["Transformer-1head"]["GFLOPs"]["ours"] == pytest.approx(0.005399, abs=1e-6)   # quick, kept
    assert rows["Transformer-1head"]["FLOPs ratio"]["ours"] == pytest.approx(0.9636, abs=1e-4)
    flops = [c for c in result["claims"] if "FLOPs" in c["text"]]
    assert [c["verdict"] for c in flops] == ["✓", "✓", "✓"]
    assert set(result["commit"].split(",")) == {"6980a28", "c0ffee1"}   # the trained cells' and the count cells'
    assert any("tensorcoder_paper_size" in note for note in result["notes"])
    md = (tmp_path / "tables" / "tensorcoder_table3.quick.md").read_text()
    assert "| GFLOPs at paper size | FLOPs ratio at paper size † |" in md and "3.28 / 3.00" in md
    for record in (tmp_path / "quick" / "tensorcoder_paper_size").glob("*/metrics.json"):   # count cells re-run
        record.write_text(record.read_text().replace("c0ffee1", "c0ffee2"))
    again = rejudge("tensorcoder_table3", "quick", tmp_path)
    assert set(again["commit"].split(",")) == {"6980a28", "c0ffee2"} and again["claims"] == result["claims"]
