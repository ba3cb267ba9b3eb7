"""Building the table: each (row, column) cell from the runs that match it, with its provenance and dry outcome."""

from __future__ import annotations

import logging
import statistics

from langrepr.metric_versions import METRIC_VERSIONS, metric_name, stale_metrics
from langrepr.tables.claims import apply_floors, derive_ratios, judge_claims
from langrepr.tables.runs import matches, run_value
from langrepr.tables.spec import filled_notes
from langrepr.utils import git_commit

log = logging.getLogger("langrepr.tables")


# ---------------------------------------------------------------- building the table

ADDRESSING = {"experiment", "profile", "seed", "seeds", "ckpt_path", "force", "dataset", "model"}


def recipe_overrides(run: dict, spec: dict) -> list[str]:
    """A run's command-line overrides beyond those that address its cell: what makes it another recipe.

    Addressing keys are the experiment, profile, seed and the sweep keys the table matches on; what is left is,
    e.g., a one-off `+trainer.max_steps=2`.
    """
    axes = set(ADDRESSING)
    for item in spec["rows"] + spec["columns"]:
        axes |= set(item.get("match") or {})
        for src in (item.get("sources") or {}).values():
            axes |= set(src.get("match") or {})
    extra = []
    for override in run.get("overrides") or []:
        key = override.split("=", 1)[0].lstrip("+~")
        if key in axes or key.split(".")[0] in ("hydra", "paths") or key.startswith("hydra/"):
            continue
        extra.append(override)
    return extra


def column_cell(spec: dict, row: dict, column: dict, runs: list[dict], profile: str) -> tuple[dict, list]:
    """One cell of the table from the runs that fill it, and those runs with their values.

    Its runs are those of the row's `run_id` (or the column's, or the row's `sources` entry for the column) that
    match the row and the column; one per seed, the newest.
    """
    # `sources: {<column>: {run_id, match}}`: this row's cell in that column comes from other cells
    source = row.get("sources", {}).get(column["name"], {})
    run_id = source.get("run_id", column.get("run_id") or row.get("run_id"))
    row_match = source.get("match", row.get("match"))
    derived = bool(column.get("ratio_of") or column.get("quotient"))   # filled from its inputs by derive_ratios
    cell_runs = [] if derived else [
        r for r in runs if matches(r, row_match) and matches(r, column.get("match"))
        and r.get("run_id", run_id) == (run_id if run_id is not None else r.get("run_id"))]
    by_seed: dict[int, dict] = {}
    for r in sorted(cell_runs, key=lambda r: r["mtime"]):
        if r.get("seed") in by_seed:
            log.warning("%s / %s: seed %s ran twice, using the newest (%s)", row["key"], column["name"],
                        r.get("seed"), r["dir"])
        by_seed[r.get("seed")] = r
    diverged = [r["dir"] for r in by_seed.values() if r.get("status") == "diverged"]
    values = [(r, run_value(r, column, row)) for r in by_seed.values() if r.get("status") == "finished"]
    values = [(r, v) for r, v in values if v is not None]
    not_run = (spec.get("not_run") or {}).get(column["name"])
    if not_run:      # this profile does not run the column: what the runs recorded there is not shown
        values = []
    metric = column.get("metric", "").format(**row.get("vars", {}))
    stale = [r["dir"] for r, _ in values if metric in stale_metrics(r)]  # scored under an older definition
    values = [(r, v) for r, v in values if r["dir"] not in stale]
    cell = {"ours": statistics.fmean(v for _, v in values) if values else None,
            "paper": row.get("paper", {}).get(column["name"]),
            "std": statistics.stdev(v for _, v in values) if len(values) > 1 else None,
            "n": len(values), "runs": [r["dir"] for r, _ in values],
            "seeds": sorted(r.get("seed") for r, _ in values if r.get("seed") is not None),
            "commits": sorted({r.get("commit") for r, _ in values if r.get("commit")}), "diverged": diverged,
            "stale": stale, "metric_version": METRIC_VERSIONS.get(metric_name(metric), 1),
            "wall_s": [r.get("wall_time_s") for r, _ in values]}
    if not_run:
        cell["not_run"] = not_run
    if profile == "dry":
        cell["dry"] = dry_outcome(list(by_seed.values()))
    return cell, values


def build(spec: dict, runs: list[dict], profile: str) -> dict:
    rows_out, seeds, commits, recipe = [], set(), set(), set()
    for row in spec["rows"]:
        cells = {}
        for column in spec["columns"]:
            cells[column["name"]], values = column_cell(spec, row, column, runs, profile)
            recipe.update(o for r, _ in values for o in recipe_overrides(r, spec))
            seeds.update(cells[column["name"]]["seeds"])
            commits.update(cells[column["name"]]["commits"])
        reference = bool(row.get("reference", False))
        deterministic = row.get("deterministic")
        for cell in cells.values():
            cell["deterministic"] = reference if deterministic is None else bool(deterministic)
        rows_out.append({"key": row["key"], "reference": reference, "cells": cells})
    derive_ratios(spec, rows_out)
    apply_floors(spec, rows_out)
    clean = sorted(c for c in commits if c and not c.endswith("+dirty"))
    dirty = sorted(c for c in commits if c and c.endswith("+dirty"))
    table = {
        "table": spec["name"], "title": spec["title"], "profile": profile,
        "commit": ",".join(clean + dirty) or git_commit(), "dirty_commits": dirty,
        "columns": [c["name"] for c in spec["columns"]], "rows": rows_out,
        "claims": judge_claims(spec, rows_out), "seeds": sorted(s for s in seeds if s is not None),
        "data": spec.get("data", ""), "notes": filled_notes(list(spec.get("notes", [])), rows_out, spec),
        "recipe": sorted(recipe),
        "not_run": dict(spec.get("not_run") or {}),
    }
    table["cell_wall"] = cell_wall(rows_out)
    return table


def run_seconds(rows: list[dict]) -> dict[str, float | None]:
    """Each run behind these rows once (however many cells read it) with its recorded wall time, None if unrecorded."""
    seconds: dict[str, float | None] = {}
    for row in rows:
        for cell in row["cells"].values():
            runs = cell.get("runs", [])
            for run, wall in zip(runs, cell.get("wall_s") or [None] * len(runs)):   # derived cells carry no times
                seconds[run] = wall if wall is not None else seconds.get(run)
    return seconds


def cell_wall(rows: list[dict]) -> dict:
    """What the table's cells cost, from their own records: the sum over its runs, and how many lack a time."""
    seconds = run_seconds(rows)
    timed = [s for s in seconds.values() if s is not None]
    return {"seconds": round(sum(timed), 1), "runs": len(seconds), "untimed_runs": len(seconds) - len(timed)}


def dry_outcome(runs: list[dict]) -> dict:
    """A dry cell's outcome over its seeds: which ran 2 steps (ok), stopped for missing data, skipped or failed."""
    out: dict = {"ok": [], "missing_data": [], "skipped": [], "failed": [], "by_run": {}}
    for r in runs:
        info = r.get("dry") or {}
        if r.get("status") == "failed":
            kind, line = "failed", r.get("error", "failed")
        elif info.get("missing_data"):
            kind, line = "missing_data", info["missing_data"]
        elif info.get("skipped"):
            kind, line = "skipped", info["skipped"]
        else:
            kind, line = "ok", r["dir"]
        out[kind].append(line)
        out["by_run"][r["dir"]] = kind
    return out


def dry_notes(rows: list[dict]) -> list[str]:
    """One note per distinct failure / missing-data line of a dry render, naming the cells it stopped."""
    found: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        for cell in row["cells"].values():
            for kind in ("failed", "missing_data", "skipped"):
                for line in (cell.get("dry") or {}).get(kind, []):
                    found.setdefault((kind, line), []).append(row["key"])
    label = {"failed": "DRY FAILED", "missing_data": "dry: no data", "skipped": "dry: skipped"}
    return [f"{label[k]} ({', '.join(dict.fromkeys(cells))}): {line}" for (k, line), cells in found.items()]


def dry_summary(rows: list[dict], columns: list[str]) -> str:
    """What a dry render found, counted by run folder (a run read by several columns counts once).

    E.g. "dry run, 36 cell run(s): 15 ran 2 steps at full size (PTB valid loss, PTB attn GFLOPs); 15 no data (...)".
    """
    outcome: dict[str, str] = {}
    read_by: dict[str, list[str]] = {}
    for row in rows:
        for name in columns:
            for run_dir, kind in ((row["cells"][name].get("dry") or {}).get("by_run") or {}).items():
                outcome[run_dir] = kind
                read_by.setdefault(run_dir, [])
                if name not in read_by[run_dir]:
                    read_by[run_dir].append(name)
    if not outcome:
        return "dry run: no cell of this table has a dry record"
    label = {"ok": "ran 2 steps at full size", "missing_data": "no data", "skipped": "skipped (no dry mode)",
             "failed": "FAILED"}
    parts = []
    for kind in label:
        dirs = [d for d, k in outcome.items() if k == kind]
        if dirs:
            cols = list(dict.fromkeys(c for d in dirs for c in read_by[d]))
            parts.append(f"{len(dirs)} {label[kind]} ({', '.join(cols)})")
    return f"dry run, {len(outcome)} cell run(s): " + "; ".join(parts)
