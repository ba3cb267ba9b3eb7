"""Reading run records: the experiment's config, finished runs under a run folder, and a column's value of a run."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from langrepr.confpaths import CONF_DIR, group_options, option_path
from langrepr.errors import UserError, unknown_choice

log = logging.getLogger("langrepr.tables")


# ---------------------------------------------------------------- reading runs

def experiment_config(table: str, profile: str, dry: bool = False) -> DictConfig:
    """Compose the experiment exactly as `make` runs it, to read its run_id, profile_name and `table:` spec."""
    options = group_options("experiment")
    if table not in options:
        raise UserError(unknown_choice("table", table, options))
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[f"experiment={table}", f"profile={profile}", *(["debug=dry"] if dry else [])])
    if "table" not in cfg:
        raise UserError(f"{option_path('experiment', table)} has no `table:` node to render")
    return cfg


def select(config: dict, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


FINISHED = ("finished", "diverged")
DRY = ("dry", "failed")   # a dry render (--dry) reads dry records, and failed ones to show what broke


def load_runs(run_root: Path, statuses: tuple[str, ...] = FINISHED) -> list[dict]:
    """Every finished or diverged cell under run_root (`statuses`: DRY for a dry render), with its resolved config.

    A corrupt `metrics.json` or config is skipped with a warning naming it: one bad cell must not stop a table.
    """
    runs = []
    for path in sorted(run_root.rglob("metrics.json")):
        if any(part.startswith(".") for part in path.relative_to(run_root).parts):
            continue  # cells moved aside by force=true (.replaced/) are history, not results
        try:
            record = json.loads(path.read_text())
            if record.get("status") not in statuses:
                continue
            cfg_path = path.parent / "config_resolved.yaml"
            record["config"] = yaml.safe_load(cfg_path.read_text()) if cfg_path.exists() else {}
        except (OSError, ValueError, yaml.YAMLError) as err:
            log.warning("skipping %s: unreadable (%s); rerun that cell with force=true", path, type(err).__name__)
            continue
        record["dir"] = str(path.parent)
        record["mtime"] = path.stat().st_mtime
        runs.append(record)
    return runs


def matches(run: dict, match: dict | None) -> bool:
    for key, want in (match or {}).items():
        have = run.get("choices", {}).get(key) if "." not in key else select(run["config"], key)
        if have is None and "." not in key:
            have = select(run["config"], key)
        if str(have) != str(want):
            return False
    return True


def run_value(run: dict, column: dict, row: dict) -> float | None:
    name = column["name"]
    if name in row.get("const", {}):
        return row["const"][name]
    source = row.get("config", {}).get(name) or column.get("config")
    metric = column.get("metric", "").format(**row.get("vars", {}))  # e.g. "train/{labeling}/total"
    if source:
        value = select(run["config"], source)
    elif not metric:
        return None  # derived column, filled by derive_ratios
    elif metric.startswith("params."):
        value = run.get("params", {}).get(metric.split(".", 1)[1])
    else:
        value = run.get("metrics", {}).get(metric)
    return None if value is None else float(value) * float(column.get("scale", 1))
