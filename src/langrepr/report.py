"""`make report`: one page (Markdown + self-contained HTML) with every rendered table and the plots.

Everything on the page is read from artefacts that earlier steps wrote, never recomputed or typed in:

- tables: `outputs/tables/*.json` and the Markdown `langrepr.tables` rendered beside each one (ours vs paper, Δ,
  claims, profile, seeds, commit); an experiment with no rendered table is listed as not rendered;
- learning curves: the CSV logs (`csv/metrics.csv`) of the run dirs that each table's cells name in their
  `runs` list; one figure per table, one line per row (train loss and the dataset's monitored validation
  metric), the mean over seeds with a min–max band;
- scaling: `outputs/bench/tensorcoder_scaling.json` from `scripts/bench_tensorcoder.py` (log–log time vs N
  with the fitted exponents), plus every `outputs/bench/*.json` ratio in a small table;
- the grid's heat map (`outputs/figures/grid.<profile>.png`, `make grid`) in its own section;
- paper figures: any PNG a paper's code writes into `outputs/figures/` is appended as is.

On top, one summary per paper: its claims counted by verdict, which way the "within noise" ones lean, and
what was not run and why.

What the page never does:
- **Thin.** Run folders and `outputs/bench/` are not committed, so a clone cannot redraw the learning curves or
  the scaling figure, nor list the benchmark rows. Each such piece is kept from the report already on disk (the
  committed one, in a clone): a figure with its caption verbatim while its image is there, the benchmark rows
  re-read from its table (a column an older report lacks says "not kept").
- **Drift.** The page carries no timestamp and no commit of the renderer, and reads files in sorted order: on a
  clone with no new runs `make report` rewrites README, docs and `outputs/report/` byte for byte.
- **Show a render that is not a result.** `*.dry.*` (a dry run: 2 steps per cell) and `*.partial.*` (kept
  beside a table it did not replace) renders are skipped by the page, the README rows and the doc claims alike.

Usage: `python -m langrepr.report [--outputs outputs] [--out outputs/report]`.
"""

from __future__ import annotations

import argparse
import base64
import csv
import errno
import json
import logging
import math
import os
import re
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from langrepr.confpaths import group_options
from langrepr.errors import WRITE_ERRNOS, UserError
from langrepr.tables import cell_wall, lean_words
from langrepr.utils import PROJECT_ROOT, open_mode, write_text_atomic

log = logging.getLogger("langrepr.report")

CLAIM_MARKS = {True: "✓", False: "✗", None: "not judged", "noise": "within noise", "unknown": "noise unknown"}
PAPERS = {"ewe": "EWE", "tensorcoder": "TensorCoder", "multihot": "Multi-hot LM", "leam": "LEAM",
          "bitcipher": "Bit Cipher"}
SEED_PART = re.compile(r"(^|,)seed=[^,]*")
NOT_RESULTS = (".dry", ".partial")   # renders that are not results: a dry run's, or one kept beside its table


# ---------------------------------------------------------------- reading artefacts


def profile_arg(table: dict) -> str:
    """` PROFILE=quick` for a table's make command; none for full or exact (a count, the same on every profile)."""
    return "" if table.get("profile", "full") in ("full", "exact") else f" PROFILE={table['profile']}"


def make_command(table: dict) -> str:
    """The make target that re-runs a table's cells, as a user types it."""
    return f"make {table['table'].replace('_', '-')}{profile_arg(table)}"


def claim_mark(holds: Any, claim: dict | None = None) -> str:
    """The claim's recorded verdict (✓ / ✗ / within noise / noise unknown / not judged / not run)."""
    if claim and claim.get("verdict"):
        return claim["verdict"]
    return CLAIM_MARKS.get(holds, str(holds))


def load_tables(outputs: Path) -> list[dict]:
    """Every rendered table JSON with its Markdown twin (if any), sorted by name; dry and partial renders skipped."""
    found = []
    for path in sorted((outputs / "tables").glob("*.json")):
        if path.stem.endswith(NOT_RESULTS):    # never a status, a claim line or a report section
            continue
        try:
            table = json.loads(path.read_text())
            table["rows"], table["table"]   # noqa: B018  (what every section reads)
        except (ValueError, KeyError, TypeError) as err:   # a damaged table never becomes a thinner report (X37)
            raise UserError(f"{path} is damaged (not the JSON `langrepr.tables` writes: {type(err).__name__}): "
                            f"restore it (`git checkout -- {path}`) or re-render it (`python -m langrepr.tables "
                            f"{path.stem.split('.')[0]} --profile {'quick' if '.quick' in path.name else 'full'}`); "
                            "the report on disk is untouched") from None
        md = path.with_suffix(".md")
        found.append({"stem": path.stem, "table": table, "markdown": md.read_text() if md.exists() else None})
    return found


def not_rendered(tables: list[dict]) -> list[str]:
    rendered = {t["table"]["table"] for t in tables}
    return [name for name in group_options("experiment") if name not in rendered]


def resolve_run_dir(run_dir: str, outputs: Path) -> Path:
    """Run dirs are stored as written by the renderer (relative to where it ran, normally the repo root)."""
    path = Path(run_dir)
    if path.is_absolute():
        return path
    return outputs.parent / path if outputs.name == "outputs" else path


def read_curves(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """{metric: [(step, value), ...]} from a run's Lightning CSV log; {} when the run kept none."""
    csv_log = run_dir / "csv" / "metrics.csv"
    if not csv_log.exists():
        return {}
    curves: dict[str, list[tuple[int, float]]] = defaultdict(list)
    bad = 0
    with csv_log.open(newline="", errors="replace") as fh:
        for row in csv.DictReader(fh):
            step = row.get("step")
            for key, value in row.items():
                if key in ("epoch", "step", None) or value in ("", None) or step in ("", None):
                    continue
                try:
                    curves[key].append((int(float(step)), float(value)))
                except (TypeError, ValueError):   # a cut or damaged line: drawn without it
                    bad += 1
    if bad:
        log.warning("%s: %d value(s) are not numbers (a cut or damaged log); the curves are drawn without them",
                    csv_log, bad)
    return dict(curves)


def readable_record(run_dir: Path) -> bool:
    """A run folder whose metrics.json is JSON; a damaged one is skipped with a warning naming it (X36)."""
    try:
        json.loads((run_dir / "metrics.json").read_text())
        return True
    except (OSError, ValueError) as err:
        log.warning("skipping %s: unreadable (%s); its curve is left out (rerun that cell with force=true)",
                    run_dir / "metrics.json", type(err).__name__)
        return False


def run_commit(run_dir: Path) -> str | None:
    return json.loads((run_dir / "metrics.json").read_text()).get("commit")


def monitored_metric(run_dir: Path) -> str:
    cfg = run_dir / "config_resolved.yaml"
    try:
        data = yaml.safe_load(cfg.read_text()) if cfg.exists() else {}
    except yaml.YAMLError:
        data = {}                                   # damaged: the loss every task logs
    return (((data if isinstance(data, dict) else {}).get("dataset") or {}).get("monitor")) or "val/loss"


def table_run_groups(table: dict, outputs: Path) -> dict[tuple[str, str], list[Path]]:
    """(row key, cell dir without its seed) -> the run dirs of that cell's seeds, for runs present here."""
    groups: dict[tuple[str, str], set[Path]] = defaultdict(set)
    for row in table["rows"]:
        for cell in row["cells"].values():
            for run in cell.get("runs", []):
                path = resolve_run_dir(run, outputs)
                if (path / "metrics.json").exists() and readable_record(path):
                    groups[(row["key"], SEED_PART.sub("", path.name).strip(","))].add(path)
    return {k: sorted(v) for k, v in groups.items()}


def seed_band(series: list[list[tuple[int, float]]]) -> tuple[list[int], list[float], list[float], list[float]]:
    """Mean, min and max over seeds at every step that at least one seed logged."""
    by_step: dict[int, list[float]] = defaultdict(list)
    for points in series:
        for step, value in points:
            by_step[step].append(value)
    steps = sorted(by_step)
    return (steps, [statistics.fmean(by_step[s]) for s in steps], [min(by_step[s]) for s in steps],
            [max(by_step[s]) for s in steps])


def loglog_fit(ns: list[int], ts: list[float]) -> tuple[float, float]:
    """Least-squares slope and intercept of log t against log N."""
    xs, ys = [math.log(n) for n in ns], [math.log(t) for t in ts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


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


# ---------------------------------------------------------------- the page

def table_summary(table: dict) -> dict:
    cells = [c for r in table["rows"] for c in r["cells"].values()]
    marks = [claim_mark(c.get("holds"), c) for c in table.get("claims", [])]
    return {"run": sum(c["ours"] is not None for c in cells), "total": len(cells),
            "claims": ", ".join(f"{marks.count(m)} {m}" for m in dict.fromkeys(marks)) or "—",
            "seeds": ", ".join(map(str, table.get("seeds", []))) or "none"}


def summary_line(entry: dict) -> str:
    """The report's summary row of one table (a test checks the committed report holds today's rows)."""
    t, s = entry["table"], table_summary(entry["table"])
    return (f"| [{t['table']}](#{entry['stem'].replace('.', '')}) | {t.get('profile')} | "
            f"{s['run']}/{s['total']} | {s['seeds']} | {s['claims']} | `{t.get('commit')}` |")


def generic_markdown(table: dict) -> str:
    """Only for a JSON whose Markdown twin is missing: the same cells, printed with 4 significant digits."""
    def num(v: float | None) -> str:
        return "not run" if v is None else f"{v:.4g}"

    lines = ["| | " + " | ".join(table["columns"]) + " |", "|---" * (len(table["columns"]) + 1) + "|"]
    for row in table["rows"]:
        parts = []
        for name in table["columns"]:
            c = row["cells"][name]
            delta = num(c["ours"] - c["paper"]) if c["ours"] is not None and c["paper"] is not None else "—"
            parts.append(f"{num(c['ours'])} / {'—' if c['paper'] is None else num(c['paper'])} / {delta}")
        lines.append(f"| {row['key']} | " + " | ".join(parts) + " |")
    lines += [""] + [f"- {claim_mark(c.get('holds'), c)} {c['text']}" for c in table.get("claims", [])]
    return "\n".join(lines)


def demote(markdown: str) -> str:
    """The table's own `# Title` becomes a third-level heading inside the report."""
    return re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", markdown, flags=re.M)


BENCH_COLUMNS = ("benchmark", "value", "spread", "target", "hardware", "threads", "file")
NOT_RECORDED = "not recorded"
NOT_KEPT = "not kept"        # a column the report these rows were kept from did not show


def bench_spread(result: dict) -> str:
    """The rounds behind a ratio (IQR, range, n) or "not recorded": a ratio without them is one draw."""
    details = result.get("details") if isinstance(result.get("details"), dict) else {}
    spread = result.get("ratio_spread") or details.get("ratio_spread")
    if not isinstance(spread, dict) or not {"q1", "q3", "min", "max", "n"} <= spread.keys():
        return NOT_RECORDED
    return (f"IQR {spread['q1']:.3g}–{spread['q3']:.3g}, range {spread['min']:.3g}–{spread['max']:.3g}, "
            f"{spread['n']} rounds")


def bench_machine(result: dict) -> tuple[str, str]:
    """(hardware, threads) a result was measured on; a file from before `machine` was recorded says so."""
    details = result.get("details") if isinstance(result.get("details"), dict) else {}
    here = result.get("machine") if isinstance(result.get("machine"), dict) else {}
    threads = here.get("threads", details.get("threads"))
    if not here:
        return NOT_RECORDED, NOT_RECORDED if threads is None else str(threads)
    hardware = f"{here.get('cpu', 'CPU not recorded')}, {here.get('cores', '?')} cores"
    if here.get("gpu"):
        hardware += f", {here['gpu']}"
    return hardware, NOT_RECORDED if threads is None else str(threads)


def cell_text(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def bench_rows(bench_dir: Path) -> list[dict]:
    """One row per benchmark result in `outputs/bench/*.json` (one result or a list of them per file)."""
    rows = []
    for path in sorted(bench_dir.glob("*.json")):
        try:
            results = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            log.warning("%s is not readable JSON: left out of the benchmark table (`make bench` rewrites it)", path)
            continue
        for result in results if isinstance(results, list) else [results]:  # one result or a list of them
            value = result.get("value", result.get("ratio")) if isinstance(result, dict) else None
            if value is None:
                continue
            hardware, threads = bench_machine(result)
            rows.append({"benchmark": result.get("name", path.stem),
                         "value": f"{value:.3g}" if isinstance(value, (int, float)) else str(value),
                         "spread": bench_spread(result), "target": result.get("target", "—"),
                         "hardware": hardware, "threads": threads, "file": path.name})
    return rows


def kept_bench_rows(previous: str) -> list[dict]:
    """The benchmark rows of the report on disk, column by column; a column that report lacks says so."""
    section = re.search(r"^## Benchmarks\n(.*?)(?=^## |\Z)", previous, re.M | re.S)
    table = [ln for ln in (section.group(1).splitlines() if section else []) if ln.startswith("|")]
    if len(table) < 3:
        return []
    split = lambda line: [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]  # noqa: E731
    header = split(table[0])
    return [{name: dict(zip(header, split(line))).get(name, NOT_KEPT) for name in BENCH_COLUMNS}
            for line in table[2:]]


def bench_section(bench_dir: Path, previous: str) -> list[str]:
    """The benchmark table, measured here or kept from the report on disk (outputs/bench/ is not committed)."""
    rows = bench_rows(bench_dir)
    if not rows:
        rows = [{k: v.replace("\\|", "|") for k, v in row.items()} for row in kept_bench_rows(previous)]
    if not rows:
        return ["Not run: `make bench` writes outputs/bench/*.json."]
    lines = ["| " + " | ".join(BENCH_COLUMNS) + " |", "|---" * len(BENCH_COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell_text(row[name]) for name in BENCH_COLUMNS) + " |" for row in rows]
    return lines + ["", "*Ratios measured by `make bench` (`outputs/bench/*.json`, not committed; a clone keeps "
                        "these rows from the committed report). Spread: the per-round ratios over interleaved rounds; "
                        "hardware and threads: the machine each result was measured on (\"not recorded\": a file "
                        "written before benchmarks recorded it; \"not kept\": a column the report these rows were kept "
                        "from did not show).*"]


def paper_of(table: dict) -> str:
    return table["table"].split("_")[0]


def claim_counts(claims: list[dict]) -> dict:
    """Claims by verdict, and which way the within-noise ones lean (see `verdicts.leaning`)."""
    marks = [claim_mark(c.get("holds"), c) for c in claims]
    noise = [c for c, m in zip(claims, marks) if m == "within noise"]
    return {"marks": marks, "with": sum(c.get("lean") == "with" for c in noise),
            "against": sum(c.get("lean") == "against" for c in noise),
            "beyond_margin": sum(bool(c.get("margin_exceeded")) for c in noise), "noise": len(noise)}


def not_run_lines(tables: list[dict], missing: list[str]) -> list[str]:
    """What of one paper was not run, and why, as far as the table JSONs say it."""
    parts = [f"{m} has no rendered table (`make {m.replace('_', '-')} PROFILE=quick`)" for m in missing]
    for t in tables:
        cells = [c for r in t["rows"] for c in r["cells"].values()]
        empty = sum(c["ours"] is None for c in cells)
        if not empty:
            continue
        why = [f"{name} not run on this profile: {reason.split('. ')[0].rstrip('.')}"
               for name, reason in (t.get("not_run") or {}).items()]
        rest = empty - sum(c["ours"] is None and bool(c.get("not_run")) for c in cells)
        if rest:
            why.append(f"{rest} without a finished run, see its notes")
        parts.append(f"{t['table']}: {empty} of {len(cells)} cells not run ({'; '.join(why)})")
    return parts


def paper_summary(entries: list[dict]) -> list[str]:
    """The page's opening: per paper, claims by verdict, the lean of the undecided ones, what did not run."""
    lines = ["| paper | tables | cells run | claims ✓ | ✗ | within noise (means lean with / against the paper) | "
             "noise unknown | not judged | claims not run |", "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    missing = not_rendered(entries)
    for paper, name in PAPERS.items():
        tables = [e["table"] for e in entries if paper_of(e["table"]) == paper]
        gone = [m for m in missing if m.split("_")[0] == paper]
        counts = claim_counts([c for t in tables for c in t.get("claims", [])])
        marks = counts["marks"]
        cells = [c for t in tables for r in t["rows"] for c in r["cells"].values()]
        profiles = ", ".join(f"{n} {p}" for p, n in sorted(
            {p: sum(t.get("profile") == p for t in tables) for p in {t.get("profile") for t in tables}}.items()))
        lines.append(f"| {name} | {len(tables)} ({profiles or 'none'}) | {sum(c['ours'] is not None for c in cells)}/"
                     f"{len(cells)} | {marks.count('✓')} | {marks.count('✗')} | {counts['noise']} "
                     f"({counts['with']} with / {counts['against']} against) | {marks.count('noise unknown')} | "
                     f"{marks.count('not judged')} | {marks.count('not run')} |")
        lean = "no claim is within noise"
        if counts["noise"]:
            side = ("with the paper" if counts["with"] > counts["against"] else "against the paper"
                    if counts["against"] > counts["with"] else "evenly")
            lean = (f"of {counts['noise']} claims within noise, the means of {counts['with']} lean with the paper and "
                    f"of {counts['against']} against it (on balance {side})" if side != "evenly" else
                    f"of {counts['noise']} claims within noise, the means lean with the paper and against it "
                    f"equally ({counts['with']} each)")
            if counts["beyond_margin"]:
                lean += (f"; {counts['beyond_margin']} equivalence claim(s) have |d| beyond their margin, the noise "
                         "too wide to call them ✗")
        gaps = not_run_lines(tables, gone)
        notes.append(f"- **{name}**: {lean}. " + (f"Not run: {'; '.join(gaps)}." if gaps else "Every cell ran."))
    return lines + [""] + notes


def paragraphs(markdown: str) -> str:
    """Consecutive plain lines become separate paragraphs, so a header's lines never run together on the page."""
    def plain(line: str) -> bool:   # not a list item, table row, heading, image, HTML or continuation line
        return bool(line.strip()) and not re.match(r"\s|[|#><]|!\[|[-*+] |\d+\. ", line)

    out: list[str] = []
    for line in markdown.splitlines():
        if plain(line) and out and plain(out[-1]):
            out.append("")
        out.append(line)
    return "\n".join(out)


def build_markdown(outputs: Path, img_dir: Path, page_dir: Path, previous: str = "") -> str:
    """The page. `previous` is the report on disk: what this machine cannot rebuild is kept from it."""
    tables = load_tables(outputs)
    rel = lambda p: os.path.relpath(p, page_dir)  # noqa: E731  (image links relative to the page)
    lines = ["# langrepr results report", "",
             f"Generated by `make report` from {len(tables)} rendered table(s) in `{outputs.name}/tables/` (each "
             "carries the commit its cells ran at), the run folders and CSV logs, and the benchmark results.", "",
             "Each table cell: ours (± std over seeds) / paper / Δ = ours − paper; `python -m langrepr.tables "
             "explain <table> \"<row>\" \"<column>\"` prints the runs behind a cell.", "",
             "A claim is ✓ or ✗ only when the gap beats the seed noise (Welch's t, 95%); \"within noise\" lines say "
             "which way the means lean; \"not judged\" means a side does not clear its learning floor (or the "
             "profile does not judge); dry-run and partial renders are never shown.", "",
             "## Summary by paper", ""]
    lines += paper_summary(tables)
    lines += ["", "## Summary by table", "", "| table | profile | cells run | seeds | claims | commit |",
              "|---|---|---|---|---|---|"]
    lines += [summary_line(entry) for entry in tables]
    missing = not_rendered(tables)
    if missing:
        lines += ["", "Not rendered yet (no table JSON): " + ", ".join(
            f"{m} (`make {m.replace('_', '-')} PROFILE=quick`)" for m in missing) + "."]
    for entry in tables:
        t = entry["table"]
        lines += ["", f"## {t['table']} ({t.get('profile')})" + f' <a id="{entry["stem"].replace(".", "")}"></a>', ""]
        lines.append(paragraphs(demote(entry["markdown"]).strip() if entry["markdown"] else generic_markdown(t)))
        figure, caption = plot_learning_curves(entry, outputs, img_dir, previous, page_dir)
        lines += ["", f"![learning curves of {t['table']}]({rel(figure)})" if figure else "", "", f"*{caption}*"]
    lines += ["", "## TensorCoder attention: time vs sequence length", ""]
    figure, caption = plot_scaling(outputs / "bench" / "tensorcoder_scaling.json", img_dir, previous)
    lines += ([f"![TensorCoder scaling]({rel(figure)})", ""] if figure else []) + [f"*{caption}*"]
    lines += ["", "## Benchmarks", "", *bench_section(outputs / "bench", previous)]
    grid_maps = sorted((outputs / "figures").glob("grid.*.png"))
    if grid_maps:   # the grid (issue 24, `make grid`): rows input x encoder, columns tasks
        lines += ["", "## The grid: gap to each column's floor", ""]
        for fig in grid_maps:
            lines += [f"![{fig.stem}]({rel(fig)})", "", f"*{fig.stem}: points above each task's floor (label prior "
                      "or majority class) per input x encoder, mean over seeds; n/c = does not compose, ✗ = below "
                      f"the floor, * = the column's best beyond the noise (outputs/tables/{fig.stem}.md)*", ""]
    figures = sorted(f for f in (outputs / "figures").glob("*.png") if f not in grid_maps
                     and not f.stem.endswith(NOT_RESULTS))
    if figures:
        lines += ["", "## Paper figures", ""]
        for fig in figures:
            lines += [f"![{fig.stem}]({rel(fig)})", "", f"*{fig.stem} (outputs/figures/{fig.name})*", ""]
    return "\n".join(lines).rstrip() + "\n"


def status_lines(outputs: Path) -> list[str]:
    """The README's status table: one row per rendered table, drawn from its JSON so it cannot go stale."""
    lines = ["| paper | table | profile | cells run | seeds | claims | cell time | commit |",
             "|---|---|---|---|---|---|---|---|"]
    shown = []
    for entry in load_tables(outputs):
        t, s = entry["table"], table_summary(entry["table"])
        shown.append(t)
        paper = PAPERS.get(t["table"].split("_")[0], t["table"].split("_")[0])
        wall = t.get("cell_wall")
        minutes = f"{wall['seconds'] / 60:.0f} min" if wall and wall["runs"] > wall["untimed_runs"] else "—"
        lines.append(f"| {paper} | [{t['table']}](outputs/tables/{entry['stem']}.md) | {t.get('profile')} | "
                     f"{s['run']}/{s['total']} | {s['seeds']} | {s['claims']} | {minutes} | `{t.get('commit')}` |")
    for profile in sorted({t.get("profile") for t in shown}):
        tables = [t for t in shown if t.get("profile") == profile]
        wall = cell_wall([row for t in tables for row in t["rows"]])   # a run shared by tables counted once
        seconds, untimed = wall["seconds"], wall["untimed_runs"]
        timed = wall["runs"] - untimed
        older = f"{untimed} runs were rendered before cell times were kept (\"—\")" if untimed else ""
        if not timed:
            lines += ["", f"Cell time ({profile}): not recorded yet; {older}"]
            continue
        total = f"{seconds / 3600:.1f} h" if seconds >= 360 else f"{seconds / 60:.1f} min"
        behind = f"{len(tables)} table" + ("s" if len(tables) != 1 else "")
        lines += ["", f"Cell time ({profile}): {total} over the {timed} recorded runs behind "
                  f"{behind}, each run counted once (one process per cell, at the load of its run; "
                  f"upstream stages the cells reuse, renders and set-up not counted)" + (f"; {older}" if older else "")]
    return lines


def paper_claim_lines(outputs: Path, paper: str) -> list[str]:
    """A paper page's measured summary: per rendered table, its claim verdicts with our numbers (from the JSON)."""
    lines = []
    for entry in load_tables(outputs):
        t = entry["table"]
        if paper_of(t) != paper:
            continue
        seeds = ", ".join(map(str, t.get("seeds", []))) or "none"
        lines += ["", f"**{t['title']}** ({t.get('profile')}; seeds {seeds}; commit `{t.get('commit')}`; "
                  f"[table](../outputs/tables/{entry['stem']}.md))", ""]
        for c in t.get("claims", []):
            ours = " vs ".join("—" if v is None else f"{v:.4g}" for v in c.get("ours", []))
            why = f" ({c['reason']})" if c.get("reason") and c.get("verdict") not in ("✓", "✗") else ""
            if lean_words(c):   # "(means lean against the paper, |d| beyond the margin: |d| = 5.96, bound 8, margin 2)"
                beyond = ", |d| beyond the margin" if c.get("margin_exceeded") else ""
                why = f" (means lean {c['lean']} the paper{beyond}: {c.get('reason') or 'within noise'})"
            mark = claim_mark(c.get("holds"), c)
            lines.append(f"- {mark if mark in ('✓', '✗') else mark + ':'} {c['text']}: ours {ours}{why}")
        if not t.get("claims"):
            lines.append("- (no claims of the paper map onto this table)")
    return lines[1:] if lines else ["No table of this paper is rendered yet."]


def refresh_block(path: Path, name: str, lines: list[str]) -> bool:
    """Replace the text between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`; False if no markers."""
    if not path.exists():
        return False
    text = path.read_text()
    begin, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    if begin not in text or end not in text:
        return False
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    new = head + begin + "\n" + "\n".join(lines) + "\n" + end + tail
    if new != text:
        write_text_atomic(path, new)
    return True


def cell_breaks(text: str) -> str:
    """A narrow "ours ± std / paper / Δ" cell wraps once, after ours: never inside "74.59 ± 3.37" or "paper / Δ"."""
    ours, *rest = text.replace(" ± ", "\u00a0±\u00a0").split(" / ")
    return " / ".join([ours, "\u00a0/\u00a0".join(rest)]) if rest else ours


def to_html(markdown: str, page_dir: Path) -> str:
    """The same page as HTML with every image inlined (base64), so the one file can be mailed or archived."""
    from markdown_it import MarkdownIt

    def inline(match: re.Match) -> str:
        path = (page_dir / match.group(2)).resolve()
        if not path.exists():
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode()
        return f"![{match.group(1)}](data:image/png;base64,{data})"

    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(
        re.sub(r"!\[([^\]]*)\]\(([^)]+\.png)\)", inline, markdown))
    body = re.sub(r"<td>([^<]*)</td>", lambda m: f"<td>{cell_breaks(m.group(1))}</td>", body)
    # a wide table scrolls inside its own box and long code wraps: nothing is wider than the page
    style = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;line-height:1.4}"
             "table{border-collapse:collapse;font-size:12px;margin:.5em 0;display:block;overflow-x:auto;"
             "max-width:100%}td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}"
             "img{max-width:100%;height:auto}code{background:#f4f4f4;padding:0 3px;overflow-wrap:anywhere}"
             "p,li{overflow-wrap:anywhere}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>langrepr results report</title>"
            f"<style>{style}</style></head><body>\n{body}</body></html>\n")


def build_report(outputs: str | Path = "outputs", out: str | Path | None = None,
                 root: Path | None = None) -> tuple[Path, Path]:
    """Write `report.md`, `report.html` and `img/*.png` into `out` (default `<outputs>/report`).

    The README's status rows and the docs' claim lines of the checkout `root` are refreshed too; by default
    only when `outputs` is the project's own (a report of another outputs tree never rewrites the README).
    """
    outputs = Path(outputs)
    if not (outputs / "tables").is_dir():
        raise UserError(f"{outputs}/tables does not exist: render a table first, e.g. `make ewe-table1`")
    out = Path(out) if out else outputs / "report"
    previous = (out / "report.md").read_text() if (out / "report.md").is_file() else ""
    markdown = build_markdown(outputs, out / "img", out, previous)
    write_text_atomic(out / "report.md", markdown)
    write_text_atomic(out / "report.html", to_html(markdown, out))
    if root is None and outputs.resolve() == (PROJECT_ROOT / "outputs").resolve():
        root = PROJECT_ROOT
    if root is not None:   # the README's status rows and the docs' claim lines, from the same JSONs
        refresh_block(root / "README.md", "status", status_lines(outputs))
        for paper in PAPERS:
            refresh_block(root / "docs" / f"{paper}.md", "claims", paper_claim_lines(outputs, paper))
    return out / "report.md", out / "report.html"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", default="outputs", help="folder holding tables/, bench/ and the run folders")
    parser.add_argument("--out", default=None, help="where to write the report (default <outputs>/report)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
    try:
        md, html = build_report(args.outputs, args.out)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except OSError as err:
        if err.errno not in (*WRITE_ERRNOS, errno.ENOTDIR, errno.EEXIST):
            raise
        print(f"error: cannot write {err.filename or args.out}: {err.strerror}; pass --out <a writable folder> "
              "(the report on disk is untouched)", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {md} and {html}")


if __name__ == "__main__":
    main()
