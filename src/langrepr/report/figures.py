"""The report's plots: learning curves per table and TensorCoder's scaling, kept from the page on disk when a clone cannot redraw them."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from langrepr.report.artefacts import (
    loglog_fit,
    make_command,
    monitored_metric,
    profile_arg,
    read_curves,
    run_commit,
    seed_band,
    table_run_groups,
)
from langrepr.utils import open_mode

log = logging.getLogger("langrepr.report")


# ---------------------------------------------------------------- plots

def save_figure(fig: Any, path: Path) -> None:
    """PNG written atomically, without a timestamp, so an unchanged plot gives an unchanged file.

    Stored as a 256-colour palette PNG: line plots lose nothing visible and the self-contained HTML page,
    which inlines every image, stays small enough to mail (about a third of the RGBA size).
    """
    import matplotlib.pyplot as plt
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".png")
    open_mode(fd)  # readable as the umask allows, not mkstemp's 0600
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", metadata={"Software": None})
        with Image.open(tmp) as image:
            palette = image.convert("RGB").quantize(colors=256)
        palette.save(tmp, format="PNG", optimize=True)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)


def kept_figure(previous: str, alt: str, page_dir: Path) -> tuple[Path, str] | None:
    """The figure `![alt](link)` and its caption from the report on disk, if its image is still there.

    A clone cannot redraw what needs the (uncommitted) runs; the committed figure and caption stay verbatim.
    """
    found = re.search(rf"^!\[{re.escape(alt)}\]\(([^)\s]+)\)\n\n\*(.*)\*$", previous, re.M)
    if not found or not (page_dir / found.group(1)).is_file():
        return None
    return page_dir / found.group(1), found.group(2)


def plot_learning_curves(entry: dict, outputs: Path, img_dir: Path, previous: str = "",
                         page_dir: Path | None = None) -> tuple[Path | None, str]:
    """One figure for a table: train loss + each monitored validation metric, one line per row (seed band)."""
    table = entry["table"]
    if table.get("profile") == "exact":   # known from the JSON, so a clone and the machine that ran it agree
        return None, "No learning curves: the cells of this table do not train (deterministic counts)."
    groups = table_run_groups(table, outputs)
    wanted = sum(len(c.get("runs", [])) for r in table["rows"] for c in r["cells"].values())
    path = img_dir / f"curves_{entry['stem'].replace('.', '_')}.png"
    kept = kept_figure(previous, f"learning curves of {table['table']}", page_dir or img_dir.parent)
    if not groups and wanted and kept:
        figure, caption = kept
        drawn = re.search(r"Drawn for the render at commit `([^`]*)`", caption)
        if drawn and drawn.group(1) != str(table.get("commit")) and "re-rendered since" not in caption:
            caption += (f" The table was re-rendered since (commit `{table.get('commit')}`): these curves may not "
                        "be the runs behind its numbers.")
        return figure, caption
    if not groups:
        if wanted and path.exists():  # a clone of a report from before captions were kept: keep the figure
            return path, ("Learning curves as committed with this report: the run folders behind them are not on "
                          f"this machine; `{make_command(table)}` "
                          "re-runs the cells and redraws them.")
        reason = ("no cell has run" if not wanted else
                  "the run folders behind this table are not on this machine (only rendered tables are committed)")
        return None, f"No learning curves: {reason}; run `{make_command(table)}` to produce them."
    lines = []
    for (row, cell), dirs in groups.items():
        curves = [read_curves(d) for d in dirs]
        if not any("train/loss" in c for c in curves):
            continue
        lines.append({"row": row, "cell": cell, "curves": curves, "monitor": monitored_metric(dirs[0]),
                      "seeds": len(dirs)})
    if not lines:
        return None, "No learning curves: the cells of this table do not train (no CSV logs in their run dirs)."
    rows_with_many = {ln["row"] for ln in lines if sum(o["row"] == ln["row"] for o in lines) > 1}
    monitors = sorted({ln["monitor"] for ln in lines})
    panels = ["train/loss", *monitors]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # constrained layout and the legend below the panels, outside the data: no label covers a curve
    legend_rows = math.ceil(len(lines) / 3)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.4 + 0.22 * legend_rows), squeeze=False,
                             layout="constrained")
    colours = plt.get_cmap("tab10")
    for i, line in enumerate(lines):
        label = f"{line['row']} ({line['cell']})" if line["row"] in rows_with_many else line["row"]
        for ax, metric in zip(axes[0], panels):
            series = [c[metric] for c in line["curves"] if metric in c]
            if not series:
                continue
            steps, mean, low, high = seed_band(series)
            ax.plot(steps, mean, color=colours(i % 10), label=label, lw=1.4,
                    marker="o" if metric != "train/loss" else None, ms=3)
            if len(series) > 1:
                ax.fill_between(steps, low, high, color=colours(i % 10), alpha=0.2, lw=0)
                if metric != "train/loss":  # sparse validation points: show each one's spread too
                    ax.vlines(steps, low, high, color=colours(i % 10), alpha=0.5, lw=1)
    seeds = sorted({ln["seeds"] for ln in lines})
    for ax, metric in zip(axes[0], panels):
        ax.set_title(metric)
        ax.set_xlabel("optimiser step")
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(3, len(labels)), fontsize=7, frameon=False)
    fig.suptitle(f"{table['title']} — {table.get('profile')} profile", fontsize=9)
    save_figure(fig, path)
    band = ("line = mean over seeds, band = min–max over seeds" if max(seeds) > 1
            else "one seed per line: no band")
    named = {r for row in table["rows"] for c in row["cells"].values() for r in c.get("runs", [])}
    present = {d for dirs in groups.values() for d in dirs}
    note = " Some run folders named by the table are not on this machine." if len(present) < len(named) else ""
    stale = sorted(d.name for d in present if run_commit(d) not in str(table.get("commit", "")).split(","))
    if stale:  # a cell rerun after rendering: its curve may not be the run behind the number in the table
        note += (f" {len(stale)} run folder(s) were written at a commit the rendered table does not list "
                 f"(rerun after rendering; re-render with `make tables{profile_arg(table)}`).")
    return path, f"Learning curves from the runs' CSV logs ({band}; seeds per line: " \
                 f"{', '.join(map(str, seeds))}).{note} Drawn for the render at commit `{table.get('commit')}`."


def plot_scaling(bench: Path, img_dir: Path, previous: str = "") -> tuple[Path | None, str]:
    """TensorCoder vs SDPA attention forward time against N, log–log, with the bench's fitted exponents."""
    kept = img_dir / "tensorcoder_scaling.png"
    committed = kept_figure(previous, "TensorCoder scaling", img_dir.parent)
    if not bench.exists() and committed:  # outputs/bench/ is not committed; the figure and its caption are
        return committed
    if not bench.exists() and kept.exists():
        return kept, ("As committed with this report: outputs/bench/tensorcoder_scaling.json is not on this machine; "
                      "`make bench` re-measures it and redraws the figure.")
    if not bench.exists():
        return None, ("Not run: the TensorCoder scaling benchmark has no result yet; `make bench` "
                      "(scripts/bench_tensorcoder.py) writes outputs/bench/tensorcoder_scaling.json.")
    try:
        result = json.loads(bench.read_text())
        det = result["details"]
        det["min_forward_s"], det["fit_n"], det["sdpa_exponent"]   # noqa: B018  (what the figure reads)
    except (ValueError, KeyError, TypeError) as err:
        log.warning("%s is damaged (%s): `make bench` measures it again", bench, type(err).__name__)
        why = f"{bench.name} is damaged ({type(err).__name__}); `make bench` measures it again"
        if kept.exists():
            return kept, f"As committed with this report: {why}."
        return None, f"Not drawn: {why}."
    exponents = {"tensorcoder": result["value"], "sdpa": det["sdpa_exponent"]}
    names = {"tensorcoder": "TensorCoder attention (1 filter)", "sdpa": "dot-product attention (1 head)"}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.6, 4.6), layout="constrained")
    for i, (name, times) in enumerate(det["min_forward_s"].items()):
        ns = sorted(int(n) for n in times)
        ts = [times[str(n)] for n in ns]
        ax.loglog(ns, ts, "o", color=f"C{i}", ms=4)
        fit_ns = [n for n in det["fit_n"] if str(n) in times]
        slope, intercept = loglog_fit(fit_ns, [times[str(n)] for n in fit_ns])
        ax.loglog(fit_ns, [math.exp(intercept) * n ** slope for n in fit_ns], "-", color=f"C{i}",
                  label=f"{names.get(name, name)}: t ∝ N^{exponents.get(name, slope):.2f}")
    if det.get("crossover_n"):
        ax.axvline(det["crossover_n"], color="grey", ls=":", lw=1, label=f"crossover N = {det['crossover_n']}")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("forward time (s, fastest of repeats)")
    ax.set_title(f"Attention time vs N (batch {det.get('batch')}, d = {det.get('d')}, {det.get('device')}, "
                 f"{det.get('threads')} thread(s))", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    fig.legend(loc="outside lower center", fontsize=7, ncols=1, frameon=False)   # below the axes, off the data
    path = img_dir / "tensorcoder_scaling.png"
    save_figure(fig, path)
    return path, (f"From outputs/bench/tensorcoder_scaling.json: exponents fitted over N = "
                  f"{det['fit_n'][0]}..{det['fit_n'][-1]} — TensorCoder {result['value']:.2f} (target "
                  f"{result.get('target')}), SDPA {det['sdpa_exponent']:.2f}; lines are the fits, dots the "
                  "measurements.")
