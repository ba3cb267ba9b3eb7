"""Bit Cipher Figure 4 from run artefacts: validation perplexity against training steps, cold vs cipher warm starts.

Reads the rendered table (`outputs/tables/bitcipher_figure4.<profile>.json`, written by `python -m langrepr.tables
bitcipher_figure4`) for the run folders behind each row, and each run's CSV log (`csv/metrics.csv`: `val/ppl` at
every evaluation). One line per row: the mean over seeds, a band of ± one std where several seeds ran; a dotted
line where the warm starts' embedding thaws; the unigram reference as a horizontal line. Writes
`outputs/figures/bitcipher_figure4.<profile>.png` (where `make report` collects paper figures).

    python scripts/bitcipher_figure4.py [--profile quick|full] [--outputs outputs]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

import yaml

from langrepr.errors import UserError, exits_on_user_error
from langrepr.utils import open_mode

METRIC = "val/ppl"


def read_curve(run_dir: Path, metric: str = METRIC) -> dict[int, float]:
    """{step: value} of `metric` in a run's CSV log (empty when the run logged none)."""
    path = run_dir / "csv" / "metrics.csv"
    curve: dict[int, float] = {}
    if not path.is_file():
        return curve
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get(metric) not in (None, "") and row.get("step") not in (None, ""):
                curve[int(float(row["step"]))] = float(row[metric])
    return curve


def thaw_step(run_dir: Path) -> int | None:
    cfg_path = run_dir / "config_resolved.yaml"
    if not cfg_path.is_file():
        return None
    task = (yaml.safe_load(cfg_path.read_text()) or {}).get("dataset", {}).get("task", {})
    return int(task.get("freeze_embedding_steps") or 0) if task.get("warm_start") else None


def row_runs(table: dict, outputs: Path) -> dict[str, tuple[bool, list[Path]]]:
    """Row key -> (is a reference row, the run folders of its cells that exist here)."""
    rows = {}
    for row in table["rows"]:
        dirs = {d for cell in row["cells"].values() for d in cell.get("runs", [])}
        found = []
        for d in sorted(dirs):                # as recorded (relative to where the table was rendered), else
            path = Path(d)                    # the same run under --outputs (a table rendered elsewhere)
            if not path.is_dir() and not path.is_absolute() and len(path.parts) > 1:
                path = outputs.joinpath(*path.parts[1:])
            if path.is_dir():
                found.append(path)
        rows[row["key"]] = (bool(row.get("reference")), found)
    return rows


def plot(table: dict, outputs: Path, target: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn, thaws = [], set()
    for key, (reference, dirs) in row_runs(table, outputs).items():
        if reference:
            finals = [json.loads((d / "metrics.json").read_text())["metrics"].get(METRIC) for d in dirs]
            finals = [v for v in finals if v is not None]
            if finals:
                ax.axhline(statistics.fmean(finals), color="grey", linestyle="--", linewidth=1, label=key)
                drawn.append(key)
            continue
        by_step: dict[int, list[float]] = defaultdict(list)
        for d in dirs:
            for step, value in read_curve(d).items():
                by_step[step].append(value)
            if thaw_step(d):
                thaws.add(thaw_step(d))
        if not by_step:
            continue
        steps = sorted(by_step)
        mean = [statistics.fmean(by_step[s]) for s in steps]
        line, = ax.plot(steps, mean, marker=".", label=f"{key} ({len(dirs)} seed{'s' * (len(dirs) > 1)})")
        if len(dirs) > 1:
            std = [statistics.stdev(by_step[s]) if len(by_step[s]) > 1 else 0.0 for s in steps]
            ax.fill_between(steps, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)],
                            color=line.get_color(), alpha=0.2)
        drawn.append(key)
    if not drawn:
        plt.close(fig)
        raise UserError(f"no run behind {table['table']} ({table.get('profile')}) is on this machine: run "
                        f"`make bitcipher-figure4 PROFILE={table.get('profile', 'full')}` first")
    for step in sorted(thaws):
        ax.axvline(step, color="black", linestyle=":", linewidth=1)
        ax.text(step, ax.get_ylim()[1], " embedding thaws", va="top", fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("validation perplexity (log scale)")
    ax.set_title(f"Bit Cipher Fig. 4: cipher warm start vs cold start ({table.get('profile')}, "
                 f"commit {table.get('commit')})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".png")
    open_mode(fd)  # readable as the umask allows, not mkstemp's 0600
    os.close(fd)
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, target)
    return drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="full")
    parser.add_argument("--outputs", default="outputs", help="folder holding tables/ and the run folders")
    args = parser.parse_args()
    outputs = Path(args.outputs)
    table_path = outputs / "tables" / f"bitcipher_figure4.{args.profile}.json"
    with exits_on_user_error():
        if not table_path.is_file():
            raise UserError(f"{table_path} not found: render the table first (python -m langrepr.tables "
                            f"bitcipher_figure4 --profile {args.profile})")
        target = outputs / "figures" / f"bitcipher_figure4.{args.profile}.png"
        drawn = plot(json.loads(table_path.read_text()), outputs, target)
    print(f"wrote {target} ({', '.join(drawn)})")


if __name__ == "__main__":
    main()
