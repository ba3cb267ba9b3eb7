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

The package, by role: `artefacts` (reading tables, run folders and curves), `figures`, `bench` (the
benchmark rows), `summary` (per-paper summaries, README and docs blocks), `page` (the Markdown and HTML page);
here `build_report` and the command line.
"""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from pathlib import Path

from langrepr.errors import WRITE_ERRNOS, UserError
from langrepr.report.artefacts import (  # noqa: F401
    CLAIM_MARKS,
    NOT_RESULTS,
    PAPERS,
    SEED_PART,
    claim_mark,
    load_tables,
    loglog_fit,
    make_command,
    monitored_metric,
    not_rendered,
    profile_arg,
    read_curves,
    readable_record,
    resolve_run_dir,
    run_commit,
    seed_band,
    table_run_groups,
)
from langrepr.report.bench import (  # noqa: F401
    BENCH_COLUMNS,
    NOT_KEPT,
    NOT_RECORDED,
    bench_machine,
    bench_rows,
    bench_section,
    bench_spread,
    cell_text,
    kept_bench_rows,
)
from langrepr.report.figures import kept_figure, plot_learning_curves, plot_scaling, save_figure  # noqa: F401
from langrepr.report.page import build_markdown, cell_breaks, to_html  # noqa: F401
from langrepr.report.summary import (  # noqa: F401
    claim_counts,
    demote,
    generic_markdown,
    not_run_lines,
    paper_claim_lines,
    paper_of,
    paper_summary,
    paragraphs,
    refresh_block,
    status_lines,
    summary_line,
    table_summary,
)
from langrepr.utils import PROJECT_ROOT, write_text_atomic


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
