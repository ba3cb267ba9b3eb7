"""`python -m langrepr.plan`: arguments checked in one line, plans written beside a committed one of other settings."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from langrepr.errors import UserError, exits_on_user_error
from langrepr.plan.cells import sweep_cells
from langrepr.plan.facts import DEFAULT_UTILISATION, GPU_CLASSES, OUT_DIR
from langrepr.plan.render import _hours, render_all, render_table
from langrepr.plan.table import plan_table, settings
from langrepr.plan.timing import assumption_for, load_checks

# ---------------------------------------------------------------- CLI

def tables() -> list[str]:
    from langrepr.confpaths import group_options

    return group_options("experiment")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (what is wrong, where to look), exit status 2."""

    def error(self, message: str) -> None:
        raise UserError(f"{message} (python -m langrepr.plan --help)")


def check_arguments(args: argparse.Namespace, chosen: list[str], checks: dict) -> None:
    """Every value range-checked before any cell is measured: one line (what is wrong, how to fix), exit 2.

    Overrides get the same line `python -m langrepr.train` gives for them (the table targets' wording), then every
    cell of the sweep is composed with them, since a sweep key can make a later cell refuse what the first took.
    """
    from langrepr.confpaths import group_options

    profiles = group_options("profile")
    if args.profile not in profiles:
        raise UserError(f"unknown profile '{args.profile}': choose from {', '.join(profiles)} (PROFILE=...)")
    if args.utilisation is not None and not 0 < args.utilisation <= 1:
        raise UserError(f"--utilisation {args.utilisation:g} is not a share of the peak: give a number in "
                        "(0, 1], e.g. 0.35, or leave it out to use the measured one")
    if args.pack < 1:
        raise UserError(f"--pack {args.pack} is not a number of cells: give 1 or more (PACK=...)")
    try:
        assumption_for("", args.gpu, args.utilisation, checks, args.pack)
    except ValueError as err:
        raise UserError(f"{err}: choose a smaller --pack (PACK=...)") from None
    if args.overrides:
        from langrepr.train import check_group_choices
        from langrepr.validation import check_command_line

        check_group_choices(args.overrides)
        for table in chosen:
            try:
                check_command_line(["-m", f"experiment={table}", f"profile={args.profile}", *args.overrides])
                sweep_cells(table, args.profile, args.overrides)
            except Exception as err:  # noqa: BLE001  (Hydra's message, in one line)
                first = " ".join(str(err).split("\n")[0].split())[:300]
                raise UserError(f"the overrides {' '.join(args.overrides)} do not compose for {table}: "
                                f"{first}") from None


def committed_settings(path: Path) -> dict | None:
    """The settings of the plan already at ``path`` (a plan written before settings were recorded: its profile/GPU)."""
    try:
        old = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return old.get("settings") or settings(old.get("profile"), (old.get("assumption") or {}).get("gpu"), None, 1)


def main(argv: list[str] | None = None) -> None:
    """The command: a bad argument or override is one line on stderr and exit 2 (`errors.exits_on_user_error`)."""
    with exits_on_user_error():
        _main(argv)


def _main(argv: list[str] | None) -> None:
    from langrepr.utils import write_text_atomic

    parser = _Parser(prog="python -m langrepr.plan",
                     description="Cost plan of a profile: GPU-hours, memory and data per table cell.")
    parser.add_argument("--profile", default="full")
    parser.add_argument("--table", action="append", help="one table (repeatable); default every table")
    parser.add_argument("--gpu", default="rtx4090", choices=sorted(GPU_CLASSES))
    parser.add_argument("--utilisation", type=float, default=None,
                        help="sustained share of peak for the FLOP term (default: the highest MFU a GPU check "
                             f"measured on that GPU or the nearest measured one, else {DEFAULT_UTILISATION})")
    parser.add_argument("--pack", type=int, default=1,
                        help="cells sharing one GPU, priced from the measured packed rate (docs/gpu/packed_*.json)")
    parser.add_argument("--out", default=str(OUT_DIR))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides added to every cell, e.g. trainer.max_steps=100")
    args = parser.parse_args(argv)
    known = tables()
    chosen = args.table or known
    unknown = [t for t in chosen if t not in known]
    if unknown:
        raise UserError(f"unknown table {', '.join(unknown)}: choose from {', '.join(known)}")
    checks = load_checks()
    check_arguments(args, chosen, checks)
    out = Path(args.out)
    mine = settings(args.profile, args.gpu, args.utilisation, args.pack, args.overrides)
    plans, partial = [], False
    for table in chosen:
        print(f"planning {table} ...", flush=True)
        plan = plan_table(table, args.profile, args.gpu, args.utilisation, checks, args.overrides, pack=args.pack)
        old = committed_settings(out / f"{table}.json") if (out / f"{table}.json").exists() else None
        name = table
        if args.overrides or (old is not None and old != mine):   # never overwrite the committed plan with another
            name, partial = f"{table}.partial", True
            kept = (f"kept {out / table}.json (profile {old['profile']}, gpu {old['gpu']}, pack {old.get('pack', 1)})"
                    if old else f"{out / table}.json left alone")
            print(f"{kept}: this plan has other settings or overrides, written beside it -> {out / name}.md",
                  flush=True)
        write_text_atomic(out / f"{name}.json", json.dumps(plan, indent=1, default=str) + "\n")
        write_text_atomic(out / f"{name}.md", render_table(plan) + "\n")
        print(f"{table}: {_hours(plan['totals']['gpu_hours'], 1)} GPU-hours -> {out / name}.md", flush=True)
        plans.append(plan)
    if not args.table:
        name = "all.partial.md" if partial else "all.md"
        write_text_atomic(out / name, render_all(plans) + "\n")
        print(f"wrote {out / name}")
