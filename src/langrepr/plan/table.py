"""One table planned: every cell composed, its stages measured and projected, totals."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from langrepr.plan.cells import (
    _sel,
    cell_name,
    compose_cell,
    cpu_nature,
    data_needs,
    dataset_name,
    extra_sweeps,
    grid_composition,
    stages,
    sweep_cells,
)
from langrepr.plan.measure import measure
from langrepr.plan.timing import assumption_for, project

# ---------------------------------------------------------------- one table

def settings(profile: str, gpu: str, utilisation: float | None, pack: int, extra: list[str] = ()) -> dict:
    """What a plan was made with: a committed plan is replaced only by a plan of the same settings."""
    return {"profile": profile, "gpu": gpu, "utilisation": utilisation, "pack": pack, "overrides": list(extra)}


def plan_table(table: str, profile: str, gpu: str, utilisation: float | None, measured: dict,
               extra: list[str] = (), log: Any = print, pack: int = 1) -> dict:
    """Every cell of the table's sweep, composed, its stages measured and projected."""
    paper = table.split("_", 1)[0]
    a = assumption_for(paper, gpu, utilisation, measured, pack)
    from langrepr.cell import cell_fingerprint

    cells, downloads, findings = [], set(), []
    jobs = sweep_cells(table, profile, extra)
    for more in extra_sweeps(table, profile):   # sweeps its make target runs beside the experiment's own
        jobs += [job for job in sweep_cells(table, profile, [*extra, *more]) if job not in jobs]
    for overrides in jobs:
        name = cell_name(overrides)
        entry: dict[str, Any] = {"cell": name, "overrides": overrides, "stages": [], "findings": []}
        try:
            cfg, entry["findings"] = compose_cell(overrides)
            entry["fingerprint"] = portable_fingerprint(cfg, cell_fingerprint)
            entry["stage"] = str(cfg.get("stage", "train"))
            entry["dataset"] = dataset_name(cfg)
            downloads |= data_needs(cfg)
            reason = grid_composition(cfg)
            if reason:
                entry.update(stage="does not compose", findings=[f"does not compose: {reason} (not run, not counted)"])
                cells.append(entry)
                continue
            work = stages(cfg)
        except Exception as err:  # noqa: BLE001  (a cell that does not compose or validate is a finding)
            entry.update(stage="error", findings=[f"does not compose or validate: {' '.join(str(err).split())[:300]}"])
            work = []
        if not work and entry["stage"] != "error":
            entry["cpu"] = cpu_nature(cfg)
        for s in work:
            try:
                started = time.perf_counter()
                m = measure(s.work)
                row = project(s, m, a)
                log(f"  {table} {name} {s.name}: {m['params'] / 1e6:.1f}M params, "
                    f"{row['flops_per_step'] / 1e12:.3g} TFLOP/step ({time.perf_counter() - started:.1f} s)")
            except Exception as err:  # noqa: BLE001  (a model that does not build or run at full size: a finding)
                entry["findings"].append(f"{s.name} does not build or run at full size: {' '.join(str(err).split())[:300]}")
                continue
            entry["stages"].append({"name": s.name, "kind": s.work.kind, "shape": s.work.shape, "steps_note": s.steps_note,
                                    "examples": s.examples, "optimizer": s.optimizer, "precision": s.precision,
                                    "eval_note": s.eval_note, "share_key": s.share_key or f"{entry['fingerprint']}/{s.name}",
                                    "batch_setting": s.batch_setting, "notes": s.notes, **row})
        findings += [f"{name}: {f}" for f in entry["findings"]]
        cells.append(entry)
    wired = sorted({s["name"].split()[0] for c in cells for s in c["stages"] if s["precision"].startswith("32 (the")})
    if wired:
        findings.append(f"the multi-hot {' and '.join(wired)} stages build their own pl.Trainer without `precision` "
                        "or `accumulate_grad_batches` (langrepr.tasks.multihot_mlm / multihot_downstream / span_qa): "
                        "on a GPU they run fp32 (about twice the activation memory projected here for fp16 AMP, and "
                        "no fp16 tensor-core rate), and a batch that does not fit cannot be accumulated")
    return {"table": table, "profile": profile, "settings": settings(profile, gpu, utilisation, pack, extra),
            "assumption": a.__dict__ | {"text": a.text()}, "cells": cells,
            "downloads": sorted(downloads), "findings": findings, "totals": totals(cells)}


def portable_fingerprint(cfg: Any, fingerprint: Any) -> str:
    """The cell's fingerprint with no local data folder (`paths.data_dir: null`, the committed default).

    The resolved config carries `$LANGREPR_DATA_DIR`, so the real fingerprint differs per machine; a committed plan
    must not change with the machine that wrote it.
    """
    import copy

    from omegaconf import open_dict

    if _sel(cfg, "paths.data_dir") is None:
        return fingerprint(cfg)
    c = copy.deepcopy(cfg)
    with open_dict(c):
        c.paths.data_dir = None
    return fingerprint(c)


def unique_stages(cells: list[dict], seen: set) -> Iterator[tuple[dict, dict]]:
    """(cell, stage) of each stage whose share_key is not in ``seen`` yet (a shared stage counts once); adds it."""
    for c in cells:
        for s in c["stages"]:
            if s["share_key"] in seen:
                continue
            seen.add(s["share_key"])
            yield c, s


def totals(cells: list[dict]) -> dict:
    """GPU-hours with shared stages (one multi-hot pretraining per config) counted once; unknowns counted apart."""
    seen, hours, unknown, peak = set(), 0.0, 0, 0
    not_fitting = []
    for c, s in unique_stages(cells, seen):
        if s["gpu_hours"] is None:
            unknown += 1
        else:
            hours += s["gpu_hours"]
        peak = max(peak, s["memory"]["total"])
        if not s["fits"]:
            not_fitting.append(f"{c['cell']} ({s['name']})")
    return {"gpu_hours": hours, "stages_unknown": unknown, "stages": len(seen), "peak_bytes": peak,
            "cells": len(cells), "cpu_cells": sum(1 for c in cells if c.get("cpu")),
            "error_cells": sum(1 for c in cells if c["stage"] == "error"), "not_fitting": not_fitting}
