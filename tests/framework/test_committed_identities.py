"""No result moves (issue 34 item 5): the committed tables' runs and the committed plans' cells keep their identity.

A committed table names the run folder behind each of its cells; a committed plan records the fingerprint of
every full-profile cell. If a refactor changes what those cells compose to, a re-run no longer finds them and
trains every one again, and a table mixes runs of two configs. These tests compose the recorded cells with
today's code and compare fingerprints (the portable form: no local data folder, as the plan records it).

`tests/fixtures/committed_run_fingerprints.json` holds, per committed table, the fingerprint of one of its runs,
written by `python tests/framework/test_committed_identities.py`. Rewrite it only for an identity change made on
purpose, and re-run the cells it touches.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "outputs" / "tables"
PLANS = ROOT / "outputs" / "plan"
FIXTURE = ROOT / "tests" / "fixtures" / "committed_run_fingerprints.json"


def table_runs(table_json: Path) -> list[str]:
    """Every run folder a committed table reads, sorted."""
    data = json.loads(table_json.read_text())
    return sorted({run for row in data["rows"] for cell in (row.get("cells") or {}).values()
                   for run in cell.get("runs") or []})


def run_overrides(run: str, table: str) -> list[str]:
    """The command line that composes a run folder `outputs/<profile>/<run_id>/<override_dirname>`.

    The experiment is the run_id's own when one has that name (Bit Cipher Table 2 reads Table 1's cells), else
    the table's (TensorCoder's count cells run under `tensorcoder_paper_size`).
    """
    from langrepr.confpaths import option_files

    _, profile, run_id, dirname = run.split("/", 3)
    experiment = run_id if run_id in option_files("experiment") else table
    return [f"experiment={experiment}", *([f"profile={profile}"] if profile in ("quick", "full") else []),
            *dirname.split(",")]


def fingerprint(overrides: list[str]) -> tuple[str, object]:
    from langrepr.cell import cell_fingerprint
    from langrepr.plan import compose_cell, portable_fingerprint

    cfg, _ = compose_cell(overrides)
    return portable_fingerprint(cfg, cell_fingerprint), cfg


def recorded_runs() -> dict:
    return json.loads(FIXTURE.read_text())


@pytest.mark.parametrize("table", sorted(recorded_runs()))
def test_a_committed_tables_run_composes_to_its_recorded_identity(table):
    entry = recorded_runs()[table]
    assert entry["run"] in table_runs(TABLES / f"{table}.json"), "the fixture names a run the table no longer reads"
    got, cfg = fingerprint(entry["overrides"])
    assert got == entry["fingerprint"], f"{entry['run']}: its cell composes to another identity"
    assert f"outputs/{cfg.profile_name}/{cfg.run_id}/" in entry["run"] + "/"     # and is written where it was


def _finished_runs() -> list[tuple[str, str]]:
    """(table, run) for every committed table's run whose folder is on this machine with its record.

    `.ci/run` runs `make ewe-table1` before the tests, so EWE Table 1's six cells are there in CI.
    """
    found = []
    for path in sorted(TABLES.glob("*.json")):
        for run in table_runs(path):
            if (ROOT / run / "metrics.json").is_file():
                found.append((path.stem.split(".")[0], run))
    return found


@pytest.mark.skipif(not _finished_runs(), reason="no committed table's run folder is on this machine "
                                                 "(run `make ewe-table1`, or any table's target, first)")
def test_the_runs_on_this_machine_compose_to_the_fingerprint_they_recorded():
    from langrepr.cell import cell_fingerprint, legacy_fingerprints
    from langrepr.plan import compose_cell

    for table, run in _finished_runs()[:12]:
        record = json.loads((ROOT / run / "metrics.json").read_text())
        cfg, _ = compose_cell(run_overrides(run, table))
        assert record["fingerprint"] in {cell_fingerprint(cfg), *legacy_fingerprints(cfg)}, run


def test_every_committed_table_has_a_recorded_run():
    assert sorted(recorded_runs()) == sorted(p.stem for p in TABLES.glob("*.json"))


def _plan_cells(every: bool) -> list[tuple[str, int]]:
    """(plan, cell index): the first and last cell of each paper's first plan, or every cell of every plan."""
    chosen, papers = [], set()
    for path in sorted(PLANS.glob("*.json")):
        n = len(json.loads(path.read_text())["cells"])
        paper = path.stem.split("_")[0]
        if every:
            chosen += [(path.stem, i) for i in range(n)]
        elif paper not in papers:
            papers.add(paper)
            chosen += [(path.stem, 0), (path.stem, n - 1)]
    return chosen


def _check_plan_cell(plan: str, index: int) -> None:
    cell = json.loads((PLANS / f"{plan}.json").read_text())["cells"][index]
    if "fingerprint" not in cell:       # a cell that did not compose when the plan was made records none
        pytest.skip(f"{plan} cell {cell['cell']} has no recorded fingerprint ({cell.get('stage')})")
    assert fingerprint(list(cell["overrides"]))[0] == cell["fingerprint"], f"{plan}: {cell['cell']}"


@pytest.mark.parametrize("plan, index", _plan_cells(every=False))
def test_a_committed_plans_cells_keep_their_fingerprint(plan, index):
    _check_plan_cell(plan, index)


@pytest.mark.slow
@pytest.mark.parametrize("plan, index", _plan_cells(every=True))
def test_every_committed_plan_cell_keeps_its_fingerprint(plan, index):
    _check_plan_cell(plan, index)


def write_fixture() -> None:
    """One run per committed table (its first, sorted) with its command line and today's fingerprint."""
    import langrepr.train  # noqa: F401  (registers the resolvers the configs use)

    out = {}
    for path in sorted(TABLES.glob("*.json")):
        table = path.stem.split(".")[0]
        run = table_runs(path)[0]
        overrides = run_overrides(run, table)
        out[path.stem] = {"run": run, "overrides": overrides, "fingerprint": fingerprint(overrides)[0]}
        print(path.stem, out[path.stem]["fingerprint"], file=sys.stderr)
    FIXTURE.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    write_fixture()
