"""Every quick table in one command, with each table's wall time measured: the budget a newcomer pays.

Runs `make <target> PROFILE=quick` for every paper table target in paper order (a table's target also runs the
sweeps whose cells it reads; finished cells are skipped, so a rerun after a stop only pays for what is left).
After each target the wall times so far are written atomically to `outputs/quick/wall_times.json` (target,
seconds, exit status, load average before and after, commit), so a stop loses nothing; a summary prints at the
end. A failing target is reported and the others still run; the exit status is then non-zero.

    python scripts/quick_all.py [--targets ewe-table3 leam-table5 ...] [--list] [--make make] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

from langrepr.errors import UserError
from langrepr.utils import git_commit, write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
PAPER_ORDER = ("ewe", "tensorcoder", "multihot", "leam", "bitcipher", "grid")


def table_targets(makefile: Path = ROOT / "Makefile") -> list[str]:
    """The table targets `make help` lists (`<paper>-table<N>`, `<paper>-figure<N>`, `leam-nsmc`, `grid`), in paper
    order: read from the Makefile so that a new table target joins the budget without an edit here."""
    found = []
    for line in makefile.read_text().splitlines():
        if ":" not in line or "## " not in line or line.startswith(("\t", "#", ".")):
            continue
        name = line.split(":", 1)[0].strip()
        paper = name.split("-", 1)[0]
        if paper in PAPER_ORDER and (name == "grid" or "-table" in name or "-figure" in name or name == "leam-nsmc"):
            found.append(name)
    return sorted(dict.fromkeys(found), key=lambda t: (PAPER_ORDER.index(t.split("-", 1)[0]), "-table" not in t, t))


def run_all(targets: list[str], make: str, out: Path) -> list[dict]:
    """Run each target, timing it; the record is rewritten after every target (atomic)."""
    records: list[dict] = []
    commit = git_commit()
    for target in targets:
        load_before = os.getloadavg()[0]
        start = time.monotonic()
        print(f"[quick-all] make {target} PROFILE=quick", flush=True)
        status = subprocess.run([*make.split(), target, "PROFILE=quick"], cwd=ROOT).returncode
        seconds = time.monotonic() - start
        records.append({"target": target, "seconds": round(seconds, 1), "returncode": status,
                        "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)})
        write_json_atomic(out, {"commit": commit, "cpus": os.cpu_count(),
                                "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                "total_seconds": round(sum(r["seconds"] for r in records), 1), "targets": records})
    return records


def summary(records: list[dict]) -> str:
    """A plain-text table of the wall times, minutes, with the total and the failures."""
    lines = [f"{'target':<22} {'wall (min)':>10}  status"]
    for rec in records:
        lines.append(f"{rec['target']:<22} {rec['seconds'] / 60:>10.1f}  {'ok' if rec['returncode'] == 0 else 'FAILED'}")
    lines.append(f"{'total':<22} {sum(r['seconds'] for r in records) / 60:>10.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", help="a subset of the table targets (default: every one)")
    parser.add_argument("--list", action="store_true", help="print the targets in run order and exit")
    parser.add_argument("--make", default=os.environ.get("MAKE", "make"), help="the make command (default: make)")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "quick" / "wall_times.json")
    args = parser.parse_args(argv)
    known = table_targets()
    try:
        unknown = [t for t in args.targets or [] if t not in known]
        if unknown:
            raise UserError(f"not a table target: {', '.join(unknown)}; choose from {', '.join(known)}")
        targets = args.targets or known
        if args.list:
            print("\n".join(targets))
            return 0
        records = run_all(targets, args.make, args.out)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(summary(records))
    print(f"[quick-all] wall times written to {args.out}")
    failed = [r["target"] for r in records if r["returncode"] != 0]
    if failed:
        print(f"error: {len(failed)} target(s) failed: {', '.join(failed)} (rerun them; finished cells are skipped)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
