"""`--rejudge`: the committed table JSON read back and its claims judged again, without the runs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from langrepr.errors import UserError
from langrepr.metric_versions import METRIC_VERSIONS, metric_name
from langrepr.tables.claims import apply_floors, derive_ratios, judge_claims
from langrepr.tables.compare import existing_table, portable_dir
from langrepr.tables.markdown import to_markdown
from langrepr.tables.rows import cell_wall, column_cell
from langrepr.tables.runs import experiment_config, load_runs
from langrepr.tables.spec import filled_notes, shared_notes, table_spec, table_stem
from langrepr.utils import write_json_atomic, write_text_atomic

log = logging.getLogger("langrepr.tables")


def borrowed_rows(spec: dict, main_run_id: str, profile: str, outputs: Path) -> dict[str, dict]:
    """Rows read from another table's cells (`run_id:`), taken from that table's rendered JSON.

    The other table's row is the one with the same `match`; its cells are the same runs, so a clone can re-judge
    a table whose spec gained such a row without re-running anything.
    """
    found = {}
    for row in spec["rows"]:
        rid = row["run_id"]
        if rid == main_run_id or row.get("sources"):
            continue
        try:
            other_cfg = experiment_config(rid, profile)
        except UserError:
            continue
        other_spec = table_spec(other_cfg, rid)
        twin = next((r for r in other_spec["rows"] if r.get("match") == row.get("match")), None)
        other = existing_table(outputs / "tables" / f"{table_stem(rid, other_cfg.profile_name)}.json")
        cells = next((r["cells"] for r in other.get("rows", []) if twin and r["key"] == twin["key"]), None)
        if cells:
            found[row["key"]] = {"key": row["key"], "cells": cells}
    return found


class NotRendered(UserError):
    """The table has no JSON here to re-judge (`--rejudge all` skips it; one table asked by name is exit 2)."""


CELL_NUMBERS = {"ours": "a number", "std": "a number", "paper": "a number", "n": "a whole number"}


def read_table_json(path: Path, table: str, profile: str) -> dict:
    """The rendered table at `path`, for a re-judge: any damage is one line naming the file and the fix.

    A re-judge reads a committed file and may write over it, so a torn or hand-mangled JSON is never read as
    absent (it would be "replaced" by nothing) and never reaches the judge (a `"0.56"` std is a TypeError there).
    """
    make = f"`make {table.replace('_', '-')} PROFILE={profile}`"
    if not path.exists():
        raise NotRendered(f"{path} does not exist: render the table first ({make})")
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError) as err:   # a cut file, a merge conflict, bytes that are not UTF-8
        raise UserError(f"{path} is not readable JSON ({' '.join(str(err).split())}): restore it (`git checkout -- "
                        f"{path}`) or re-render it ({make}); it was left as it is") from None
    if not isinstance(old, dict) or not isinstance(old.get("rows"), list):
        raise UserError(f"{path} is not a rendered table (no `rows` list): restore it (`git checkout -- {path}`) "
                        f"or re-render it ({make})")
    for i, row in enumerate(old["rows"]):
        if not isinstance(row, dict) or not isinstance(row.get("key"), str) or not isinstance(row.get("cells"), dict):
            raise UserError(f"{path}: row {i + 1} has no `key` and `cells`: restore the file or re-render it ({make})")
        for column, cell in row["cells"].items():
            where = f"{path}: row {row['key']!r}, column {column!r}"
            if not isinstance(cell, dict):
                raise UserError(f"{where} is {cell!r}, not a cell: restore the file or re-render it ({make})")
            for key, kind in CELL_NUMBERS.items():
                value = cell.get(key)
                whole = kind == "a whole number"
                if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                     and (not whole or float(value).is_integer())):
                    continue
                raise UserError(f"{where}: `{key}` is {value!r} ({type(value).__name__}), not {kind}: write it as "
                                f"{kind} (or null), or re-render the table ({make})")
    return old


def orphan_cells(old_rows: dict[str, dict], spec: dict) -> list[dict]:
    """The measured cells of a table JSON that the spec no longer names (a row or column renamed or removed).

    A re-judge keeps them as measured, flagged and not judged: a spec rename must never drop three seeds' numbers.
    """
    rows, columns = {r["key"] for r in spec["rows"]}, {c["name"] for c in spec["columns"]}
    orphans = []
    for key, row in old_rows.items():
        for name, cell in row.get("cells", {}).items():
            if cell.get("ours") is None and not cell.get("stale_value"):
                continue   # nothing measured to lose
            if key not in rows:
                why = f"row {key!r} of the JSON is not in the spec (renamed?): kept as measured, not judged"
            elif name not in columns:
                why = f"column {name!r} of the JSON is not in the spec (renamed?): kept as measured, not judged"
            else:
                continue
            orphans.append({"row": key, "column": name, "why": why, "cell": {"std": None, **cell}})
    return orphans


def measured_values(table: dict) -> dict[tuple[str, str], str]:
    """{(row, column): its mean, std and n as JSON text} of every measured cell (NaN equal to NaN)."""
    return {(r["key"], name): json.dumps([c.get("ours"), c.get("std"), c.get("n")])
            for r in table.get("rows", []) for name, c in r.get("cells", {}).items() if c.get("ours") is not None}


def unreproduced(new: dict, old: dict, profile_name: str) -> list[str]:
    """Why a re-judged table must not replace the JSON it came from: a measured value lost or changed, other settings.

    Verdicts, floors, notes and titles may change: that is what a re-judge is for. The settings are the profile.
    """
    before, after = measured_values(old), measured_values(new)
    changed = [f"{r} / {c}" for (r, c), value in before.items() if after.get((r, c)) != value]
    reasons = []
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        reasons.append(f"{len(changed)} measured cell(s) of the JSON would not be shown as measured: {shown}")
    if old.get("profile") not in (None, profile_name):
        reasons.append(f"the JSON holds profile {old.get('profile')!r} cells, this re-judge is for {profile_name!r}")
    return reasons


def reread_columns(spec: dict, rows: list[dict], run_root: Path, profile: str) -> bool:
    """Re-read each column that names its own `run_id` (count cells, no training) from those cells, where present.

    A re-judge keeps the measured cells of its JSON; a column of count cells (TensorCoder's GFLOPs at the paper's
    size) is deterministic and seconds to run, so a table gains it from those cells without re-running its
    trained ones. Its ratio columns are derived again. Returns whether any column was re-read.
    """
    columns = [c for c in spec["columns"] if c.get("run_id")]
    read: set[str] = set()
    for column in columns:
        runs = [dict(r, run_id=column["run_id"], dir=portable_dir(r["dir"], run_root.parent))
                for r in load_runs(run_root / column["run_id"])]
        if not runs:
            continue
        by_key = {r["key"]: r for r in rows}
        for row in spec["rows"]:
            cell, _ = column_cell(spec, row, column, runs, profile)
            deterministic = by_key[row["key"]]["cells"][column["name"]].get("deterministic", False)
            by_key[row["key"]]["cells"][column["name"]] = dict(cell, deterministic=deterministic)
        read.add(column["name"])
    if read:
        derive_ratios(spec, rows, only=read)
    return bool(read)


def rejudge(table: str, profile: str = "full", outputs: str | Path = "outputs", force: bool = False) -> dict:
    """Recompute floors, roles and verdicts of a rendered table from its JSON alone and the current spec.

    A clone holds the table JSONs, not the runs behind them: the cells (mean, std, n) stay as measured; the
    spec's rows, columns, claims and notes are re-read, so a claim added to the spec is judged without a re-run.
    A row or column the JSON does not have renders "not run"; so does a column the spec's `not_run` names. A
    measured row or column the spec no longer names is kept under `orphans`, flagged in the notes, not judged.
    The result replaces the JSON (atomically) only when it shows every measured value of it unchanged, under the
    same profile; otherwise it is written beside it as `<stem>.partial.{md,json}` unless `force`.
    A column of count cells (its own `run_id`: no training) is re-read from those cells where they are here
    (`reread_columns`); the table's commit and cell time then are those of its cells.
    """
    cfg = experiment_config(table, profile)
    spec = table_spec(cfg, table)
    path = Path(outputs) / "tables" / f"{table_stem(table, cfg.profile_name)}.json"
    old = read_table_json(path, table, profile)
    empty = {"ours": None, "paper": None, "std": None, "n": 0, "runs": [], "seeds": [], "commits": [], "diverged": []}
    old_rows = {r["key"]: r for r in old["rows"]}
    kept = [o for o in old.get("orphans") or [] if isinstance(o, dict) and "row" in o and "column" in o]
    found = {(o["row"], o["column"]) for o in kept}
    orphans = kept + [o for o in orphan_cells(old_rows, spec) if (o["row"], o["column"]) not in found]
    for key, row in borrowed_rows(spec, cfg.run_id, profile, Path(outputs)).items():
        # another table's row fills a row this JSON lacks; a row measured with this table's own runs is kept (the
        # other table may have run under another recipe)
        if not any(c.get("ours") is not None for c in old_rows.get(key, {}).get("cells", {}).values()):
            old_rows[key] = row
    rows = []
    for row in spec["rows"]:
        cells = {}
        for column in spec["columns"]:
            cell = {**empty, **(old_rows.get(row["key"], {}).get("cells", {}).get(column["name"]) or {})}
            cell["paper"] = row.get("paper", {}).get(column["name"])
            name = metric_name(column.get("metric", ""))
            if cell.get("ours") is not None and cell.get("metric_version", 1) < METRIC_VERSIONS.get(name, 1):
                # measured under an older definition (the JSON predates metric versions): shown as stale
                cell.update(stale=list(cell.get("runs", [])) or ["(committed value)"], stale_value=cell["ours"],
                            ours=None, std=None, n=0)
            not_run = (spec.get("not_run") or {}).get(column["name"])
            if not_run:      # the spec now says this profile does not run the column: as a render would show it
                cell.update(ours=None, std=None, n=0, runs=[], seeds=[], commits=[], not_run=not_run)
            reference = bool(row.get("reference", False))
            cell["deterministic"] = reference if row.get("deterministic") is None else bool(row["deterministic"])
            cells[column["name"]] = cell
        rows.append({"key": row["key"], "reference": bool(row.get("reference", False)), "cells": cells})
    reread = reread_columns(spec, rows, Path(outputs) / cfg.profile_name, cfg.profile_name)
    apply_floors(spec, rows)
    notes = filled_notes(list(spec.get("notes", [])), rows, spec) + shared_notes(spec, cfg.run_id)
    notes += list(dict.fromkeys(o["why"] for o in orphans))
    ran = old.get("data") or spec.get("data", "")   # the data line describes the runs behind the cells: keep it
    if spec.get("data") and spec["data"] != ran:
        notes.append(f"These cells ran under an earlier recipe (the data line above); the current one is: "
                     f"{spec['data']}. `make {table.replace('_', '-')} PROFILE={profile}` re-runs them.")
    result = dict(old, title=spec["title"], columns=[c["name"] for c in spec["columns"]], rows=rows,
                  claims=judge_claims(spec, rows), data=ran, notes=notes,
                  not_run=dict(spec.get("not_run") or {}))
    if reread:   # the count cells re-read here are runs of this table too: the commits and times are its cells'
        commits = {c for row in rows for cell in row["cells"].values() for c in cell.get("commits") or []}
        commits = commits or {c for c in str(old.get("commit") or "").split(",") if c}
        result.update(commit=",".join(sorted(c for c in commits if not c.endswith("+dirty"))
                                      + sorted(c for c in commits if c.endswith("+dirty"))),
                      dirty_commits=sorted(c for c in commits if c.endswith("+dirty")), cell_wall=cell_wall(rows))
    result.pop("orphans", None)
    if orphans:
        result["orphans"] = orphans
    reasons = [] if force else unreproduced(result, old, cfg.profile_name)
    result["kept_existing"] = bool(reasons)
    target = path
    if reasons:
        target = path.with_name(path.name.removesuffix(".json") + ".partial.json")
        log.warning("%s: kept %s and wrote the re-judged table beside it as %s (%s); pass --force to replace it",
                    table, path, target.with_suffix(".md").name, "; ".join(reasons))
    write_json_atomic(target, result)
    write_text_atomic(target.with_suffix(".md"), to_markdown(result, spec))
    log.info("Re-judged %s", target.with_suffix(".md"))
    return result
