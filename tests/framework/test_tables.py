"""Tables are rendered only from run artefacts: fake run dirs in, the fixed JSON shape and Markdown out."""

from __future__ import annotations

import json

import pytest
import yaml

from langrepr.errors import UserError
from langrepr.tables import build, judge_claims, render, to_markdown

SPEC = {
    "name": "toy", "title": "Toy table",
    "columns": [{"name": "F1", "metric": "test/f1", "scale": 100, "fmt": "{:.1f}"},
                {"name": "Params", "metric": "params.total", "fmt": "{:.0f}"},
                {"name": "Ratio", "ratio_of": "Params", "fmt": "{:.2f}"}],
    "rows": [{"key": "A", "match": {"model": "a"}, "ratio_base": "B", "paper": {"F1": 60.0}},
             {"key": "B", "match": {"model": "b"}, "paper": {"F1": 50.0}},
             {"key": "C", "match": {"model": "c"}, "paper": {"F1": 40.0}}],
    "claims": [{"text": "A beats B", "a": ["A", "F1"], "op": "gt", "b": ["B", "F1"]},
               {"text": "C beats B", "a": ["C", "F1"], "op": "gt", "b": ["B", "F1"]},
               {"text": "A has half of B's parameters", "a": ["A", "Ratio"], "op": "approx", "value": 0.5, "tol": 0.01}],
}


def fake_run(model: str, seed: int, f1: float, params: int, mtime: float = 0.0) -> dict:
    return {"status": "finished", "seed": seed, "commit": "abc1234", "choices": {"model": model},
            "metrics": {"test/f1": f1}, "params": {"total": params}, "config": {}, "dir": f"{model}/{seed}",
            "mtime": mtime}


def test_cells_mean_std_ratio_and_not_run():
    runs = [fake_run("a", 1, 0.60, 50), fake_run("a", 2, 0.62, 50), fake_run("b", 1, 0.50, 100)]
    table = build(SPEC, runs, "quick")
    assert set(table) >= {"table", "title", "profile", "commit", "columns", "rows", "claims"}
    a, b, c = (r["cells"] for r in table["rows"])
    assert a["F1"]["ours"] == pytest.approx(61.0)
    assert a["F1"]["std"] == pytest.approx(1.41421356, rel=1e-6)   # stdev([60, 62]) by hand
    assert a["F1"]["paper"] == 60.0 and len(a["F1"]["runs"]) == 2
    assert b["F1"]["std"] is None                                   # one seed: no spread to report
    assert a["Ratio"]["ours"] == pytest.approx(0.5) and b["Ratio"]["ours"] == pytest.approx(1.0)
    assert c["F1"]["ours"] is None and c["F1"]["runs"] == []
    # B ran one seed (a model row): its noise is unknown, so no ✓ even though A's mean is 11 points higher
    assert [cl["holds"] for cl in table["claims"]] == ["unknown", None, True]
    md = to_markdown(table, SPEC)
    assert "not run" in md and "61.0 ± 1.4 / 60.0 / 1.0" in md and "noise unknown: A beats B" in md
    assert "not run: C beats B" in md


def test_newest_duplicate_seed_wins():
    runs = [fake_run("b", 1, 0.10, 100, mtime=1.0), fake_run("b", 1, 0.50, 100, mtime=2.0)]
    table = build(SPEC, runs, "full")
    assert table["rows"][1]["cells"]["F1"]["ours"] == pytest.approx(50.0)


def test_claims_not_judged_when_switched_off():
    runs = [fake_run("a", 1, 0.60, 50), fake_run("b", 1, 0.50, 100)]
    rows = build(SPEC, runs, "quick")["rows"]
    assert all(c["holds"] is None for c in judge_claims({**SPEC, "judge_claims": False}, rows))


def test_render_reads_run_dirs_and_writes_json(tmp_path):
    run_dir = tmp_path / "exact" / "ewe_table1" / "model=bert_ewe"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.json").write_text(json.dumps({
        "status": "finished", "seed": 1, "commit": "abc", "choices": {"model": "bert_ewe"}, "metrics": {},
        "params": {"total": 87_271_472, "embedding": 12_288}}))
    (run_dir / "config_resolved.yaml").write_text(yaml.safe_dump(
        {"model": {"tokenizer": {"u": 128, "v": 16}, "net": {"num_heads": 16, "embedding": {"width": 768}}}}))
    result = render("ewe_table1", "full", tmp_path)
    row = result["rows"][0]
    assert row["key"] == "BERT_EWE" and row["cells"]["Total (M)"]["ours"] == pytest.approx(87.271472)
    assert row["cells"]["c"]["ours"] == 48 and row["cells"]["Embedding (M)"]["paper"] == 0.012
    assert result["rows"][1]["cells"]["Total (M)"]["ours"] is None      # BERT_ORIG not run
    written = json.loads((tmp_path / "tables" / "ewe_table1.json").read_text())
    assert written["profile"] == "exact" and written["table"] == "ewe_table1"
    assert "not run" in (tmp_path / "tables" / "ewe_table1.md").read_text()


def test_unknown_table_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="unknown table 'nope'"):
        render("nope", "full", tmp_path)


NOISY = {
    "name": "noisy", "title": "Noisy table",
    "columns": [{"name": "F1", "metric": "test/f1", "scale": 100, "fmt": "{:.1f}"}],
    "rows": [{"key": "A", "match": {"model": "a"}, "paper": {"F1": 64.3}},
             {"key": "B", "match": {"model": "b"}, "paper": {"F1": 63.7}},
             {"key": "Prior", "match": {"model": "prior"}, "reference": True}],
    "claims": [{"text": "A beats B", "a": ["A", "F1"], "op": "gt", "b": ["B", "F1"]},
               {"text": "A beats the prior", "a": ["A", "F1"], "op": "gt", "b": ["Prior", "F1"]}],
}


def test_claims_within_noise_show_our_numbers_and_the_papers():
    # A: 0.60, 0.62, 0.64 (mean 62, std 2); B: 0.61, 0.63, 0.65 (mean 63, std 2); combined std sqrt(8) = 2.83 > 1
    runs = [fake_run("a", s, v, 1) for s, v in ((1, 0.60), (2, 0.62), (3, 0.64))]
    runs += [fake_run("b", s, v, 1) for s, v in ((1, 0.61), (2, 0.63), (3, 0.65))]
    runs += [fake_run("prior", s, 0.40, 1) for s in (1, 2, 3)]
    table = build(NOISY, runs, "quick")
    assert [c["holds"] for c in table["claims"]] == ["noise", True]
    md = to_markdown(table, NOISY)
    assert "- within noise: A beats B: ours 62.0 vs 63.0 (paper 64.3 vs 63.7)" in md
    assert "- ✓ A beats the prior: ours 62.0 vs 40.0 (paper 64.3 vs —)" in md
    assert "Reference rows" in md and "| Prior | 40.0 ± 0.0 |" in md
    assert md.index("| A |") < md.index("Reference rows") < md.index("| Prior |")
    cell = table["rows"][0]["cells"]["F1"]
    assert cell["seeds"] == [1, 2, 3] and cell["commits"] == ["abc1234"] and cell["n"] == 3


def test_single_seed_verdict_says_noise_is_unknown_and_dirty_commits_are_flagged():
    runs = [fake_run("a", 1, 0.70, 1), fake_run("b", 1, 0.50, 1)]
    runs[0]["commit"] = "abc1234+dirty"
    table = build(NOISY, runs, "quick")
    assert table["claims"][0]["holds"] == "unknown" and table["claims"][0]["verdict"] == "noise unknown"
    md = to_markdown(table, NOISY)
    assert "- noise unknown: A beats B" in md and "the means point the paper's way" in md
    assert "Provenance warning" in md and "abc1234+dirty" in md


def write_cell(root, name, record):
    d = root / "quick" / "ewe_table3" / name
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(record if isinstance(record, str) else json.dumps(record))
    return d


def test_diverged_cells_and_corrupt_metrics_do_not_stop_a_table(tmp_path, caplog):
    write_cell(tmp_path, "model=bert_ewe,seed=1", {"status": "diverged", "seed": 1, "choices": {"model": "bert_ewe"},
                                                   "metrics": {}})
    bad = write_cell(tmp_path, "model=bert_orig,seed=1", '{"status": "finis')
    result = render("ewe_table3", "quick", tmp_path)
    assert str(bad / "metrics.json") in caplog.text
    md = (tmp_path / "tables" / "ewe_table3.quick.md").read_text()
    assert "diverged" in md and result["rows"][0]["cells"]["2015A F1"]["diverged"]


def test_a_render_with_fewer_cells_never_replaces_the_table_on_disk(tmp_path):
    rec = {"status": "finished", "seed": 1, "commit": "abc", "choices": {"model": "bert_ewe"},
           "metrics": {"test/2015A/f1": 0.5}, "params": {}}
    d = write_cell(tmp_path, "model=bert_ewe,seed=1", rec)
    render("ewe_table3", "quick", tmp_path)
    committed = (tmp_path / "tables" / "ewe_table3.quick.md").read_text()
    (d / "metrics.json").unlink()
    result = render("ewe_table3", "quick", tmp_path)
    assert result["kept_existing"]
    assert (tmp_path / "tables" / "ewe_table3.quick.md").read_text() == committed
    assert (tmp_path / "tables" / "ewe_table3.quick.partial.md").exists()
    assert not render("ewe_table3", "quick", tmp_path, force=True)["kept_existing"]


def test_ratio_claims_over_zero_are_not_judged_and_single_seed_ratios_say_so():
    spec = {**NOISY, "claims": [
        {"text": "A at least 0.95 of B", "a": ["A", "F1"], "op": "ratio_ge", "b": ["B", "F1"], "value": 0.95},
        {"text": "A at least 2x B (counted)", "a": ["A", "F1"], "op": "ratio_ge", "b": ["B", "F1"], "value": 2.0,
         "deterministic": True}]}
    zero = build(spec, [fake_run("a", 1, 0.0, 1), fake_run("b", 1, 0.0, 1)], "quick")
    assert [c["holds"] for c in zero["claims"]] == [None, None]
    one = build(spec, [fake_run("a", 1, 0.5, 1), fake_run("b", 1, 0.2, 1)], "quick")
    assert [c["holds"] for c in one["claims"]] == ["unknown", True]
    assert one["claims"][1]["reason"].startswith("deterministic")


def test_run_dirs_in_a_table_never_name_the_machine(tmp_path):
    outputs = tmp_path / "outputs"
    write_cell(outputs, "model=bert_ewe,seed=1", {"status": "finished", "seed": 1, "commit": "abc",
                                                   "choices": {"model": "bert_ewe"}, "metrics": {"test/2015A/f1": 0.5}})
    result = render("ewe_table3", "quick", outputs.resolve())
    runs = result["rows"][0]["cells"]["2015A F1"]["runs"]
    assert runs == ["outputs/quick/ewe_table3/model=bert_ewe,seed=1"]
    assert str(tmp_path) not in (outputs / "tables" / "ewe_table3.quick.json").read_text()


def test_a_row_can_take_one_column_from_another_tables_cells():
    spec = {"name": "toy", "title": "t", "columns": [{"name": "Count", "metric": "count"},
                                                      {"name": "EM", "metric": "em"}],
            "rows": [{"key": "A", "run_id": "stats", "match": {"model": "a"},
                      "sources": {"EM": {"run_id": "finetune", "match": {"model": "qa"}}}}]}
    runs = [dict(fake_run("a", 1, 0.0, 0), run_id="stats", metrics={"count": 7.0, "em": 99.0}),
            dict(fake_run("qa", 1, 0.0, 0), run_id="finetune", metrics={"count": 1.0, "em": 40.0}),
            dict(fake_run("qa", 2, 0.0, 0), run_id="finetune", metrics={"em": 50.0})]
    cells = build(spec, runs, "quick")["rows"][0]["cells"]
    assert cells["Count"]["ours"] == 7.0 and cells["Count"]["n"] == 1
    assert cells["EM"]["ours"] == 45.0 and cells["EM"]["seeds"] == [1, 2]


def test_a_one_off_recipe_or_fewer_seeds_never_replace_the_committed_table(tmp_path, caplog):
    # the probed case: `make leam-table3 ARGS="++hydra.sweeper.params.seed=1 +trainer.max_steps=2"` replaced a
    # 3-seed table with 1-seed numbers although every cell was still "measured"
    for seed in (1, 2, 3):
        write_cell(tmp_path, f"model=bert_ewe,seed={seed}", {
            "status": "finished", "seed": seed, "commit": "abc", "choices": {"model": "bert_ewe"},
            "overrides": ["experiment=ewe_table3", "profile=quick", "model=bert_ewe", f"seed={seed}"],
            "metrics": {"test/2015A/f1": 0.5 + seed / 100}, "params": {}})
    assert not render("ewe_table3", "quick", tmp_path)["kept_existing"]
    import shutil
    shutil.rmtree(tmp_path / "quick")
    write_cell(tmp_path, "model=bert_ewe,seed=1", {
        "status": "finished", "seed": 1, "commit": "abc", "choices": {"model": "bert_ewe"},
        "overrides": ["experiment=ewe_table3", "model=bert_ewe", "seed=1", "+trainer.max_steps=2"],
        "metrics": {"test/2015A/f1": 0.25}, "params": {}})
    result = render("ewe_table3", "quick", tmp_path)
    assert result["kept_existing"] and result["recipe"] == ["+trainer.max_steps=2"]
    assert "1 seed run(s) here, 3 on disk" in caplog.text and "another recipe" in caplog.text
    kept = json.loads((tmp_path / "tables" / "ewe_table3.quick.json").read_text())
    assert kept["rows"][0]["cells"]["2015A F1"]["n"] == 3
    assert (tmp_path / "tables" / "ewe_table3.quick.partial.md").exists()


def test_column_not_run_on_a_profile_keeps_the_other_columns():
    """`not_run: {column: reason}` blanks that column (and its claims) whatever the runs recorded, with the reason."""
    spec = {**SPEC, "not_run": {"F1": "no test set this profile can learn (measured: 0.3 after 1,200 steps)"}}
    runs = [fake_run(m, s, 0.5, p) for m, p in (("a", 50), ("b", 100)) for s in (1, 2)]
    table = build(spec, runs, "quick")
    a = table["rows"][0]["cells"]
    assert a["F1"]["ours"] is None and a["F1"]["not_run"].startswith("no test set")
    assert a["Params"]["ours"] == 50 and a["Ratio"]["ours"] == pytest.approx(0.5)   # kept: training does not move them
    beats = table["claims"][0]
    assert beats["verdict"] == "not run" and beats["reason"].startswith("F1 not run on this profile")
    assert table["claims"][2]["holds"] is True                                      # the Params claim is still judged
    md = to_markdown(table, spec)
    assert "| A | not run / 60.0 / — | 50 ± 0 /" in md
    assert "- F1: no test set this profile can learn" in md


def test_not_run_names_a_column_and_a_reason():
    with pytest.raises(UserError, match="not_run: 'BLEU' must be a column"):
        build({**SPEC, "not_run": {"BLEU": "x"}}, [], "quick")
    with pytest.raises(UserError, match="non-empty reason"):
        build({**SPEC, "not_run": {"F1": " "}}, [], "quick")


def test_cell_wall_time_counts_each_run_once_from_the_records():
    runs = [dict(fake_run("a", 1, 0.60, 50), wall_time_s=30.0), dict(fake_run("a", 2, 0.62, 50), wall_time_s=50.0),
            fake_run("b", 1, 0.50, 100)]                  # a record from before wall times were kept
    table = build(SPEC, runs, "quick")
    # A's two runs feed its F1, Params and (derived) Ratio cells: 30 + 50 s, once each; B's run has no time
    assert table["cell_wall"] == {"seconds": 80.0, "runs": 3, "untimed_runs": 1}
    assert "Cell wall time: 1.3 min over 3 runs" in to_markdown(table, SPEC)


def test_a_render_that_reproduces_the_numbers_keeps_the_committed_file_and_its_stamp(tmp_path):
    """A newcomer's `make ewe-table1` re-runs the counts at their clone's commit: same numbers, no tracked change."""
    rec = {"status": "finished", "seed": 1, "commit": "abc1234", "choices": {"model": "bert_ewe"},
           "metrics": {"test/2015A/f1": 0.5}, "params": {}, "wall_time_s": 10.0}
    d = write_cell(tmp_path, "model=bert_ewe,seed=1", rec)
    render("ewe_table3", "quick", tmp_path)
    md, js = (tmp_path / "tables" / "ewe_table3.quick.md"), (tmp_path / "tables" / "ewe_table3.quick.json")
    committed_md, committed_js = md.read_bytes(), js.read_bytes()
    (d / "metrics.json").write_text(json.dumps(dict(rec, commit="fff9999", wall_time_s=22.5)))   # a re-run
    result = render("ewe_table3", "quick", tmp_path)
    assert result["kept_existing"] and result["commit"] == "abc1234"
    assert md.read_bytes() == committed_md and js.read_bytes() == committed_js
    assert not (tmp_path / "tables" / "ewe_table3.quick.partial.md").exists()
    (d / "metrics.json").write_text(json.dumps(dict(rec, commit="fff9999", metrics={"test/2015A/f1": 0.6})))
    result = render("ewe_table3", "quick", tmp_path)       # another number: the render replaces the table
    assert not result["kept_existing"] and "fff9999" in md.read_text()


def test_a_dry_render_says_what_ran_and_derived_columns_follow_their_inputs(caplog):
    """Derived columns read no runs of their own (no 'ran twice' warnings); the summary counts run folders."""
    from langrepr.tables import dry_summary

    def dry(model, seed, missing=None):
        return {"status": "dry", "seed": seed, "choices": {"model": model}, "metrics": {}, "params": {},
                "config": {}, "dir": f"{model}/{seed}/{missing or 'ok'}", "mtime": 0.0,
                "dry": {"missing_data": missing} if missing else {}}
    runs = [dry("a", 1), dry("a", 2), dry("b", 1, "no b.txt"), dry("c", 1)]
    table = build(SPEC, runs, "dry")
    assert "ran twice" not in caplog.text
    assert table["rows"][0]["cells"]["Ratio"]["dry"]["ok"] == ["a/1/ok", "a/2/ok"]       # follows Params
    line = dry_summary(table["rows"], table["columns"])
    assert line.startswith("dry run, 4 cell run(s): 3 ran 2 steps at full size") and "1 no data" in line, line


def test_a_note_quotes_its_own_table_through_placeholders_and_a_wrong_one_is_one_line():
    """`{=A.F1}` is A's F1 in the column's format, `:std` / `:n` its spread and seed count: a re-run cannot leave
    the note behind its table."""
    from langrepr.tables import filled_notes

    runs = [fake_run("a", 1, 0.60, 10), fake_run("a", 2, 0.64, 10), fake_run("b", 1, 0.50, 20)]
    table = build(SPEC, runs, "quick")
    notes = filled_notes(["A {=A.F1} ± {=A.F1:std} over {=A.F1:n}; B {=B.F1}; C {=C.F1}; {braces} stay"],
                         table["rows"], SPEC)
    assert notes == ["A 62.0 ± 2.8 over 2; B 50.0; C not run; {braces} stay"]
    with pytest.raises(UserError, match=r"placeholder \{=A.G1\} names no cell"):
        filled_notes(["{=A.G1}"], table["rows"], SPEC)
