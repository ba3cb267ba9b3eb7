"""`make quick-all`: every table target in the budget, each timed, failures reported, the record written."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "quick_all.py"
sys.path.insert(0, str(SCRIPT.parent))

import quick_all  # noqa: E402

from langrepr.confpaths import group_options  # noqa: E402


def test_every_experiment_has_its_table_target_in_the_budget():
    targets = quick_all.table_targets()
    experiments = set(group_options("experiment")) - {"multihot_pretrain"}   # every config root
    assert {e.replace("_", "-") for e in experiments} <= set(targets)
    assert targets.index("ewe-table3") < targets.index("ewe-table4")       # paper order, tables by number


def _fake_make(tmp_path: Path, failing: str) -> Path:
    fake = tmp_path / "fake_make"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'calls'}\n[ \"$1\" = {failing} ] && exit 3\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return fake


def test_runs_each_target_records_wall_times_and_reports_a_failure(tmp_path):
    out = tmp_path / "wall_times.json"
    run = subprocess.run([sys.executable, str(SCRIPT), "--targets", "ewe-table1", "leam-table4",
                          "--make", str(_fake_make(tmp_path, "leam-table4")), "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert "leam-table4" in run.stderr and "Traceback" not in run.stderr
    assert (tmp_path / "calls").read_text().splitlines() == ["ewe-table1 PROFILE=quick", "leam-table4 PROFILE=quick"]
    record = json.loads(out.read_text())
    assert [(r["target"], r["returncode"]) for r in record["targets"]] == [("ewe-table1", 0), ("leam-table4", 3)]
    assert record["total_seconds"] == round(sum(r["seconds"] for r in record["targets"]), 1)


def test_an_unknown_target_is_one_line():
    run = subprocess.run([sys.executable, str(SCRIPT), "--targets", "ewe-table9"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "ewe-table9" in run.stderr
