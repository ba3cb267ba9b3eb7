"""Render a paper table from run artefacts: `python -m langrepr.tables <table> [--profile quick|full] [--dry]`.

A table is declared by the `table:` node of `conf/papers/<paper>/experiment/<table>.yaml`; its cells are filled only from
`metrics.json` + `config_resolved.yaml` of finished runs under `outputs/<profile>/<run_id>/`, never from a
dashboard. The JSON written beside the Markdown has a fixed shape that downstream tools rely on.

The package, by role: `runs` (reading run records), `rows` (cells from runs), `claims` (derived
columns, floors, verdicts), `markdown`, `compare` (a render against the table on disk), `spec` (the `table:`
node and its notes), `rejudge`; here `render` and the command line.
"""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from pathlib import Path

from langrepr.confpaths import group_options
from langrepr.errors import WRITE_ERRNOS, UserError
from langrepr.tables.claims import apply_floors, claim_record, derive_ratios, find_cell, judge_claims  # noqa: F401
from langrepr.tables.compare import (  # noqa: F401
    PROVENANCE_KEYS,
    existing_table,
    measured_cells,
    portable_dir,
    reproduces,
    thinner_than,
    without_provenance,
)
from langrepr.tables.markdown import (  # noqa: F401
    claim_line,
    floor_lines,
    fmt,
    fmt_ours,
    header_lines,
    lean_words,
    to_markdown,
)
from langrepr.tables.rejudge import (  # noqa: F401
    CELL_NUMBERS,
    NotRendered,
    borrowed_rows,
    measured_values,
    orphan_cells,
    read_table_json,
    rejudge,
    reread_columns,
    unreproduced,
)
from langrepr.tables.rows import (  # noqa: F401
    ADDRESSING,
    build,
    cell_wall,
    column_cell,
    dry_notes,
    dry_outcome,
    dry_summary,
    recipe_overrides,
    run_seconds,
)
from langrepr.tables.runs import DRY, FINISHED, experiment_config, load_runs, matches, run_value, select  # noqa: F401
from langrepr.tables.spec import PLACEHOLDER, filled_notes, shared_notes, spec_run_ids, table_spec, table_stem  # noqa: F401
from langrepr.utils import write_json_atomic, write_text_atomic

log = logging.getLogger("langrepr.tables")


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
