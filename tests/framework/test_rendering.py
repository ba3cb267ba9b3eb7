"""Tables, report and explain on damaged or missing inputs: one line, and nothing partial shown as a table.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("own_digest_cache", "fresh_root_logger")


def test_X40_explain_of_a_table_that_does_not_exist_says_unknown_table(capsys):
    from langrepr.confpaths import group_options
    from langrepr.tables import main

    with pytest.raises(SystemExit) as exit_:
        main(["explain", "tensorcoder_table9", "Transformer-1head", "PTB valid loss"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert err == ("error: unknown table 'tensorcoder_table9': no rendered table 'tensorcoder_table9' in "
                   "outputs/tables and no conf/experiment/tensorcoder_table9.yaml; choose one of "
                   f"{', '.join(group_options('experiment'))}\n")


def _toy_outputs(root: Path) -> Path:
    """outputs/ with one rendered toy table whose cell names one run folder (with a CSV log)."""
    run = root / "outputs" / "quick" / "toy" / "model=a,seed=1"
    (run / "csv").mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"status": "finished", "commit": "abc", "metrics": {"test/f1": 0.5}}))
    (run / "csv" / "metrics.csv").write_text("epoch,step,train/loss,val/loss\n0,0,1.0,\n0,1,0.8,\n0,1,,0.9\n")
    table = {"table": "toy", "title": "Toy", "profile": "quick", "commit": "abc", "columns": ["F1"], "seeds": [1],
             "rows": [{"key": "A", "cells": {"F1": {"ours": 0.5, "paper": None, "std": None, "n": 1,
                                                    "runs": [str(run)]}}}], "claims": []}
    (root / "outputs" / "tables").mkdir(parents=True)
    (root / "outputs" / "tables" / "toy.quick.json").write_text(json.dumps(table))
    (root / "outputs" / "tables" / "toy.quick.md").write_text("# Toy\n\n| | F1 |\n|---|---|\n| A | 0.5 |\n")
    return root / "outputs"


def run_report(argv: list[str], capsys=None) -> tuple[int, str, str]:
    """`python -m langrepr.report <argv>` in a fresh interpreter (its own logging, as a user runs it)."""
    from conftest import run_cli

    done = run_cli("langrepr.report", *argv, timeout=120)
    return done.returncode, done.stdout, done.stderr


def test_X35_the_report_never_shows_a_partial_render_as_a_table(tmp_path, capsys):
    outputs = _toy_outputs(tmp_path)
    tables = outputs / "tables"
    table = json.loads((tables / "toy.quick.json").read_text())
    (tables / "toy.quick.partial.json").write_text(json.dumps({**table, "seeds": []}))
    (tables / "toy.quick.partial.md").write_text("# Toy (partial)\n")
    code, _, err = run_report(["--outputs", str(outputs)], capsys)
    assert code == 0, err
    md = (outputs / "report" / "report.md").read_text()
    assert md.count("| [toy](") == 1 and "Toy (partial)" not in md and "toyquickpartial" not in md
    # ignored entirely, not even named: a git-ignored file must not make this machine's report differ from a clone's
    (tables / "toy.quick.partial.json").unlink()
    assert run_report(["--outputs", str(outputs)], capsys)[0] == 0
    assert (outputs / "report" / "report.md").read_text() == md


def test_X36_a_damaged_run_record_leaves_out_its_curve_with_a_warning(tmp_path, capsys):
    outputs = _toy_outputs(tmp_path)
    run = outputs / "quick" / "toy" / "model=a,seed=1"
    (run / "metrics.json").write_text('{"status": "fini')
    code, printed, err = run_report(["--outputs", str(outputs)], capsys)
    assert code == 0 and "Traceback" not in err
    assert err.splitlines() == [f"warning: skipping {run / 'metrics.json'}: unreadable (JSONDecodeError); its curve "
                                "is left out (rerun that cell with force=true)"]
    assert printed.startswith("wrote ") and "| [toy](" in (outputs / "report" / "report.md").read_text()


def test_X37_a_damaged_table_json_is_one_line_and_the_report_is_kept(tmp_path, capsys):
    outputs = _toy_outputs(tmp_path)
    (outputs / "report").mkdir()
    (outputs / "report" / "report.md").write_text("the committed report\n")
    path = outputs / "tables" / "toy.quick.json"
    path.write_text(path.read_text()[:60])
    code, _, err = run_report(["--outputs", str(outputs)], capsys)
    assert code == 2 and err == (
        f"error: {path} is damaged (not the JSON `langrepr.tables` writes: JSONDecodeError): restore it (`git checkout "
        f"-- {path}`) or re-render it (`python -m langrepr.tables toy --profile quick`); the report on disk is "
        "untouched\n")
    assert (outputs / "report" / "report.md").read_text() == "the committed report\n"


def test_X43_tables_on_a_read_only_folder_is_one_line(tmp_path, capsys, monkeypatch):
    import langrepr.tables as tables

    def read_only(path, *_):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(tables, "write_json_atomic", read_only)
    with pytest.raises(SystemExit) as exit_:
        tables.main(["leam_table3", "--profile", "quick", "--outputs", str(tmp_path / "ro")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.splitlines()[-1] == (
        f"error: cannot write {tmp_path / 'ro' / 'tables' / 'leam_table3.quick.partial.json'}: Read-only file system; pass "
        "--outputs <a writable folder holding the run folders> (the tables already on disk are untouched)")
    assert "Traceback" not in err


def test_X43_tables_and_report_under_a_file_are_one_line(tmp_path, capsys):
    from langrepr.tables import main

    (tmp_path / "afile").write_text("not a folder")
    with pytest.raises(SystemExit) as exit_:
        main(["leam_table3", "--profile", "quick", "--outputs", str(tmp_path / "afile")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.splitlines()[-1].startswith(f"error: cannot write {tmp_path / 'afile'}")
    outputs = _toy_outputs(tmp_path)
    code, _, err = run_report(["--outputs", str(outputs), "--out", str(tmp_path / "afile" / "rep")], capsys)
    assert code == 2 and err.startswith(f"error: cannot write {tmp_path / 'afile'}") and err.endswith(
        "pass --out <a writable folder> (the report on disk is untouched)\n")
