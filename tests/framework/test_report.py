"""`make report` and `tables explain` read only artefacts: a generated outputs/ tree in, the page and provenance out."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run_cli
from langrepr.report import build_report, loglog_fit, seed_band
from langrepr.tables import main as tables_main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_run(root, name, seed, losses, f1s, f1_test):
    """A finished run dir as train.py leaves it: metrics.json, config, overrides and the CSV log."""
    run = root / "quick" / "toy" / f"{name},seed={seed}"
    (run / ".hydra").mkdir(parents=True)
    (run / "csv").mkdir()
    (run / "metrics.json").write_text(json.dumps({
        "status": "finished", "run_id": "toy", "profile": "quick", "seed": seed, "commit": "abc1234",
        "fingerprint": f"fp{seed}", "wall_time_s": 12.5, "data": {"manifest_digest": "d1g3st", "synthetic": True},
        "metrics": {"test/f1": f1_test}}))
    (run / "config_resolved.yaml").write_text(yaml.safe_dump({"dataset": {"monitor": "val/f1"}}))
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(
        ["experiment=toy", "profile=quick", f"{name.split(',')[1]}", f"seed={seed}", "ckpt_path=auto"]))
    lines = ["epoch,step,train/loss,val/f1"]
    for step, loss in enumerate(losses):
        lines.append(f"0,{step},{loss},")
    for step, f1 in f1s:
        lines.append(f"0,{step},,{f1}")
    (run / "csv" / "metrics.csv").write_text("\n".join(lines) + "\n")
    return str(run)


@pytest.fixture
def outputs(tmp_path):
    out = tmp_path / "outputs"
    a1 = write_run(out, "dataset=s,model=a", 1, [1.0, 0.8, 0.6], [(2, 0.5)], 0.60)
    a2 = write_run(out, "dataset=s,model=a", 2, [1.2, 0.9, 0.5], [(2, 0.7)], 0.62)
    table = {
        "table": "toy", "title": "Toy table", "profile": "quick", "commit": "abc1234", "columns": ["F1"],
        "rows": [{"key": "A", "cells": {"F1": {"ours": 61.0, "paper": 60.0, "std": 1.4142, "runs": [a1, a2],
                                               "n": 2, "seeds": [1, 2], "commits": ["abc1234"]}}},
                 {"key": "B", "cells": {"F1": {"ours": None, "paper": 50.0, "std": None, "runs": []}}}],
        "claims": [{"text": "A beats B", "holds": None}, {"text": "A beats C", "holds": "noise"}],
        "seeds": [1, 2], "data": "", "notes": [],
    }
    (out / "tables").mkdir()
    (out / "tables" / "toy.quick.json").write_text(json.dumps(table))
    (out / "tables" / "toy.quick.md").write_text("# Toy table\n\n| | F1 |\n|---|---|\n| A | 61.0 ± 1.4 / 60.0 / 1.0 |\n"
                                                 "| B | not run / 50.0 / — |\n")
    times = {"tensorcoder": {str(n): 1e-6 * n for n in (256, 512, 1024)},
             "sdpa": {str(n): 1e-9 * n * n for n in (256, 512, 1024)}}
    (out / "bench").mkdir()
    (out / "bench" / "tensorcoder_scaling.json").write_text(json.dumps({
        "name": "tensorcoder_scaling_exponent", "value": 1.0, "target": "<= 1.1",
        "details": {"sdpa_exponent": 2.0, "crossover_n": 1024, "fit_n": [256, 512, 1024], "min_forward_s": times,
                    "d": 64, "batch": 1, "device": "cpu", "threads": 1}}))
    (out / "bench" / "several.json").write_text(json.dumps([{"name": "a_ratio", "ratio": 0.5, "target": "<= 1"},
                                                            {"name": "no_value"}]))
    return out


def test_seed_band_and_loglog_fit_by_hand():
    steps, mean, low, high = seed_band([[(0, 1.0), (1, 0.8)], [(0, 1.2), (1, 0.4), (2, 0.3)]])
    assert steps == [0, 1, 2]
    assert mean == pytest.approx([1.1, 0.6, 0.3]) and low == [1.0, 0.4, 0.3] and high == [1.2, 0.8, 0.3]
    slope, intercept = loglog_fit([10, 100, 1000], [3e-4 * n ** 1.5 for n in (10, 100, 1000)])
    assert slope == pytest.approx(1.5) and math.exp(intercept) == pytest.approx(3e-4)


def test_report_gathers_tables_curves_and_scaling(outputs):
    (outputs / "figures").mkdir()
    (outputs / "figures" / "toy_figure3.png").write_bytes(PNG_MAGIC + b"paper figure")   # a paper's own figure
    md_path, html_path = build_report(outputs)
    md = md_path.read_text()
    assert "| [toy](#toyquick) | quick | 1/2 | 1, 2 | 1 not judged, 1 within noise | `abc1234` |" in md
    assert "at commit" not in md.split("## Summary by paper")[0]            # no commit of the renderer: no drift
    assert "### Toy table" in md and "not run / 50.0" in md                 # the renderer's own Markdown
    assert "Not rendered yet" in md and "ewe-table1" in md                  # experiments with no table JSON
    assert "band = min–max over seeds" in md and "img/curves_toy_quick.png" in md
    assert "TensorCoder 1.00" in md and "SDPA 2.00" in md                    # exponents as the bench fitted them
    assert "| a_ratio | 0.5 | not recorded | <= 1 | not recorded | not recorded | several.json |" in md
    assert "| tensorcoder_scaling_exponent | 1 | not recorded | <= 1.1 | not recorded | 1 |" in md
    for png in ("curves_toy_quick.png", "tensorcoder_scaling.png"):
        assert (md_path.parent / "img" / png).read_bytes().startswith(PNG_MAGIC)
    html = html_path.read_text()
    assert "## Paper figures" in md and "](../figures/toy_figure3.png)" in md
    assert html.count("data:image/png;base64,") == 3 and 'src="img/' not in html   # self-contained
    assert "<table>" in html and "Toy table" in html


def test_report_says_what_has_not_run(outputs, tmp_path):
    for run in (outputs / "quick" / "toy").iterdir():
        (run / "metrics.json").unlink()
    (outputs / "bench" / "tensorcoder_scaling.json").unlink()
    md = build_report(outputs)[0].read_text()
    assert "run folders behind this table are not on this machine" in md and "make toy PROFILE=quick" in md
    assert "Not run: the TensorCoder scaling benchmark has no result yet" in md
    assert "![" not in md


def test_report_cli_without_tables_is_one_line(tmp_path):
    result = run_cli("langrepr.report", "--outputs", str(tmp_path / "nothing"), timeout=120)
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "render a table first" in result.stderr


def test_explain_prints_runs_seeds_and_reproduce_command(outputs, capsys):
    tables_main(["explain", "toy", "A", "F1", "--outputs", str(outputs)])
    text = capsys.readouterr().out
    assert text.count("seed ") == 2 and "commit abc1234" in text and "config fingerprint fp2" in text
    assert "data manifest digest: d1g3st (synthetic data)" in text and "wall time: 12.5 s" in text
    assert "reproduce: python -m langrepr.train experiment=toy profile=quick model=a seed=1 ckpt_path=auto" in text
    assert "whole table: make toy PROFILE=quick" in text and "seeds: 1, 2 (n = 2) · commits: abc1234" in text


def test_explain_not_run_cell_and_missing_run_folder(outputs, capsys):
    tables_main(["explain", "toy", "B", "F1", "--outputs", str(outputs)])
    assert "not run: no finished run fills this cell" in capsys.readouterr().out
    run = next((outputs / "quick" / "toy").iterdir())
    (run / "metrics.json").unlink()
    tables_main(["explain", "toy", "A", "F1", "--outputs", str(outputs), "--json"])
    info = json.loads(capsys.readouterr().out)
    absent = [r for r in info["runs"] if not r["present"]][0]
    assert absent["command"].startswith("python -m langrepr.train experiment=toy profile=quick dataset=s model=a")


@pytest.mark.parametrize("args, message", [
    (["nope", "A", "F1"], "no rendered table 'nope'"),
    (["toy", "Z", "F1"], "has no row 'Z': choose one of A, B"),
    (["toy", "A", "G1"], "has no column 'G1': choose one of F1"),
])
def test_explain_bad_input_is_one_line_exit_2(outputs, capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        tables_main(["explain", *args, "--outputs", str(outputs)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and err.strip().count("\n") == 0


def test_report_flags_run_folders_newer_than_the_rendered_table(outputs):
    run = next((outputs / "quick" / "toy").iterdir())
    record = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps({**record, "commit": "def5678"}))
    md = build_report(outputs)[0].read_text()
    assert "1 run folder(s) were written at a commit the rendered table does not list" in md


def test_committed_report_and_readme_status_rows_match_the_table_jsons():
    """Artefacts that cannot go stale: the committed report and the README status rows are those the committed
    table JSONs give today (a re-judged or re-run table whose report was not rebuilt fails here)."""
    from langrepr.report import load_tables, status_lines, summary_line
    root = ROOT
    outputs = root / "outputs"
    readme = (root / "README.md").read_text()
    block = readme.split("<!-- generated:status -->\n", 1)[1].split("<!-- /generated:status -->", 1)[0]
    assert block.splitlines() == status_lines(outputs), "README status rows are stale: run `make report`"
    report = (outputs / "report" / "report.md").read_text()
    for entry in load_tables(outputs):
        assert summary_line(entry) in report, f"report.md is stale for {entry['stem']}: run `make report`"


def test_a_clone_keeps_the_committed_learning_curves(tmp_path):
    """`make report` in a fresh clone (no run folders) keeps the figures committed with the report."""
    tables = tmp_path / "outputs" / "tables"
    tables.mkdir(parents=True)
    cell = {"ours": 1.0, "paper": None, "std": None, "n": 1, "runs": ["outputs/quick/t/model=a,seed=1"]}
    (tables / "toy.quick.json").write_text(json.dumps({
        "table": "toy", "title": "Toy", "profile": "quick", "commit": "abc", "columns": ["F1"],
        "rows": [{"key": "A", "cells": {"F1": cell}}], "claims": [], "seeds": [1]}))
    img = tmp_path / "outputs" / "report" / "img"
    img.mkdir(parents=True)
    (img / "curves_toy_quick.png").write_bytes(b"\x89PNG kept")
    md, _ = build_report(tmp_path / "outputs")
    text = md.read_text()
    assert "![learning curves of toy](img/curves_toy_quick.png)" in text and "as committed" in text
    assert (img / "curves_toy_quick.png").read_bytes() == b"\x89PNG kept"


def test_status_total_counts_each_run_once_in_minutes_under_six_and_one_table_singular(outputs):
    from langrepr.report import status_lines

    path = outputs / "tables" / "toy.quick.json"
    table = json.loads(path.read_text())
    cell = table["rows"][0]["cells"]["F1"]
    cell["wall_s"] = [30.0, 60.0]
    table["rows"].append({"key": "A again", "cells": {"F1": dict(cell)}})    # the same two runs read twice
    path.write_text(json.dumps(table))
    (total,) = [line for line in status_lines(outputs) if line.startswith("Cell time (quick)")]
    assert total.startswith("Cell time (quick): 1.5 min over the 2 recorded runs behind 1 table, ")
    cell["wall_s"] = [3600.0, 1800.0]
    table["rows"] = table["rows"][:1]
    path.write_text(json.dumps(table))
    (total,) = [line for line in status_lines(outputs) if line.startswith("Cell time (quick)")]
    assert total.startswith("Cell time (quick): 1.5 h over the 2 recorded runs behind 1 table, ")


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_clone_rebuilds_the_committed_report_byte_for_byte(outputs):
    """Drawn with runs and benchmarks, then rebuilt twice where neither is (a fresh clone): nothing thins or drifts."""
    (outputs / "bench" / "several.json").write_text(json.dumps([{
        "name": "a_ratio", "ratio": 0.5, "target": "<= 1 | lower is worse",
        "ratio_spread": {"median": 0.5, "q1": 0.45, "q3": 0.55, "min": 0.4, "max": 0.6, "n": 5},
        "machine": {"cpu": "Toy CPU 3000", "cores": 2, "gpu": None, "threads": 1, "torch": "2.x"}}]))
    build_report(outputs)
    committed = tree_bytes(outputs / "report")
    md = committed["report.md"].decode()
    assert "| a_ratio | 0.5 | IQR 0.45–0.55, range 0.4–0.6, 5 rounds | <= 1 \\| lower is worse | Toy CPU 3000, 2 cores | " \
           "1 | several.json |" in md
    assert "| tensorcoder_scaling_exponent |" in md and "![learning curves of toy](img/curves_toy_quick.png)" in md
    for run in (outputs / "quick").rglob("metrics.json"):      # a clone: no run folders, no outputs/bench/
        run.unlink()
    for bench in (outputs / "bench").iterdir():
        bench.unlink()
    build_report(outputs)
    assert tree_bytes(outputs / "report") == committed
    build_report(outputs)
    assert tree_bytes(outputs / "report") == committed


def test_an_older_report_keeps_its_benchmark_rows_and_says_what_it_lacks(outputs):
    """A committed report from before spread and hardware were shown keeps its rows; the new columns say why blank."""
    (outputs / "report").mkdir()
    (outputs / "report" / "report.md").write_text("# old\n\n## Benchmarks\n\n| benchmark | value | target | file |\n"
                                                  "|---|---|---|---|\n| bf16_ewe | 1.04 | > 1.1 | bf16.json |\n\n"
                                                  "## The grid\n")
    for bench in (outputs / "bench").iterdir():
        bench.unlink()
    md = build_report(outputs)[0].read_text()
    gone = "not kept"
    assert f"| bf16_ewe | 1.04 | {gone} | > 1.1 | {gone} | {gone} | bf16.json |" in md


def test_dry_and_partial_renders_never_become_status_claims_or_report(outputs, tmp_path):
    """`make <table> DRY=1` writes `*.dry.*`; a thinner render is kept as `*.partial.*`: neither is a result."""
    from langrepr.report import paper_claim_lines, status_lines

    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text("<!-- generated:status -->\n<!-- /generated:status -->\n")
    (root / "docs" / "ewe.md").write_text("<!-- generated:claims -->\n<!-- /generated:claims -->\n")
    before = {"status": status_lines(outputs), "claims": paper_claim_lines(outputs, "ewe")}
    build_report(outputs, root=root)
    clean = {"md": (outputs / "report" / "report.md").read_text(), "readme": (root / "README.md").read_text(),
             "doc": (root / "docs" / "ewe.md").read_text()}
    dry = {"table": "ewe_table1", "title": "EWE T1 (dry)", "profile": "full", "commit": "abc1234", "columns": ["F1"],
           "rows": [{"key": "A", "cells": {"F1": {"ours": None, "paper": 1.0, "std": None, "runs": [],
                                                  "dry": {"ok": True, "failed": False, "missing_data": False,
                                                          "skipped": False}}}}],
           "claims": [{"text": "A beats B", "holds": None, "verdict": "not run"}], "seeds": []}
    for stem in ("ewe_table1.dry", "toy.quick.partial"):
        (outputs / "tables" / f"{stem}.json").write_text(json.dumps(dry))
        (outputs / "tables" / f"{stem}.md").write_text("# EWE T1 (dry)\n\n| | F1 |\n|---|---|\n| A | dry ✓ |\n")
    (outputs / "tables" / "broken.dry.json").write_text("{ cut")   # never read, so never an error either
    (outputs / "figures").mkdir(exist_ok=True)   # `make tables` on a clone: the grid's heat map of no cell, kept aside
    for name in ("grid.partial.png", "grid.quick.partial.png", "ewe_fig.dry.png"):
        (outputs / "figures" / name).write_bytes(b"\x89PNG not a result")
    assert status_lines(outputs) == before["status"] and paper_claim_lines(outputs, "ewe") == before["claims"]
    build_report(outputs, root=root)
    assert (outputs / "report" / "report.md").read_text() == clean["md"]
    assert (root / "README.md").read_text() == clean["readme"] and (root / "docs" / "ewe.md").read_text() == clean["doc"]
    assert "EWE T1 (dry)" not in clean["md"] and "ewe_table1 (`make ewe-table1 PROFILE=quick`)" in clean["md"]


def test_the_summary_counts_each_papers_verdicts_and_which_way_the_undecided_lean(outputs):
    path = outputs / "tables" / "toy.quick.json"
    table = json.loads(path.read_text())
    table["table"] = "ewe_toy"
    table["claims"] = [{"text": "a", "holds": "noise", "verdict": "within noise", "lean": "against"},
                       {"text": "b", "holds": "noise", "verdict": "within noise", "lean": "against",
                        "margin_exceeded": True},
                       {"text": "c", "holds": "noise", "verdict": "within noise", "lean": "with"},
                       {"text": "d", "holds": True, "verdict": "✓"}]
    path.write_text(json.dumps(table))
    md = build_report(outputs)[0].read_text()
    assert "| EWE | 1 (1 quick) | 1/2 | 1 | 0 | 3 (1 with / 2 against) | 0 | 0 | 0 |" in md
    assert ("- **EWE**: of 3 claims within noise, the means of 1 lean with the paper and of 2 against it (on balance "
            "against the paper); 1 equivalence claim(s) have |d| beyond their margin") in md
    assert "ewe_toy: 1 of 2 cells not run (1 without a finished run, see its notes)" in md


def test_header_lines_of_a_table_are_separate_paragraphs(outputs):
    (outputs / "tables" / "toy.quick.md").write_text("# Toy table\n\nProfile: **quick** · seeds: 1, 2\nData: toy data\n"
                                                 "**Provenance warning:** dirty\n\n| | F1 |\n|---|---|\n| A | 1 |\n"
                                                 "\nNotes:\n\n- one\n- two\n")
    md_path, html_path = build_report(outputs)
    assert "Profile: **quick** · seeds: 1, 2\n\nData: toy data\n\n**Provenance warning:** dirty" in md_path.read_text()
    html = html_path.read_text()
    assert "<p>Data: toy data</p>" in html and "<li>one</li>\n<li>two</li>" in html


def test_report_and_readme_and_docs_rebuild_byte_identical_from_the_committed_files(tmp_path):
    """`make report` on a clone with no new runs leaves README, docs and outputs/report/ as committed."""
    import shutil

    root = ROOT
    copy = tmp_path / "clone"
    for part in ("outputs/tables", "outputs/report", "outputs/figures", "docs"):
        shutil.copytree(root / part, copy / part)
    shutil.copy(root / "README.md", copy / "README.md")
    for stray in (copy / "outputs" / "tables").glob("*.*.*"):    # git-ignored dry/partial renders of this checkout
        if stray.name.split(".")[-2] in ("dry", "partial"):
            stray.unlink()
    def state() -> dict[str, bytes]:
        return {f"{part}/{name}": data for part in ("outputs/report", "docs")
                for name, data in tree_bytes(copy / part).items()} | {"README.md": (copy / "README.md").read_bytes()}

    committed = state()
    build_report(copy / "outputs", root=copy)
    again = state()
    changed = sorted(k for k in committed.keys() | again.keys() if committed.get(k) != again.get(k))
    assert not changed, f"make report changes {changed} on a clone with no new runs: run `make report`, commit"
