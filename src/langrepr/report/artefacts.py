"""Reading what earlier steps wrote: rendered tables, run folders, their CSV curves and commits."""

from __future__ import annotations

import csv
import json
import logging
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from langrepr.confpaths import group_options
from langrepr.errors import UserError

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
