"""Where a table cell comes from: `python -m langrepr.tables explain <table> "<row>" "<column>"`.

A rendered table (`outputs/tables/<table>[.<profile>].json`, written by `langrepr.tables`) lists, per cell,
the run dirs it averaged. This module follows those dirs back to the artefacts each run left —
`metrics.json` (seed, commit, config fingerprint, data manifest digest, wall time), `config_resolved.yaml`
and `.hydra/overrides.yaml` — and prints the command that reproduces the cell. It reads nothing else: the
table JSON and the run dirs stay the only source of truth.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

from langrepr.confpaths import SHORTENED, SLASH, group_options, option_path
from langrepr.errors import UserError

# keys of a run's `data` record that identify the data it read (datamodules name them differently)
DATA_DIGEST_KEYS = ("manifest_digest", "manifest_sha256", "manifest_hash", "data_digest", "digest", "sha256")


def table_path(table: str, profile: str | None, outputs: Path) -> Path:
    """The rendered JSON of `table`; without `profile`, the only one rendered (full wins over quick)."""
    tables = outputs / "tables"
    if profile:
        stems = [table] if profile == "full" else [f"{table}.{profile}"]
        if profile == "full":
            stems.append(table)  # "exact" tables (no training) are stored without a profile suffix
    else:
        stems = [table, f"{table}.quick"]
    for stem in stems:
        if (tables / f"{stem}.json").exists():
            return tables / f"{stem}.json"
    rendered = sorted(p.stem for p in tables.glob("*.json")) if tables.exists() else []
    if table not in group_options("experiment"):   # a typo, not a table to render (issue 21 X40)
        raise UserError(f"unknown table '{table}': no rendered table '{table}' in {tables} and no "
                        f"{option_path('experiment', table)}; choose one of {', '.join(group_options('experiment'))}")
    raise UserError(f"no rendered table '{table}'{f' for profile {profile}' if profile else ''} in {tables}: "
                    f"render it with `python -m langrepr.tables {table} --profile {profile or 'quick'}`"
                    f" (rendered now: {', '.join(rendered) or 'none'})")


def find_cell(table: dict, row: str, column: str) -> dict:
    rows = {r["key"]: r for r in table["rows"]}
    if row not in rows:
        raise UserError(f"table {table['table']} has no row '{row}': choose one of {', '.join(rows)}")
    cells = rows[row]["cells"]
    if column not in cells:
        raise UserError(f"table {table['table']} has no column '{column}': choose one of {', '.join(cells)}")
    return cells[column]


def read_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.exists() else None


def data_digest(data: dict) -> str | None:
    for key in DATA_DIGEST_KEYS:
        if data.get(key):
            return str(data[key])
    return None


def reproduce_command(overrides: list[str]) -> str:
    """The single-cell command: the run's own overrides, minus the multirun flag (one cell, not a sweep)."""
    return " ".join(["python -m langrepr.train", *(shlex.quote(o) for o in overrides)])


def run_provenance(run_dir: str | Path, root: Path = Path(".")) -> dict:
    """What one run dir says about itself; `missing` names what is not on this machine."""
    path = Path(run_dir)
    path = path if path.is_absolute() else root / path
    info: dict[str, Any] = {"dir": str(run_dir), "present": (path / "metrics.json").exists()}
    if not info["present"]:
        # runs are not committed, only tables: a clean clone can still rebuild the cell from its dir name
        info["overrides"] = [p.replace(SLASH, "/") for p in path.name.split(",") if "=" in p]   # %2F: a '/'
        info["overrides_source"] = "run dir name (run folder not on this machine)"
        if any(p.startswith(SHORTENED) for p in path.name.split(",")):   # confpaths.cell_dir_name cut it short
            info["overrides_source"] += ": shortened, its last overrides are only in the run folder's metrics.json"
            info["incomplete"] = True
        return info
    try:
        record = json.loads((path / "metrics.json").read_text())
    except (OSError, ValueError) as err:
        info.update(present=False, damaged=f"{path / 'metrics.json'} is unreadable ({type(err).__name__}): rerun "
                                           "that cell with force=true",
                    overrides=[p.replace(SLASH, "/") for p in path.name.split(",") if "=" in p],
                    overrides_source="run dir name")
        return info
    overrides = read_yaml(path / ".hydra" / "overrides.yaml")
    info.update({
        "status": record.get("status"), "seed": record.get("seed"), "commit": record.get("commit"),
        "fingerprint": record.get("fingerprint"), "wall_time_s": record.get("wall_time_s"),
        "data_digest": record.get("data_digest") or data_digest(record.get("data") or {}), "synthetic": (record.get("data") or {}).get("synthetic"),
        "profile": record.get("profile"), "run_id": record.get("run_id"),
        "overrides": list(overrides if overrides is not None else record.get("overrides", [])),
        "overrides_source": ".hydra/overrides.yaml" if overrides is not None else "metrics.json",
        "config_resolved": (path / "config_resolved.yaml").exists(),
    })
    return info


def with_experiment(overrides: list[str], table: dict) -> list[str]:
    """A run rebuilt from its dir name lacks the experiment/profile overrides that the dir name excludes."""
    keys = {o.lstrip("+~").split("=", 1)[0] for o in overrides}
    extra = []
    if "experiment" not in keys:
        extra.append(f"experiment={table['table']}")
    if "profile" not in keys and table.get("profile") not in (None, "full", "exact"):
        extra.append(f"profile={table['profile']}")
    return extra + overrides


def explain(table_name: str, row: str, column: str, profile: str | None = None,
            outputs: str | Path = "outputs") -> dict:
    """Everything known about one cell, as a dict (printed by `format_explanation`)."""
    outputs = Path(outputs)
    path = table_path(table_name, profile, outputs)
    try:
        table = json.loads(path.read_text())
    except ValueError as err:
        raise UserError(f"{path} is damaged (not the JSON `langrepr.tables` writes: {type(err).__name__}): restore it "
                        f"(`git checkout -- {path}`) or re-render it with `python -m langrepr.tables {table_name} "
                        f"--profile {profile or 'quick'}`") from None
    cell = find_cell(table, row, column)
    root = outputs.parent if outputs.name == "outputs" else Path(".")
    runs = []
    for run_dir in cell.get("runs", []):
        info = run_provenance(run_dir, root)
        overrides = [o for o in info["overrides"] if o not in ("-m", "--multirun")]
        info["command"] = reproduce_command(with_experiment(overrides, table))
        runs.append(info)
    return {"table": table["table"], "json": str(path), "profile": table.get("profile"), "row": row,
            "column": column, "ours": cell.get("ours"), "std": cell.get("std"), "paper": cell.get("paper"),
            "table_commit": table.get("commit"), "runs": runs,
            "cell_seeds": cell.get("seeds"), "cell_commits": cell.get("commits"), "n": cell.get("n"),
            "sweep_command": f"make {make_target(table['table'])} PROFILE={table.get('profile', 'full')}"}


def make_target(table: str) -> str:
    """`ewe_table3` -> `ewe-table3`, the Makefile's name for the whole sweep."""
    return table.replace("_", "-")


def format_explanation(info: dict) -> str:
    def num(v: Any) -> str:
        return "—" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)

    lines = [f"{info['table']} ({info['profile']}) · row {info['row']!r} · column {info['column']!r}",
             f"  ours: {num(info['ours'])}" + (f" ± {num(info['std'])}" if info["std"] is not None else "")
             + f" · paper: {num(info['paper'])} · table commit: {info['table_commit']}",
             f"  from: {info['json']}"]
    if info.get("cell_seeds") is not None:  # recorded in the table itself, so known even without the run folders
        lines.append(f"  seeds: {', '.join(map(str, info['cell_seeds'])) or 'none'} (n = {info.get('n')}) · "
                     f"commits: {', '.join(info.get('cell_commits') or []) or 'none'}")
    if not info["runs"]:
        lines.append("  not run: no finished run fills this cell "
                     f"(run the sweep: {info['sweep_command']}, then re-render)")
    for i, run in enumerate(info["runs"], 1):
        lines.append(f"  run {i}: {run['dir']}")
        if run["present"]:
            wall = run["wall_time_s"]
            lines += [f"    seed {run['seed']} · commit {run['commit']} · config fingerprint {run['fingerprint']}",
                      f"    data manifest digest: {run['data_digest'] or 'not recorded by this datamodule'}"
                      + (" (synthetic data)" if run.get("synthetic") else ""),
                      f"    wall time: {'—' if wall is None else f'{wall:.1f} s'} · status {run['status']}"]
        elif run.get("damaged"):
            lines.append(f"    {run['damaged']}")
        else:
            lines.append("    run folder not on this machine: seed, commit, fingerprint and wall time live in its "
                         "metrics.json (only rendered tables are committed)")
        if run.get("incomplete"):
            lines.append(f"    reproduce (incomplete: the folder name was shortened): {run['command']} ...")
        else:
            lines.append(f"    reproduce: {run['command']}")
    lines.append(f"  whole table: {info['sweep_command']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m langrepr.tables explain",
                                     description="Print the runs behind one table cell and how to reproduce it.")
    parser.add_argument("table", help="experiment name, e.g. ewe_table3")
    parser.add_argument("row", help="row key as printed in the table, e.g. BERT_EWE")
    parser.add_argument("column", help="column name as printed in the table, e.g. '2015A F1'")
    parser.add_argument("--profile", choices=["full", "quick"], default=None,
                        help="which rendering to read (default: the only one rendered, full first)")
    parser.add_argument("--outputs", default="outputs", help="the outputs folder holding tables/ and the runs")
    parser.add_argument("--json", action="store_true", help="print the provenance as JSON")
    args = parser.parse_args(argv)
    try:
        info = explain(args.table, args.row, args.column, args.profile, args.outputs)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(info, indent=2) if args.json else format_explanation(info))


if __name__ == "__main__":
    main()
