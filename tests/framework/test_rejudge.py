"""`python -m langrepr.tables <table> --rejudge` on a committed table JSON (issue 33, finding 2): it never drops a
measured value, judges no NaN, says what is wrong with a damaged JSON in one line, and writes beside (never over)
a committed table it cannot reproduce. Each case runs on a tmp copy of a committed JSON."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from conftest import ROOT
from langrepr import verdicts
from langrepr.tables import main

TABLE, STEM = "leam_table2", "leam_table2.quick"
COMMITTED = ROOT / "outputs" / "tables" / f"{STEM}.json"


@pytest.fixture
def outputs(tmp_path):
    """A tmp outputs folder holding a copy of the committed LEAM Table 2 (quick) JSON, and nothing else."""
    (tmp_path / "tables").mkdir()
    shutil.copy(COMMITTED, tmp_path / "tables" / f"{STEM}.json")
    return tmp_path


def edit(outputs, change) -> bytes:
    """Apply `change` to the copied table JSON; return the bytes written (to check they are left untouched)."""
    path = outputs / "tables" / f"{STEM}.json"
    table = json.loads(path.read_text())
    change(table)
    path.write_text(json.dumps(table, indent=2))
    return path.read_bytes()


def rejudge(outputs, *extra: str) -> None:
    main([TABLE, "--profile", "quick", "--rejudge", "--outputs", str(outputs), *extra])


def row(table: dict, key: str) -> dict:
    return next(r for r in table["rows"] if r["key"] == key)


def test_a_committed_table_rejudges_to_itself_in_place(outputs):
    """The contract the rest guards: re-judging an unchanged committed JSON rewrites nothing of it, beside nothing."""
    rejudge(outputs)
    assert json.loads((outputs / "tables" / f"{STEM}.json").read_text()) == json.loads(COMMITTED.read_text())
    assert not list((outputs / "tables").glob("*.partial.*"))


def test_a_row_the_spec_renamed_is_kept_and_flagged_and_the_committed_file_is_untouched(outputs, caplog):
    def rename(table):
        row(table, "LEAM-linear")["key"] = "LEAM linear (old name)"
    before = edit(outputs, rename)
    rejudge(outputs)
    assert (outputs / "tables" / f"{STEM}.json").read_bytes() == before     # never over what it cannot reproduce
    partial = json.loads((outputs / "tables" / f"{STEM}.partial.json").read_text())
    flag = "row 'LEAM linear (old name)' of the JSON is not in the spec (renamed?): kept as measured, not judged"
    kept = [o for o in partial["orphans"] if o["row"] == "LEAM linear (old name)"]
    assert [o["column"] for o in kept] == ["AG News"]                       # its one measured cell, as measured
    measured = row(json.loads(COMMITTED.read_text()), "LEAM-linear")["cells"]["AG News"]
    assert {k: kept[0]["cell"][k] for k in ("ours", "std", "n", "seeds")} == \
        {k: measured[k] for k in ("ours", "std", "n", "seeds")}
    assert flag in partial["notes"]
    md = (outputs / "tables" / f"{STEM}.partial.md").read_text()
    assert flag in md and f"{measured['ours']:.2f}" in md
    assert "kept" in caplog.text and f"{STEM}.partial.md" in caplog.text


def test_a_column_the_spec_does_not_name_is_kept_and_flagged(outputs):
    def rename(table):
        table["columns"] = [("AG news" if c == "AG News" else c) for c in table["columns"]]
        for r in table["rows"]:
            r["cells"]["AG news"] = r["cells"].pop("AG News")
    edit(outputs, rename)
    rejudge(outputs)
    partial = json.loads((outputs / "tables" / f"{STEM}.partial.json").read_text())
    measured = [r for r in json.loads(COMMITTED.read_text())["rows"] if r["cells"].get("AG News", {}).get("n")]
    assert len(measured) >= 10
    assert len([o for o in partial["orphans"] if o["column"] == "AG news"]) == len(measured)   # every one kept
    assert any("column 'AG news' of the JSON is not in the spec (renamed?)" in n for n in partial["notes"])


def test_a_nan_cell_is_not_judged_and_says_why(outputs):
    def nan(table):
        row(table, "LEAM (paper eqs.)")["cells"]["AG News"]["ours"] = float("nan")
    edit(outputs, nan)
    rejudge(outputs)
    table = json.loads((outputs / "tables" / f"{STEM}.json").read_text())   # verdicts only changed: in place
    claims = [c for c in table["claims"] if c["a"]["row"] == "LEAM (paper eqs.)" and c["a"]["column"] == "AG News"]
    assert claims and all(c["verdict"] == "not judged" for c in claims)
    assert all("LEAM (paper eqs.) / AG News: its mean is nan" in c["reason"] for c in claims)
    assert math.isnan(row(table, "LEAM (paper eqs.)")["cells"]["AG News"]["ours"])   # kept as it is


def test_judge_never_marks_a_non_finite_side():
    side = {"row": "A", "column": "Acc", "mean": 80.0, "std": 1.0, "n": 3}
    for bad in ({"mean": float("nan")}, {"std": float("inf")}):
        out = verdicts.judge({"op": "gt", "a": {**side, **bad}, "b": {**side, "row": "B", "mean": 70.0}})
        assert out["verdict"] == "not judged" and out["holds"] is None and "A / Acc" in out["reason"]
    floor = verdicts.floor_status({"ours": float("nan"), "std": 1.0, "n": 3}, {"ours": 25.0, "std": 0.0, "n": 3})
    assert floor["clears"] is None


@pytest.mark.parametrize("key,value", [("std", "0.56"), ("n", "3"), ("ours", "87.7")])
def test_a_number_stored_as_a_string_is_one_line_and_exit_2(outputs, capfd, key, value):
    def stringify(table):
        row(table, "LEAM-linear")["cells"]["AG News"][key] = value
    before = edit(outputs, stringify)
    with pytest.raises(SystemExit) as exit_:
        rejudge(outputs)
    err = capfd.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1, err
    assert f"{STEM}.json" in err and "row 'LEAM-linear', column 'AG News'" in err and f"`{key}`" in err
    assert "re-render" in err and "Traceback" not in err
    assert (outputs / "tables" / f"{STEM}.json").read_bytes() == before
    assert not list((outputs / "tables").glob("*.partial.*"))


def test_a_table_cut_in_half_is_one_true_line_and_left_as_it_is(outputs, capfd):
    path = outputs / "tables" / f"{STEM}.json"
    half = path.read_bytes()[: path.stat().st_size // 2]
    path.write_bytes(half)
    with pytest.raises(SystemExit) as exit_:
        rejudge(outputs)
    captured = capfd.readouterr()
    err = captured.err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1, err
    assert "is not readable JSON" in err and "git checkout" in err
    assert "will be replaced" not in captured.out + captured.err and "does not exist" not in err
    assert path.read_bytes() == half
    assert not list((outputs / "tables").glob("*.partial.*"))


def test_a_missing_table_still_says_render_it_first(tmp_path, capfd):
    with pytest.raises(SystemExit) as exit_:
        rejudge(tmp_path)
    assert exit_.value.code == 2 and "does not exist: render the table first" in capfd.readouterr().err


def test_a_table_of_another_profile_is_rejudged_beside_it(outputs, caplog):
    """The JSON says it holds another profile's cells: its settings differ from this re-judge's, so it is kept."""
    before = edit(outputs, lambda table: table.update(profile="full"))
    rejudge(outputs)
    assert (outputs / "tables" / f"{STEM}.json").read_bytes() == before
    assert (outputs / "tables" / f"{STEM}.partial.json").exists()
    assert "profile" in caplog.text


def test_force_replaces_and_still_keeps_the_orphan(outputs):
    edit(outputs, lambda table: row(table, "LEAM-linear").update(key="LEAM linear (old name)"))
    rejudge(outputs, "--force")
    table = json.loads((outputs / "tables" / f"{STEM}.json").read_text())
    assert [o["row"] for o in table["orphans"]] == ["LEAM linear (old name)"]
    assert not list((outputs / "tables").glob("*.partial.*"))
