"""The benchmark section: one row per `outputs/bench/*.json` result, kept from the page on disk in a clone."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("langrepr.report")


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
