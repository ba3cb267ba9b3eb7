"""GPU time of a stage: FLOP time at the measured utilisation vs the measured per-step floor, packing."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from langrepr.plan.facts import DEFAULT_UTILISATION, GIB, GPU_CLASSES, GPU_JSON_DIR, RESERVE_GIB, peak_for
from langrepr.plan.memory import accumulation, memory_bytes
from langrepr.plan.workload import Stage

# A kind of cell no GPU check measured borrows the floor of the kind that runs the same layers; any other kind
# takes the smallest floor measured on that GPU (a lower bound, said in the stage's row).
FLOOR_FROM_KIND = {"seq2seq": "masked_lm"}


@dataclass
class GpuCheck:
    """What one GPU check (`scripts/gpu_check.py`) and the packed runs beside it measured on one GPU class."""

    label: str
    file: str
    peak_fp16: float
    utilisation: float                     # the highest fp16 MFU of its cells: what a FLOP-bound cell sustains
    utilisation_cell: str
    floors: dict[str, float]               # kind -> fp16 seconds per optimiser step (mean over that kind's cells)
    floor_cells: dict[str, list[str]]
    packed: dict | None = None             # {"n", "slowdown", "kind", "file", "per_cell"}


def _packed_slowdown(record: dict, check: dict, name: str) -> dict | None:
    """How much slower each cell stepped with `cells_sharing` cells on the GPU than alone (same cell, measured).

    Per cell: seconds / ((steps + validations x val_batches) x its alone step time), every batch priced as the
    plan prices it; the mean over the cells that were also measured alone.
    """
    alone = {row: cell["fp16"]["step_s"] for cells in (check.get("papers") or {}).values()
             for row, cell in cells.items() if (cell.get("fp16") or {}).get("step_s")}
    per_cell = {}
    for row, c in (record.get("cells") or {}).items():
        if row in alone:
            batches = c["steps"] + c["validations"] * record["val_batches"]
            per_cell[row] = record["seconds"] / (batches * alone[row])
    if not per_cell or int(record.get("cells_sharing", 0)) < 2:
        return None
    return {"n": int(record["cells_sharing"]), "slowdown": sum(per_cell.values()) / len(per_cell),
            "kind": record.get("kind"), "file": name, "per_cell": per_cell}


def load_checks(gpu_dir: Path = GPU_JSON_DIR) -> dict[str, GpuCheck]:
    """GPU label -> what its committed checks measured (`docs/gpu/gpu_check_*.json`, `packed_*.json`); --small ignored."""
    records = []
    for path in sorted(gpu_dir.glob("*.json")) if gpu_dir.is_dir() else []:
        try:
            records.append((path.name, json.loads(path.read_text())))
        except (OSError, json.JSONDecodeError):
            continue
    checks: dict[str, GpuCheck] = {}
    raw: dict[str, dict] = {}
    for name, record in records:
        peak = peak_for(str(record.get("device_name", "")))
        if record.get("small") or record.get("name") == "packed_run" or not peak:
            continue
        timed = [(f"{paper}/{row}", cell["kind"], cell["fp16"]) for paper, rows in (record.get("papers") or {}).items()
                 for row, cell in rows.items() if (cell.get("fp16") or {}).get("step_s") and cell.get("kind")]
        best, best_cell = max(((float(f.get("mfu") or 0), name) for name, _, f in timed), default=(0.0, ""))
        floors: dict[str, list[float]] = {}
        cells: dict[str, list[str]] = {}
        for cell_name, kind, fp16 in timed:
            if cell_name == best_cell:   # FLOP-bound: its step time is the FLOP term's, not a floor of its kind
                continue
            floors.setdefault(kind, []).append(float(fp16["step_s"]))
            cells.setdefault(kind, []).append(cell_name)
        if floors:
            checks[peak["label"]] = GpuCheck(peak["label"], name, peak["fp16"], best, best_cell,
                                             {k: sum(v) / len(v) for k, v in sorted(floors.items())}, cells)
            raw[peak["label"]] = record
    for name, record in records:
        peak = peak_for(str(record.get("device_name", "")))
        if record.get("name") == "packed_run" and peak and peak["label"] in checks:
            checks[peak["label"]].packed = _packed_slowdown(record, raw[peak["label"]], name)
    return checks


@dataclass
class Assumption:
    """The GPU class, the sustained share of its peak, the measured per-step floors and how many cells share it."""

    gpu: str
    label: str
    peak_tflops: float
    memory_gib: float
    utilisation: float
    source: str
    floors: dict = field(default_factory=dict)    # kind -> seconds per step (alone on the GPU)
    floor_source: str = "no GPU check in docs/gpu/: no per-step floor, FLOP time only (a lower bound)"
    pack: int = 1
    slowdown: float = 1.0                         # per-step slowdown of one cell when `pack` share the GPU
    pack_source: str = ""

    @property
    def sustained(self) -> float:
        return self.peak_tflops * self.utilisation * 1e12

    @property
    def budget(self) -> float:
        return (self.memory_gib - RESERVE_GIB) * GIB

    def floor_for(self, kind: str) -> tuple[float | None, str]:
        """(seconds per step, where it comes from) of a kind of cell alone on the GPU; (None, why) without a check."""
        if kind in self.floors:
            return self.floors[kind], f"{kind} measured"
        if FLOOR_FROM_KIND.get(kind) in self.floors:
            return self.floors[FLOOR_FROM_KIND[kind]], f"not measured: {FLOOR_FROM_KIND[kind]}'s (same layers)"
        if self.floors:
            smallest = min(self.floors, key=self.floors.get)
            return self.floors[smallest], f"not measured: the smallest measured ({smallest}; a lower bound)"
        return None, "no floor measured"

    def text(self) -> str:
        floors = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.floors.items())
        pack = (f"; {self.pack} cells share one GPU: each step {self.slowdown:.2f}x its alone time ({self.pack_source}), "
                f"GPU time divided by {self.pack}" if self.pack > 1 else "")
        return (f"{self.label}: peak {self.peak_tflops:g} TFLOP/s dense fp16/bf16 x utilisation "
                f"{self.utilisation * 100:.3g}% ({self.source}) = {self.sustained / 1e12:.1f} TFLOP/s sustained; "
                f"per-step floors {self.floor_source}" + (f": {floors}" if floors else "") + pack
                + f"; {self.memory_gib:g} GiB, of which {self.memory_gib - RESERVE_GIB:g} GiB for the model "
                f"({RESERVE_GIB:g} GiB reserve)")


def nearest_check(label: str, peak_fp16: float, checks: dict[str, GpuCheck]) -> tuple[GpuCheck | None, bool]:
    """(the check of this GPU class, False), else (the measured GPU nearest in peak, True), else (None, False)."""
    if label in checks:
        return checks[label], False
    if not checks:
        return None, False
    return min(checks.values(), key=lambda c: (abs(math.log(c.peak_fp16 / peak_fp16)), c.label)), True


def assumption_for(paper: str, gpu: str, utilisation: float | None, checks: dict, pack: int = 1) -> Assumption:
    """The assumption a table is priced at (the same for every paper: floors are per kind of cell)."""
    peak = peak_for(GPU_CLASSES[gpu])
    check, borrowed = nearest_check(peak["label"], peak["fp16"], checks)
    if utilisation is not None:
        util, source = utilisation, "--utilisation"
    elif check is not None:
        util = check.utilisation
        source = (f"the highest fp16 MFU measured on {check.label}: {check.utilisation_cell}, {check.file}"
                  + (f"; borrowed: {peak['label']} has no GPU check" if borrowed else ""))
    else:
        util, source = DEFAULT_UTILISATION, "assumed; no GPU check in docs/gpu/"
    a = Assumption(gpu, peak["label"], peak["fp16"], peak["memory_gib"], util, source, pack=pack)
    if check is not None:
        a.floors = dict(check.floors)
        a.floor_source = (f"measured on {check.label} ({check.file})" if not borrowed
                          else f"borrowed from {check.label} ({check.file}), the nearest measured GPU: {peak['label']} "
                               "has no GPU check")
    if pack > 1:
        p = check.packed if check is not None else None
        if p is None or pack > p["n"]:
            raise ValueError(f"--pack {pack}: packing is measured for up to {p['n'] if p else 1} cell(s) per GPU")
        a.slowdown = 1 + (p["slowdown"] - 1) * (pack - 1) / (p["n"] - 1)
        a.pack_source = (f"measured {p['slowdown']:.2f}x with {p['n']} {p['kind']} cells on {check.label}, {p['file']}"
                         + ("" if pack == p["n"] else f"; linear between 1 and {p['n']} cells")
                         + (f"; borrowed from {check.label}" if borrowed else ""))
    return a


def project(stage: Stage, m: dict, a: Assumption) -> dict:
    """GPU time (the larger of FLOP time and the per-step floor), memory, and the accumulation that fits."""
    per_example_step = m["step_flops"]                       # batch 1, scaled linearly
    step_flops = per_example_step * stage.batch
    eval_flops = m["fwd_flops"] * stage.eval_forwards
    total = step_flops * stage.steps + eval_flops if stage.steps is not None else None
    floor, floor_note = a.floor_for(stage.work.kind)
    step_floor = (floor or 0.0) * a.slowdown / a.pack      # GPU seconds per step: packed cells share the GPU
    flop_s = step_flops / a.sustained
    step_s = max(flop_s, step_floor)
    bound = "FLOPs" if flop_s >= step_floor else "floor"
    seconds = (None if stage.steps is None else
               stage.steps * step_s + max(eval_flops / a.sustained, stage.eval_batches * step_floor))
    mem = memory_bytes(m["params"], m["act_fp16_bytes"], stage.batch, stage.optimizer)
    fits = mem["total"] <= a.budget
    k, micro = (1, stage.batch) if fits else accumulation(m["params"], m["act_fp16_bytes"], stage.batch, a.budget,
                                                           stage.optimizer)
    return {"params": m["params"], "batch": stage.batch, "flops_per_step": step_flops, "steps": stage.steps,
            "eval_flops": eval_flops, "eval_batches": stage.eval_batches, "total_flops": total,
            "flop_s_per_step": flop_s, "floor_s_per_step": floor, "floor_note": floor_note, "step_s": step_s,
            "bound": bound, "gpu_hours": None if seconds is None else seconds / 3600,
            "wall_hours": None if seconds is None else seconds * a.pack / 3600,
            "memory": mem, "act_fp32_per_example": m["act_fp32_bytes"], "act_fp16_per_example": m["act_fp16_bytes"],
            "fits": fits, "accumulation": k, "micro_batch": micro}
