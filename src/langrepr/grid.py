"""The grid (issue 24): the five papers' inputs x encoders over tasks: which cells compose, and its rendering.

A grid cell is an ordinary train cell composed from three config choices, `dataset=<task> input=<input>
encoder=<encoder>` (`conf/input/`, `conf/encoder/`, a paper's own in `conf/papers/<paper>/`; `experiment=grid`
sets `model=none` under them). This module is torch-free: the renderer and the cost plan read it.

- `composition_error(compose)`: why an input x encoder x task cannot compose, or None. The rules: an input that
  exists for some languages only (multi-hot syllable groups: Korean) needs a task in one of them; a tagging task
  needs an encoder that keeps one state per position (a document encoder, LEAM or SWEM, cannot tag).
- `render(profile)`: `outputs/tables/grid.<profile>.{md,json}` from the generic table build of
  `conf/experiment/grid.yaml` (`langrepr.tables`), with "does not compose" in the cells that cannot, and the best
  row per column marked only when it beats the runner-up beyond the noise (Welch, `langrepr.verdicts`), and the
  heat map of every cell's gap to its column's floor (`outputs/figures/grid.<profile>.png`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from langrepr.confpaths import option_files
from langrepr.errors import UserError, exits_on_user_error

log = logging.getLogger("langrepr.grid")

# the language of a task's text, by its datamodule's name (tasks not listed are English)
TASK_LANGUAGES = {"nsmc": "ko", "klue_ner": "ko", "modu_ner": "ko"}
TAGGING_TASKS = ("TaggingTask", "token_classification")


def task_language(task: str | None) -> str:
    return TASK_LANGUAGES.get(str(task), "en")


def tagging_task(compose: dict[str, Any]) -> bool:
    """Whether the task of `compose` tags every token (its `task_target`)."""
    return any(mark in str(compose.get("task_target", "")) for mark in TAGGING_TASKS)


def composition_error(compose: dict[str, Any]) -> str | None:
    """Why this input x encoder x task does not compose (one line), or None when it does.

    compose: {input, input_languages (list or None = any), encoder, encoder_tags (bool), task (the datamodule's
    name), task_target (the task's `_target_`), task_label (optional: the name to print)}.
    """
    language = task_language(compose.get("task"))
    task = compose.get("task_label") or compose.get("task") or str(compose.get("task_target", "?")).rsplit(".", 1)[-1]
    languages = compose.get("input_languages")
    if languages and language not in languages:
        return f"input {compose.get('input')} exists only for {'/'.join(languages)} text and task {task} is {language}"
    if tagging_task(compose) and not compose.get("encoder_tags", False):
        return (f"encoder {compose.get('encoder')} is a document encoder (one vector per text) and task {task} "
                "tags every token")
    return None


def group_options(group: str) -> dict[str, dict]:
    """{option: its YAML} of the input or encoder group, over every config root (a paper's own sit in its folder)."""
    return {name: yaml.safe_load(path.read_text()) or {} for name, path in sorted(option_files(group).items())}


def cell_composes(input_name: str, encoder_name: str, task: dict, label: str | None = None) -> str | None:
    """composition_error for input=<input_name> x encoder=<encoder_name> x a grid task entry."""
    inputs, encoders = group_options("input"), group_options("encoder")
    inp, enc = inputs[input_name], encoders[encoder_name]
    return composition_error({"input": input_name, "input_languages": inp.get("languages"),
                              "encoder": encoder_name, "encoder_tags": (enc.get("encoder") or {}).get("can_tag"),
                              "task": task.get("datamodule"), "task_target": task.get("target", ""),
                              "task_label": label})


# --------------------------------------------------------------------------- rendering
NOT_COMPOSED = "does not compose"


def experiment_grid(profile: str) -> tuple[dict, dict]:
    """(the composed `grid:` node, the `table:` spec) of conf/experiment/grid.yaml at `profile`."""
    from omegaconf import OmegaConf

    from langrepr.tables import experiment_config, table_spec

    cfg = experiment_config("grid", profile)
    grid = OmegaConf.to_container(cfg.grid, resolve=False)
    return grid, table_spec(cfg, "grid")


def row_parts(spec: dict) -> dict[str, tuple[str, str]]:
    """{row key: (input, encoder)} of the model rows."""
    return {r["key"]: (r["match"]["input"], r["match"]["encoder"]) for r in spec["rows"] if not r.get("reference")}


def column_tasks(spec: dict) -> dict[str, str]:
    """{column name: grid task} (the column's `match: {grid_task: ...}`)."""
    return {c["name"]: c["match"]["grid_task"] for c in spec["columns"]}


def column_task_entries(spec: dict, grid: dict) -> dict[str, dict]:
    """{column name: its task entry ({datamodule, target, ...})}.

    The column's own `task:` when it has one (a column added after the grid ran: `grid.tasks` is part of every
    cell's identity), else `grid.tasks[<task>]`.
    """
    return {c["name"]: c.get("task") or grid["tasks"][c["match"]["grid_task"]] for c in spec["columns"]}


def mark_composition(table: dict, spec: dict, grid: dict) -> int:
    """Mark every model cell that cannot compose (`compose` = the reason); returns how many model cells can."""
    parts, tasks, entries = row_parts(spec), column_tasks(spec), column_task_entries(spec, grid)
    composing = 0
    for row in table["rows"]:
        if row.get("reference"):
            continue
        inp, enc = parts[row["key"]]
        for name, cell in row["cells"].items():
            reason = cell_composes(inp, enc, entries[name], tasks[name])
            if reason:
                cell["compose"] = reason
                cell.pop("floor", None)
            else:
                composing += 1
    return composing


def mark_best(table: dict) -> None:
    """Per column: the best model row (by mean) is marked best only when it beats the runner-up beyond the noise.

    `best` = {"row", "runner_up", "diff", "bound", "beyond_noise"} per column in the table's `best`; the cell of a
    row that wins beyond the noise gets `best: true`. Only cells that clear their floor compete.
    """
    from langrepr import verdicts

    table["best"] = {}
    for name in table["columns"]:
        cells = [(row["key"], row["cells"][name]) for row in table["rows"]
                 if not row.get("reference") and row["cells"][name].get("ours") is not None
                 and (row["cells"][name].get("floor") or {}).get("clears", True) is not False]
        if len(cells) < 2:
            continue
        cells.sort(key=lambda kc: kc[1]["ours"], reverse=True)
        (top, a), (second, b) = cells[0], cells[1]
        noise = verdicts.welch_bound(a, b)
        diff = a["ours"] - b["ours"]
        beyond = noise["bound"] is not None and diff > noise["bound"]
        table["best"][name] = {"row": top, "runner_up": second, "diff": diff, "bound": noise["bound"],
                               "beyond_noise": beyond}
        if beyond:
            a["best"] = True


def floor_gaps(table: dict) -> tuple[list[str], list[str], list[list[float | None]]]:
    """(row keys, column names, gap of each model cell to its column's floor, None where not run / not composed)."""
    rows = [r for r in table["rows"] if not r.get("reference")]
    gaps = [[(r["cells"][c].get("floor") or {}).get("gap") if "compose" not in r["cells"][c] else None
             for c in table["columns"]] for r in rows]
    return [r["key"] for r in rows], list(table["columns"]), gaps


def heat_map(table: dict, path: Path) -> Path | None:
    """Rows x columns of the gap to each column's floor (points), written as a PNG; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        log.warning("matplotlib is not installed: no heat map")
        return None
    rows, columns, gaps = floor_gaps(table)
    data = np.array([[np.nan if g is None else g for g in row] for row in gaps], dtype=float)
    fig, ax = plt.subplots(figsize=(3.2 + 1.6 * len(columns), 1.2 + 0.32 * len(rows)))
    finite = data[np.isfinite(data)]
    top = float(np.abs(finite).max()) if finite.size else 1.0
    image = ax.imshow(np.ma.masked_invalid(data), cmap="RdYlGn", vmin=-top, vmax=top, aspect="auto")
    for i, row in enumerate(table["rows"][: len(rows)]):
        for j, name in enumerate(columns):
            cell = row["cells"][name]
            text = ("n/c" if "compose" in cell else "—" if cell.get("ours") is None
                    else f"{data[i, j]:+.1f}" + ("*" if cell.get("best") else "")
                    + ("" if (cell.get("floor") or {}).get("clears") is not False else " ✗"))
            ax.text(j, i, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(columns)), columns, fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_title(f"{table['profile']} grid: gap to each column's floor (points, mean over seeds)\n"
                 "n/c = does not compose, ✗ = below the floor, * = best beyond the noise, — = not run", fontsize=8)
    fig.colorbar(image, ax=ax, fraction=0.03, label="points above the floor")
    fig.tight_layout()
    try:
        save_atomic(fig, path)
    finally:
        plt.close(fig)
    return path


def save_atomic(fig: Any, path: Path) -> None:
    """Save `fig` as PNG at `path` through a hidden temp file renamed over it.

    A full disk or a read-only folder leaves the figure on disk as it was and no temp file behind; the OSError
    goes up naming `path` (the file the user knows), for `main` to say in one line.
    """
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            err.filename = str(path)
        raise


def to_markdown(table: dict, spec: dict) -> str:
    from langrepr.tables import fmt_ours, header_lines

    formats = {c["name"]: c.get("fmt", "{:.2f}") for c in spec["columns"]}
    lines = header_lines(table)
    lines += ["", f"Rows: input × encoder; columns: one task each, one metric. Each cell: mean ± std over seeds; "
              f"**bold** = the column's best row, marked only when it beats the runner-up beyond the seed noise "
              f"(Welch's t, two-sided 95%); \"(below floor)\" = the cell does not clear its column's floor by the "
              f"margin plus the noise; \"{NOT_COMPOSED}\" = the combination cannot compose (not counted); "
              f"\"not run\" = no finished run. Measured cells: **{table['measured']}** of {table['composing']} "
              "that compose.", ""]
    lines.append("| input × encoder | " + " | ".join(table["columns"]) + " |")
    lines.append("|---" * (len(table["columns"]) + 1) + "|")
    for row in table["rows"]:
        if row.get("reference"):
            continue
        parts = []
        for name in table["columns"]:
            cell = row["cells"][name]
            if "compose" in cell:
                parts.append(NOT_COMPOSED)
                continue
            text = fmt_ours(cell, formats[name])
            if cell.get("best"):
                text = f"**{text}**"
            if (cell.get("floor") or {}).get("clears") is False:
                text += " (below floor)"
            parts.append(text)
        lines.append(f"| {row['key']} | " + " | ".join(parts) + " |")
    for row in table["rows"]:
        if row.get("reference"):
            cells = [fmt_ours(row["cells"][n], formats[n]) + (f" ({row['cells'][n].get('role')})"
                                                              if row["cells"][n].get("role") else "")
                     for n in table["columns"]]
            lines.append(f"| *{row['key']}* | " + " | ".join(cells) + " |")
    lines += ["", "Best row per column (mean; marked above only beyond the noise):", ""]
    for name in table["columns"]:
        best = table.get("best", {}).get(name)
        if not best:
            lines.append(f"- {name}: fewer than two model rows clear the floor")
            continue
        bound = "unknown" if best["bound"] is None else f"{best['bound']:.2f}"
        verdict = "beyond the noise" if best["beyond_noise"] else "within the noise"
        lines.append(f"- {name}: {best['row']} ahead of {best['runner_up']} by {best['diff']:.2f} "
                     f"(noise bound {bound}): {verdict}")
    reasons = sorted({cell["compose"] for row in table["rows"] for cell in row["cells"].values() if "compose" in cell})
    if reasons:
        lines += ["", "Does not compose:", ""] + [f"- {r}" for r in reasons]
    if table.get("figure"):
        lines += ["", f"Heat map of the gap to each column's floor: `{table['figure']}`"]
    if table["notes"]:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in table["notes"]]
    return "\n".join(lines) + "\n"


def render(profile: str = "quick", outputs: str | Path = "outputs", figures: str | Path | None = None,
           force: bool = False) -> dict:
    """Render outputs/tables/grid.<profile>.{md,json} and outputs/figures/grid.<profile>.png from the grid's runs.

    As for a paper table, a render thinner than the grid on disk (a clone without the run folders) is written
    beside it as `grid.<profile>.partial.*` unless `force`, so `make tables` never blanks the committed grid.
    """
    from langrepr.tables import build, existing_table, load_runs, portable_dir, table_stem, thinner_than
    from langrepr.utils import write_json_atomic, write_text_atomic

    grid, spec = experiment_grid(profile)
    outputs = Path(outputs)
    profile_name = profile
    runs = [dict(r, run_id="grid", dir=portable_dir(r["dir"], outputs))
            for r in load_runs(outputs / profile_name / "grid")]
    table = build(spec, runs, profile_name)
    table["composing"] = mark_composition(table, spec, grid)
    table["measured"] = sum(c.get("ours") is not None and "compose" not in c
                            for r in table["rows"] if not r.get("reference") for c in r["cells"].values())
    mark_best(table)
    stem = table_stem("grid", profile_name)
    reasons = [] if force else thinner_than(table, existing_table(outputs / "tables" / f"{stem}.json"))
    table["kept_existing"] = bool(reasons)
    if not force and not reasons and not table["measured"]:
        # as for a paper table: a grid no cell has run (`make tables` on a clone, full profile) is not a result
        log.warning("grid: no cell has a finished run under %s yet: wrote outputs/tables/%s.partial.md, not a "
                    "table (pass --force to write one of 'not run' cells)", outputs / profile_name, stem)
        stem += ".partial"
    elif reasons:
        log.warning("grid: kept outputs/tables/%s.json and wrote this render beside it as %s.partial.md (%s); pass "
                    "--force to replace it", stem, stem, "; ".join(reasons))
        stem += ".partial"
    figure = heat_map(table, Path(figures or outputs / "figures") / f"{stem}.png")
    table["figure"] = None if figure is None else f"outputs/figures/{figure.name}"
    write_json_atomic(outputs / "tables" / f"{stem}.json", table)
    write_text_atomic(outputs / "tables" / f"{stem}.md", to_markdown(table, spec))
    log.info("Wrote %s (%d measured cells of %d that compose)", outputs / "tables" / f"{stem}.md",
             table["measured"], table["composing"])
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="render the grid: outputs/tables/grid.<profile>.{md,json} + heat map")
    parser.add_argument("--profile", default="quick", choices=["quick", "full"])
    parser.add_argument("--outputs", default="outputs", help="the outputs folder holding the run folders")
    parser.add_argument("--force", action="store_true",
                        help="replace the grid on disk even when this render has fewer measured cells")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with exits_on_user_error():
        try:
            table = render(args.profile, args.outputs, force=args.force)
        except OSError as err:
            from langrepr.tables import unwritable

            if not unwritable(err):
                raise
            raise UserError(f"cannot write {err.filename or args.outputs}: {err.strerror}; free space or pass "
                            "--outputs <a writable folder holding the run folders> (the grid and heat map already "
                            "on disk are untouched)") from None
    print(f"grid ({table['profile']}): {table['measured']} measured cells of {table['composing']} that compose")


if __name__ == "__main__":
    main()
