"""Render a paper table from run artefacts: `python -m langrepr.tables <table> [--profile quick|full]`.

A table is declared by the `table:` node of `conf/experiment/<table>.yaml`; its cells are filled only from
`metrics.json` + `config_resolved.yaml` of finished runs under `outputs/<profile>/<run_id>/`, never from a
dashboard. The JSON written beside the Markdown has a fixed shape that downstream tools rely on.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from langrepr.errors import UserError
from langrepr.train import CONF_DIR
from langrepr.utils import git_commit, write_json_atomic, write_text_atomic

log = logging.getLogger("langrepr.tables")
OPS = {
    "lt": lambda a, b: a < b, "gt": lambda a, b: a > b, "le": lambda a, b: a <= b, "ge": lambda a, b: a >= b,
    "ratio_ge": lambda a, b: a >= b, "ratio_le": lambda a, b: a <= b,
}


# ---------------------------------------------------------------- reading runs

def experiment_config(table: str, profile: str) -> DictConfig:
    """Compose the experiment exactly as `make` runs it, to read its run_id, profile_name and `table:` spec."""
    if not (CONF_DIR / "experiment" / f"{table}.yaml").exists():
        options = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
        raise UserError(f"unknown table '{table}': choose one of {', '.join(options)}")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[f"experiment={table}", f"profile={profile}"])
    if "table" not in cfg:
        raise UserError(f"conf/experiment/{table}.yaml has no `table:` node to render")
    return cfg


def select(config: dict, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def load_runs(run_root: Path) -> list[dict]:
    """Every finished cell under run_root, with its resolved config; the newest of duplicates wins later."""
    runs = []
    for path in sorted(run_root.rglob("metrics.json")):
        record = json.loads(path.read_text())
        if record.get("status") != "finished":
            continue
        cfg_path = path.parent / "config_resolved.yaml"
        record["config"] = yaml.safe_load(cfg_path.read_text()) if cfg_path.exists() else {}
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

def build(spec: dict, runs: list[dict], profile: str) -> dict:
    rows_out, seeds, commits = [], set(), set()
    for row in spec["rows"]:
        cells = {}
        for column in spec["columns"]:
            cell_runs = [r for r in runs if matches(r, row.get("match")) and matches(r, column.get("match"))]
            by_seed: dict[int, dict] = {}
            for r in sorted(cell_runs, key=lambda r: r["mtime"]):
                if r.get("seed") in by_seed:
                    log.warning("%s / %s: seed %s ran twice, using the newest (%s)", row["key"], column["name"],
                                r.get("seed"), r["dir"])
                by_seed[r.get("seed")] = r
            values = [(r, run_value(r, column, row)) for r in by_seed.values()]
            values = [(r, v) for r, v in values if v is not None]
            ours = statistics.fmean(v for _, v in values) if values else None
            std = statistics.stdev(v for _, v in values) if len(values) > 1 else None
            seeds.update(r.get("seed") for r, _ in values)
            commits.update(r.get("commit") for r, _ in values)
            cells[column["name"]] = {"ours": ours, "paper": row.get("paper", {}).get(column["name"]), "std": std,
                                     "runs": [r["dir"] for r, _ in values]}
        rows_out.append({"key": row["key"], "cells": cells})
    derive_ratios(spec, rows_out)
    table = {
        "table": spec["name"], "title": spec["title"], "profile": profile,
        "commit": ",".join(sorted(c for c in commits if c)) or git_commit(),
        "columns": [c["name"] for c in spec["columns"]], "rows": rows_out,
        "claims": judge_claims(spec, rows_out), "seeds": sorted(s for s in seeds if s is not None),
        "data": spec.get("data", ""), "notes": list(spec.get("notes", [])),
    }
    return table


def derive_ratios(spec: dict, rows: list[dict]) -> None:
    """Derived columns: `ratio_of: <column>` (this row over its `ratio_base` row) and `quotient: [a, b]`."""
    by_key = {r["key"]: r for r in rows}
    row_specs = {r["key"]: r for r in spec["rows"]}
    for column in spec["columns"]:
        if column.get("quotient"):
            num, den = column["quotient"]
            for row in rows:
                a, b = row["cells"][num]["ours"], row["cells"][den]["ours"]
                row["cells"][column["name"]].update(ours=a / b if a is not None and b else None,
                                                    runs=row["cells"][num]["runs"])
        source = column.get("ratio_of")
        if not source:
            continue
        for row in rows:
            base = by_key.get(row_specs[row["key"]].get("ratio_base", row["key"]))
            ours = row["cells"][source]["ours"]
            denom = base["cells"][source]["ours"] if base else None
            cell = row["cells"][column["name"]]
            cell["ours"] = ours / denom if ours is not None and denom else None
            cell["runs"] = row["cells"][source]["runs"]


def cell_value(rows: list[dict], ref: list) -> float | None:
    for row in rows:
        if row["key"] == ref[0]:
            return row["cells"][ref[1]]["ours"]
    raise UserError(f"claim refers to unknown row {ref[0]!r}")


def judge_claims(spec: dict, rows: list[dict]) -> list[dict]:
    judged = []
    for claim in spec.get("claims", []):
        holds = None
        if spec.get("judge_claims", True):
            a = cell_value(rows, claim["a"])
            b = cell_value(rows, claim["b"]) if claim.get("b") else None
            if a is not None and (b is not None or not claim.get("b")):
                if claim["op"] == "approx":  # equal to a printed value within its precision
                    holds = abs(a - float(claim["value"])) <= float(claim["tol"])
                elif claim["op"].startswith("ratio_"):
                    holds = bool(b) and OPS[claim["op"]](a / b, float(claim["value"]))
                else:
                    holds = OPS[claim["op"]](a, b if claim.get("b") else float(claim["value"]))
        judged.append({"text": claim["text"], "holds": holds})
    return judged


# ---------------------------------------------------------------- Markdown

def fmt(value: float | None, pattern: str) -> str:
    return "not run" if value is None else pattern.format(value)


def to_markdown(table: dict, spec: dict) -> str:
    formats = {c["name"]: c.get("fmt", "{:.2f}") for c in spec["columns"]}
    seeds = ", ".join(map(str, table["seeds"])) or "none"
    lines = [f"# {table['title']}", "",
             f"Profile: **{table['profile']}** · seeds: {seeds} · commit: `{table['commit']}`"]
    if table["data"]:
        lines.append(f"Data: {table['data']}")
    lines += ["", "Each cell: ours (± std over seeds) / paper / Δ = ours − paper. \"not run\" = no finished run.", ""]
    lines.append("| | " + " | ".join(table["columns"]) + " |")
    lines.append("|---" * (len(table["columns"]) + 1) + "|")
    for row in table["rows"]:
        parts = []
        for name in table["columns"]:
            cell, f = row["cells"][name], formats[name]
            ours = fmt(cell["ours"], f) + (f" ± {f.format(cell['std'])}" if cell["std"] is not None else "")
            paper = "—" if cell["paper"] is None else f.format(cell["paper"])
            delta = (f.format(cell["ours"] - cell["paper"])
                     if cell["ours"] is not None and cell["paper"] is not None else "—")
            parts.append(f"{ours} / {paper} / {delta}")
        lines.append(f"| {row['key']} | " + " | ".join(parts) + " |")
    if table["claims"]:
        lines += ["", "Claims of the paper for this table:", ""]
        mark = {True: "✓", False: "✗", None: "not judged"}
        lines += [f"- {mark[c['holds']]} {c['text']}" for c in table["claims"]]
        if not spec.get("judge_claims", True):
            lines.append(f"- (not judged on this profile: {spec.get('no_judge_reason', 'see data note')})")
    if table["notes"]:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in table["notes"]]
    return "\n".join(lines) + "\n"


def render(table: str, profile: str = "full", outputs: str | Path = "outputs") -> dict:
    """Render `table` for `profile` into outputs/tables/ and return its JSON object."""
    cfg = experiment_config(table, profile)
    spec = OmegaConf.to_container(cfg.table, resolve=True)
    spec.setdefault("name", table)
    outputs = Path(outputs)
    runs = load_runs(outputs / cfg.profile_name / cfg.run_id)
    result = build(spec, runs, cfg.profile_name)
    stem = table if cfg.profile_name in ("full", "exact") else f"{table}.{cfg.profile_name}"
    write_json_atomic(outputs / "tables" / f"{stem}.json", result)
    write_text_atomic(outputs / "tables" / f"{stem}.md", to_markdown(result, spec))
    log.info("Wrote %s", outputs / "tables" / f"{stem}.md")
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    names = args.tables
    if names == ["all"]:
        names = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
    try:
        for name in names:
            result = render(name, args.profile, args.outputs)
            missing = sum(c["ours"] is None for r in result["rows"] for c in r["cells"].values())
            print(f"{name} ({result['profile']}): {missing} cell(s) not run")
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
