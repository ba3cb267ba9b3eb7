"""A render against the table already on disk: measured cells, what is thinner, what reproduces."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("langrepr.tables")


def measured_cells(table: dict) -> int:
    return sum(c.get("ours") is not None for r in table.get("rows", []) for c in r.get("cells", {}).values())


def thinner_than(new: dict, old: dict) -> list[str]:
    """Why `new` must not replace the table on disk: fewer measured cells, fewer seed runs, another recipe."""
    if not old:
        return []
    reasons = []
    if measured_cells(new) < measured_cells(old):
        reasons.append(f"{measured_cells(new)} measured cell(s) here, {measured_cells(old)} on disk")
    runs_new = sum(c.get("n") or 0 for r in new.get("rows", []) for c in r.get("cells", {}).values())
    runs_old = sum(c.get("n") or 0 for r in old.get("rows", []) for c in r.get("cells", {}).values())
    if runs_new < runs_old:
        reasons.append(f"{runs_new} seed run(s) here, {runs_old} on disk (seeds {new.get('seeds')} vs {old.get('seeds')})")
    if sorted(new.get("recipe") or []) != sorted(old.get("recipe") or []):
        reasons.append(f"another recipe: overrides {new.get('recipe') or 'none'} here, "
                       f"{old.get('recipe') or 'none'} on disk")
    return reasons


# What a re-run changes without changing a result: which commit and how long each run took. A committed table
# whose every other field a render reproduces keeps its stamp (the commit of the runs that first gave the numbers).
PROVENANCE_KEYS = frozenset({"commit", "dirty_commits", "cell_wall", "kept_existing", "commits", "wall_s"})


def without_provenance(value: Any) -> Any:
    """`value` with its provenance fields dropped and floats to 12 significant digits (a sum's last bits vary)."""
    if isinstance(value, dict):
        return {k: without_provenance(v) for k, v in value.items() if k not in PROVENANCE_KEYS}
    if isinstance(value, list):
        return [without_provenance(v) for v in value]
    if isinstance(value, float):
        return float(f"{value:.12g}")
    return value


def reproduces(new: dict, old: dict) -> bool:
    """Whether `new` says exactly what `old` says, numbers, verdicts and notes, whoever ran it and when."""
    as_written = json.loads(json.dumps(new, default=str))   # the JSON on disk holds lists, not tuples
    return not old.get("dirty_commits") and without_provenance(as_written) == without_provenance(old)


def existing_table(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError) as err:
        log.warning("%s is unreadable (%s); read as if absent", path, type(err).__name__)
        return {}


def portable_dir(run_dir: str, outputs: Path) -> str:
    """A run dir as a committed table names it: `outputs/quick/...`, relative to the outputs folder's parent.

    A render given an absolute `--outputs` must not write the machine's paths into a tracked JSON.
    """
    path, root = Path(run_dir), outputs.resolve()
    if path.is_absolute() and path.is_relative_to(root):
        return str(Path(outputs.name) / path.relative_to(root))
    return run_dir
