"""Render a paper table from run artefacts: `python -m langrepr.tables <table> [--profile quick|full] [--dry]`.

A table is declared by the `table:` node of `conf/papers/<paper>/experiment/<table>.yaml`; its cells are filled
only from `metrics.json` + `config_resolved.yaml` of finished runs under `outputs/<profile>/<run_id>/`, never from a
dashboard. The JSON written beside the Markdown has a fixed shape that downstream tools rely on.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from langrepr import verdicts
from langrepr.confpaths import CONF_DIR, group_options, option_path
from langrepr.errors import WRITE_ERRNOS, UserError, unknown_choice
from langrepr.metric_versions import METRIC_VERSIONS, metric_name, stale_metrics
from langrepr.table_spec import TableSpec, normalised
from langrepr.utils import git_commit, write_json_atomic, write_text_atomic

log = logging.getLogger("langrepr.tables")


# ---------------------------------------------------------------- reading runs

def experiment_config(table: str, profile: str, dry: bool = False) -> DictConfig:
    """Compose the experiment exactly as `make` runs it, to read its run_id, profile_name and `table:` spec."""
    options = group_options("experiment")
    if table not in options:
        raise UserError(unknown_choice("table", table, options))
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[f"experiment={table}", f"profile={profile}", *(["debug=dry"] if dry else [])])
    if "table" not in cfg:
        raise UserError(f"{option_path('experiment', table)} has no `table:` node to render")
    return cfg


def select(config: dict, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


FINISHED = ("finished", "diverged")
DRY = ("dry", "failed")   # a dry render (--dry) reads dry records, and failed ones to show what broke


def load_runs(run_root: Path, statuses: tuple[str, ...] = FINISHED) -> list[dict]:
    """Every finished or diverged cell under run_root (`statuses`: DRY for a dry render), with its resolved config.

    A corrupt `metrics.json` or config is skipped with a warning naming it: one bad cell must not stop a table.
    """
    runs = []
    for path in sorted(run_root.rglob("metrics.json")):
        if any(part.startswith(".") for part in path.relative_to(run_root).parts):
            continue  # cells moved aside by force=true (.replaced/) are history, not results
        try:
            record = json.loads(path.read_text())
            if record.get("status") not in statuses:
                continue
            cfg_path = path.parent / "config_resolved.yaml"
            record["config"] = yaml.safe_load(cfg_path.read_text()) if cfg_path.exists() else {}
        except (OSError, ValueError, yaml.YAMLError) as err:
            log.warning("skipping %s: unreadable (%s); rerun that cell with force=true", path, type(err).__name__)
            continue
        record["dir"] = str(path.parent)
        record["mtime"] = path.stat().st_mtime
        runs.append(record)
    return runs


def matches(run: dict, match: dict | None) -> bool:
    for key, want in (match or {}).items():
        have = run.get("choices", {}).get(key) if "." not in key else select(run["config"], key)
        if have is None and "." not in key:
            have = select(run["config"], key)
        if str(have) != str(want):
            return False
    return True


def run_value(run: dict, column: dict, row: dict) -> float | None:
    name = column["name"]
    if name in row.get("const", {}):
        return row["const"][name]
    source = row.get("config", {}).get(name) or column.get("config")
    metric = column.get("metric", "").format(**row.get("vars", {}))  # e.g. "train/{labeling}/total"
    if source:
        value = select(run["config"], source)
    elif not metric:
        return None  # derived column, filled by derive_ratios
    elif metric.startswith("params."):
        value = run.get("params", {}).get(metric.split(".", 1)[1])
    else:
        value = run.get("metrics", {}).get(metric)
    return None if value is None else float(value) * float(column.get("scale", 1))


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


def derive_ratios(spec: dict, rows: list[dict], only: set[str] | None = None) -> None:
    """Derived columns: `ratio_of: <column>` (this row over its `ratio_base` row) and `quotient: [a, b]`.

    `only`: derive just the columns computed from these columns (a re-judge that re-read them).
    """
    by_key = {r["key"]: r for r in rows}
    row_specs = {r["key"]: r for r in spec["rows"]}
    for column in spec["columns"]:
        if only is not None and not ({column.get("ratio_of"), *(column.get("quotient") or [])} & only):
            continue
        if column.get("quotient"):
            num, den = column["quotient"]
            for row in rows:
                a, b = row["cells"][num]["ours"], row["cells"][den]["ours"]
                row["cells"][column["name"]].update(ours=a / b if a is not None and b else None,
                                                    runs=row["cells"][num]["runs"], n=row["cells"][num]["n"],
                                                    seeds=row["cells"][num]["seeds"],
                                                    commits=row["cells"][num]["commits"])
                if "dry" in row["cells"][num]:
                    row["cells"][column["name"]]["dry"] = row["cells"][num]["dry"]
        source = column.get("ratio_of")
        if not source:
            continue
        for row in rows:
            base = by_key.get(row_specs[row["key"]].get("ratio_base", row["key"]))
            ours = row["cells"][source]["ours"]
            denom = base["cells"][source]["ours"] if base else None
            cell = row["cells"][column["name"]]
            cell["ours"] = ours / denom if ours is not None and denom else None
            for key in ("runs", "n", "seeds", "commits"):
                cell[key] = row["cells"][source][key]
            if "dry" in row["cells"][source]:
                cell["dry"] = row["cells"][source]["dry"]
            if row["cells"][source].get("not_run"):
                cell["not_run"] = row["cells"][source]["not_run"]


def find_cell(rows: list[dict], ref: list) -> dict:
    for row in rows:
        if row["key"] == ref[0]:
            if ref[1] not in row["cells"]:
                raise UserError(f"claim refers to unknown column {ref[1]!r} of row {ref[0]!r}")
            return row["cells"][ref[1]]
    raise UserError(f"claim refers to unknown row {ref[0]!r}")


def apply_floors(spec: dict, rows: list[dict]) -> None:
    """Record each reference cell's role and whether each model cell clears its column's learning floor."""
    typed = TableSpec.parse(spec)
    by_key = {r["key"]: r for r in rows}
    row_specs = {r.key: r for r in typed.rows}
    for column in typed.columns:
        for row in rows:
            cell = row["cells"][column.name]
            if row["reference"]:
                cell["role"] = typed.role(row_specs[row["key"]], column)
                cell.pop("floor", None)
            elif (floor := typed.floor_of(row_specs[row["key"]], column)) and floor in by_key:
                status = verdicts.floor_status(cell, by_key[floor]["cells"][column.name], column.margin,
                                               column.better)
                cell["floor"] = {"reference": floor, **status}
            else:
                cell.pop("floor", None)


def claim_record(claim: dict, rows: list[dict], spec: dict) -> dict:
    """Everything a verdict reads, so it can be recomputed from the table JSON alone (`verdicts.judge`)."""
    def side(ref: list) -> dict:
        cell = find_cell(rows, ref)
        return {"row": ref[0], "column": ref[1], "mean": cell.get("ours"), "std": cell.get("std"),
                "n": cell.get("n", 0), "deterministic": cell.get("deterministic", False),
                "floor": cell.get("floor"), "stale": bool(cell.get("stale")) and cell.get("ours") is None,
                "not_run": cell.get("not_run", "")}
    record = {"text": claim["text"], "source": claim.get("source", ""), "op": claim["op"],
              "a": side(claim["a"]), "b": side(claim["b"]) if claim.get("b") else None,
              "judge": spec.get("judge_claims", True), "no_judge_reason": spec.get("no_judge_reason", "")}
    for key in ("value", "tol", "margin"):
        if claim.get(key) is not None:
            record[key] = claim[key]
    record["deterministic"] = bool(claim.get("deterministic", False))
    return record


def judge_claims(spec: dict, rows: list[dict]) -> list[dict]:
    """Each claim on our numbers, by the one rule of `langrepr.verdicts` (floor, Welch t, equivalence margin).

    The record keeps the old keys (`ours`, `paper`, `holds`) beside the inputs of the verdict.
    """
    judged = []
    for claim in spec.get("claims", []):
        record = claim_record(claim, rows, spec)
        a_cell = find_cell(rows, claim["a"])
        b_cell = find_cell(rows, claim["b"]) if claim.get("b") else None
        record["ours"] = [a_cell["ours"], b_cell["ours"]] if b_cell else [a_cell["ours"]]
        record["paper"] = [a_cell.get("paper"), b_cell.get("paper")] if b_cell else [a_cell.get("paper")]
        record.update(verdicts.judge(record))
        skipped = [f"{cell['column']} not run on this profile (the reason is under the table)"
                   for cell in (record["a"], record["b"]) if cell and cell.get("not_run")]
        if record["verdict"] == "not run" and skipped:
            record["reason"] = "; ".join(dict.fromkeys(skipped))
        judged.append(record)
    return judged


# ---------------------------------------------------------------- Markdown

def fmt(value: float | None, pattern: str) -> str:
    return "not run" if value is None else pattern.format(value)


def fmt_ours(cell: dict, pattern: str) -> str:
    dry = cell.get("dry")
    if dry is not None:   # a dry render: what the 2-step run of this cell found, never a number
        if dry["failed"]:
            return "dry ✗ failed"
        if dry["missing_data"]:
            return "dry: no data"
        if dry["skipped"]:
            return "dry: skipped"   # not "not run": reference rows show "not run" as "—"
        return "dry ✓" if dry["ok"] else "not run"
    if cell["ours"] is None:
        if cell.get("stale"):
            return "stale (metric redefined since it ran; re-run)"
        return "diverged" if cell.get("diverged") else "not run"
    return fmt(cell["ours"], pattern) + (f" ± {pattern.format(cell['std'])}" if cell["std"] is not None else "")


def claim_line(claim: dict, formats: list[str]) -> str:
    verdict = claim.get("verdict") or {True: "✓", False: "✗", None: "not judged", "noise": "within noise"}[claim["holds"]]
    ours = [fmt(v, f) for v, f in zip(claim["ours"], formats)]
    paper = [fmt(v, f).replace("not run", "—") for v, f in zip(claim["paper"], formats)]
    numbers = f"ours {' vs '.join(ours)} (paper {' vs '.join(paper)})"
    reason = f" [{claim['reason']}]" if claim.get("reason") and verdict not in ("✓", "✗", "within noise") else ""
    if verdict in ("✓", "✗", "within noise") and claim.get("reason", "").startswith("deterministic"):
        reason = " [deterministic: no noise test]"
    mark = verdict if verdict in ("✓", "✗") else f"{verdict}:"
    source = f" — {claim['source']}" if claim.get("source") else ""
    return f"- {mark} {claim['text']}: {numbers}{lean_words(claim)}{reason}{source}"


def lean_words(claim: dict) -> str:
    """The "(means lean with/against the paper)" of a within-noise line.

    An undecided verdict still says where the means point; an equivalence whose |d| is beyond its margin says
    that too (both recorded by `verdicts.judge`).
    """
    if claim.get("verdict") != "within noise" or claim.get("lean") not in ("with", "against"):
        return ""
    beyond = ""
    if claim.get("margin_exceeded") and claim.get("diff") is not None:
        beyond = f"; |d| = {abs(claim['diff']):.3g} exceeds the margin {float(claim['margin']):g}"
    return f" (means lean {claim['lean']} the paper{beyond})"


def floor_lines(table: dict, formats: dict) -> list[str]:
    """Per model row: does it clear each column's learning floor?"""
    lines = []
    for row in table["rows"]:
        if row.get("reference"):
            continue
        parts = []
        for name in table["columns"]:
            floor = row["cells"][name].get("floor")
            if not floor or floor.get("clears") is None:
                continue
            f = formats[name]
            gap = f.format(floor["gap"])
            bound = "" if floor.get("bound") is None else f", noise {f.format(floor['bound'])}"
            verdict = "clears" if floor["clears"] else "**below**"
            parts.append(f"{name}: {verdict} {floor['reference']} (gap {gap}; needs > margin {floor['margin']:g}{bound})")
        if parts:
            lines.append(f"- {row['key']}: " + "; ".join(parts))
    return lines


def header_lines(table: dict) -> list[str]:
    """Title, profile, seeds, commit, provenance warning, data line and what the cells cost: every table's head."""
    seeds = ", ".join(map(str, table["seeds"])) or "none"
    lines = [f"# {table['title']}", "",
             f"Profile: **{table['profile']}** · seeds: {seeds} · commit: `{table['commit']}`"]
    if table.get("dirty_commits"):
        lines.append(f"**Provenance warning:** some cells ran from uncommitted code ({', '.join(table['dirty_commits'])}).")
    if table.get("data"):
        lines.append(f"Data: {table['data']}")
    wall = table.get("cell_wall")
    if wall and wall["runs"]:
        untimed = f"; {wall['untimed_runs']} without a recorded time" if wall["untimed_runs"] else ""
        lines.append(f"Cell wall time: {wall['seconds'] / 60:.1f} min over {wall['runs']} runs (the sum of the cells' "
                     f"own records, each one process at the load of its run; upstream stages the cells reuse, such as "
                     f"pretrained checkpoints or cached vectors, not counted{untimed})")
    return lines


def to_markdown(table: dict, spec: dict) -> str:
    formats = {c["name"]: c.get("fmt", "{:.2f}") for c in spec["columns"]}
    lines = header_lines(table)
    lines += ["", "Each cell: ours (± std over seeds) / paper / Δ = ours − paper. \"not run\" = no finished run.", ""]
    models = [r for r in table["rows"] if not r.get("reference")]
    references = [r for r in table["rows"] if r.get("reference")]
    lines.append("| | " + " | ".join(table["columns"]) + " |")
    lines.append("|---" * (len(table["columns"]) + 1) + "|")
    for row in models:
        parts = []
        for name in table["columns"]:
            cell, f = row["cells"][name], formats[name]
            paper = "—" if cell["paper"] is None else f.format(cell["paper"])
            delta = (f.format(cell["ours"] - cell["paper"])
                     if cell["ours"] is not None and cell["paper"] is not None else "—")
            parts.append(f"{fmt_ours(cell, f)} / {paper} / {delta}")
        lines.append(f"| {row['key']} | " + " | ".join(parts) + " |")
    if references:
        lines += ["", "Reference rows (same split and pipeline; not models of the paper; ours ± std; (floor) marks "
                  "a column's learning floor, (ceiling) a bound from above, the rest are comparators):", ""]
        lines.append("| | " + " | ".join(table["columns"]) + " |")
        lines.append("|---" * (len(table["columns"]) + 1) + "|")
        for row in references:
            cells = [fmt_ours(row["cells"][n], formats[n]).replace("not run", "—")
                     + (f" ({row['cells'][n]['role']})" if row["cells"][n].get("role") not in (None, "comparator")
                        and row["cells"][n]["ours"] is not None else "")
                     for n in table["columns"]]
            lines.append(f"| {row['key']} | " + " | ".join(cells) + " |")
    floors = floor_lines(table, formats)
    if floors:
        lines += ["", "Learning floor (a model cell must beat its column's floor row by the margin plus the seed "
                  "noise; claims on a cell below it are not judged):", ""] + floors
    if table["claims"]:
        lines += ["", "Claims of the paper for this table, judged on our numbers (✓/✗ only when the gap exceeds "
                  f"the seed noise: Welch's t, two-sided {verdicts.LEVEL:.0%}; equivalence claims against their "
                  "stated margin):", ""]
        for claim, spec_claim in zip(table["claims"], spec.get("claims", [])):
            fa = formats.get(spec_claim["a"][1], "{:.2f}")
            fb = formats.get(spec_claim["b"][1], fa) if spec_claim.get("b") else fa
            lines.append(claim_line(claim, [fa, fb]))
        if not spec.get("judge_claims", True):
            lines.append(f"- (not judged on this profile: {spec.get('no_judge_reason', 'see data note')})")
    if table.get("not_run"):
        lines += ["", "Columns not run on this profile (their cells say \"not run\" whatever the runs recorded):", ""]
        lines += [f"- {name}: {reason}" for name, reason in table["not_run"].items()]
    if table.get("orphans"):
        lines += ["", "Measured cells of the JSON that the spec no longer names (kept as measured, not judged; "
                  "rename the spec's row or column back, or re-run it):", ""]
        lines += [f"- {o['row']} / {o['column']}: {fmt_ours(o['cell'], formats.get(o['column'], '{:.2f}'))} "
                  f"(n = {o['cell'].get('n') or 0})" for o in table["orphans"]]
    if table["notes"]:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in table["notes"]]
    return "\n".join(lines) + "\n"


def measured_cells(table: dict) -> int:
    return sum(c.get("ours") is not None for r in table.get("rows", []) for c in r.get("cells", {}).values())


def thinner_than(new: dict, old: dict) -> list[str]:
    """Why `new` must not replace the table on disk: fewer measured cells, fewer seed runs, another recipe."""
    if not old:
        return []
    reasons = []
    if measured_cells(new) < measured_cells(old):
        reasons.append(f"{measured_cells(new)} measured cell(s) here, {measured_cells(old)} on disk")
    runs_new = sum(c.get("n") or 0 for r in new.get("rows", []) for c in r.get("cells", {}).values())
    runs_old = sum(c.get("n") or 0 for r in old.get("rows", []) for c in r.get("cells", {}).values())
    if runs_new < runs_old:
        reasons.append(f"{runs_new} seed run(s) here, {runs_old} on disk (seeds {new.get('seeds')} vs {old.get('seeds')})")
    if sorted(new.get("recipe") or []) != sorted(old.get("recipe") or []):
        reasons.append(f"another recipe: overrides {new.get('recipe') or 'none'} here, "
                       f"{old.get('recipe') or 'none'} on disk")
    return reasons


# What a re-run changes without changing a result: which commit and how long each run took. A committed table
# whose every other field a render reproduces keeps its stamp (the commit of the runs that first gave the numbers).
PROVENANCE_KEYS = frozenset({"commit", "dirty_commits", "cell_wall", "kept_existing", "commits", "wall_s"})


def without_provenance(value: Any) -> Any:
    """`value` with its provenance fields dropped and floats to 12 significant digits (a sum's last bits vary)."""
    if isinstance(value, dict):
        return {k: without_provenance(v) for k, v in value.items() if k not in PROVENANCE_KEYS}
    if isinstance(value, list):
        return [without_provenance(v) for v in value]
    if isinstance(value, float):
        return float(f"{value:.12g}")
    return value


def reproduces(new: dict, old: dict) -> bool:
    """Whether `new` says exactly what `old` says, numbers, verdicts and notes, whoever ran it and when."""
    as_written = json.loads(json.dumps(new, default=str))   # the JSON on disk holds lists, not tuples
    return not old.get("dirty_commits") and without_provenance(as_written) == without_provenance(old)


def existing_table(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError) as err:
        log.warning("%s is unreadable (%s); read as if absent", path, type(err).__name__)
        return {}


def portable_dir(run_dir: str, outputs: Path) -> str:
    """A run dir as a committed table names it: `outputs/quick/...`, relative to the outputs folder's parent.

    A render given an absolute `--outputs` must not write the machine's paths into a tracked JSON.
    """
    path, root = Path(run_dir), outputs.resolve()
    if path.is_absolute() and path.is_relative_to(root):
        return str(Path(outputs.name) / path.relative_to(root))
    return run_dir


def table_spec(cfg: DictConfig, table: str) -> dict:
    spec = normalised(OmegaConf.to_container(cfg.table, resolve=True))   # rows/claims/notes keyed by id: lists
    spec.setdefault("name", table)
    TableSpec.parse(spec)  # one clear line on a typo, before any run is read
    for row in spec["rows"]:
        row.setdefault("run_id", cfg.run_id)
    return spec


def spec_run_ids(spec: dict) -> set[str]:
    """Every run_id whose cells fill this table: its rows', its rows' `sources`' and its columns'."""
    return ({row["run_id"] for row in spec["rows"]}
            | {src["run_id"] for row in spec["rows"] for src in row.get("sources", {}).values() if src.get("run_id")}
            | {c["run_id"] for c in spec["columns"] if c.get("run_id")})


def shared_notes(spec: dict, main_run_id: str) -> list[str]:
    """Notes naming the other tables whose cells fill rows or columns here, and the target that runs them."""
    notes = []
    for rid in sorted(spec_run_ids(spec) - {main_run_id}):
        make = f"`make {rid.replace('_', '-')}` runs them."
        shared = ", ".join(r["key"] for r in spec["rows"] if r["run_id"] == rid)
        if shared:
            notes.append(f"Rows {shared} are the cells of {rid} (same configuration); {make}")
        sourced = sorted({c for r in spec["rows"] for c, src in r.get("sources", {}).items() if src.get("run_id") == rid}
                         | {c["name"] for c in spec["columns"] if c.get("run_id") == rid})
        if sourced:
            notes.append(f"Columns {', '.join(sourced)} of the model rows are the cells of {rid}; {make}")
    return notes


PLACEHOLDER = re.compile(r"\{=([^{}]+)\}")   # {=LEAM.AG News} or {=LEAM.AG News:std} in a note


def filled_notes(notes: list[str], rows: list[dict], spec: dict) -> list[str]:
    """Notes with each `{=<row>.<column>[:std|:n]}` replaced by that cell of this table, in its column's format.

    A note that quotes its own table takes the number from the table's data, so a re-run cannot leave it stale;
    a placeholder naming no cell is one line, not a note that silently says "{=...}".
    """
    formats = {c["name"]: c.get("fmt", "{:.2f}") for c in spec["columns"]}
    cells = {(r["key"], name): cell for r in rows for name, cell in r["cells"].items()}

    def value(match: re.Match) -> str:
        ref, _, part = match.group(1).partition(":")
        for i in [i for i, ch in enumerate(ref) if ch == "."]:   # row keys may hold dots: try every split
            cell = cells.get((ref[:i].strip(), ref[i + 1:].strip()))
            if cell is not None:
                number = cell.get({"": "ours", "std": "std", "n": "n"}.get(part, part))
                if part not in ("", "std", "n"):
                    break
                if part == "n":
                    return str(number or 0)
                return fmt(number, formats[ref[i + 1:].strip()])
        raise UserError(f"table {spec['name']}: note placeholder {match.group(0)} names no cell: write "
                        "{=<row key>.<column name>}, optionally with :std or :n")

    return [PLACEHOLDER.sub(value, note) for note in notes]


def table_stem(table: str, profile_name: str) -> str:
    return table if profile_name in ("full", "exact") else f"{table}.{profile_name}"


def render(table: str, profile: str = "full", outputs: str | Path = "outputs", force: bool = False,
           dry: bool = False) -> dict:
    """Render `table` for `profile` into outputs/tables/ and return its JSON object.

    A render with fewer measured cells than the table already on disk (e.g. in a fresh clone, where the
    committed quick tables' runs are absent) never replaces it: it is written beside it as
    `<stem>.partial.{md,json}` unless `force`. `dry` renders the dry runs (`debug=dry`, outputs/dry/...) into
    `<table>.dry.{md,json}`: DRY in the title, every cell marked with what its dry run found, no values.
    """
    cfg = experiment_config(table, profile, dry)
    spec = table_spec(cfg, table)
    outputs = Path(outputs)
    # rows may read another table's cells (`run_id:`), e.g. reference rows computed once on a shared split
    runs = [dict(r, run_id=rid, dir=portable_dir(r["dir"], outputs))
            for rid in sorted(spec_run_ids(spec)) for r in load_runs(outputs / cfg.profile_name / rid, DRY if dry else FINISHED)]
    if dry:
        spec = dict(spec, title=f"DRY RUN (2 steps at full size, no results) — {spec['title']}")
    result = build(spec, runs, cfg.profile_name)
    result["notes"] += shared_notes(spec, cfg.run_id)
    if dry:   # a check, never a result: what ran, and no verdicts on cells that hold no number
        result["dry_summary"] = dry_summary(result["rows"], result["columns"])
        result["claims"] = []
        result["notes"] = [result["dry_summary"] + "; a dry run judges no claim."] + result["notes"] \
            + dry_notes(result["rows"])
    stem = table_stem(table, cfg.profile_name)
    existing = existing_table(outputs / "tables" / f"{stem}.json")
    if existing and reproduces(result, existing):
        log.info("%s: this render reproduces outputs/tables/%s.json (only the commits and wall times of the runs "
                 "differ); kept it as it is", table, stem)
        return dict(existing, kept_existing=True)
    reasons = [] if force else thinner_than(result, existing)
    if not existing and not dry and not runs and not force:
        reasons = ["no cell of it has run here"]   # a table of "not run" only is not a result
    result["kept_existing"] = bool(reasons)
    if reasons and not existing:
        log.warning("%s: no cell has a finished run under %s yet: wrote outputs/tables/%s.partial.md, not a table "
                    "(pass --force to write one of 'not run' cells)", table, outputs / cfg.profile_name, stem)
        stem += ".partial"
    elif reasons:
        log.warning("%s: kept outputs/tables/%s.json and wrote this render beside it as %s.partial.md (%s); pass "
                    "--force to replace it", table, stem, stem, "; ".join(reasons))
        stem += ".partial"
    write_json_atomic(outputs / "tables" / f"{stem}.json", result)
    write_text_atomic(outputs / "tables" / f"{stem}.md", to_markdown(result, spec))
    log.info("Wrote %s", outputs / "tables" / f"{stem}.md")
    return result


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


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "explain":  # `explain <table> <row> <column>`: the runs behind one cell
        from langrepr.provenance import main as explain_main
        return explain_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="+", help="experiment names, e.g. ewe_table1, or 'all'")
    parser.add_argument("--profile", default="full", choices=["full", "quick"])
    parser.add_argument("--outputs", default="outputs", help="the outputs folder to read runs from")
    parser.add_argument("--dry", action="store_true",
                        help="render the dry runs (`make <table> DRY=1`) into <table>.dry.md, marked DRY")
    parser.add_argument("--force", action="store_true",
                        help="replace a table on disk even when this render has fewer measured cells (with "
                             "--rejudge: even when the re-judged table does not show its measured values as they are)")
    parser.add_argument("--rejudge", action="store_true",
                        help="recompute floors and verdicts from the rendered JSON alone (no runs needed)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    names = args.tables
    if names == ["all"]:
        names = group_options("experiment")
    failed = []
    try:
        for name in names:
            if name == "grid":      # its own renderer (composition, best-row marks, heat map); no import of it here
                if args.tables != ["all"]:
                    raise UserError(f"the grid has its own renderer: python -m langrepr.grid --profile {args.profile}")
                print("grid: skipped (rendered by `python -m langrepr.grid`, which `make tables` also runs)")
                continue
            if args.rejudge:
                try:
                    result = rejudge(name, args.profile, args.outputs, force=args.force)
                except UserError as err:
                    if args.tables != ["all"]:
                        raise
                    if isinstance(err, NotRendered):   # `all`: a table never rendered has nothing to re-judge
                        print(f"{name}: skipped ({err})")
                    else:                              # a damaged one is an error, after the others are re-judged
                        print(f"error: {name}: {err}", file=sys.stderr)
                        failed.append(name)
                    continue
                marks = [c.get("verdict") for c in result["claims"]]
                beside = " (written beside the table on disk as .partial, see above)" if result["kept_existing"] else ""
                print(f"{name} ({result['profile']}): " + ", ".join(f"{marks.count(m)} {m}" for m in dict.fromkeys(marks))
                      + beside)
                continue
            result = render(name, args.profile, args.outputs, force=args.force, dry=args.dry)
            if args.dry:
                print(f"{name}: {result['dry_summary']}")
                continue
            missing = sum(c["ours"] is None for r in result["rows"] for c in r["cells"].values())
            print(f"{name} ({result['profile']}): {missing} cell(s) not run")
        if failed:
            sys.exit(2)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except OSError as err:
        if not unwritable(err):
            raise
        print(f"error: cannot write {err.filename or args.outputs}: {err.strerror}; pass --outputs <a writable folder "
              "holding the run folders> (the tables already on disk are untouched)", file=sys.stderr)
        sys.exit(2)


def unwritable(err: OSError) -> bool:
    """A write refused by the file system (read-only, full, no permission, a file where a folder should be)."""
    return err.errno in (*WRITE_ERRNOS, errno.ENOTDIR, errno.EEXIST)


if __name__ == "__main__":
    main()
